package apmplugin

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseQuery(t *testing.T) {
	tests := []struct {
		in   string
		want Query
	}{
		{"schedule", Query{Kind: KindSchedule, Metric: "schedule"}},
		{"  schedule\t ", Query{Kind: KindSchedule, Metric: "schedule"}},
		{`lendable_gpus{quota="Quota1.2"}`, Query{Kind: KindQuota, Metric: "lendable_gpus", Quota: "Quota1.2"}},
		{` used_gpus { quota = "Quota1" } `, Query{Kind: KindQuota, Metric: "used_gpus", Quota: "Quota1"}},
		{`used_gpus{quota="Quota1",flavor="h100"}`, Query{Kind: KindQuota, Metric: "used_gpus", Quota: "Quota1", Flavor: "h100"}},
		{`debt_gpus{flavor="a100-1g",quota="Quota1.2"}`, Query{Kind: KindQuota, Metric: "debt_gpus", Quota: "Quota1.2", Flavor: "a100-1g"}},
		{`queued_gpus{quota="a \"b\" \\c"}`, Query{Kind: KindQuota, Metric: "queued_gpus", Quota: `a "b" \c`}},
		{`idle_fit{namespace="workspace-c",job="training",group="train"}`,
			Query{Kind: KindIdleFit, Metric: "idle_fit", Namespace: "workspace-c", Job: "training", Group: "train"}},
		{`idle_fit{ group = "g" , job="j",namespace="n" }`,
			Query{Kind: KindIdleFit, Metric: "idle_fit", Namespace: "n", Job: "j", Group: "g"}},
	}
	for _, tt := range tests {
		got, err := ParseQuery(tt.in)
		if err != nil {
			t.Errorf("ParseQuery(%q): %v", tt.in, err)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("ParseQuery(%q) (-want +got):\n%s", tt.in, diff)
		}
		if back, err := ParseQuery(got.String()); err != nil || back != got {
			t.Errorf("ParseQuery(%q.String() = %q) = %v, %v", tt.in, got.String(), back, err)
		}
	}
}

func TestParseQueryErrors(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", `query "": offset 0: want a metric name (schedule, idle_fit, nominal_gpus, used_gpus, nonidle_gpus, borrowed_gpus, debt_gpus, lendable_gpus, booked_gpus, queued_gpus), got end of query`},
		{"schedule x", `query "schedule x": offset 9: want end of query after schedule, got 'x'`},
		{"schedule{}", `query "schedule{}": offset 8: want end of query after schedule, got '{'`},
		{`gpus{quota="a"}`, `query "gpus{quota=\"a\"}": offset 0: unknown metric "gpus": want schedule, idle_fit or one of nominal_gpus, used_gpus, nonidle_gpus, borrowed_gpus, debt_gpus, lendable_gpus, booked_gpus, queued_gpus`},
		{`used_gpus`, `query "used_gpus": offset 9: want "{", got end of query`},
		{`used_gpus{}`, `query "used_gpus{}": offset 10: want a label name (quota, flavor), got '}'`},
		{`used_gpus{q="a"}`, `query "used_gpus{q=\"a\"}": offset 10: unknown label "q" for used_gpus: want quota, flavor`},
		{`used_gpus{flavor="h100"}`, `query "used_gpus{flavor=\"h100\"}": offset 23: missing label "quota": used_gpus takes quota`},
		{`used_gpus{quota="a",flavor="x",flavor="y"}`, `query "used_gpus{quota=\"a\",flavor=\"x\",flavor=\"y\"}": offset 31: label "flavor" given twice`},
		{`idle_fit{namespace="n",job="j",group="g",flavor="h100"}`, `query "idle_fit{namespace=\"n\",job=\"j\",group=\"g\",flavor=\"h100\"}": offset 41: unknown label "flavor" for idle_fit: want namespace, job, group`},
		{`used_gpus{quota="a",quota="b"}`, `query "used_gpus{quota=\"a\",quota=\"b\"}": offset 20: label "quota" given twice`},
		{`used_gpus{quota:"a"}`, `query "used_gpus{quota:\"a\"}": offset 15: want "=", got ':'`},
		{`used_gpus{quota=a}`, `query "used_gpus{quota=a}": offset 16: want a double-quoted value, got 'a'`},
		{`used_gpus{quota="a}`, `query "used_gpus{quota=\"a}": offset 19: unterminated string: want a closing '"'`},
		{`used_gpus{quota="a\n"}`, `query "used_gpus{quota=\"a\\n\"}": offset 18: invalid escape "\n": only \" and \\`},
		// The escaped character is named as written, not by its first byte.
		{`used_gpus{quota="\é"}`, `query "used_gpus{quota=\"\\é\"}": offset 17: invalid escape "\é": only \" and \\`},
		{`used_gpus{quota=""}`, `query "used_gpus{quota=\"\"}": offset 16: label "quota" is empty`},
		{`used_gpus{quota="a",}`, `query "used_gpus{quota=\"a\",}": offset 20: want a label name (quota, flavor), got '}'`},
		{`used_gpus{quota="a"`, `query "used_gpus{quota=\"a\"": offset 19: want "," or "}", got end of query`},
		{`used_gpus{quota="a"} x`, `query "used_gpus{quota=\"a\"} x": offset 21: want end of query after "}", got 'x'`},
		{`idle_fit{namespace="n",job="j"}`, `query "idle_fit{namespace=\"n\",job=\"j\"}": offset 30: missing label "group": idle_fit takes namespace, job, group`},
		{`idle_fit{quota="q"}`, `query "idle_fit{quota=\"q\"}": offset 9: unknown label "quota" for idle_fit: want namespace, job, group`},
	}
	for _, tt := range tests {
		_, err := ParseQuery(tt.in)
		var qe *QueryError
		if !errors.As(err, &qe) {
			t.Errorf("ParseQuery(%q) = %v, want a *QueryError", tt.in, err)
			continue
		}
		if err.Error() != tt.want {
			t.Errorf("ParseQuery(%q)\n got: %s\nwant: %s", tt.in, err, tt.want)
		}
	}
}

// FuzzParseQuery: no panic; an error is a *QueryError with an offset inside the
// query; a parsed query prints back to itself.
func FuzzParseQuery(f *testing.F) {
	for _, s := range []string{"schedule", `used_gpus{quota="Q"}`, `idle_fit{namespace="n",job="j",group="g"}`, `x{quota="\"\\"}`, `debt_gpus { quota = "a\"" }`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q, err := ParseQuery(s)
		if err != nil {
			var qe *QueryError
			if !errors.As(err, &qe) || qe.Offset < 0 || qe.Offset > len(s) || qe.Query != s {
				t.Fatalf("ParseQuery(%q) error %v: not a *QueryError inside the query", s, err)
			}
			return
		}
		back, err := ParseQuery(q.String())
		if err != nil || back != q {
			t.Fatalf("ParseQuery(%q) = %+v; its String %q parses to %+v, %v", s, q, q.String(), back, err)
		}
	})
}
