package acl

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
)

// MaxTokenLen bounds a token taken from a request (8 KiB): Nomad secrets
// are UUIDs, workload identities JWTs of a few KiB.
const MaxTokenLen = 8 << 10

// TokenFromRequest gives the caller's token: the X-Nomad-Token header if
// set, else the credentials of "Authorization: Bearer <token>" (scheme
// case-insensitive), else "". Surrounding spaces are trimmed; a value
// longer than MaxTokenLen or holding control characters counts as no token.
func TokenFromRequest(r *http.Request) string {
	tok := strings.TrimSpace(r.Header.Get("X-Nomad-Token"))
	if tok == "" {
		auth := strings.TrimSpace(r.Header.Get("Authorization"))
		scheme, rest, ok := strings.Cut(auth, " ")
		if ok && strings.EqualFold(scheme, "Bearer") {
			tok = strings.TrimSpace(rest)
		}
	}
	if len(tok) > MaxTokenLen || strings.ContainsFunc(tok, func(r rune) bool { return r < 0x21 || r == 0x7f }) {
		return ""
	}
	return tok
}

// AdminTokenMatches reports whether given equals the broker's admin token,
// comparing their SHA-256 digests in constant time (crypto/subtle), so
// neither the content nor the length of the admin token leaks through
// timing. An empty admin token matches nothing: no admin_token means no
// admin (DESIGN §9).
func AdminTokenMatches(given, admin string) bool {
	if admin == "" || given == "" {
		return false
	}
	g, a := sha256.Sum256([]byte(given)), sha256.Sum256([]byte(admin))
	return subtle.ConstantTimeCompare(g[:], a[:]) == 1
}
