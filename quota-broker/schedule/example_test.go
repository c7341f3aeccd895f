package schedule_test

import (
	"fmt"
	"time"

	"github.com/gputide/gputide/quota-broker/schedule"
)

// The reference scenario's inference schedule: 24 replicas on weekdays from
// 08:00 to 22:00 Berlin time, 2 otherwise, none of it on Christmas Day.
func ExampleParse() {
	s, err := schedule.Parse(map[string]string{
		"window_day": "mon-fri 08:00-22:00 24",
		"default":    "2",
		"time_zone":  "Europe/Berlin",
		"holidays":   "2026-12-25",
	})
	if err != nil {
		panic(err)
	}
	from := time.Date(2026, 12, 24, 0, 0, 0, 0, s.Location())
	for _, st := range s.Preview(from, 5*24*time.Hour) {
		fmt.Println(st.At.Format("Mon 2006-01-02 15:04 MST"), st.Count)
	}
	// Output:
	// Thu 2026-12-24 00:00 CET 2
	// Thu 2026-12-24 08:00 CET 24
	// Thu 2026-12-24 22:00 CET 2
	// Mon 2026-12-28 08:00 CET 24
	// Mon 2026-12-28 22:00 CET 2
}

// A typo in a window is reported with its key and value.
func ExampleParse_error() {
	_, err := schedule.Parse(map[string]string{"window_day": "mon-fri 25:00-22:00 24", "default": "2"})
	fmt.Println(err)
	// Output:
	// window_day: invalid time "25:00" in "mon-fri 25:00-22:00 24"
}

// The simulator builds its schedule from HCL through the typed form, and finds
// the next scale-up to pre-warm for.
func ExampleNew() {
	s, err := schedule.New(schedule.Config{
		TimeZone: "America/Los_Angeles",
		Default:  0,
		Windows:  []schedule.WindowConfig{{Name: "day", Days: "mon-fri", Start: "08:00", End: "22:00", Count: 16}},
	})
	if err != nil {
		panic(err)
	}
	at, n, _ := s.NextBoundary(time.Date(2026, 3, 7, 12, 0, 0, 0, time.UTC)) // a Saturday
	fmt.Println(at.Format(time.RFC3339), n)
	// Output:
	// 2026-03-09T08:00:00-07:00 16
}
