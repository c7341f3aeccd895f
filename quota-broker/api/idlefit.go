package api

import (
	"net/http"

	"github.com/gputide/gputide/quota-broker/plan"
)

// idleFit serves GET /v1/idle-fit?namespace=N&job=J&group=G (issue 11 item
// 4, DESIGN §8): the extra allocations of the idle group's shape that fit
// now on free, healthy, unheld GPUs, as the last plan counted them
// (plan.Plan.IdleFit), with the flavor they lie in when the tree declares
// flavors (DESIGN L13), for the gputide-apm plugin's idle_fit query. It
// needs read-job on N; a group that is not an idle group of the last
// snapshot (no gputide-idle scaling policy, or a namespace the caller
// cannot read) is 404, and a missing parameter 400 naming it.
func (s *Server) idleFit(w http.ResponseWriter, r *http.Request, c *caller) {
	q := r.URL.Query()
	k := plan.GroupKey{Namespace: q.Get("namespace"), Job: q.Get("job"), Group: q.Get("group")}
	for _, p := range []struct{ name, value string }{{"namespace", k.Namespace}, {"job", k.Job}, {"group", k.Group}} {
		if p.value == "" {
			writeError(w, badInput(p.name, p.value, "required"))
			return
		}
	}
	st, fresh, err := s.current()
	if err != nil {
		writeError(w, err)
		return
	}
	fit, ok := st.Plan.GroupFitOf(k)
	if !ok || !c.canRead(k.Namespace) {
		writeError(w, notFound("no idle group %s (a task group with a gputide-idle scaling policy)", k))
		return
	}
	writeJSON(w, IdleFitResponse{State: fresh, Namespace: k.Namespace, Job: k.Job, Group: k.Group, IdleFit: fit.Fit, Flavor: fit.Flavor})
}
