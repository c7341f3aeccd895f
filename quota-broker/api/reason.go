package api

import (
	"cmp"
	"slices"
	"strings"

	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/quota"
)

// reasonFor is a plan reason (a wait's, a stop's) as c may see it: the
// reason of a group or allocation c may read can still name what holds
// or displaces it, another workspace's booking ("reservation r-1") or job
// ("the scale-up of ns/job/group"); those are cut to their namespace
// ("reservation of ns", "ns") as StoppingFor and warnings are (issue 16).
func reasonFor(snap *plan.Snapshot, reason string, c *caller) string {
	if reason == "" || c.open || snap == nil {
		return reason
	}
	for _, r := range snap.Reservations {
		if !c.canRead(r.Namespace) {
			reason = replaceWord(reason, "reservation "+r.ID, "reservation of "+r.Namespace, isIDByte)
		}
	}
	// Known keys first, longest first (a group name may hold a space),
	// then any other "ns/..." word of a namespace c cannot read.
	var keys []string
	add := func(ns, job, group string) {
		if !c.canRead(ns) {
			keys = append(keys, ns+"/"+job+"/"+group, ns+"/"+job)
		}
	}
	for _, a := range snap.Allocations {
		add(a.Namespace, a.Job, a.Group)
	}
	for _, p := range snap.Pending {
		add(p.Namespace, p.Job, p.Group)
	}
	for _, p := range snap.Prewarm {
		add(p.Namespace, p.Job, p.Group)
	}
	for _, h := range snap.Holds {
		if !h.For.Group.IsZero() {
			add(h.For.Group.Namespace, h.For.Group.Job, h.For.Group.Group)
		}
	}
	slices.SortFunc(keys, func(a, b string) int { return cmp.Or(cmp.Compare(len(b), len(a)), strings.Compare(a, b)) })
	keys = slices.Compact(keys)
	for _, k := range keys {
		ns, _, _ := strings.Cut(k, "/")
		reason = replaceWord(reason, k, ns, func(b byte) bool { return b != ' ' && b != ',' && b != ';' && b != ')' })
	}
	namespaces := map[string]bool{}
	for ns := range quota.Namespaces(snap.Quota) {
		namespaces[ns] = true
	}
	for _, a := range snap.Allocations {
		namespaces[a.Namespace] = true
	}
	for _, p := range snap.Pending {
		namespaces[p.Namespace] = true
	}
	for _, p := range snap.Prewarm {
		namespaces[p.Namespace] = true
	}
	for ns := range namespaces {
		if !c.canRead(ns) {
			reason = cutPaths(reason, ns)
		}
	}
	return reason
}

// isIDByte reports whether b may continue a booking ID.
func isIDByte(b byte) bool { return b >= 'a' && b <= 'z' || b >= '0' && b <= '9' || b == '-' }

// replaceWord replaces each old in s that starts a word (s's start or
// after a byte that is not a letter, digit, '-', '/' or '_') and is not
// followed by a byte for which more is true, with new.
func replaceWord(s, old, new string, more func(byte) bool) string {
	var b strings.Builder
	for {
		i := wordIndex(s, old, more)
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		b.WriteString(new)
		s = s[i+len(old):]
	}
}

func wordIndex(s, old string, more func(byte) bool) int {
	for off := 0; ; {
		j := strings.Index(s[off:], old)
		if j < 0 {
			return -1
		}
		i := off + j
		end := i + len(old)
		if (i == 0 || !isWordByte(s[i-1])) && (end == len(s) || !more(s[end])) {
			return i
		}
		off = i + 1
	}
}

func isWordByte(b byte) bool {
	return isIDByte(b) || b >= 'A' && b <= 'Z' || b == '_' || b == '/' || b == '.'
}

// cutPaths replaces each word "ns/..." of s (up to a space, ',', ';' or
// ')') with ns.
func cutPaths(s, ns string) string {
	prefix := ns + "/"
	var b strings.Builder
	for {
		i := wordIndex(s, prefix, func(byte) bool { return false })
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		b.WriteString(ns)
		rest := s[i+len(prefix):]
		end := strings.IndexAny(rest, " ,;)")
		if end < 0 {
			end = len(rest)
		}
		s = rest[end:]
	}
}
