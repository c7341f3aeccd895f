package client

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// broker serves fixed bodies per path and records the requests.
func broker(t *testing.T, status int, bodies map[string]string) (*httptest.Server, *[]*http.Request) {
	t.Helper()
	var seen []*http.Request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, r)
		body, ok := bodies[r.URL.Path]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"error": "no such path"}`))
			return
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv, &seen
}

func TestQuotas(t *testing.T) {
	srv, seen := broker(t, 200, map[string]string{"/v1/quotas": `{"state_age_seconds": 1.5, "staleness_seconds": 15, "quotas": [
		{"name": "Quota1", "nominal_gpus": 128, "used_gpus": 100},
		{"name": "Quota1.1", "parent": "Quota1", "nominal_gpus": 56, "used_gpus": 40, "nonidle_gpus": 38, "borrowed_gpus": 2,
		 "debt_gpus": 1, "booked_gpus": 8, "displaced_gpus": 3, "lendable_gpus": 16, "queued_gpus": 4, "workspaces": ["workspace-a"]}]}`})
	c, err := New(srv.URL, "tok", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Quotas(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := &QuotasResponse{State: State{1.5, 15}, Quotas: []Quota{
		{Name: "Quota1", NominalGPUs: 128, UsedGPUs: 100},
		{Name: "Quota1.1", Parent: "Quota1", NominalGPUs: 56, UsedGPUs: 40, NonidleGPUs: 38, BorrowedGPUs: 2, DebtGPUs: 1,
			BookedGPUs: 8, DisplacedGPUs: 3, LendableGPUs: 16, QueuedGPUs: 4, Workspaces: []string{"workspace-a"}},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Quotas (-want +got):\n%s", diff)
	}
	if h := (*seen)[0].Header.Get("X-Nomad-Token"); h != "tok" {
		t.Errorf("X-Nomad-Token = %q, want tok", h)
	}
}

func TestIdleFit(t *testing.T) {
	srv, seen := broker(t, 200, map[string]string{"/v1/idle-fit": `{"state_age_seconds": 0.2, "staleness_seconds": 15,
		"namespace": "workspace c", "job": "training", "group": "train", "idle_fit": 8}`})
	c, err := New(srv.URL+"/", "", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.IdleFit(context.Background(), "workspace c", "training", "train")
	if err != nil {
		t.Fatal(err)
	}
	want := &IdleFitResponse{State: State{0.2, 15}, Namespace: "workspace c", Job: "training", Group: "train", IdleFit: 8}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("IdleFit (-want +got):\n%s", diff)
	}
	r := (*seen)[0]
	if q := r.URL.Query(); q.Get("namespace") != "workspace c" || q.Get("job") != "training" || q.Get("group") != "train" {
		t.Errorf("query = %v", q)
	}
	if h := r.Header.Get("X-Nomad-Token"); h != "" {
		t.Errorf("X-Nomad-Token sent without a token: %q", h)
	}
}

func TestErrors(t *testing.T) {
	down := httptest.NewServer(http.NotFoundHandler())
	downURL := down.URL
	down.Close()

	tests := []struct {
		name     string
		status   int
		body     string
		address  string // "" = the test server
		sentinel error
		want     string // substring of Error()
	}{
		{"no answer", 0, "", downURL, ErrUnreachable, "GET /v1/quotas " + downURL + ": no answer"},
		{"503", 503, `{"error": "state older than 15s"}`, "", ErrUnreachable, "HTTP 503: state older than 15s"},
		{"stale state", 200, `{"state_age_seconds": 20, "staleness_seconds": 15, "quotas": []}`, "", ErrStale, "state is 20s old, past its staleness bound of 15s"},
		{"403", 403, `{"error": "token lacks read-job", "field": "namespace"}`, "", ErrForbidden, "HTTP 403: token lacks read-job (field namespace)"},
		{"not JSON", 200, `<html>`, "", ErrBadResponse, "answer is not the documented JSON"},
		{"too large", 200, `{"quotas": [` + strings.Repeat(" ", maxBody) + `]}`, "", ErrBadResponse, "answer larger than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr := tt.address
			if addr == "" {
				srv, _ := broker(t, tt.status, map[string]string{"/v1/quotas": tt.body})
				addr = srv.URL
			}
			c, err := New(addr, "", 2*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.Quotas(context.Background())
			if !errors.Is(err, tt.sentinel) {
				t.Fatalf("Quotas error %v, want %v", err, tt.sentinel)
			}
			var e *Error
			if !errors.As(err, &e) || e.Address != addr {
				t.Errorf("error %v is not an *Error naming %s", err, addr)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not contain %q", err, tt.want)
			}
		})
	}
}

func TestNewClientRefusesBadAddress(t *testing.T) {
	for _, a := range []string{"127.0.0.1:4780", "ftp://x", "http://", "::"} {
		if _, err := New(a, "", 0); err == nil || !strings.Contains(err.Error(), a) {
			t.Errorf("New(%q) error = %v, want one naming the address", a, err)
		}
	}
	c, err := New("", "", 0)
	if err != nil || c.Address() != DefaultAddress {
		t.Errorf("New(\"\") = %v, %v; want %s", c, err, DefaultAddress)
	}
}

// TestClientEscapesAPathSegmentOnce: an ID with "/" or "%" reaches the
// broker escaped once ("a%2Fb"), not twice ("a%252Fb"), under a base
// address with a path of its own.
func TestClientEscapesAPathSegmentOnce(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Method+" "+r.URL.EscapedPath())
		http.Error(w, `{"error": "no such reservation"}`, http.StatusNotFound)
	}))
	defer srv.Close()
	c, err := New(srv.URL+"/broker/", "t", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, _ = c.Reservation(ctx, "a/b")
	_, _ = c.CancelReservation(ctx, "../x%y", false)
	_, _ = c.Reservation(ctx, "r-0123abcd")
	want := []string{
		"GET /broker/v1/reservation/a%2Fb",
		"DELETE /broker/v1/reservation/..%2Fx%25y",
		"GET /broker/v1/reservation/r-0123abcd",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("request paths (-want +got):\n%s", diff)
	}
}
