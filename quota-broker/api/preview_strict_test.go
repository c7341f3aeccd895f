package api

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// POST /v1/plan decodes its body as every write does (issue 16): trailing
// data, a key given twice (the job's fields without letter case, as
// encoding/json matches them; a map's keys exactly), an unknown top-level
// key and a job ID or namespace over MaxJobIDLength are 400s naming the
// body or the field; a job's env may hold keys that differ only in case.
func TestPreviewBodyIsStrict(t *testing.T) {
	h := newHarness(t, options{})
	const job = `{"Job":{"ID":"probe","Namespace":"workspace-b","Type":"batch","TaskGroups":[{"Name":"g","Count":1,"Tasks":[{"Name":"t","Env":{"http_proxy":"a","HTTP_PROXY":"b"},"Resources":{"Devices":[{"Name":"nvidia/gpu","Count":8}]}}]}]}}`
	if code, body := h.do(t, "POST", "/v1/plan", tokTeamB, job); code != http.StatusOK {
		t.Fatalf("a valid job with env keys differing in case: %d %s", code, body)
	}
	long := strings.Repeat("a", 1<<20)
	for _, tc := range []struct {
		name, body string
		want       errorBody
	}{
		{"trailing garbage", job + `garbage`, errorBody{Field: "body", Error: "body: data after the JSON value at offset 224"}},
		{"trailing brace", job + `}`, errorBody{Field: "body", Error: "body: data after the JSON value at offset 224"}},
		{"duplicate job key", `{"Job":{"ID":"probe","Namespace":"workspace-b","ID":"other"}}`, errorBody{Field: "ID", Error: `ID "other": key given twice`}},
		{"duplicate job key other case", `{"Job":{"ID":"probe","Namespace":"workspace-b","id":"other"}}`, errorBody{Field: "id", Error: `id "other": key given twice (as "ID" before)`}},
		{"duplicate meta key", `{"Job":{"ID":"probe","Meta":{"gputide_pool":"default","gputide_pool":"gpu"}}}`, errorBody{Field: "gputide_pool", Error: `gputide_pool "gpu": key given twice`}},
		{"duplicate top-level key", `{"Namespace":"workspace-b","JobID":"a","jobid":"b"}`, errorBody{Field: "jobid", Error: `jobid "b": key given twice (as "JobID" before)`}},
		{"unknown top-level key", `{"Namespace":"workspace-b","Job_ID":"a"}`, errorBody{Field: "Job_ID", Error: `unknown field "Job_ID"`}},
		{"1 MB job ID", `{"Job":{"ID":"` + long + `","Namespace":"workspace-b"}}`, errorBody{Field: "Job.ID", Error: `Job.ID "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa...": is 1048576 bytes long, more than 128`}},
		{"1 MB waiting job ID", `{"Namespace":"workspace-b","JobID":"` + long + `"}`, errorBody{Field: "JobID", Error: `JobID "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa...": is 1048576 bytes long, more than 128`}},
	} {
		code, body := h.do(t, "POST", "/v1/plan", tokTeamB, tc.body)
		if code != http.StatusBadRequest {
			t.Errorf("%s: %d %.300s, want 400", tc.name, code, body)
			continue
		}
		if diff := cmp.Diff(tc.want, errOf(t, body)); diff != "" {
			t.Errorf("%s: (-want +got):\n%s", tc.name, diff)
		}
	}
}
