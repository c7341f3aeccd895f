package command

import (
	"strings"
	"testing"
)

// Attacks on the CLI's address redaction (issue 16): a percent-encoded
// password, a password with '@', '#' or '/', a token in the query string,
// an address that does not parse; none of them is printed, on a 403, an
// unreachable server or a bad address.
func TestCLIRedactsAddressSecretsHarder(t *testing.T) {
	const secret = "S3cretPW"
	forbidURL, closedAddr, hcl := redactFixture(t)
	closed := "http://" + closedAddr
	user := func(base, userinfo string) string { return strings.Replace(base, "http://", "http://"+userinfo+"@", 1) }
	var cases []struct {
		name string
		env  map[string]string
		args []string
	}
	add := func(name string, env map[string]string, args ...string) {
		cases = append(cases, struct {
			name string
			env  map[string]string
			args []string
		}{name, env, args})
	}
	for _, base := range []string{forbidURL, closed} {
		for _, addr := range []string{
			user(base, "admin:"+secret+"%40x"),
			user(base, "admin:"+secret+"@x"),
			user(base, "admin:%"+secret),
			base + "/?token=" + secret,
			base + "?x-nomad-token=" + secret,
			user(base, "admin:1#"+secret),
		} {
			add("GPUTIDE_ADDR "+addr, map[string]string{"GPUTIDE_ADDR": addr}, "quota", "status")
			add("-address "+addr, nil, "reservation", "list", "-address", addr)
			add("NOMAD_ADDR job plan "+addr, map[string]string{"NOMAD_ADDR": addr, "GPUTIDE_ADDR": closed}, "job", "plan", hcl)
			add("NOMAD_ADDR schedule preview "+addr, map[string]string{"NOMAD_ADDR": addr}, "schedule", "preview", "-policy", hcl)
		}
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runWithAddresses(t, tc.env, tc.args...)
			if code == 0 {
				t.Errorf("exit 0; stderr:\n%s", errOut)
			}
			if strings.Contains(out+errOut, secret) {
				t.Errorf("the secret is printed:\n%s%s", out, errOut)
			}
		})
	}
}
