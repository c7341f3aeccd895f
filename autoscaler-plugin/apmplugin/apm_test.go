package apmplugin

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/nomad-autoscaler/sdk"

	"github.com/gputide/gputide/autoscaler-plugin/pluginconf"
	"github.com/gputide/gputide/quota-broker/api/client"
)

var fixed = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

// fakeBroker answers /v1/quotas and /v1/idle-fit with fixed figures and counts
// calls; it records the last token.
type fakeBroker struct {
	calls atomic.Int32
	token atomic.Value
	stale bool
}

func (b *fakeBroker) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b.calls.Add(1)
	b.token.Store(r.Header.Get("X-Nomad-Token"))
	age := "0.5"
	if b.stale {
		age = "30"
	}
	switch r.URL.Path {
	case "/v1/quotas":
		_, _ = w.Write([]byte(`{"state_age_seconds": ` + age + `, "staleness_seconds": 15, "quotas": [
			{"name": "Quota1.1", "flavor": "gpu", "nominal_gpus": 56, "used_gpus": 40, "nonidle_gpus": 38, "borrowed_gpus": 2, "debt_gpus": 1,
			 "booked_gpus": 8, "lendable_gpus": 16, "queued_gpus": 4},
			{"name": "Quota2", "flavor": "h100", "nominal_gpus": 16, "used_gpus": 12, "queued_gpus": 3},
			{"name": "Quota2", "flavor": "a100", "nominal_gpus": 32, "used_gpus": 5, "lendable_gpus": 27}]}`))
	case "/v1/idle-fit":
		if r.URL.Query().Get("group") != "train" {
			w.WriteHeader(404)
			_, _ = w.Write([]byte(`{"error": "no idle group", "field": "group"}`))
			return
		}
		_, _ = w.Write([]byte(`{"state_age_seconds": ` + age + `, "staleness_seconds": 15, "idle_fit": 16}`))
	default:
		w.WriteHeader(404)
	}
}

func configured(t *testing.T, b *fakeBroker, extra map[string]string) (*APM, string) {
	t.Helper()
	srv := httptest.NewServer(b)
	t.Cleanup(srv.Close)
	a := New(nil, func() time.Time { return fixed })
	cfg := map[string]string{"address": srv.URL, "nomad_address": "http://127.0.0.1:4646", "nomad_token": "agent-token"}
	for k, v := range extra {
		cfg[k] = v
	}
	if err := a.SetConfig(cfg); err != nil {
		t.Fatal(err)
	}
	return a, srv.URL
}

func TestQueryValues(t *testing.T) {
	b := &fakeBroker{}
	a, _ := configured(t, b, nil)
	tests := []struct {
		query string
		want  float64
	}{
		{"schedule", 1},
		{`nominal_gpus{quota="Quota1.1"}`, 56},
		{`used_gpus{quota="Quota1.1"}`, 40},
		{`nonidle_gpus{quota="Quota1.1"}`, 38},
		{`borrowed_gpus{quota="Quota1.1"}`, 2},
		{`debt_gpus{quota="Quota1.1"}`, 1},
		{`lendable_gpus{quota="Quota1.1"}`, 16},
		{`booked_gpus{quota="Quota1.1"}`, 8},
		{`queued_gpus{quota="Quota1.1"}`, 4},
		// Per flavor (DESIGN L13): the implicit flavor by name or without
		// the label, a flavor of a node of several by name.
		{`used_gpus{quota="Quota1.1",flavor="gpu"}`, 40},
		{`used_gpus{quota="Quota2",flavor="h100"}`, 12},
		{`used_gpus{ flavor = "a100", quota = "Quota2" }`, 5},
		{`nominal_gpus{quota="Quota2",flavor="a100"}`, 32},
		{`queued_gpus{quota="Quota2",flavor="h100"}`, 3},
		{`lendable_gpus{quota="Quota2",flavor="a100"}`, 27},
		{`idle_fit{namespace="workspace-c",job="training",group="train"}`, 16},
	}
	for _, tt := range tests {
		got, err := a.Query(tt.query, sdk.TimeRange{})
		if err != nil {
			t.Errorf("Query(%s): %v", tt.query, err)
			continue
		}
		want := sdk.TimestampedMetrics{{Timestamp: fixed, Value: tt.want}}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Query(%s) (-want +got):\n%s", tt.query, diff)
		}
	}
	if tok := b.token.Load(); tok != "agent-token" {
		t.Errorf("token sent = %v, want the agent's nomad_token", tok)
	}
	multi, err := a.QueryMultiple("schedule", sdk.TimeRange{})
	if err != nil || len(multi) != 1 || len(multi[0]) != 1 {
		t.Errorf("QueryMultiple(schedule) = %v, %v; want one series of one point", multi, err)
	}
}

func TestScheduleNeedsNoBroker(t *testing.T) {
	a := New(nil, func() time.Time { return fixed })
	// A broker address where nothing listens: schedule must still answer.
	if err := a.SetConfig(map[string]string{"address": "http://127.0.0.1:1"}); err != nil {
		t.Fatal(err)
	}
	got, err := a.Query("schedule", sdk.TimeRange{})
	if err != nil || len(got) != 1 || got[0].Value != 1 {
		t.Fatalf("Query(schedule) = %v, %v; want one point of value 1", got, err)
	}
	b := &fakeBroker{}
	a2, _ := configured(t, b, nil)
	if _, err := a2.Query(" schedule ", sdk.TimeRange{}); err != nil {
		t.Fatal(err)
	}
	if n := b.calls.Load(); n != 0 {
		t.Errorf("schedule made %d broker calls, want 0", n)
	}
}

// TestQuotaEntryOfABrokerBeforeFlavors: a broker from before flavors
// writes no flavor; its entries are the implicit flavor's, with or
// without the label.
func TestQuotaEntryOfABrokerBeforeFlavors(t *testing.T) {
	qs := []client.Quota{{Name: "Quota1", UsedGPUs: 7}, {Name: "Quota1.1", UsedGPUs: 3}}
	for _, query := range []string{`used_gpus{quota="Quota1.1"}`, `used_gpus{quota="Quota1.1",flavor="gpu"}`} {
		q, err := ParseQuery(query)
		if err != nil {
			t.Fatal(err)
		}
		n, err := quotaEntry(qs, q, "http://broker")
		if err != nil || n.UsedGPUs != 3 {
			t.Errorf("%s: %+v, %v; want Quota1.1's 3 used GPUs", query, n, err)
		}
	}
	q, _ := ParseQuery(`used_gpus{quota="Quota1.1",flavor="h100"}`)
	if _, err := quotaEntry(qs, q, "http://broker"); err == nil || err.Error() != `quota "Quota1.1" has no flavor "h100" at broker http://broker (its flavors: gpu)` {
		t.Errorf("h100 of a broker before flavors: %v", err)
	}
}

func TestQueryErrors(t *testing.T) {
	b := &fakeBroker{}
	a, addr := configured(t, b, map[string]string{"token": "own"})
	stale := &fakeBroker{stale: true}
	as, saddr := configured(t, stale, nil)
	down := New(nil, nil)
	if err := down.SetConfig(map[string]string{"address": "http://127.0.0.1:1", "timeout": "1s"}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		a        *APM
		query    string
		sentinel error
		want     string
	}{
		{"bad query", a, `used_gpus{quota=}`, nil, `gputide-apm: query "used_gpus{quota=}": offset 16: want a double-quoted value, got '}'`},
		{"unknown quota", a, `used_gpus{quota="Nope"}`, nil, `gputide-apm: query "used_gpus{quota=\"Nope\"}": quota "Nope" not found at broker ` + addr},
		{"several flavors, none named", a, `used_gpus{quota="Quota2"}`, nil, `query "used_gpus{quota=\"Quota2\"}": quota "Quota2" has 2 flavors at broker ` + addr + ` (h100, a100): name one with flavor="..."`},
		{"unknown flavor", a, `used_gpus{quota="Quota2",flavor="b200"}`, nil, `quota "Quota2" has no flavor "b200" at broker ` + addr + ` (its flavors: h100, a100)`},
		{"empty flavor", a, `used_gpus{quota="Quota2",flavor=""}`, nil, `offset 32: label "flavor" is empty`},
		{"broker down", down, `used_gpus{quota="Quota1.1"}`, ErrBrokerUnreachable, `gputide-apm: query "used_gpus{quota=\"Quota1.1\"}": broker unreachable at http://127.0.0.1:1: GET /v1/quotas http://127.0.0.1:1: no answer`},
		{"broker stale", as, `idle_fit{namespace="n",job="j",group="train"}`, ErrBrokerUnreachable, `broker unreachable at ` + saddr + `: GET /v1/idle-fit ` + saddr + `: state is 30s old, past its staleness bound of 15s`},
		{"broker 404", a, `idle_fit{namespace="n",job="j",group="other"}`, nil, `HTTP 404: no idle group (field group)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.a.Query(tt.query, sdk.TimeRange{})
			if err == nil {
				t.Fatalf("Query(%s) = %v, want an error", tt.query, got)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Query error\n got: %s\nwant: %s", err, tt.want)
			}
			if tt.sentinel != nil && !errors.Is(err, tt.sentinel) {
				t.Errorf("error %v does not wrap %v", err, tt.sentinel)
			}
		})
	}
	if tok := b.token.Load(); tok != "own" {
		t.Errorf("token sent = %v, want the block's token over nomad_token", tok)
	}
}

func TestSetConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  map[string]string
		want string // "" = accepted
	}{
		{"defaults and the agent's keys", map[string]string{"nomad_address": "http://127.0.0.1:4646", "nomad_token": "t"}, ""},
		{"all keys", map[string]string{"address": "https://broker:4780", "token": "t", "timeout": "2s"}, ""},
		{"an unknown key", map[string]string{"adress": "http://x"}, `gputide-apm: config key "adress": unknown key; known keys are address, token, timeout, ca_file`},
		{"a CA file that is a device", map[string]string{"address": "https://broker:4780", "ca_file": "/dev/zero"}, `gputide-apm: config key "ca_file": CA certificate "/dev/zero": /dev/zero: not a regular file (a character device): want a regular file`},
		{"a bad timeout", map[string]string{"timeout": "soon"}, `gputide-apm: config key "timeout": invalid duration "soon": want a positive Go duration such as "5s"`},
		{"a zero timeout", map[string]string{"timeout": "0s"}, `gputide-apm: config key "timeout": invalid duration "0s": want a positive Go duration such as "5s"`},
		{"a bad address", map[string]string{"address": "127.0.0.1:4780"}, `gputide-apm: config key "address": broker address "127.0.0.1:4780": want an http or https URL such as "http://127.0.0.1:4780"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := New(nil, nil).SetConfig(tt.cfg)
			got := ""
			if err != nil {
				got = err.Error()
				var pe *pluginconf.Error
				if !errors.As(err, &pe) {
					t.Errorf("error %v is not a *pluginconf.Error", err)
				}
			}
			if got != tt.want {
				t.Errorf("SetConfig(%v)\n got: %s\nwant: %s", tt.cfg, got, tt.want)
			}
		})
	}
	if _, err := New(nil, nil).Query(`used_gpus{quota="a"}`, sdk.TimeRange{}); !errors.Is(err, ErrNotConfigured) {
		t.Errorf("Query before SetConfig = %v, want ErrNotConfigured", err)
	}
}

// A broker that refuses the connection or drops it mid-answer gives an error
// that names the broker and wraps the cause, but whose text has neither
// "connection refused" nor "EOF": nomad-autoscaler v0.5.0 restarts all its
// policies on either phrase (agentSafe), which would stall the schedule
// policies through a broker outage.
func TestBrokerErrorsSpareTheAgentsFatalPhrases(t *testing.T) {
	drop := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	}))
	defer drop.Close()
	refused := httptest.NewServer(http.NotFoundHandler())
	refused.Close()
	for _, tt := range []struct {
		name, addr, want string
		cause            error
	}{
		{"connection refused", refused.URL, "connect: connection was refused", syscall.ECONNREFUSED},
		{"connection dropped", drop.URL, "end of stream", io.EOF},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := New(nil, nil)
			if err := a.SetConfig(map[string]string{"address": tt.addr, "timeout": "2s"}); err != nil {
				t.Fatal(err)
			}
			_, err := a.Query(`idle_fit{namespace="n",job="j",group="train"}`, sdk.TimeRange{})
			if err == nil {
				t.Fatal("Query: no error, want broker unreachable")
			}
			msg := err.Error()
			if !strings.Contains(msg, "broker unreachable at "+tt.addr+": ") || !strings.Contains(msg, tt.want) {
				t.Errorf("error %q, want it to name the broker and contain %q", msg, tt.want)
			}
			if strings.Contains(msg, "connection refused") || strings.Contains(msg, "EOF") {
				t.Errorf("error %q contains a phrase the autoscaler takes as fatal", msg)
			}
			if !errors.Is(err, ErrBrokerUnreachable) || !errors.Is(err, tt.cause) {
				t.Errorf("error %v: want it to wrap ErrBrokerUnreachable and %v", err, tt.cause)
			}
		})
	}
}

// The configured line gives the timeout as a duration's text, also in
// go-plugin's JSON log (where a time.Duration showed as 5e+09).
func TestSetConfigLogsTimeout(t *testing.T) {
	var b strings.Builder
	log := hclog.New(&hclog.LoggerOptions{Output: &b, JSONFormat: true})
	if err := New(log, nil).SetConfig(map[string]string{"address": "http://127.0.0.1:4780", "timeout": "5s"}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `"timeout":"5s"`) {
		t.Errorf("log line lacks \"timeout\":\"5s\": %s", b.String())
	}
}
