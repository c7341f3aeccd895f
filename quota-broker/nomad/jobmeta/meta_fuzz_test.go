package jobmeta

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gputide/gputide/quota-broker/plan"
)

// testHoldingPool is the broker's default holding pool (build.DefaultHoldingPool).
const testHoldingPool = "gputide-queue"

// FuzzParseJobOptions: the gputide meta reader never panics; every error
// is a *MetaError whose key is a gputide key of the meta (or max_run when
// it is missing, with the value "") and whose value is the meta's, both in
// the message; a flex request naming a reservation names both keys; what
// it accepts keeps DESIGN L11 (either flex key makes the job flex, max_run
// then 0 < d <= 168h, max_wait defaults to 168h and is at most 168h) and a
// reservation and idle only without flex. set is a bit mask of the keys present:
// 1 max_wait, 2 max_run, 4 reservation, 8 idle, 16 the extra key.
func FuzzParseJobOptions(f *testing.F) {
	f.Add(uint8(3), "24h", "4h", "", "true", "gputide_pool", "default")
	f.Add(uint8(2), "", "4h", "", "", "", "")
	f.Add(uint8(1), "24h", "", "", "", "", "")
	f.Add(uint8(6), "", "1h", "r-1", "", "", "")
	f.Add(uint8(7), "169h", "0s", "r-1", "", "", "")
	f.Add(uint8(2), "", "-5m", "", "", "", "")
	f.Add(uint8(4), "", "", " ", "maybe", "gputide_idle", "1")
	f.Add(uint8(16), "", "", "", "", "gputide_what", "x")
	f.Add(uint8(10), "", "1h", "", "true", "", "")
	f.Add(uint8(16), "", "", "", "", "GPUTIDE-idle", "true")
	f.Add(uint8(3), "9223372036854775807ns", "1e3h", "", "", "gputide_pool", "gputide-queue")
	f.Fuzz(func(t *testing.T, set uint8, wait, run, res, idle, extraKey, extraVal string) {
		meta := map[string]string{}
		if set&1 != 0 {
			meta[MetaFlexMaxWait] = wait
		}
		if set&2 != 0 {
			meta[MetaFlexMaxRun] = run
		}
		if set&4 != 0 {
			meta[MetaReservation] = res
		}
		if set&8 != 0 {
			meta[MetaIdle] = idle
		}
		if set&16 != 0 {
			meta[extraKey] = extraVal
		}
		o, err := ParseJobOptions(meta, testHoldingPool)
		_, hasWait := meta[MetaFlexMaxWait]
		_, hasRun := meta[MetaFlexMaxRun]
		if err != nil {
			var me *MetaError
			if !errors.As(err, &me) {
				t.Fatalf("ParseJobOptions(%q): error %T %v, want a *MetaError", meta, err, err)
			}
			v, present := meta[me.Key]
			switch {
			case !gputideKey(me.Key):
				t.Fatalf("ParseJobOptions(%q): error names key %q", meta, me.Key)
			case !present && !(me.Key == MetaFlexMaxRun && hasWait && me.Value == ""):
				t.Fatalf("ParseJobOptions(%q): error names key %q, which the meta lacks", meta, me.Key)
			case present && me.Value != v:
				t.Fatalf("ParseJobOptions(%q): error value %q, the meta has %q", meta, me.Value, v)
			}
			if want := "job meta " + me.Key + " = " + strconv.Quote(me.Value) + ": "; !strings.HasPrefix(err.Error(), want) {
				t.Fatalf("ParseJobOptions(%q) = %q, want it to start with %q", meta, err, want)
			}
			if (hasWait || hasRun) && me.Key == MetaReservation && strings.Contains(me.Problem, "flex") &&
				!strings.Contains(me.Problem, "gputide_flex_max_") {
				t.Fatalf("ParseJobOptions(%q) = %q: a flex request naming a reservation names both keys", meta, err)
			}
			return
		}
		if hasWait || hasRun {
			if o.Flex == nil || o.Reservation != "" || o.Idle {
				t.Fatalf("ParseJobOptions(%q) = %+v: flex keys set, want flex, no reservation, not idle", meta, o)
			}
			if o.Flex.MaxRun <= 0 || o.Flex.MaxRun > plan.MaxFlexRun || o.Flex.MaxWait <= 0 || o.Flex.MaxWait > plan.MaxFlexWait {
				t.Fatalf("ParseJobOptions(%q) accepted %v, outside L11", meta, o.Flex)
			}
			if !hasWait && o.Flex.MaxWait != plan.DefaultFlexWait {
				t.Fatalf("ParseJobOptions(%q): max_wait %v without the key, want %v", meta, o.Flex.MaxWait, plan.DefaultFlexWait)
			}
			if hasWait {
				if d, _ := time.ParseDuration(meta[MetaFlexMaxWait]); d != o.Flex.MaxWait {
					t.Fatalf("ParseJobOptions(%q): max_wait %v, the meta says %q", meta, o.Flex.MaxWait, meta[MetaFlexMaxWait])
				}
			}
		} else if o.Flex != nil {
			t.Fatalf("ParseJobOptions(%q) = %+v: flex without a flex key", meta, o)
		}
		if o.Reservation != meta[MetaReservation] {
			t.Fatalf("ParseJobOptions(%q): reservation %q", meta, o.Reservation)
		}
	})
}
