package reservation

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestDefaultAllocGPUs(t *testing.T) {
	got := map[int]int{}
	for _, g := range []int{-1, 0, 1, 2, 3, 7, 8, 12, 16, 18, 20, 24, 30, 49, 9973} {
		got[g] = DefaultAllocGPUs(g)
	}
	want := map[int]int{-1: 0, 0: 0, 1: 1, 2: 2, 3: 3, 7: 7, 8: 8, 12: 6, 16: 8, 18: 6, 20: 5, 24: 8, 30: 6, 49: 7, 9973: 1}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("DefaultAllocGPUs (-want +got):\n%s", d)
	}
}

func TestValidIDAndNewID(t *testing.T) {
	for _, id := range []string{"a", "0", "r-0a1b2c3d", "train-2026-w49", strings.Repeat("a", 63)} {
		if err := ValidID(id); err != nil {
			t.Errorf("ValidID(%q) = %v", id, err)
		}
	}
	for _, id := range []string{"", "-a", "A", "a_b", "a.b", "a/b", "é", strings.Repeat("a", 64), "a b"} {
		if err := ValidID(id); !errors.Is(err, ErrInvalid) {
			t.Errorf("ValidID(%q) = %v, want ErrInvalid", id, err)
		}
	}
	// The bad character is named as written, counted in characters, not
	// bytes: "é" is not shown as its first byte 'Ã', and 32 "é" (64 bytes)
	// are not "64 characters long".
	for id, want := range map[string]string{
		"é":                     `id "é": character 1 ('é') is not allowed; an ID matches [a-z0-9][a-z0-9-]{0,62}`,
		"ab\u00e9":              `id "abé": character 3 ('é') is not allowed; an ID matches [a-z0-9][a-z0-9-]{0,62}`,
		"aé\xff":                `id "aé\xff": character 2 ('é') is not allowed; an ID matches [a-z0-9][a-z0-9-]{0,62}`,
		"a\xff":                 `id "a\xff": character 2 (byte 0xff, not UTF-8) is not allowed; an ID matches [a-z0-9][a-z0-9-]{0,62}`,
		strings.Repeat("é", 32): `id "` + strings.Repeat("é", 32) + `": character 1 ('é') is not allowed; an ID matches [a-z0-9][a-z0-9-]{0,62}`,
		strings.Repeat("a", 64): `id "` + strings.Repeat("a", 64) + `": is 64 characters long, more than 63`,
	} {
		if err := ValidID(id); err == nil || err.Error() != want {
			t.Errorf("ValidID(%q) = %v, want %s", id, err, want)
		}
	}
	if got := NewID([4]byte{0x0a, 0xb1, 0xff, 0x00}); got != "r-0ab1ff00" {
		t.Fatalf("NewID = %q", got)
	}
	if err := ValidID(NewID([4]byte{0xff, 0xff, 0xff, 0xff})); err != nil {
		t.Fatal(err)
	}
}

func TestPrepare(t *testing.T) {
	tr := testTree(t)
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, tokyo)
	ok := Booking{ID: "r-1", Namespace: "workspace-b", GPUs: 16, Start: at(7, 8), End: at(14, 8)}
	got, err := Prepare(tr, ok, now, DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	want := ok
	want.Node, want.AllocGPUs = "Quota1.1", 8
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("prepared booking (-want +got):\n%s", d)
	}

	with := func(f func(b *Booking)) Booking {
		b := ok
		f(&b)
		return b
	}
	cases := []struct {
		name string
		b    Booking
		lim  Limits
		want string
	}{
		{"bad id", with(func(b *Booking) { b.ID = "R1" }), DefaultLimits(), `id "R1": character 1 ('R') is not allowed; an ID matches [a-z0-9][a-z0-9-]{0,62}`},
		{"unbound namespace", with(func(b *Booking) { b.Namespace = "nobody" }), DefaultLimits(), `namespace "nobody": is not bound to any quota node of the tree`},
		{"other node", with(func(b *Booking) { b.Node = "Quota1.2" }), DefaultLimits(), `node "Quota1.2": is not the node of namespace "workspace-b" (Quota1.1)`},
		{"zero gpus", with(func(b *Booking) { b.GPUs = 0 }), DefaultLimits(), `gpus "0": must be from 1 to 2147483647`},
		{"alloc does not divide", with(func(b *Booking) { b.AllocGPUs = 3 }), DefaultLimits(), `alloc_gpus "3": must divide gpus (16)`},
		{"alloc above gpus", with(func(b *Booking) { b.AllocGPUs = 32 }), DefaultLimits(), `alloc_gpus "32": must divide gpus (16)`},
		{"start now", with(func(b *Booking) { b.Start = now; b.End = now.Add(time.Hour) }), DefaultLimits(), `start "2026-12-01T09:00+09:00": is not in the future (now 2026-12-01T09:00+09:00)`},
		{"start too far", with(func(b *Booking) { b.Start = now.Add(DefaultMaxAhead + time.Minute); b.End = b.Start.Add(time.Hour) }), DefaultLimits(),
			`start "2027-01-26T09:01+09:00": is more than reservation_max_ahead (1344h0m0s) ahead; the latest start is 2027-01-26T09:00+09:00`},
		{"too short", with(func(b *Booking) { b.End = b.Start.Add(59 * time.Minute) }), DefaultLimits(), `duration "59m0s": must be from reservation_min_duration (1h0m0s) to 2160h0m0s`},
		{"too long", with(func(b *Booking) { b.End = b.Start.Add(MaxDuration + time.Second) }), DefaultLimits(), `duration "2160h0m1s": must be from reservation_min_duration (1h0m0s) to 2160h0m0s`},
		{"end before start", with(func(b *Booking) { b.End = b.Start.Add(-time.Hour) }), DefaultLimits(), `duration "-1h0m0s": must be from reservation_min_duration (1h0m0s) to 2160h0m0s`},
		{"pool with a slash and NUL", with(func(b *Booking) { b.NodePool = "a/b\x00" }), DefaultLimits(),
			`node_pool "a/b\x00": not a Nomad node pool name (1 to 128 letters, digits, '-' or '_')`},
		{"pool too long", with(func(b *Booking) { b.NodePool = strings.Repeat("p", 129) }), DefaultLimits(),
			`node_pool "` + strings.Repeat("p", 129) + `": not a Nomad node pool name (1 to 128 letters, digits, '-' or '_')`},
		{"model too long", with(func(b *Booking) { b.Model = strings.Repeat("x", 257) }), DefaultLimits(),
			`model "` + strings.Repeat("x", 257) + `": is 257 bytes long, more than 256`},
		{"model with a control character", with(func(b *Booking) { b.Model = "H100\n" }), DefaultLimits(),
			`model "H100\n": character 5 ('\n') is not printable`},
		{"below a shorter minimum", with(func(b *Booking) { b.End = b.Start.Add(time.Minute) }), Limits{MaxAhead: DefaultMaxAhead, MinDuration: 2 * time.Minute},
			`duration "1m0s": must be from reservation_min_duration (2m0s) to 2160h0m0s`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Prepare(tr, c.b, now, c.lim)
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("want ErrInvalid, got %v", err)
			}
			if err.Error() != c.want {
				t.Fatalf("error\n got %s\nwant %s", err, c.want)
			}
		})
	}
	// Real model and pool names pass.
	named := with(func(b *Booking) { b.Model, b.NodePool = "NVIDIA H100 80GB HBM3", "gpu_h100-a" })
	if _, err := Prepare(tr, named, now, DefaultLimits()); err != nil {
		t.Fatal(err)
	}
	// The limits are the tree's: a shorter minimum admits a 2-minute booking.
	short := with(func(b *Booking) { b.End = b.Start.Add(2 * time.Minute) })
	if _, err := Prepare(tr, short, now, Limits{MaxAhead: DefaultMaxAhead, MinDuration: 2 * time.Minute}); err != nil {
		t.Fatal(err)
	}
}
