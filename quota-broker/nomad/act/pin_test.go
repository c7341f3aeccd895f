package act

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/nomad/api"

	"github.com/gputide/gputide/quota-broker/nomad/build"
	"github.com/gputide/gputide/quota-broker/nomad/watch"
	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/quota"
)

// The recording's GPUs' model (8 mock A100s).
const recordedModel = "Mock NVIDIA A100-SXM4-40GB"

// flavoredTree is e2eTree with flavors "h100" (no device of the
// recording) and "a100" (its 8 GPUs), DESIGN L13.
func flavoredTree() *quota.Node {
	n := func(h, a int) quota.Nominal { return quota.Nominal{"h100": h, "a100": a} }
	return &quota.Node{Name: "Quota1", GPUs: n(0, 8), ChildPreemption: true, Namespaces: []string{"workspace-a"},
		Flavors: []quota.Flavor{
			{Name: "h100", Models: []string{"NVIDIA H100 80GB HBM3"}},
			{Name: "a100", Models: []string{recordedModel}},
		},
		Children: []*quota.Node{
			{Name: "Quota1.1", GPUs: n(0, 3), Namespaces: []string{"workspace-b"}},
			{Name: "Quota1.2", GPUs: n(0, 5), Namespaces: []string{"workspace-c"}},
		}}
}

// setDevice gives the recording's waiting workspace-b/training (group
// "worker", 3 GPUs, in the holding pool) the device request d.
func setDevice(s *watch.State, d *api.RequestedDevice) {
	old := raw(s).Jobs[jobB]
	j := *old
	tg := *old.TaskGroups[0]
	task := *tg.Tasks[0]
	res := *task.Resources
	res.Devices = []*api.RequestedDevice{d}
	task.Resources = &res
	tg.Tasks = []*api.Task{&task}
	j.TaskGroups = []*api.TaskGroup{&tg}
	raw(s).Jobs[jobB] = &j
}

// admissionOf returns the pool and the GPU device constraints of each
// register of workspace-b/training, in order.
func admissionOf(t *testing.T, f *fakeNomad) (pools []string, constraints [][]*api.Constraint) {
	t.Helper()
	for _, r := range f.Writes() {
		if r.Path != "/v1/jobs" {
			continue
		}
		j, _, _ := registered(t, r)
		if str(j.Namespace) != jobB.Namespace || str(j.ID) != jobB.Job {
			continue
		}
		pools = append(pools, str(j.NodePool))
		constraints = append(constraints, j.TaskGroups[0].Tasks[0].Resources.Devices[0].Constraints)
	}
	return pools, constraints
}

// admitPlan builds the recording under tree and a plan that admits
// workspace-b/training in flavor (the core's choice, given by hand so
// that the test is the Actor's alone).
func admitPlan(t *testing.T, s *watch.State, tree *quota.Node, flavor string) (*plan.Plan, *build.Build) {
	t.Helper()
	b := build.From(s, build.Input{Now: at(t), Quota: tree, Settings: quota.DefaultSettings(),
		Accepted: func(plan.JobKey) bool { return true }})
	if b.Invalid != nil {
		t.Fatal(b.Invalid)
	}
	p := &plan.Plan{Actions: []plan.Action{{Action: plan.ActionAdmit, Namespace: jobB.Namespace, Job: jobB.Job,
		Group: "worker", Count: 1, GPUs: 3, Flavor: flavor, Rule: "L3", Reason: "entitled"}}}
	return p, b
}

// DESIGN L13, issue 17 item 3: admission pins the chosen flavor in the
// same register that moves the job out of the holding pool (one register,
// to its pool, with the pin), and leaves the State's and the view's spec
// as they were; under a tree without flavor blocks, the implicit flavor's
// pin keeps the job off MIG instances.
func TestAdmissionPinsTheChosenFlavor(t *testing.T) {
	three := uint64(3)
	for _, tc := range []struct {
		name   string
		tree   *quota.Node
		flavor string
		want   []*api.Constraint
	}{
		{"a100", flavoredTree(), "a100", []*api.Constraint{{LTarget: "${device.model}", Operand: "=", RTarget: recordedModel}}},
		{"implicit", e2eTree(), "", []*api.Constraint{{LTarget: "${device.attr.mig_profile}", Operand: "is_not_set"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, s := listRecorded(t)
			setDevice(s, &api.RequestedDevice{Name: "nvidia/gpu", Count: &three})
			a, log := newActor(f, s)
			p, b := admitPlan(t, s, tc.tree, tc.flavor)
			before := s.Job(jobB.Namespace, jobB.Job)
			forgetRequests(f)
			out := a.Execute(context.Background(), p, b)
			if len(out.Errors) != 0 || out.Admitted != 1 {
				t.Fatalf("outcome %+v\n%s", out, log)
			}
			pools, cons := admissionOf(t, f)
			if diff := cmp.Diff([]string{"default"}, pools); diff != "" {
				t.Errorf("registers' pools (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([][]*api.Constraint{tc.want}, cons); diff != "" {
				t.Errorf("registers' device constraints (-want +got):\n%s", diff)
			}
			for what, j := range map[string]*api.Job{"the view's": b.Jobs[jobB].Job, "the State's old": before} {
				if c := j.TaskGroups[0].Tasks[0].Resources.Devices[0].Constraints; c != nil {
					t.Errorf("%s spec was changed: %v", what, c)
				}
			}
		})
	}
}

// A job that pinned the chosen flavor itself is registered as it is: the
// admission adds no constraint twice.
func TestAdmissionLeavesAPinnedJobAsItIs(t *testing.T) {
	f, s := listRecorded(t)
	three := uint64(3)
	own := []*api.Constraint{{LTarget: "${device.model}", Operand: "=", RTarget: recordedModel}}
	setDevice(s, &api.RequestedDevice{Name: "nvidia/gpu", Count: &three, Constraints: own})
	a, log := newActor(f, s)
	p, b := admitPlan(t, s, flavoredTree(), "a100")
	forgetRequests(f)
	if out := a.Execute(context.Background(), p, b); len(out.Errors) != 0 || out.Admitted != 1 {
		t.Fatalf("outcome %+v\n%s", out, log)
	}
	if _, cons := admissionOf(t, f); !cmp.Equal([][]*api.Constraint{own}, cons) {
		t.Errorf("registers' device constraints %v, want %v alone", cons, own)
	}
}

// DESIGN §5: a job with live allocations is never re-registered to pin
// (a changed device request is a destructive update): it moves to its
// pool unpinned.
func TestAdmissionNeverPinsAJobWithLiveAllocations(t *testing.T) {
	f, s := listRecorded(t)
	three := uint64(3)
	setDevice(s, &api.RequestedDevice{Name: "nvidia/gpu", Count: &three})
	a, log := newActor(f, s)
	p, b := admitPlan(t, s, flavoredTree(), "a100")
	b.Jobs[jobB].Live = 1 // a survivor of a preemption, say
	forgetRequests(f)
	if out := a.Execute(context.Background(), p, b); len(out.Errors) != 0 || out.Admitted != 1 {
		t.Fatalf("outcome %+v\n%s", out, log)
	}
	pools, cons := admissionOf(t, f)
	if diff := cmp.Diff([]string{"default"}, pools); diff != "" {
		t.Errorf("registers' pools (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([][]*api.Constraint{nil}, cons); diff != "" {
		t.Errorf("registers' device constraints (-want +got):\n%s", diff)
	}
	if !strings.Contains(log.String(), "without pinning its flavor") {
		t.Errorf("no warning logged:\n%s", log)
	}
}

// DESIGN L13: a job whose device requests can use only ungoverned devices
// moves to its pool uncounted, unpinned, with no plan action for it.
func TestUngovernedJobMovesToItsPoolUncounted(t *testing.T) {
	f, s := listRecorded(t)
	three := uint64(3)
	setDevice(s, &api.RequestedDevice{Name: "nvidia/gpu/" + recordedModel + " MIG 1g.5gb", Count: &three})
	a, log := newActor(f, s)
	b := build.From(s, build.Input{Now: at(t), Quota: flavoredTree(), Settings: quota.DefaultSettings(),
		Accepted: func(plan.JobKey) bool { return true }})
	p, err := plan.Compute(b.Snapshot)
	if err != nil {
		t.Fatal(err)
	}
	for _, act := range p.Actions {
		if act.Namespace == jobB.Namespace && act.Job == jobB.Job {
			t.Errorf("plan action for the ungoverned job: %+v", act)
		}
	}
	forgetRequests(f)
	if out := a.Execute(context.Background(), p, b); len(out.Errors) != 0 {
		t.Fatalf("outcome %+v\n%s", out, log)
	}
	pools, cons := admissionOf(t, f)
	if diff := cmp.Diff([]string{"default"}, pools); diff != "" {
		t.Errorf("registers' pools (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([][]*api.Constraint{nil}, cons); diff != "" {
		t.Errorf("registers' device constraints (-want +got):\n%s", diff)
	}
}

// DESIGN L13: a wait in the one flavor the core tried names it in
// gputide_reason; a wait across flavors names each in its reason already.
func TestWaitReasonNamesItsFlavor(t *testing.T) {
	for _, tc := range []struct {
		name string
		act  plan.Action
		want string
	}{
		{"one flavor", plan.Action{Flavor: "a100", Rule: "L3", Reason: "Quota1.1: 6 of 6 GPUs in use; 1 more needed"},
			"L3: a100: Quota1.1: 6 of 6 GPUs in use; 1 more needed"},
		{"across flavors", plan.Action{Rule: "L3", Reason: "h100: Quota1.1 at 0 of 0; a100: Quota1.1 at 6 of 6",
			Reasons: []plan.FlavorReason{{Flavor: "h100"}, {Flavor: "a100"}}},
			"L3: h100: Quota1.1 at 0 of 0; a100: Quota1.1 at 6 of 6"},
		{"implicit flavor", plan.Action{Rule: "L3", Reason: "Quota1.1: 3 of 3 GPUs in use; 3 more needed"},
			"L3: Quota1.1: 3 of 3 GPUs in use; 3 more needed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, s := listRecorded(t)
			a, log := newActor(f, s)
			_, b := admitPlan(t, s, flavoredTree(), "a100")
			w := tc.act
			w.Action, w.Namespace, w.Job, w.Group, w.Count, w.GPUs = plan.ActionWait, jobB.Namespace, jobB.Job, "worker", 1, 3
			forgetRequests(f)
			if out := a.Execute(context.Background(), &plan.Plan{Actions: []plan.Action{w}}, b); len(out.Errors) != 0 || out.MetaWrites == 0 {
				t.Fatalf("outcome %+v\n%s", out, log)
			}
			var got []string
			for _, r := range f.Writes() {
				if r.Path != "/v1/jobs" {
					continue
				}
				if j, _, _ := registered(t, r); str(j.ID) == jobB.Job {
					got = append(got, j.Meta["gputide_reason"])
				}
			}
			if diff := cmp.Diff([]string{tc.want}, got); diff != "" {
				t.Errorf("gputide_reason written (-want +got):\n%s", diff)
			}
		})
	}
}
