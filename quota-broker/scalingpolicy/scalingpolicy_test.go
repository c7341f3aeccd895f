package scalingpolicy

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSniff(t *testing.T) {
	for src, want := range map[string]Kind{
		` {"Job": {}}`:                           KindJSONJob,
		"job \"x\" {\n  group \"g\" {\n  }\n}\n": KindHCLJob,
		"scaling \"x\" {\n  max = 1\n}\n":        KindPolicyFile,
		"scaling \"x\" {":                        KindPolicyFile,
	} {
		if got := Sniff("f.hcl", []byte(src)); got != want {
			t.Errorf("Sniff(%q) = %d, want %d", src, got, want)
		}
	}
}

func TestFromPolicyFile(t *testing.T) {
	src := `
scaling "a" {
  max = 4
  policy {
    check "one" {
      strategy "gputide-schedule" {
        window_day    = "mon 08:00-09:00 3"
        default_count = 1
      }
    }
    check "two" {
      source = "gputide-apm"
      query  = "idle_fit{namespace=\"n\",job=\"j\",group=\"g\"}"
      strategy "gputide-idle" {}
    }
    target "nomad-target" {
      Namespace = "n"
      Job       = "j"
      Group     = "g"
    }
  }
}
`
	got, err := FromPolicyFile("p.hcl", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := []Check{
		{Policy: "a", Namespace: "n", Job: "j", Group: "g", Name: "one", Strategy: "gputide-schedule",
			Config: map[string]string{"window_day": "mon 08:00-09:00 3", "default_count": "1"}},
		{Policy: "a", Namespace: "n", Job: "j", Group: "g", Name: "two", Source: "gputide-apm", Query: `idle_fit{namespace="n",job="j",group="g"}`,
			Strategy: "gputide-idle", Config: map[string]string{}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("FromPolicyFile (-want +got):\n%s", diff)
	}
}

func TestFromJSONJobBareAndFormatting(t *testing.T) {
	// A bare job (no {"Job": ...} wrapper); numbers and bools formatted as the
	// Autoscaler formats them (%v); malformed entries skipped.
	src := `{"ID": "j", "Namespace": "n", "TaskGroups": [{"Name": "g", "Scaling": {"Policy": {"check": [
	  {"c": [{"strategy": [{"gputide-schedule": [{"default_count": 2, "window_x": "mon 08:00-09:00 3", "flag": true}]}]}]},
	  {"broken": "not a list"}
	]}}}, {"Name": "unscaled"}]}`
	got, err := FromJSONJob("job.json", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := []Check{{Namespace: "n", Job: "j", Group: "g", Name: "c", Strategy: "gputide-schedule",
		Config: map[string]string{"default_count": "2", "window_x": "mon 08:00-09:00 3", "flag": "true"}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("FromJSONJob (-want +got):\n%s", diff)
	}
	if _, err := FromJSONJob("job.json", []byte(`{"Job": 3}`)); !errors.Is(err, ErrSyntax) {
		t.Errorf("FromJSONJob of a bad job = %v, want ErrSyntax", err)
	}
}

func TestSelect(t *testing.T) {
	checks := []Check{
		{Policy: "p", Name: "a", Strategy: ScheduleStrategy},
		{Policy: "p", Name: "b", Strategy: ScheduleStrategy},
		{Policy: "p", Name: "c", Strategy: "threshold"},
	}
	if c, err := Select("f", checks, ScheduleStrategy, "b"); err != nil || c.Name != "b" {
		t.Errorf("Select b = %v, %v", c, err)
	}
	if _, err := Select("f", checks, ScheduleStrategy, ""); !errors.Is(err, ErrAmbiguous) {
		t.Errorf("Select without a name = %v, want ErrAmbiguous", err)
	}
	if _, err := Select("f", checks, ScheduleStrategy, "c"); !errors.Is(err, ErrNoCheck) || err.Error() != `f: no gputide-schedule check named "c"; there are "a" (policy "p"), "b" (policy "p")` {
		t.Errorf("Select c = %v", err)
	}
}
