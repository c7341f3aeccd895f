package watch

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/nomad/api"
)

// Nomad v1.11.3's answers of GET /v1/acl/token/self (measured on a dev
// agent): a client token, a management token, and the pseudo token it
// gives with ACLs off.
const (
	selfClient     = `{"AccessorID":"0f6e1a3c-8d2b-4f4e-9c1a-2b3c4d5e6f70","SecretID":"s","Name":"gputide-broker","Type":"client","Policies":["gputide-broker"]}`
	selfManagement = `{"AccessorID":"190e6440-353c-98ce-1ff6-eab7e85af39e","SecretID":"s","Name":"Bootstrap Token","Type":"management","Policies":null}`
	selfACLsOff    = `{"ExpirationTTL":"","AccessorID":"acls-disabled","SecretID":"","Name":"ACLs disabled token","Type":"client","Policies":null}`
)

// namespacesJSON is a GET /v1/namespaces answer with the names given.
func namespacesJSON(names ...string) string {
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf(`{"Name":%q}`, n)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// streamTopics returns the topics of every event stream request, in order.
func streamTopics(t *testing.T, f *fakeNomad) [][]string {
	t.Helper()
	f.Mu.Lock()
	defer f.Mu.Unlock()
	var out [][]string
	for _, r := range f.Requests {
		if r.Path != "/v1/event/stream" {
			continue
		}
		q, err := url.ParseQuery(r.Query)
		if err != nil {
			t.Fatalf("stream query %q: %v", r.Query, err)
		}
		out = append(out, q["topic"])
	}
	return out
}

// runUntilListed runs a watcher on f until its first list is installed and
// the stream request arrived, and returns it; the watcher stops with the test.
func runUntilListed(t *testing.T, f *fakeNomad) (*Watcher, *syncBuffer) {
	t.Helper()
	log, buf := testLogger(t)
	ctx, cancel := context.WithCancel(context.Background())
	w := &Watcher{Client: f.Client(), Governed: everything, Logger: log}
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	deadline := time.Now().Add(10 * time.Second)
	for (w.State() == nil || f.Count("GET", "/v1/event/stream") == 0) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if w.State() == nil {
		t.Fatalf("no list within 10s:\n%s", buf.String())
	}
	return w, buf
}

var topicsWithoutNamespace = []string{"Allocation:*", "Evaluation:*", "Job:*", "Node:*"}

// A token that is not a management token: the stream leaves the Namespace
// topic out (Nomad would close it at once), and a namespace created after
// the list is seen at the next Refresh, which lists the namespaces again.
func TestWatcherListsNamespacesForAClientToken(t *testing.T) {
	f := newFakeNomad(t)
	f.Bodies = map[string]string{"/v1/acl/token/self": selfClient}
	w, buf := runUntilListed(t, f)
	got := streamTopics(t, f)
	for _, ts := range got {
		slices.Sort(ts)
	}
	if diff := cmp.Diff([][]string{topicsWithoutNamespace}, got); diff != "" {
		t.Fatalf("stream topics (-want +got):\n%s", diff)
	}
	s := w.State()
	if diff := cmp.Diff([]string{"default", "workspace-a", "workspace-b", "workspace-c"}, s.Namespaces()); diff != "" {
		t.Fatalf("namespaces after the list (-want +got):\n%s", diff)
	}
	f.Mu.Lock()
	f.Bodies["/v1/namespaces"] = namespacesJSON("default", "workspace-a", "workspace-b", "workspace-d")
	f.Mu.Unlock()
	if err := s.Refresh(context.Background(), f.Client()); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"default", "workspace-a", "workspace-b", "workspace-d"}, s.Namespaces()); diff != "" {
		t.Fatalf("namespaces after Refresh (-want +got):\n%s", diff)
	}
	if n := f.Count("GET", "/v1/namespaces"); n != 2 {
		t.Fatalf("namespace lists = %d, want 2 (the full list, then Refresh)", n)
	}
	if n := f.Count("GET", "/v1/acl/token/self"); n != 1 {
		t.Fatalf("token reads = %d, want 1", n)
	}
	log := buf.String()
	if !strings.Contains(log, "[INFO]  watching namespaces by listing them at each planning cycle") || !strings.Contains(log, `the token is of type \"client\"`) {
		t.Fatalf("the choice is not logged at INFO with its reason:\n%s", log)
	}
}

// A management token, and Nomad with ACLs off: the stream carries the
// Namespace topic and Refresh does not list the namespaces.
func TestWatcherStreamsNamespacesForAManagementToken(t *testing.T) {
	for _, tc := range []struct{ name, self, reason string }{
		{"management", selfManagement, "reason=\"the token is a management token\""},
		{"ACLs off", selfACLsOff, "reason=\"Nomad's ACLs are disabled\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeNomad(t)
			f.Bodies = map[string]string{"/v1/acl/token/self": tc.self}
			w, buf := runUntilListed(t, f)
			want := []string{"Allocation:*", "Evaluation:*", "Job:*", "Namespace:*", "Node:*"}
			got := streamTopics(t, f)
			for _, ts := range got {
				slices.Sort(ts)
			}
			if diff := cmp.Diff([][]string{want}, got); diff != "" {
				t.Fatalf("stream topics (-want +got):\n%s", diff)
			}
			if err := w.State().Refresh(context.Background(), f.Client()); err != nil {
				t.Fatal(err)
			}
			if n := f.Count("GET", "/v1/namespaces"); n != 1 {
				t.Fatalf("namespace lists = %d, want 1 (the full list only)", n)
			}
			if log := buf.String(); !strings.Contains(log, "[INFO]  watching namespaces on the event stream") || !strings.Contains(log, tc.reason) {
				t.Fatalf("the choice is not logged at INFO with its reason:\n%s", log)
			}
		})
	}
}

// A Nomad that cannot answer token/self yet: no list, no stream; the next
// try decides.
func TestWatcherDecidesTheNamespaceWatchOnlyOnceNomadAnswers(t *testing.T) {
	f := newFakeNomad(t)
	f.Down = true
	f.Bodies = map[string]string{"/v1/acl/token/self": selfManagement}
	log, _ := testLogger(t)
	w := &Watcher{Client: f.Client(), Governed: everything, Logger: log}
	if _, err := w.once(context.Background()); !errors.Is(err, ErrTokenUnreadable) {
		t.Fatalf("once with Nomad down: %v, want ErrTokenUnreadable", err)
	}
	if n := f.Count("GET", "/v1/namespaces"); n != 0 {
		t.Fatalf("listed %d times before the token was read", n)
	}
	f.Mu.Lock()
	f.Down = false
	f.Mu.Unlock()
	mode, err := w.namespaceWatch(context.Background())
	if err != nil || mode != NamespacesStreamed {
		t.Fatalf("after Nomad came back: %v, %v; want %v", mode, err, NamespacesStreamed)
	}
}

func TestResolveNamespaceWatch(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		body   string
		want   NamespaceWatch
		reason string
		err    error
	}{
		{"client token", 200, selfClient, NamespacesListed, `the token is of type "client" and Nomad gives the Namespace topic to management tokens only`, nil},
		{"management token", 200, selfManagement, NamespacesStreamed, "the token is a management token", nil},
		{"ACLs off, v1.11.3 pseudo token", 200, selfACLsOff, NamespacesStreamed, "Nomad's ACLs are disabled", nil},
		{"ACLs off, 400", 400, "ACL support disabled\n", NamespacesStreamed, "Nomad's ACLs are disabled", nil},
		{"pseudo accessor with a secret", 200, `{"AccessorID":"acls-disabled","SecretID":"x","Type":"client"}`, NamespacesListed, `the token is of type "client" and Nomad gives the Namespace topic to management tokens only`, nil},
		{"other 400", 400, "bad request", NamespacesListed, "GET /v1/acl/token/self answered 400, so the token is not a management token", nil},
		{"unknown token", 403, "ACL token not found", NamespacesListed, "GET /v1/acl/token/self answered 403, so the token is not a management token", nil},
		{"no leader", 500, "No cluster leader", 0, "", ErrTokenUnreadable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/v1/acl/token/self" {
					http.NotFound(w, r)
					return
				}
				w.WriteHeader(tc.status)
				fmt.Fprint(w, tc.body)
			}))
			defer srv.Close()
			cfg := api.DefaultConfig()
			cfg.Address = srv.URL
			c, err := api.NewClient(cfg)
			if err != nil {
				t.Fatal(err)
			}
			got, why, err := ResolveNamespaceWatch(context.Background(), c)
			if !errors.Is(err, tc.err) || (tc.err == nil && err != nil) {
				t.Fatalf("error %v, want %v", err, tc.err)
			}
			if got != tc.want || why != tc.reason {
				t.Fatalf("got %v %q, want %v %q", got, why, tc.want, tc.reason)
			}
		})
	}
}
