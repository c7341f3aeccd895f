package jobmeta

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/nomad/api"

	"github.com/gputide/gputide/quota-broker/nomad/device"
	"github.com/gputide/gputide/quota-broker/quota"
)

// The flavors of the issue 17 e2e, in tree order.
var (
	h100    = quota.Flavor{Name: "h100", Models: []string{"NVIDIA H100 80GB HBM3"}}
	a100    = quota.Flavor{Name: "a100", Models: []string{"NVIDIA A100-SXM4-40GB"}}
	a100mig = quota.Flavor{Name: "a100-1g", Models: []string{"NVIDIA A100-SXM4-40GB"}, MIGProfile: "1g.5gb"}
	tree    = []quota.Flavor{h100, a100, a100mig}
)

// loadJob reads a jobspec of testdata/flavors as Nomad parsed it (the
// .json next to each .nomad.hcl).
func loadJob(t *testing.T, name string) *api.Job {
	t.Helper()
	raw, err := os.ReadFile("testdata/flavors/" + name + ".json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct{ Job *api.Job }
	if err := json.Unmarshal(raw, &doc); err != nil || doc.Job == nil {
		t.Fatalf("%s.json: %v", name, err)
	}
	return doc.Job
}

// wantList reads a group's expected flavors from its meta: "none" for no
// GPU request (nil), "" for GPUs of no flavor (empty), else the names.
func wantList(s string) []string {
	switch s {
	case "none":
		return nil
	case "":
		return []string{}
	}
	return strings.Split(s, ",")
}

// DESIGN L13: a group's allowed flavors are those its device requests can
// use: the device name (gpu, nvidia/gpu, nvidia/gpu/<model>, a MIG group's
// name included) and the constraints on ${device.model},
// ${device.attr.mig_profile} and ${device.attr.mig} with =, ==, !=,
// regexp, set_contains, set_contains_any, is_set; a constraint the broker
// cannot decide (memory, an operator such as >) keeps the flavor. Under a
// tree without flavors, the implicit flavor gpu takes whole GPUs only, so
// a MIG request is of no flavor.
func TestGroupFlavorsOfEveryWayToAskForGPUs(t *testing.T) {
	job := loadJob(t, "groups")
	if len(job.TaskGroups) != 17 {
		t.Fatalf("groups.json has %d groups, want 17", len(job.TaskGroups))
	}
	for _, tg := range job.TaskGroups {
		for _, c := range []struct {
			tree    []quota.Flavor
			wantKey string
		}{{tree, "want"}, {nil, "want_implicit"}} {
			want, ok := tg.Meta[c.wantKey]
			if !ok {
				t.Fatalf("group %s has no meta %s", *tg.Name, c.wantKey)
			}
			got, err := GroupFlavors(c.tree, job.Meta, tg)
			if err != nil {
				t.Errorf("group %s (%s): %v", *tg.Name, c.wantKey, err)
				continue
			}
			if diff := cmp.Diff(wantList(want), got); diff != "" {
				t.Errorf("group %s (%s): flavors (-want +got):\n%s", *tg.Name, c.wantKey, diff)
			}
		}
	}
}

// gputide_flavors orders the job's flavors and narrows them to those it
// lists; all GPU groups of a job take one flavor, so JobFlavors is what
// every group allows. Without the meta, tree order.
func TestJobFlavorsFollowGputideFlavors(t *testing.T) {
	job := loadJob(t, "ordered")
	got, err := JobFlavors(tree, job)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a100", "h100"}, got); diff != "" {
		t.Errorf("JobFlavors (-want +got):\n%s", diff)
	}
	worker, err := GroupFlavors(tree, job.Meta, job.TaskGroups[0])
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a100", "h100"}, worker); diff != "" {
		t.Errorf("GroupFlavors(worker) (-want +got):\n%s", diff)
	}

	delete(job.Meta, MetaFlavors)
	got, err = JobFlavors(tree, job)
	if err != nil {
		t.Fatal(err)
	}
	// worker allows all three, eval (mig = false) only whole GPUs.
	if diff := cmp.Diff([]string{"h100", "a100"}, got); diff != "" {
		t.Errorf("JobFlavors without meta (-want +got):\n%s", diff)
	}
	worker, _ = GroupFlavors(tree, job.Meta, job.TaskGroups[0])
	if diff := cmp.Diff([]string{"h100", "a100", "a100-1g"}, worker); diff != "" {
		t.Errorf("GroupFlavors(worker) without meta (-want +got):\n%s", diff)
	}

	noGPU := &api.Job{Meta: map[string]string{MetaFlavors: "h100"}, TaskGroups: []*api.TaskGroup{{Name: ptr("web")}}}
	if got, err := JobFlavors(tree, noGPU); got != nil || err != nil {
		t.Errorf("a job without GPU requests: %v, %v; want nil, nil", got, err)
	}
}

func ptr[T any](v T) *T { return &v }

// gputide_flavors may list only flavors of the tree that the job's device
// requests can use (DESIGN L13); otherwise a meta error naming the key,
// the value and both lists.
func TestGputideFlavorsErrorsNameBothLists(t *testing.T) {
	job := loadJob(t, "ordered")
	eval := job.TaskGroups[1] // whole GPUs only: h100, a100
	cases := []struct {
		tree []quota.Flavor
		meta string
		want string
	}{
		{tree, "a100-1g,h100", `job meta gputide_flavors = "a100-1g,h100": flavor "a100-1g" is not one the job's device requests can use (allowed: h100, a100)`},
		{tree, "h100,h200", `job meta gputide_flavors = "h100,h200": unknown flavor "h200" (the tree's flavors: h100, a100, a100-1g)`},
		{nil, "h100", `job meta gputide_flavors = "h100": unknown flavor "h100" (the tree's flavors: gpu)`},
		{tree, "h100,,a100", `job meta gputide_flavors = "h100,,a100": want flavor names separated by commas, e.g. "h100,a100", with none empty`},
		{tree, "", `job meta gputide_flavors = "": want flavor names separated by commas, e.g. "h100,a100", with none empty`},
		{tree, "h100,h100", `job meta gputide_flavors = "h100,h100": flavor "h100" listed twice`},
		{tree, "h 100", `job meta gputide_flavors = "h 100": "h 100" is not a flavor name (letters, digits, '.', '_', '-')`},
	}
	for _, c := range cases {
		got, err := GroupFlavors(c.tree, map[string]string{MetaFlavors: c.meta}, eval)
		var me *MetaError
		if !errors.As(err, &me) || me.Key != MetaFlavors || me.Value != c.meta {
			t.Errorf("meta %q: got %v, %v; want a *MetaError on %s", c.meta, got, err, MetaFlavors)
			continue
		}
		if diff := cmp.Diff(c.want, err.Error()); diff != "" {
			t.Errorf("meta %q: error (-want +got):\n%s", c.meta, diff)
		}
	}
	// A group whose GPUs are of no flavor may list none.
	mig := &api.TaskGroup{Tasks: []*api.Task{{Resources: &api.Resources{Devices: []*api.RequestedDevice{{Name: "nvidia/gpu/NVIDIA A100-SXM4-40GB MIG 1g.5gb"}}}}}}
	_, err := GroupFlavors(nil, map[string]string{MetaFlavors: "gpu"}, mig)
	if err == nil || err.Error() != `job meta gputide_flavors = "gpu": flavor "gpu" is not one the job's device requests can use (allowed: none)` {
		t.Errorf("MIG request under the implicit flavor: %v", err)
	}
}

// ParseJobOptions takes gputide_flavors as a known key and checks its
// form; GroupFlavors checks it against the tree and the requests.
func TestParseJobOptionsReadsGputideFlavors(t *testing.T) {
	o, err := ParseJobOptions(map[string]string{MetaFlavors: " a100 ,h100"}, testHoldingPool)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a100", "h100"}, o.Flavors); diff != "" {
		t.Errorf("Flavors (-want +got):\n%s", diff)
	}
	_, err = ParseJobOptions(map[string]string{MetaFlavors: "a100,"}, testHoldingPool)
	if err == nil || err.Error() != `job meta gputide_flavors = "a100,": want flavor names separated by commas, e.g. "h100,a100", with none empty` {
		t.Errorf("bad gputide_flavors: %v", err)
	}
}

// The pending group's model of a request that names a MIG group is its
// GPU's model, as the GPUs' models are (DESIGN L13); the profile is the
// flavor's.
func TestGroupGPUsGivesTheGPUModelOfAMIGName(t *testing.T) {
	job := loadJob(t, "groups")
	want := map[string]struct {
		n     int
		model string
	}{
		"plain": {4, ""}, "h100-by-name": {2, "NVIDIA H100 80GB HBM3"}, "mig-by-name": {1, "NVIDIA A100-SXM4-40GB"},
		"two-tasks": {2, "NVIDIA H100 80GB HBM3"}, "no-gpu": {0, ""},
	}
	for _, tg := range job.TaskGroups {
		w, ok := want[*tg.Name]
		if !ok {
			continue
		}
		if n, model := GroupGPUs(tg); n != w.n || model != w.model {
			t.Errorf("group %s: groupGPUs = %d, %q; want %d, %q", *tg.Name, n, model, w.n, w.model)
		}
	}
}

// DESIGN L13: admission pins the chosen flavor with device constraints:
// ${device.model} on the flavor's models, a regexp for MIG groups and
// ${device.attr.mig_profile} for a MIG flavor; constraints the request
// already carries are not added again.
func TestPinConstraintsOfEachFlavor(t *testing.T) {
	two := quota.Flavor{Name: "a100-80g", Models: []string{"NVIDIA A100-SXM4-80GB", "NVIDIA A100-PCIE-80GB"}}
	cases := []struct {
		f    quota.Flavor
		want []*api.Constraint
	}{
		{h100, []*api.Constraint{{LTarget: "${device.model}", Operand: "=", RTarget: "NVIDIA H100 80GB HBM3"}}},
		{two, []*api.Constraint{{LTarget: "${device.model}", Operand: "regexp", RTarget: `^(?:NVIDIA A100-SXM4-80GB|NVIDIA A100-PCIE-80GB)$`}}},
		{a100mig, []*api.Constraint{
			{LTarget: "${device.model}", Operand: "regexp", RTarget: `^(?:NVIDIA A100-SXM4-40GB) MIG 1g\.5gb$`},
			{LTarget: "${device.attr.mig_profile}", Operand: "=", RTarget: "1g.5gb"},
		}},
		{quota.Flavor{Name: quota.ImplicitFlavor}, []*api.Constraint{{LTarget: "${device.attr.mig_profile}", Operand: "is_not_set"}}},
	}
	for _, c := range cases {
		got := device.Pin(c.f, nil)
		if diff := cmp.Diff(c.want, got); diff != "" {
			t.Errorf("%s: pin (-want +got):\n%s", c.f.Name, diff)
		}
		// Pinned, the request allows that flavor alone.
		pinned := &api.RequestedDevice{Name: "nvidia/gpu", Constraints: got}
		flavors := append([]quota.Flavor{two}, tree...)
		if c.f.Implicit() {
			flavors = nil
		}
		if diff := cmp.Diff([]string{c.f.Name}, device.AllowedFlavors(flavors, []*api.RequestedDevice{pinned})); diff != "" {
			t.Errorf("%s: flavors of the pinned request (-want +got):\n%s", c.f.Name, diff)
		}
		if again := device.Pin(c.f, pinned); again != nil {
			t.Errorf("%s: pinning a pinned request adds %v", c.f.Name, again)
		}
	}
	// A request that carries part of the pin gets the rest.
	partial := &api.RequestedDevice{Name: "nvidia/gpu", Constraints: []*api.Constraint{
		{LTarget: "${device.attr.mig_profile}", Operand: "=", RTarget: "1g.5gb"}}}
	want := []*api.Constraint{{LTarget: "${device.model}", Operand: "regexp", RTarget: `^(?:NVIDIA A100-SXM4-40GB) MIG 1g\.5gb$`}}
	if diff := cmp.Diff(want, device.Pin(a100mig, partial)); diff != "" {
		t.Errorf("partial pin (-want +got):\n%s", diff)
	}
}

// PinJob pins every GPU request of a job, leaves other devices alone, and
// changes nothing the second time.
func TestPinJobPinsEveryGPURequestOnce(t *testing.T) {
	job := loadJob(t, "ordered")
	job.TaskGroups[1].Tasks[0].Resources.Devices = append(job.TaskGroups[1].Tasks[0].Resources.Devices,
		&api.RequestedDevice{Name: "amd/gpu"})
	if !device.PinJob(job, a100) {
		t.Fatal("PinJob added nothing")
	}
	pin := &api.Constraint{LTarget: "${device.model}", Operand: "=", RTarget: "NVIDIA A100-SXM4-40GB"}
	mig := &api.Constraint{LTarget: "${device.attr.mig}", Operand: "=", RTarget: "false"}
	want := map[string][]*api.Constraint{
		"nvidia/gpu worker": {pin},
		"nvidia/gpu eval":   {mig, pin},
		"amd/gpu eval":      nil,
	}
	got := map[string][]*api.Constraint{}
	for _, tg := range job.TaskGroups {
		for _, d := range device.Requests(tg) {
			got[d.Name+" "+*tg.Name] = d.Constraints
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("constraints (-want +got):\n%s", diff)
	}
	if device.PinJob(job, a100) {
		t.Error("pinning a pinned job changed it")
	}
	if diff := cmp.Diff([]string{"a100"}, mustJobFlavors(t, job)); diff != "" {
		t.Errorf("flavors of the pinned job (-want +got):\n%s", diff)
	}
}

func mustJobFlavors(t *testing.T, j *api.Job) []string {
	t.Helper()
	delete(j.Meta, MetaFlavors)
	got, err := JobFlavors(tree, j)
	if err != nil {
		t.Fatal(err)
	}
	return got
}
