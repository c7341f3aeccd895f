package reservation

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gputide/gputide/quota-broker/quota"
)

// flavorRoot is a tree of two flavors (DESIGN L13): Quota1 {h100 = 16,
// a100 = 32} with Quota1.1 {h100 = 8, a100 = 16} (workspace-b) and
// Quota1.2 {h100 = 8, a100 = 16} (workspace-a).
func flavorRoot() *quota.Node {
	nom := func(h, a int) quota.Nominal { return quota.Nominal{"h100": h, "a100": a} }
	return &quota.Node{Name: "Quota1", GPUs: nom(16, 32),
		Flavors: []quota.Flavor{{Name: "h100", Models: []string{"NVIDIA H100 80GB HBM3"}}, {Name: "a100", Models: []string{"NVIDIA A100-SXM4-40GB"}}},
		Children: []*quota.Node{
			{Name: "Quota1.1", GPUs: nom(8, 16), Namespaces: []string{"workspace-b"}},
			{Name: "Quota1.2", GPUs: nom(8, 16), Namespaces: []string{"workspace-a"}},
		}}
}

func flavorTree(t *testing.T) *Tree {
	t.Helper()
	tr, err := NewTree(flavorRoot())
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func fbk(id, node, flavor string, gpus int, start, end time.Time) Booking {
	b := bk(id, node, gpus, start, end)
	b.Flavor = flavor
	return b
}

// Prepare (DESIGN L13, issue 17 item 4): the booking's flavor is one of
// the tree's, required when the tree has several, defaulted when it has
// one; flavor and model together, and a model in a tree with flavors, are
// refused; in a tree without flavor blocks the flavor is stored as "".
func TestPrepareFlavor(t *testing.T) {
	now := at(1, 0)
	oneFlavor := flavorRoot()
	oneFlavor.Flavors = oneFlavor.Flavors[:1]
	implicit := &quota.Node{Name: "Quota1", GPUs: quota.Plain(8), Namespaces: []string{"workspace-b"}}
	for _, tt := range []struct {
		name          string
		root          *quota.Node
		flavor, model string
		want          string // the stored flavor
		err           string // the error, "" for none
	}{
		{"named", flavorRoot(), "a100", "", "a100", ""},
		{"missing in a tree of two", flavorRoot(), "", "", "",
			`flavor "": is missing: the tree has 2 flavors (h100, a100), name one`},
		{"unknown", flavorRoot(), "v100", "", "", `flavor "v100": is not a flavor of the tree (h100, a100)`},
		{"with a model", flavorRoot(), "a100", "NVIDIA A100-SXM4-40GB", "",
			`flavor "a100": given with model "NVIDIA A100-SXM4-40GB": a booking gives flavor or model, not both`},
		{"a model in a tree with flavors", oneFlavor, "", "NVIDIA H100 80GB HBM3", "",
			`model "NVIDIA H100 80GB HBM3": the tree declares flavors (h100): a booking names a flavor, not a model`},
		{"defaulted in a tree of one", oneFlavor, "", "", "h100", ""},
		{"implicit: none", implicit, "", "", "", ""},
		{"implicit: gpu is stored as none", implicit, "gpu", "", "", ""},
		{"implicit: a model", implicit, "", "H100", "", ""},
		{"implicit: another flavor", implicit, "h100", "", "", `flavor "h100": is not a flavor of the tree (gpu)`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tr, err := NewTree(tt.root)
			if err != nil {
				t.Fatal(err)
			}
			b := Booking{ID: "r-1", Namespace: "workspace-b", GPUs: 4, Flavor: tt.flavor, Model: tt.model, Start: at(2, 0), End: at(2, 2)}
			got, err := Prepare(tr, b, now, DefaultLimits())
			if tt.err != "" {
				var e *Error
				if !errors.As(err, &e) || !errors.Is(err, ErrInvalid) || err.Error() != tt.err {
					t.Fatalf("err = %v, want an invalid booking %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Flavor != tt.want {
				t.Fatalf("flavor = %q, want %q", got.Flavor, tt.want)
			}
		})
	}
}

// Check per flavor (DESIGN L13): a booking of a100 is checked against
// a100's nominals and a100's bookings only; the refusal names the flavor
// and the earliest start that fits is a100's.
func TestCheckPerFlavor(t *testing.T) {
	tr := flavorTree(t)
	existing := []Booking{
		fbk("h", "Quota1.1", "h100", 8, at(7, 0), at(14, 0)),  // Quota1.1's h100 full all week
		fbk("a", "Quota1.1", "a100", 12, at(7, 0), at(9, 0)),  // 12 of 16 a100 until the 9th
		fbk("x", "Quota1.2", "a100", 16, at(7, 0), at(10, 0)), // the sibling's a100: 28 of 32 at the root
	}
	// 4 a100 fit beside 12 at Quota1.1 and 28 at the root, whatever h100 holds.
	if err := tr.Check(existing, fbk("new", "Quota1.1", "a100", 4, at(8, 0), at(8, 2)), at(30, 0)); err != nil {
		t.Fatalf("a100 booking that fits its flavor was refused: %v", err)
	}
	// 8 a100 do not: Quota1.1 has 12 of 16 until the 9th.
	got := asRefusal(t, tr.Check(existing, fbk("new", "Quota1.1", "a100", 8, at(8, 0), at(8, 2)), at(30, 0)))
	want := refusal{Node: "Quota1.1", At: "2026-12-08T00:00+09:00", Booked: 12, Nominal: 16, Asked: 8,
		Earliest: "2026-12-09T00:00+09:00",
		Message:  "Quota1.1 at 2026-12-08T00:00+09:00: 12 of 16 a100 GPUs booked, 8 asked; earliest start that fits: 2026-12-09T00:00+09:00"}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("a100 refusal (-want +got):\n%s", d)
	}
	var e *Error
	if !errors.As(tr.Check(existing, fbk("new", "Quota1.1", "a100", 8, at(8, 0), at(8, 2)), at(30, 0)), &e) || e.Flavor != "a100" {
		t.Fatalf("refusal %v: want Flavor a100", e)
	}
	// 1 h100 does not fit: the a100 ends (9th, 10th) do not free h100;
	// only h100's own end on the 14th does.
	got = asRefusal(t, tr.Check(existing, fbk("new", "Quota1.1", "h100", 1, at(8, 0), at(8, 2)), at(30, 0)))
	if got.Node != "Quota1.1" || got.Booked != 8 || got.Nominal != 8 || got.Earliest != "2026-12-14T00:00+09:00" {
		t.Fatalf("h100 refusal: %+v", got)
	}
	s, ok, err := tr.Earliest(existing, fbk("new", "Quota1.2", "a100", 8, at(8, 0), at(8, 2)), at(30, 0))
	if err != nil || !ok || FormatInstant(s) != "2026-12-10T00:00+09:00" {
		t.Fatalf("Earliest a100 at Quota1.2 = %s, %v, %v; want 2026-12-10T00:00+09:00", FormatInstant(s), ok, err)
	}
	// A booking of a flavor the tree does not have is invalid.
	if err := tr.Check(existing, fbk("new", "Quota1.1", "v100", 1, at(8, 0), at(8, 2)), at(30, 0)); !errors.Is(err, ErrInvalid) {
		t.Fatalf("unknown flavor: err = %v, want ErrInvalid", err)
	}
}

// Fits and CheckTree per flavor: each flavor's bookings against its own
// nominals; a stored booking of a flavor the new tree drops, or without a
// flavor in a tree of several, is refused naming the booking, the flavor
// and the tree's flavors; a booking stored before flavors (none) reads as
// the tree's only flavor.
func TestCheckTreeFlavors(t *testing.T) {
	now := at(1, 0)
	a := fbk("r-a", "Quota1.1", "a100", 16, at(2, 0), at(3, 0))
	a.Namespace = "workspace-b"
	h := fbk("r-h", "Quota1.1", "h100", 8, at(2, 0), at(3, 0))
	h.Namespace = "workspace-b"
	legacy := h
	legacy.ID, legacy.Flavor = "r-old", ""
	for _, tt := range []struct {
		name     string
		root     func() *quota.Node
		bookings []Booking
		kind     error
		want     string
	}{
		{"each flavor full, none over", flavorRoot, []Booking{a, h}, nil, ""},
		{"a100 lowered below its bookings", func() *quota.Node {
			r := flavorRoot()
			r.Children[0].GPUs["a100"] = 8
			return r
		}, []Booking{a, h}, ErrRefused, "Quota1.1 at 2026-12-02T00:00+09:00: 16 of 8 a100 GPUs booked"},
		{"a flavor dropped", func() *quota.Node {
			r := flavorRoot()
			r.Flavors = r.Flavors[:1]
			for _, n := range []*quota.Node{r, r.Children[0], r.Children[1]} {
				delete(n.GPUs, "a100")
			}
			return r
		}, []Booking{a}, ErrInvalid, `flavor "a100": of booking "r-a" is not a flavor of the tree (h100); cancel the booking first`},
		{"no flavor in a tree of two", flavorRoot, []Booking{legacy}, ErrInvalid,
			`flavor "": of booking "r-old": it names no flavor and the tree has 2 (h100, a100); cancel the booking first`},
		{"no flavor in a tree of one: its only flavor", func() *quota.Node {
			r := flavorRoot()
			r.Flavors = r.Flavors[:1]
			for _, n := range []*quota.Node{r, r.Children[0], r.Children[1]} {
				delete(n.GPUs, "a100")
			}
			r.Children[0].GPUs["h100"] = 4
			return r
		}, []Booking{legacy}, ErrRefused, "Quota1.1 at 2026-12-02T00:00+09:00: 8 of 4 h100 GPUs booked"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckTree(tt.root(), tt.bookings, now)
			if tt.kind == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, tt.kind) || err.Error() != tt.want {
				t.Fatalf("err = %v, want %v %q", err, tt.kind, tt.want)
			}
		})
	}
}

// FlavorOf: a stored booking's flavor name ("gpu" without flavor blocks).
func TestFlavorOf(t *testing.T) {
	tr := flavorTree(t)
	if f, err := tr.FlavorOf(fbk("a", "Quota1.1", "a100", 1, at(2, 0), at(3, 0))); err != nil || f != "a100" {
		t.Fatalf("FlavorOf a100 = %q, %v", f, err)
	}
	if f, err := testTree(t).FlavorOf(bk("a", "Quota1.1", 1, at(2, 0), at(3, 0))); err != nil || f != quota.ImplicitFlavor {
		t.Fatalf("FlavorOf in a tree without flavors = %q, %v; want gpu", f, err)
	}
	if n, ok := tr.Nominal("Quota1.1", "a100"); !ok || n != 16 {
		t.Fatalf("Nominal(Quota1.1, a100) = %d, %v", n, ok)
	}
	if _, ok := tr.Nominal("Quota1.1", "v100"); ok {
		t.Fatal("Nominal of an unknown flavor reported ok")
	}
}

// A booking stored before flavors (no "flavor" key) reads as the tree's
// only flavor; a flavored one writes and reads "flavor".
func TestBookingJSONFlavor(t *testing.T) {
	var old Booking
	if err := json.Unmarshal([]byte(`{"id":"r-old","namespace":"workspace-b","node":"Quota1.1","gpus":8,"alloc_gpus":8,
		"start":"2026-12-02T00:00:00+09:00","end":"2026-12-03T00:00:00+09:00"}`), &old); err != nil {
		t.Fatal(err)
	}
	one := flavorRoot()
	one.Flavors = one.Flavors[1:]
	tr, err := NewTree(one)
	if err != nil {
		t.Fatal(err)
	}
	if f, err := tr.FlavorOf(old); err != nil || f != "a100" {
		t.Fatalf("a booking stored before flavors in a tree of a100 alone: %q, %v", f, err)
	}
	b := fbk("r-a", "Quota1.1", "a100", 8, at(2, 0), at(3, 0))
	data, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	var back Booking
	if err := json.Unmarshal(data, &back); err != nil || back.Flavor != "a100" || !strings.Contains(string(data), `"flavor":"a100"`) {
		t.Fatalf("round trip %s: %+v, %v", data, back, err)
	}
}
