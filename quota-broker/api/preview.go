package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/gputide/gputide/quota-broker/plan"
	nomadapi "github.com/hashicorp/nomad/api"
)

// PlanRequest is the body of POST /v1/plan: a new job as `nomad job run
// -output` writes it ({"Job": {...}}), or a job waiting in the holding pool
// ({"Namespace": "...", "JobID": "..."}).
type PlanRequest struct {
	Job       *nomadapi.Job `json:"Job,omitempty"`
	Namespace string        `json:"Namespace,omitempty"`
	JobID     string        `json:"JobID,omitempty"`
}

// PlanStop is a stop the previewed job causes; for a namespace the caller
// cannot read only Namespace, GPUs and Rule are set.
type PlanStop struct {
	Namespace string `json:"namespace"`
	GPUs      int    `json:"gpus"`
	Rule      string `json:"rule"`
	Alloc     string `json:"alloc,omitempty"`
	Job       string `json:"job,omitempty"`
	Group     string `json:"group,omitempty"`
	Reason    string `json:"reason,omitempty"`
}

// PlanResponse is the answer of POST /v1/plan: the job's admit, wait or
// expire actions in the plan the core makes now with it pending, and the
// stops made for it.
type PlanResponse struct {
	State
	Namespace string        `json:"namespace"`
	Job       string        `json:"job"`
	Actions   []plan.Action `json:"actions"`
	Stops     []PlanStop    `json:"stops"`
}

// MaxJobIDLength bounds the job IDs and namespaces of a POST /v1/plan body
// (Nomad's namespace limit, acl.MaxNamespaceLen, used for both): a longer
// one is a 400, as the other writes bound their IDs.
const MaxJobIDLength = 128

// planEnvelope is PlanRequest with its job kept raw: the envelope is
// decoded strictly (decodeBody: unknown keys, trailing data and duplicate
// keys anywhere in the body refused), the job by decodePlanJob.
type planEnvelope struct {
	Job       json.RawMessage `json:"Job,omitempty"`
	Namespace string          `json:"Namespace,omitempty"`
	JobID     string          `json:"JobID,omitempty"`
}

// decodePlanJob decodes the job of a POST /v1/plan body. Fields this
// broker's Nomad API does not know are let through, as Nomad's own job
// endpoints do (a job written by a newer Nomad); everything else is as
// strict as every body (decodeBody ran over the whole body first).
func decodePlanJob(raw json.RawMessage) (*nomadapi.Job, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var job nomadapi.Job
	if err := json.Unmarshal(raw, &job); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			f := "Job." + te.Field
			return nil, &Problem{Status: http.StatusBadRequest, Field: f, Msg: fmt.Sprintf("%s: want a JSON %s, got %s", f, te.Type, te.Value)}
		}
		return nil, &Problem{Status: http.StatusBadRequest, Field: "Job", Msg: "Job is not a Nomad job: " + err.Error()}
	}
	return &job, nil
}

// boundedName refuses a job ID or namespace longer than MaxJobIDLength,
// naming the field and the first 32 bytes of the value.
func boundedName(field, v string) error {
	if len(v) <= MaxJobIDLength {
		return nil
	}
	shown := v
	if len(shown) > 32 {
		shown = shown[:32] + "..."
	}
	return badInput(field, shown, "is %d bytes long, more than %d", len(v), MaxJobIDLength)
}

// DecodePlanRequest reads and checks a POST /v1/plan body: exactly one of
// Job, or Namespace with JobID; IDs and namespaces of at most
// MaxJobIDLength bytes.
func DecodePlanRequest(data []byte) (PlanRequest, error) {
	var env planEnvelope
	if err := decodeBody(data, &env, reflect.TypeOf(PlanRequest{})); err != nil {
		return PlanRequest{}, err
	}
	job, err := decodePlanJob(env.Job)
	if err != nil {
		return PlanRequest{}, err
	}
	req := PlanRequest{Job: job, Namespace: env.Namespace, JobID: env.JobID}
	switch {
	case req.Job != nil && (req.Namespace != "" || req.JobID != ""):
		return req, badInput("Job", "", "give either Job or Namespace and JobID, not both")
	case req.Job != nil:
		if req.Job.ID == nil || *req.Job.ID == "" {
			return req, badInput("Job.ID", "", "is empty")
		}
		if req.Job.Namespace == nil || *req.Job.Namespace == "" {
			ns := "default"
			req.Job.Namespace = &ns
		}
		if err := boundedName("Job.ID", *req.Job.ID); err != nil {
			return req, err
		}
		if err := boundedName("Job.Namespace", *req.Job.Namespace); err != nil {
			return req, err
		}
	case req.JobID == "":
		return req, badInput("JobID", "", "is empty; give Job, or Namespace and JobID of a waiting job")
	case req.Namespace == "":
		req.Namespace = "default"
	}
	if err := boundedName("JobID", req.JobID); err != nil {
		return req, err
	}
	if err := boundedName("Namespace", req.Namespace); err != nil {
		return req, err
	}
	return req, nil
}

// previewPlan serves POST /v1/plan: submit-job for a new job, read-job for
// a waiting one; the plan runs plan.ComputeFair on the current snapshot (no
// rule of its own).
func (s *Server) previewPlan(w http.ResponseWriter, r *http.Request, c *caller) {
	data, err := readBody(r)
	if err != nil {
		writeError(w, err)
		return
	}
	req, err := DecodePlanRequest(data)
	if err != nil {
		writeError(w, err)
		return
	}
	ns, job := req.Namespace, req.JobID
	if req.Job != nil {
		ns, job = *req.Job.Namespace, *req.Job.ID
		if !c.canSubmit(ns) {
			writeError(w, forbidden(fmt.Sprintf("permission denied: previewing a new job needs submit-job on namespace %q", ns)))
			return
		}
	} else if !c.canRead(ns) {
		writeError(w, forbidden(fmt.Sprintf("permission denied: the plan of a waiting job needs read-job on namespace %q", ns)))
		return
	}
	st, fresh, err := s.current()
	if err != nil {
		writeError(w, err)
		return
	}
	now := s.cfg.Now()
	snap := *st.Snapshot
	snap.Time = now
	key := plan.JobKey{Namespace: ns, Job: job}
	if req.Job != nil {
		groups, err := s.cfg.Backend.PendingOf(req.Job, now)
		if err != nil {
			writeError(w, err)
			return
		}
		snap.Pending = slices.DeleteFunc(slices.Clone(snap.Pending), func(p plan.Pending) bool { return p.JobKey() == key })
		snap.Pending = append(snap.Pending, groups...)
	} else if !slices.ContainsFunc(snap.Pending, func(p plan.Pending) bool { return p.JobKey() == key }) {
		writeError(w, notFound("job %q is not waiting in namespace %q", job, ns))
		return
	}
	p, err := s.computePreview(&snap)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, previewOf(p, &snap, key, c, fresh))
}

// computePreview plans a preview's snapshot. A planner error is the job's
// 400; a planner panic is recovered (issue 16 item 5: the broker survives
// its planner), logged once with its stack and answered 500, so a preview
// never drops the caller's connection and never stops the server.
func (s *Server) computePreview(snap *plan.Snapshot) (p *plan.Plan, err error) {
	defer func() {
		if v := recover(); v != nil {
			s.cfg.Logger.Error("the planner panicked on a preview", "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			p, err = nil, &Problem{Status: http.StatusInternalServerError, Msg: fmt.Sprintf("the planner panicked on this preview: %v; nothing was written", v)}
		}
	}()
	p, err = s.cfg.Planner(snap)
	if err != nil {
		return nil, &Problem{Status: http.StatusBadRequest, Field: "Job", Msg: "the core refused the job: " + err.Error()}
	}
	return p, nil
}

// previewOf keeps the actions of job key and the stops made for it.
func previewOf(p *plan.Plan, snap *plan.Snapshot, key plan.JobKey, c *caller, fresh State) PlanResponse {
	out := PlanResponse{State: fresh, Namespace: key.Namespace, Job: key.Job, Actions: []plan.Action{}, Stops: []PlanStop{}}
	for _, a := range p.Actions {
		switch {
		case a.Action == plan.ActionStop && a.For.JobKey() == key:
			st := PlanStop{Namespace: a.Namespace, GPUs: a.GPUs, Rule: string(a.Rule)}
			if c.canRead(a.Namespace) {
				st.Alloc, st.Job, st.Group, st.Reason = a.Alloc, a.Job, a.Group, reasonFor(snap, a.Reason, c)
			}
			out.Stops = append(out.Stops, st)
		case a.Action != plan.ActionStop && a.Namespace == key.Namespace && a.Job == key.Job:
			a.Reason = reasonFor(snap, a.Reason, c)
			out.Actions = append(out.Actions, a)
		}
	}
	return out
}

// PendingOfJob is a plain reading of a Nomad job's GPU task groups as the
// core's pending groups, for previews: per group, count allocations of the
// summed GPU device requests ("nvidia/gpu", "gpu", "nvidia/gpu/<model>")
// of its tasks; meta gputide_idle / gputide_elastic = "true",
// gputide_reservation; groups without GPUs are left out. It does not read
// flex meta nor check the booking: the agent's Backend.PendingOf then
// applies the Nomad adapter's reading of the meta (jobmeta.ParseJobOptions,
// jobmeta.CheckReservation in quota-broker/nomad/build), which is authoritative, and refuses a meta
// error with a 400 naming the key.
func PendingOfJob(job *nomadapi.Job, now time.Time) ([]plan.Pending, error) {
	str := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	typ := plan.JobType(str(job.Type))
	if typ == "" {
		typ = plan.JobService
	}
	if !typ.Valid() {
		return nil, badInput("Job.Type", string(typ), "want service, batch, system or sysbatch")
	}
	prio := 50
	if job.Priority != nil {
		prio = *job.Priority
	}
	if prio < 1 || prio > 100 {
		return nil, badInput("Job.Priority", fmt.Sprint(prio), "want 1 to 100")
	}
	var out []plan.Pending
	for gi, tg := range job.TaskGroups {
		gpus, model := 0, ""
		for _, t := range tg.Tasks {
			if t.Resources == nil {
				continue
			}
			for _, d := range t.Resources.Devices {
				name := d.Name
				if !(name == "gpu" || name == "nvidia/gpu" || strings.HasPrefix(name, "nvidia/gpu/")) {
					continue
				}
				if m, ok := strings.CutPrefix(name, "nvidia/gpu/"); ok {
					model = m
				}
				n := uint64(1)
				if d.Count != nil {
					n = *d.Count
				}
				if n > 1<<16 {
					return nil, badInput(fmt.Sprintf("Job.TaskGroups[%d].Tasks.Resources.Devices.Count", gi), fmt.Sprint(n), "want 0 to 65536")
				}
				gpus += int(n)
			}
		}
		if gpus == 0 {
			continue
		}
		count := 1
		if tg.Count != nil {
			count = *tg.Count
		}
		if count < 0 || count > 1<<16 {
			return nil, badInput(fmt.Sprintf("Job.TaskGroups[%d].Count", gi), fmt.Sprint(count), "want 0 to 65536")
		}
		meta := map[string]string{}
		for k, v := range job.Meta {
			meta[k] = v
		}
		for k, v := range tg.Meta {
			meta[k] = v
		}
		out = append(out, plan.Pending{
			Namespace: str(job.Namespace), Job: str(job.ID), Group: str(tg.Name), Type: typ, Priority: prio,
			Count: count, GPUs: gpus, Model: model, Datacenters: slices.Clone(job.Datacenters), NodePool: str(job.NodePool),
			Idle: meta["gputide_idle"] == "true", Elastic: meta["gputide_elastic"] == "true",
			Reservation: meta["gputide_reservation"], SubmittedAt: now,
		})
	}
	return out, nil
}
