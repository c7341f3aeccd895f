package api

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestReservationsPerFlavor (issue 17 item 4, DESIGN L13): in a tree of
// two flavors a booking names one (bad input naming the choices
// otherwise, and with a model); a100 bookings are refused against a100's
// nominal and bookings only, with the refusal's flavor and the earliest
// a100 start; the flavor is shown by GET and list; a quota move of a100
// is checked against the a100 bookings only.
func TestReservationsPerFlavor(t *testing.T) {
	h := newHarness(t, options{})
	if code, body := h.do(t, "PUT", "/v1/quotas", tokMgmt, flavorTree); code != 200 {
		t.Fatalf("apply: %d %s", code, body)
	}
	const window = `"start":"2026-12-07T08:00:00+09:00","duration":"24h"`
	for _, tc := range []struct{ body, field, want string }{
		{`{"namespace":"workspace-b","gpus":8,` + window + `}`, "flavor",
			`flavor "": is missing: the tree has 2 flavors (h100, a100), name one`},
		{`{"namespace":"workspace-b","gpus":8,"flavor":"v100",` + window + `}`, "flavor",
			`flavor "v100": is not a flavor of the tree (h100, a100)`},
		{`{"namespace":"workspace-b","gpus":8,"flavor":"a100","model":"NVIDIA A100-SXM4-40GB",` + window + `}`, "flavor",
			`flavor "a100": given with model "NVIDIA A100-SXM4-40GB": a booking gives flavor or model, not both`},
		{`{"namespace":"workspace-b","gpus":8,"model":"NVIDIA A100-SXM4-40GB",` + window + `}`, "model",
			`model "NVIDIA A100-SXM4-40GB": the tree declares flavors (h100, a100): a booking names a flavor, not a model`},
	} {
		code, body := h.do(t, "POST", "/v1/reservations", tokTeamB, tc.body)
		if e := errOf(t, body); code != 400 || e.Field != tc.field || e.Error != tc.want {
			t.Errorf("POST %s: %d %s, want 400 field %s %q", tc.body, code, body, tc.field, tc.want)
		}
	}

	code, body := h.do(t, "POST", "/v1/reservations", tokTeamB, `{"id":"ra","namespace":"workspace-b","gpus":16,"flavor":"a100",`+window+`}`)
	if code != 201 {
		t.Fatalf("a100 booking: %d %s", code, body)
	}
	var created ReservationResponse
	if err := json.Unmarshal(body, &created); err != nil {
		t.Fatal(err)
	}
	if created.Reservation.Flavor != "a100" {
		t.Errorf("created flavor %q, want a100", created.Reservation.Flavor)
	}
	// 16 more a100 do not fit Quota1.1's 24 a100 until ra ends.
	code, body = h.do(t, "POST", "/v1/reservations", tokTeamB, `{"namespace":"workspace-b","gpus":16,"flavor":"a100",`+window+`}`)
	e := errOf(t, body)
	at := time.Date(2026, 12, 7, 8, 0, 0, 0, time.FixedZone("", 9*3600))
	wantRefusal := &Refusal{Flavor: "a100", Node: "Quota1.1", At: at, Booked: 16, Nominal: 24, Asked: 16}
	eq := cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })
	if code != 409 || cmp.Diff(wantRefusal, e.Refusal, eq) != "" || e.Earliest == nil || !e.Earliest.Equal(at.Add(24*time.Hour)) ||
		e.Error != "Quota1.1 at 2026-12-07T08:00+09:00: 16 of 24 a100 GPUs booked, 16 asked; earliest start that fits: 2026-12-08T08:00+09:00" {
		t.Errorf("second a100 booking: %d %s, want 409 with refusal %+v and earliest 2026-12-08T08:00+09:00", code, body, wantRefusal)
	}
	// The same window in h100 fits: a100's bookings do not count there.
	if code, body := h.do(t, "POST", "/v1/reservations", tokTeamB, `{"id":"rh","namespace":"workspace-b","gpus":24,"flavor":"h100",`+window+`}`); code != 201 {
		t.Fatalf("h100 booking beside a100: %d %s", code, body)
	}

	var got ReservationResponse
	if code, body := h.do(t, "GET", "/v1/reservation/ra", tokTeamB, ""); code != 200 || json.Unmarshal(body, &got) != nil || got.Reservation.Flavor != "a100" {
		t.Errorf("GET ra: %d %s, want flavor a100", code, body)
	}
	var list ReservationsResponse
	if code, body := h.do(t, "GET", "/v1/reservations", tokTeamB, ""); code != 200 || json.Unmarshal(body, &list) != nil {
		t.Fatalf("list: %d %s", code, body)
	}
	flavors := map[string]string{}
	for _, r := range list.Reservations {
		flavors[r.ID] = r.Flavor
	}
	if d := cmp.Diff(map[string]string{"ra": "a100", "rh": "h100"}, flavors); d != "" {
		t.Errorf("listed flavors (-want +got):\n%s", d)
	}

	// Moves: 8 a100 leave Quota1.1 its 16 booked; 9 would not. Any h100
	// move away from Quota1.1 breaks rh's 24.
	if code, body := h.do(t, "POST", "/v1/quota/move", tokMgmt, `{"from":"Quota1.1","to":"Quota1.2","gpus":9,"flavor":"a100"}`); code != 409 {
		t.Errorf("a100 move below ra: %d %s, want 409", code, body)
	}
	if code, body := h.do(t, "POST", "/v1/quota/move", tokMgmt, `{"from":"Quota1.1","to":"Quota1.2","gpus":1,"flavor":"h100"}`); code != 409 {
		t.Errorf("h100 move below rh: %d %s, want 409", code, body)
	}
	if code, body := h.do(t, "POST", "/v1/quota/move", tokMgmt, `{"from":"Quota1.1","to":"Quota1.2","gpus":8,"flavor":"a100"}`); code != 200 {
		t.Errorf("a100 move that leaves ra room: %d %s, want 200", code, body)
	}

	// A tree that drops a100 while ra is booked is refused, naming the
	// booking, its flavor and the new tree's flavors.
	h100Only := strings.NewReplacer("flavor \"a100\" {\n  models = [\"NVIDIA A100-SXM4-40GB\"]\n}\n", "",
		", a100 = 64", "", ", a100 = 24", "", ", a100 = 40", "").Replace(flavorTree)
	if strings.Contains(h100Only, "a100") {
		t.Fatalf("the h100-only tree still names a100:\n%s", h100Only)
	}
	code, body = h.do(t, "PUT", "/v1/quotas", tokMgmt, h100Only)
	if e := errOf(t, body); code != 409 || e.Error != `L10: the change leaves a booking without its flavor: flavor "a100": of booking "ra" is not a flavor of the tree (h100); cancel the booking first` {
		t.Errorf("tree without a100: %d %s", code, body)
	}
}
