package plan

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

type prewarmRow struct {
	Action ActionKind
	Job    string
	Alloc  string
	Flavor string
	Node   string
	GPUs   int
	Rule   Rule
}

func prewarmRows(p *Plan) []prewarmRow {
	var out []prewarmRow
	for _, a := range p.Actions {
		out = append(out, prewarmRow{Action: a.Action, Job: a.Job, Alloc: a.Alloc, Flavor: a.Flavor, Node: a.Node, GPUs: a.GPUs, Rule: a.Rule})
	}
	return out
}

// TestL5PrewarmPerFlavor (DESIGN L5 "Pre-warm", L13): team B's scale-up
// of one allocation of 4 GPUs in 30 minutes is placed now in one of the
// flavors it allows: node-01 has 8 H100, node-02 8 A100. It takes the
// flavor where its job already runs or where it holds GPUs already;
// else, as the choice rule, the first of its flavors in which it is
// entitled and fits on free GPUs.
func TestL5PrewarmPerFlavor(t *testing.T) {
	at := t0.Add(30 * time.Minute)
	hold := func(flavor, node string) []prewarmRow {
		return []prewarmRow{{Action: ActionHold, Job: "infer", Flavor: flavor, Node: node, GPUs: 4, Rule: RulePrewarm}}
	}
	for _, tc := range []struct {
		name    string
		flavors []string
		more    func(*snapBuilder)
		want    []prewarmRow
	}{
		{"every flavor, tree order: h100", nil, nil, hold("h100", "node-01")},
		{"a100 only: not the tree's first flavor", []string{"a100"}, nil, hold("a100", "node-02")},
		{"its own order", []string{"a100", "h100"}, nil, hold("a100", "node-02")},
		{"h100 full of another team's work: the next flavor with free GPUs", []string{"h100", "a100"},
			func(b *snapBuilder) { b.alloc("c1", "workspace-c", "c-train", "node-01", 8) }, hold("a100", "node-02")},
		{"the job runs on A100: the scale-up stays there", []string{"h100", "a100"},
			func(b *snapBuilder) { b.alloc("i1", "workspace-b", "infer", "node-02", 2) }, hold("a100", "node-02")},
		{"GPUs held for it on A100 already: nothing more to hold, none on H100", []string{"h100", "a100"},
			func(b *snapBuilder) {
				b.s.Holds = []Hold{{For: HoldOwner{Group: key("workspace-b/infer/web")}, Node: "node-02",
					GPUIDs: []string{"node-02-gpu0", "node-02-gpu1", "node-02-gpu2", "node-02-gpu3"}, Until: at.Add(90 * time.Second)}}
			}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newSnap(twoFlavorTree(8, 8)).nodes(1, 8, h100).nodes(1, 8, a100)
			if tc.more != nil {
				tc.more(b)
			}
			s := b.build()
			w := prewarmOf(1, 4, at)
			w.Flavors = tc.flavors
			s.Prewarm = []Prewarm{w}
			if err := s.Validate(); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, prewarmRows(mustPlan(t, s))); diff != "" {
				t.Errorf("actions (-want +got):\n%s", diff)
			}
		})
	}
}

// TestL5PrewarmFlavorsValidated: a pre-warm's flavors name flavors of the
// tree, each once.
func TestL5PrewarmFlavorsValidated(t *testing.T) {
	s := newSnap(twoFlavorTree(8, 8)).nodes(1, 8, h100).build()
	w := prewarmOf(1, 4, t0.Add(time.Minute))
	w.Flavors = []string{"h100", "gpu"}
	s.Prewarm = []Prewarm{w}
	want := `prewarm[0].flavors[1]: "gpu" is not a flavor of the tree (h100, a100)`
	if err := s.Validate(); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Validate = %v, want it to say %s", err, want)
	}
}
