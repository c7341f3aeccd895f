package trace

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// PhillyLayout is the timestamp layout of the Philly trace. Its timestamps
// carry no zone; the simulator takes them as US-Pacific local time (the raw
// Philly utilisation files are stamped PDT/PST).
const PhillyLayout = "2006-01-02 15:04:05"

// PhillyJob is one row of the Philly job trace (philly.csv: timestamp,
// duration, num_gpus, gpu_time, cluster).
type PhillyJob struct {
	Line     int           // line in the file, for messages
	Submit   time.Time     // submit time, read in the location given to ReadPhilly
	Duration time.Duration // seconds of execution (sum over attempts)
	GPUs     int           // GPUs held by the job
	VC       string        // hashed virtual cluster (the team quota)
}

// Key is a stable identity of the row made of its content, not its line, so
// that a sample of the trace and the whole trace give a row the same key.
func (j *PhillyJob) Key() string {
	return fmt.Sprintf("%s|%d|%d|%s", j.Submit.Format(PhillyLayout), int64(j.Duration/time.Second), j.GPUs, j.VC)
}

// ReadPhilly reads a Philly job trace. file names the source in errors;
// loc is the zone the timestamps are read in. The header must name the
// columns timestamp, duration, num_gpus and cluster (gpu_time is optional
// and, when present, must equal duration*num_gpus within rounding). Rows
// may come in any order; they are returned in file order. A trace with a
// header and no rows is an error: it has no jobs to replay.
func ReadPhilly(r io.Reader, file string, loc *time.Location) ([]PhillyJob, error) {
	var (
		cols  map[string]int
		n     int
		jobs  []PhillyJob
		hline int // line of the header
	)
	err := lines(r, file, func(no int, line string) error {
		if strings.HasPrefix(line, "#") {
			return nil // a comment, e.g. the attribution of a shipped sample
		}
		if cols == nil {
			c, err := header(file, no, line, "timestamp", "duration", "num_gpus", "cluster")
			if err != nil {
				return err
			}
			cols, n, hline = c, strings.Count(line, ",")+1, no
			return nil
		}
		f, err := split(file, no, line, n)
		if err != nil {
			return err
		}
		bad := func(col, why string) error {
			return &Error{File: file, Line: no, Msg: fmt.Sprintf("%s %q: %s", col, f[cols[col]], why)}
		}
		ts, err := time.ParseInLocation(PhillyLayout, strings.TrimSpace(f[cols["timestamp"]]), loc)
		if err != nil {
			return bad("timestamp", "want YYYY-MM-DD HH:MM:SS")
		}
		dur, err := strconv.ParseFloat(strings.TrimSpace(f[cols["duration"]]), 64)
		if err != nil || math.IsNaN(dur) || math.IsInf(dur, 0) || dur < 0 || dur > 1e9 {
			return bad("duration", "want seconds, a number from 0 to 1e9")
		}
		gpus, err := strconv.Atoi(strings.TrimSpace(f[cols["num_gpus"]]))
		if err != nil || gpus < 1 || gpus > 1<<20 {
			return bad("num_gpus", "want a whole number of GPUs, at least 1")
		}
		if i, ok := cols["gpu_time"]; ok {
			gt, err := strconv.ParseFloat(strings.TrimSpace(f[i]), 64)
			if err != nil || math.IsNaN(gt) || math.Abs(gt-dur*float64(gpus)) > 1+1e-6*gt {
				return bad("gpu_time", fmt.Sprintf("want duration*num_gpus = %g", dur*float64(gpus)))
			}
		}
		vc := strings.TrimSpace(f[cols["cluster"]])
		if vc == "" {
			return bad("cluster", "empty virtual cluster")
		}
		jobs = append(jobs, PhillyJob{Line: no, Submit: ts, Duration: time.Duration(math.Round(dur)) * time.Second, GPUs: gpus, VC: vc})
		return nil
	})
	if err != nil {
		return nil, err
	}
	if cols == nil {
		return nil, &Error{File: file, Msg: "empty trace: no header"}
	}
	if len(jobs) == 0 {
		return nil, &Error{File: file, Line: hline, Msg: "the trace has no jobs: a header and no rows"}
	}
	return jobs, nil
}
