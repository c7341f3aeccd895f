package trace

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// Shape is a diurnal load shape: the relative load of each local hour of
// the day, 0..1, with the busiest hour at 1.
type Shape struct {
	Hours [24]float64
	// Counts are the raw requests per local hour it was made from (for the
	// Alibaba trace: the aggregate the project may ship; the rows may not be).
	Counts  [24]float64
	Source  string // what it was made from
	Samples int    // requests (or rows) it was made from
}

// At returns the shape's value at local hour h of t (t in the wanted zone).
func (s *Shape) At(t time.Time) float64 { return s.Hours[t.Hour()] }

// AlibabaLayout is the layout of gmt_create in the Alibaba GenAI trace.
const AlibabaLayout = "2006-01-02 15:04:05"

// ReadShape reads a diurnal shape from either
//   - the Alibaba GenAI request trace (lora_request_trace.csv, header starting
//     gmt_create): requests are counted per hour of gmt_create + shift; the
//     trace's clock is anonymised, so shift moves its quiet hours to the
//     local night; or
//   - the derived aggregate the project ships (header "hour,requests"): 24
//     rows of local hour 0..23 and a request count (shift is not applied:
//     the aggregate is already in local hours).
//
// Lines starting with '#' are comments. The counts are normalised so that
// the busiest hour is 1.
func ReadShape(r io.Reader, file string, shift time.Duration) (*Shape, error) {
	var (
		kind   string
		cols   map[string]int
		n      int
		counts [24]float64
		seen   [24]bool
		rows   int
	)
	err := lines(r, file, func(no int, line string) error {
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			return nil
		}
		if kind == "" {
			switch {
			case strings.HasPrefix(line, "gmt_create"):
				c, err := header(file, no, line, "gmt_create")
				if err != nil {
					return err
				}
				kind, cols, n = "alibaba", c, strings.Count(line, ",")+1
			case strings.HasPrefix(line, "hour"):
				c, err := header(file, no, line, "hour", "requests")
				if err != nil {
					return err
				}
				kind, cols, n = "hourly", c, strings.Count(line, ",")+1
			default:
				return &Error{File: file, Line: no, Msg: fmt.Sprintf(
					"unknown shape header %q: want the Alibaba GenAI trace (gmt_create,...) or hour,requests", clip(line))}
			}
			return nil
		}
		f, err := split(file, no, line, n)
		if err != nil {
			return err
		}
		rows++
		if kind == "alibaba" {
			v := strings.TrimSpace(f[cols["gmt_create"]])
			t, err := time.ParseInLocation(AlibabaLayout, v, time.UTC)
			if err != nil {
				return &Error{File: file, Line: no, Msg: fmt.Sprintf("gmt_create %q: want YYYY-MM-DD HH:MM:SS", v)}
			}
			counts[t.Add(shift).Hour()]++
			return nil
		}
		hv, rv := strings.TrimSpace(f[cols["hour"]]), strings.TrimSpace(f[cols["requests"]])
		h, err := strconv.Atoi(hv)
		if err != nil || h < 0 || h > 23 {
			return &Error{File: file, Line: no, Msg: fmt.Sprintf("hour %q: want 0..23", hv)}
		}
		if seen[h] {
			return &Error{File: file, Line: no, Msg: fmt.Sprintf("hour %d given twice", h)}
		}
		c, err := strconv.ParseFloat(rv, 64)
		if err != nil || c < 0 || c != c {
			return &Error{File: file, Line: no, Msg: fmt.Sprintf("requests %q: want a count >= 0", rv)}
		}
		seen[h], counts[h] = true, c
		return nil
	})
	if err != nil {
		return nil, err
	}
	if kind == "" {
		return nil, &Error{File: file, Msg: "empty shape file: no header"}
	}
	if kind == "hourly" {
		for h, ok := range seen {
			if !ok {
				return nil, &Error{File: file, Msg: fmt.Sprintf("hour %d is missing: want 24 rows, hours 0..23", h)}
			}
		}
	}
	peak := 0.0
	for _, c := range counts {
		peak = max(peak, c)
	}
	if peak == 0 {
		return nil, &Error{File: file, Msg: "no requests: the shape is flat zero"}
	}
	s := &Shape{Source: file, Samples: rows, Counts: counts}
	for h, c := range counts {
		s.Hours[h] = c / peak
	}
	return s, nil
}
