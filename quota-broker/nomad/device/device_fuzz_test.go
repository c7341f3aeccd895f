package device

import (
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/nomad/api"

	"github.com/gputide/gputide/quota-broker/quota"
)

// FuzzPinAllowsExactlyThePinnedFlavor: for any models and profiles that
// make a valid tree (models and profiles UTF-8, not empty, without " MIG ";
// no model and profile in two flavors), a GPU request pinned to a flavor
// (PinConstraints) allows that flavor and no other (AllowedFlavors), in
// each form of request name; pinning it again adds nothing; the pin's
// regexps match each of the flavor's device group names and not a name
// one character longer. Another regexp constraint, however hostile, never
// widens the pinned request, nor makes AllowedFlavors panic.
func FuzzPinAllowsExactlyThePinnedFlavor(f *testing.F) {
	f.Add("NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-40GB", "1g.5gb", "3g.20gb", "", uint8(0))
	f.Add("A100 (40GB)+", "a.b*c?[d]^$|e", "1g.5gb", "2g", `(a+)+$`, uint8(2))
	f.Add("80GB", "true", "1", "Inf", `\`, uint8(3))
	f.Add("${device.model}", "X MIG", "MIG 1g", "1g", strings.Repeat("(a|b)*", 200), uint8(1))
	f.Fuzz(func(t *testing.T, m1, m2, p1, p2, extra string, pick uint8) {
		for _, s := range []string{m1, m2, p1, p2} {
			if s == "" || !utf8.ValidString(s) || strings.Contains(s, quota.MIGSuffix) {
				return
			}
		}
		if m1 == m2 || p1 == p2 {
			return
		}
		tree := []quota.Flavor{
			{Name: "a", Models: []string{m1}},
			{Name: "b", Models: []string{m2}},
			{Name: "c", Models: []string{m1}, MIGProfile: p1},
			{Name: "d", Models: []string{m1, m2}, MIGProfile: p2},
		}
		fl := tree[int(pick)%len(tree)]
		pin := Pin(fl, nil)
		var names []string
		for _, k := range kindsOf(&fl) {
			names = append(names, k.name)
		}
		for _, c := range pin {
			if c.Operand != "regexp" || c.LTarget != targetModel {
				continue
			}
			re, err := regexp.Compile(c.RTarget)
			if err != nil {
				t.Fatalf("flavor %+v: pin regexp %q: %v", fl, c.RTarget, err)
			}
			for _, n := range names {
				if !re.MatchString(n) || re.MatchString(n+"x") || re.MatchString("x"+n) {
					t.Fatalf("flavor %+v: pin regexp %q on %q, %q, %q: want a match of the name alone", fl, c.RTarget, n, n+"x", "x"+n)
				}
			}
		}
		for _, name := range []string{"nvidia/gpu", "gpu", "/gpu", "nvidia/gpu/" + names[0]} {
			req := &api.RequestedDevice{Name: name, Constraints: append([]*api.Constraint(nil), pin...)}
			got := AllowedFlavors(tree, []*api.RequestedDevice{req})
			if strings.Count(name, "/") > 2 && strings.Contains(names[0], "/") {
				continue // a model with "/" in a device name: Nomad's parse, tested apart
			}
			if diff := cmp.Diff([]string{fl.Name}, got); diff != "" {
				t.Fatalf("flavor %+v, request %q pinned %+v: allowed (-want +got):\n%s", fl, name, pin, diff)
			}
			if again := Pin(fl, req); again != nil {
				t.Fatalf("flavor %+v: pinning a pinned request adds %+v", fl, again)
			}
			req.Constraints = append(req.Constraints, &api.Constraint{LTarget: "${device.model}", Operand: "regexp", RTarget: extra})
			if got := AllowedFlavors(tree, []*api.RequestedDevice{req}); len(got) > 1 || len(got) == 1 && got[0] != fl.Name {
				t.Fatalf("flavor %+v with regexp %q: allowed %v", fl, extra, got)
			}
		}
	})
}
