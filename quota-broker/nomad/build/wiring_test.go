package build

import (
	"errors"
	"github.com/gputide/gputide/quota-broker/nomad/device"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/nomad/api"

	"github.com/gputide/gputide/quota-broker/nomad/jobmeta"
	"github.com/gputide/gputide/quota-broker/nomad/watch"
	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/quota"
)

// The recording's node and its GPUs' model (8 mock A100s).
const (
	recordedNode  = "292c925c-0664-98f4-0f8d-63cdbfd840e1"
	recordedModel = "Mock NVIDIA A100-SXM4-40GB"
)

// flavoredE2ETree is e2eTree with two flavors: "h100", which no device of
// the recording has, and "a100", its 8 GPUs (DESIGN L13).
func flavoredE2ETree() *quota.Node {
	n := func(h, a int) quota.Nominal { return quota.Nominal{"h100": h, "a100": a} }
	return &quota.Node{Name: "Quota1", GPUs: n(0, 8), ChildPreemption: true, Namespaces: []string{"workspace-a"},
		Flavors: []quota.Flavor{
			{Name: "h100", Models: []string{"NVIDIA H100 80GB HBM3"}, Pos: "quota.hcl:1"},
			{Name: "a100", Models: []string{recordedModel}, Pos: "quota.hcl:2"},
		},
		Children: []*quota.Node{
			{Name: "Quota1.1", GPUs: n(0, 3), Namespaces: []string{"workspace-b"}},
			{Name: "Quota1.2", GPUs: n(0, 5), Namespaces: []string{"workspace-c"}},
		}}
}

var jobB = plan.JobKey{Namespace: "workspace-b", Job: "training"}

// setJobB replaces the recording's waiting workspace-b/training (one
// group "worker" asking for 3 nvidia/gpu) by a copy with the given meta
// gputide_flavors ("" leaves it unset) and device request name.
func setJobB(t *testing.T, s *watch.State, flavors, device string) {
	t.Helper()
	old := raw(s).Jobs[jobB]
	j := *old
	j.Meta = map[string]string{jobmeta.MetaPool: "default"}
	if flavors != "" {
		j.Meta[jobmeta.MetaFlavors] = flavors
	}
	tg := *old.TaskGroups[0]
	task := *tg.Tasks[0]
	res := *task.Resources
	three := uint64(3)
	res.Devices = []*api.RequestedDevice{{Name: device, Count: &three}}
	task.Resources = &res
	tg.Tasks = []*api.Task{&task}
	j.TaskGroups = []*api.TaskGroup{&tg}
	raw(s).Jobs[jobB] = &j
}

func buildTree(t *testing.T, s *watch.State, root *quota.Node) *Build {
	t.Helper()
	b := From(s, Input{Now: at(t), Quota: root, Settings: quota.DefaultSettings(),
		Accepted: func(plan.JobKey) bool { return true }})
	if b.Invalid != nil {
		t.Fatalf("invalid: %v", b.Invalid)
	}
	return b
}

func pendingFlavors(b *Build, k plan.JobKey) map[string][]string {
	out := map[string][]string{}
	for _, g := range b.Snapshot.Pending {
		if g.Namespace == k.Namespace && g.Job == k.Job {
			out[g.Group] = g.Flavors
		}
	}
	return out
}

// DESIGN L13, issue 17 item 3: each pending group carries the flavors its
// job's device requests allow (jobmeta.JobFlavors), in gputide_flavors order when
// the meta sets it, else tree order; the implicit flavor's name in a tree
// without flavor blocks.
func TestBuildWritesEachPendingGroupsFlavors(t *testing.T) {
	for _, tc := range []struct {
		name, meta string
		tree       *quota.Node
		want       []string
	}{
		{"tree order", "", flavoredE2ETree(), []string{"h100", "a100"}},
		{"gputide_flavors order", "a100,h100", flavoredE2ETree(), []string{"a100", "h100"}},
		{"gputide_flavors narrows", "a100", flavoredE2ETree(), []string{"a100"}},
		{"implicit flavor", "", e2eTree(), []string{quota.ImplicitFlavor}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, s := listRecorded(t)
			setJobB(t, s, tc.meta, "nvidia/gpu")
			b := buildTree(t, s, tc.tree)
			if diff := cmp.Diff(map[string][]string{"worker": tc.want}, pendingFlavors(b, jobB)); diff != "" {
				t.Errorf("pending flavors (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want, b.Jobs[jobB].Flavors); diff != "" {
				t.Errorf("view flavors (-want +got):\n%s", diff)
			}
			if len(b.Ungoverned) != 0 || len(b.Warnings) != 0 {
				t.Errorf("ungoverned %v, warnings %v, want none", b.Ungoverned, b.Warnings)
			}
		})
	}
}

// A bad gputide_flavors is a meta error like the others: the job is not
// pending, and its *jobmeta.MetaError names the meta, its value and the lists.
func TestBuildGivesABadGputideFlavorsAMetaError(t *testing.T) {
	for _, tc := range []struct{ meta, want string }{
		{"a100,t4", `job meta gputide_flavors = "a100,t4": unknown flavor "t4" (the tree's flavors: h100, a100)`},
		{"a100,,h100", `job meta gputide_flavors = "a100,,h100": want flavor names separated by commas, e.g. "h100,a100", with none empty`},
	} {
		_, s := listRecorded(t)
		setJobB(t, s, tc.meta, "nvidia/gpu")
		b := buildTree(t, s, flavoredE2ETree())
		err := b.Jobs[jobB].MetaErr
		var me *jobmeta.MetaError
		if !errors.As(err, &me) {
			t.Fatalf("%s: meta error %v (%T), want a *jobmeta.MetaError", tc.meta, err, err)
		}
		if err.Error() != tc.want {
			t.Errorf("%s: meta error %q, want %q", tc.meta, err, tc.want)
		}
		if got := pendingFlavors(b, jobB); len(got) != 0 {
			t.Errorf("%s: pending %v, want none", tc.meta, got)
		}
		if b.Jobs[jobB].Pending != 0 {
			t.Errorf("%s: view pending %d, want 0", tc.meta, b.Jobs[jobB].Pending)
		}
	}
	// A stopped job's gputide_flavors is not checked: its status is the
	// stop's (as with gputide_reservation).
	_, s := listRecorded(t)
	setJobB(t, s, "a100,t4", "nvidia/gpu")
	raw(s).Jobs[jobB].Stop = new(bool)
	*raw(s).Jobs[jobB].Stop = true
	if err := buildTree(t, s, flavoredE2ETree()).Jobs[jobB].MetaErr; err != nil {
		t.Errorf("stopped job: meta error %v, want none", err)
	}
}

// DESIGN L13: a job whose device requests can use only ungoverned devices
// (here a MIG group, of no flavor under either tree) is not pending: it is
// listed in Ungoverned, to move to its pool uncounted, with a warning.
func TestBuildListsAJobOfUngovernedDevicesOnly(t *testing.T) {
	for _, tree := range []*quota.Node{flavoredE2ETree(), e2eTree()} {
		_, s := listRecorded(t)
		setJobB(t, s, "", "nvidia/gpu/"+recordedModel+" MIG 1g.5gb")
		b := buildTree(t, s, tree)
		if got := pendingFlavors(b, jobB); len(got) != 0 {
			t.Errorf("%s: pending %v, want none", tree.Name, got)
		}
		if diff := cmp.Diff([]plan.JobKey{jobB}, b.Ungoverned); diff != "" {
			t.Errorf("ungoverned (-want +got):\n%s", diff)
		}
		want := []plan.Warning{{Kind: plan.WarnGeneral, Namespace: "workspace-b", Job: "training",
			Message: `job workspace-b/training asks only for GPUs of no flavor (ungoverned devices, DESIGN L13): ` +
				`it is admitted to node pool "default" uncounted by the quota`}}
		if diff := cmp.Diff(want, b.Warnings); diff != "" {
			t.Errorf("warnings (-want +got):\n%s", diff)
		}
		if v := b.Jobs[jobB]; v.MetaErr != nil || v.Pending != 0 || !v.Holding {
			t.Errorf("view: meta error %v, pending %d, holding %v", v.MetaErr, v.Pending, v.Holding)
		}
	}
}

// DESIGN L13: GPUs of no flavor are listed per node with the reason;
// those of a flavor are not.
func TestBuildListsUngovernedGPUsPerNode(t *testing.T) {
	_, s := listRecorded(t)
	n := raw(s).Nodes[recordedNode]
	if n == nil {
		t.Fatalf("no node %s in the recording", recordedNode)
	}
	nn := *n
	nn.GPUs = append(append([]plan.GPU(nil), n.GPUs...),
		plan.GPU{ID: "MIG-1", Model: recordedModel, Healthy: true, MIGProfile: "1g.5gb"},
		plan.GPU{ID: "T4-1", Model: "Tesla T4", Healthy: true})
	raw(s).Nodes[recordedNode] = &nn

	mig := device.UngovernedGPU{Node: recordedNode, ID: "MIG-1", Model: recordedModel, MIGProfile: "1g.5gb"}
	t4 := device.UngovernedGPU{Node: recordedNode, ID: "T4-1", Model: "Tesla T4"}
	flavored := []device.UngovernedGPU{mig, t4}
	flavored[0].Reason = `no flavor of the tree (h100, a100) has model "Mock NVIDIA A100-SXM4-40GB" with mig_profile "1g.5gb"`
	flavored[1].Reason = `no flavor of the tree (h100, a100) has model "Tesla T4" as whole GPUs`
	b := From(s, Input{Now: at(t), Quota: flavoredE2ETree(), Settings: quota.DefaultSettings()})
	if diff := cmp.Diff(flavored, b.UngovernedGPUs); diff != "" {
		t.Errorf("flavored tree (-want +got):\n%s", diff)
	}
	implicit := []device.UngovernedGPU{mig}
	implicit[0].Reason = `a MIG instance (profile 1g.5gb): the tree declares no flavor, and the implicit flavor "gpu" counts whole GPUs only`
	b = From(s, Input{Now: at(t), Quota: e2eTree(), Settings: quota.DefaultSettings()})
	if diff := cmp.Diff(implicit, b.UngovernedGPUs); diff != "" {
		t.Errorf("implicit tree (-want +got):\n%s", diff)
	}
}

// A job admission pinned to a100 whose gputide_flavors lists h100 too
// (which the pin now excludes) takes a100 alone, with no meta error; a
// job pinned to a100 by its own constraint whose gputide_flavors lists
// only h100 keeps its meta error.
func TestBuildTakesAPinnedJobsFlavor(t *testing.T) {
	pin := []*api.Constraint{{LTarget: "${device.model}", Operand: "=", RTarget: recordedModel}}
	for _, tc := range []struct {
		meta    string
		want    []string
		wantErr string
	}{
		{"h100,a100", []string{"a100"}, ""},
		{"a100", []string{"a100"}, ""},
		{"h100", nil, `job meta gputide_flavors = "h100": flavor "h100" is not one the job's device requests can use (allowed: a100)`},
	} {
		_, s := listRecorded(t)
		setJobB(t, s, tc.meta, "nvidia/gpu")
		raw(s).Jobs[jobB].TaskGroups[0].Tasks[0].Resources.Devices[0].Constraints = pin
		b := buildTree(t, s, flavoredE2ETree())
		v := b.Jobs[jobB]
		gotErr := ""
		if v.MetaErr != nil {
			gotErr = v.MetaErr.Error()
		}
		if gotErr != tc.wantErr {
			t.Errorf("%s: meta error %q, want %q", tc.meta, gotErr, tc.wantErr)
		}
		if diff := cmp.Diff(tc.want, v.Flavors); diff != "" {
			t.Errorf("%s: flavors (-want +got):\n%s", tc.meta, diff)
		}
		wantPending := map[string][]string{}
		if tc.want != nil {
			wantPending["worker"] = tc.want
		}
		if diff := cmp.Diff(wantPending, pendingFlavors(b, jobB)); diff != "" {
			t.Errorf("%s: pending flavors (-want +got):\n%s", tc.meta, diff)
		}
	}
}
