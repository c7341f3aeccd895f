package apmplugin

import (
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// heavy are the broker's packages (and Consul's API) the autoscaler plugins
// must not link: the plugins read the broker over HTTP through
// quota-broker/api/client alone (issue 18 item 3).
var heavy = regexp.MustCompile(`(^github\.com/hashicorp/consul/api$)|(/quota-broker/(store|acl|snapshot|plan)$)`)

func TestPluginsLinkOnlyTheBrokersClient(t *testing.T) {
	gobin, err := exec.LookPath("go") // go test puts GOROOT/bin first on PATH
	if err != nil {
		t.Skip("no go tool on PATH")
	}
	out, err := exec.Command(gobin, "list", "-deps", "../...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps ../...: %v\n%s", err, out)
	}
	var bad []string
	for _, pkg := range strings.Fields(string(out)) {
		if heavy.MatchString(pkg) {
			bad = append(bad, pkg)
		}
	}
	if len(bad) != 0 {
		t.Fatalf("the autoscaler plugins link %v; they must reach the broker through quota-broker/api/client only", bad)
	}
}
