package plan_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gputide/gputide/quota-broker/plan"
	"github.com/gputide/gputide/quota-broker/snapshot"
)

func init() {
	// The booking property suite prints its shrunk failing snapshots in
	// the snapshot format (plan.SnapshotJSON).
	plan.SnapshotJSON = snapshot.Marshal
}

// FuzzPlan runs the whole planner on any document (issue 16): bytes ->
// snapshot.Unmarshal (which runs Validate) -> plan.Compute. Whatever the
// decoder accepts, Validate accepts too and Compute plans without a panic
// or an error, gives the same plan a second time and leaves the snapshot
// as it was. The seed corpus is the reference snapshot, the snapshots of
// testdata/planfuzz (the repro files of issue 16) and those of
// testdata/found (what the booking property suite found). In CI: make
// fuzz-ci.
func FuzzPlan(f *testing.F) {
	paths, err := filepath.Glob(filepath.Join("testdata", "planfuzz", "*.json"))
	if err != nil {
		f.Fatal(err)
	}
	found, err := filepath.Glob(filepath.Join("testdata", "found", "*.json"))
	if err != nil {
		f.Fatal(err)
	}
	paths = append(paths, found...)
	paths = append(paths, filepath.Join("..", "..", "examples", "reference", "snapshot.json"))
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := snapshot.Unmarshal(data)
		if err != nil {
			return
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("Unmarshal accepted a snapshot that Validate refuses: %v", err)
		}
		before, err := snapshot.Unmarshal(data)
		if err != nil {
			t.Fatalf("the same document decodes once only: %v", err)
		}
		p, err := plan.Compute(s)
		if err != nil {
			t.Fatalf("Compute of a snapshot that passes Validate: %v", err)
		}
		again, err := plan.Compute(s)
		if err != nil {
			t.Fatalf("second Compute: %v", err)
		}
		if diff := cmp.Diff(p, again); diff != "" {
			t.Fatalf("plans differ for the same snapshot (-first +second):\n%s", diff)
		}
		if diff := cmp.Diff(before, s); diff != "" {
			t.Fatalf("Compute changed the snapshot (-before +after):\n%s", diff)
		}
	})
}

// TestBookingPropertyFiles checks the booking suite's invariants
// (TestBookingProperty) on the snapshot files of testdata/planfuzz (the
// repro files of issue 16) and testdata/found, one subtest per file and
// invariant:
//
//	go test ./quota-broker/plan -run 'TestBookingPropertyFiles/stale-debt-after-in-plan-stop/DebtStops'
func TestBookingPropertyFiles(t *testing.T) {
	var paths []string
	for _, dir := range []string{"planfuzz", "found"} {
		p, err := filepath.Glob(filepath.Join("testdata", dir, "*.json"))
		if err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p...)
	}
	if len(paths) == 0 {
		t.Fatal("no snapshot files")
	}
	for _, path := range paths {
		name := strings.TrimSuffix(filepath.Base(path), ".json")
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			for _, inv := range plan.BookingInvariants {
				t.Run(inv, func(t *testing.T) {
					s, err := snapshot.Unmarshal(data)
					if err != nil {
						t.Fatalf("%s: %v", path, err)
					}
					skipped, err := plan.CheckBookingInvariant(inv, s)
					if skipped {
						t.Skip("Compute panicked (see NoPanic)")
					}
					if err != nil {
						t.Errorf("%s: %v", path, err)
					}
				})
			}
		})
	}
}
