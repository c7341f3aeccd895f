// Package trace reads the public GPU-cluster traces the simulator replays:
// the Microsoft Philly job trace (training arrivals, GPU counts, durations)
// and the Alibaba GenAI request trace (a diurnal inference load shape), or
// the derived hourly aggregate of the latter that the project ships.
//
// Readers are strict: a bad row is an error that names the file and the
// line, and a file whose last row has no line end is reported as cut
// (truncated) instead of being read short.
package trace

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
)

// Error is a problem at one line of a trace file.
type Error struct {
	File string
	Line int // 1-based; 0 = the file as a whole
	Msg  string
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.File, e.Msg)
}

// ErrTruncated is wrapped by the error for a file whose last row has no line
// end: a cut download or copy.
var ErrTruncated = errors.New("trace is truncated")

type truncErr struct{ e *Error }

func (t truncErr) Error() string { return t.e.Error() }
func (t truncErr) Unwrap() error { return ErrTruncated }

// MaxLineBytes is the longest line a trace may have (64 KiB, line end
// included): rows of the traces read here are under 200 bytes. It bounds
// the memory of one line whatever the file holds.
const MaxLineBytes = 64 << 10

// lines calls fn for each line of r (without the line end, "\r\n" or "\n"),
// with its 1-based number. Empty lines are skipped. A last line without a
// line end is a truncation error; a line longer than MaxLineBytes is an
// error naming it, found without holding more than MaxLineBytes of it.
func lines(r io.Reader, file string, fn func(no int, line string) error) error {
	br := bufio.NewReaderSize(r, MaxLineBytes)
	no := 0
	for {
		b, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			return &Error{File: file, Line: no + 1, Msg: fmt.Sprintf(
				"line longer than %d KiB, the most a trace line may be: %q", MaxLineBytes>>10, clip(string(b)))}
		}
		if err != nil && err != io.EOF {
			return &Error{File: file, Line: no + 1, Msg: err.Error()}
		}
		if len(b) == 0 && err == io.EOF {
			return nil
		}
		s := string(b)
		no++
		if err == io.EOF {
			return truncErr{&Error{File: file, Line: no, Msg: fmt.Sprintf(
				"the last row has no line end: the trace is truncated (a cut file?) after %d lines; row %q", no, clip(s))}}
		}
		s = strings.TrimSuffix(strings.TrimSuffix(s, "\n"), "\r")
		if strings.TrimSpace(s) == "" {
			continue
		}
		if err := fn(no, s); err != nil {
			return err
		}
	}
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

// header maps the column names of a CSV header line to their index and
// checks that every required column is there, once. A UTF-8 byte order
// mark before the first name is not part of it.
func header(file string, no int, line string, required ...string) (map[string]int, error) {
	cols := map[string]int{}
	for i, c := range strings.Split(strings.TrimPrefix(line, "\ufeff"), ",") {
		c = strings.TrimSpace(c)
		if first, dup := cols[c]; dup && slices.Contains(required, c) {
			return nil, &Error{File: file, Line: no, Msg: fmt.Sprintf("header %q names column %q twice (columns %d and %d)",
				clip(line), c, first+1, i+1)}
		}
		cols[c] = i
	}
	for _, r := range required {
		if _, ok := cols[r]; !ok {
			return nil, &Error{File: file, Line: no, Msg: fmt.Sprintf("header %q has no column %q (want %s)",
				clip(line), r, strings.Join(required, ","))}
		}
	}
	return cols, nil
}

func split(file string, no int, line string, n int) ([]string, error) {
	if strings.ContainsRune(line, '"') {
		return nil, &Error{File: file, Line: no, Msg: fmt.Sprintf("quoted fields are not supported: %q", clip(line))}
	}
	f := strings.Split(line, ",")
	if len(f) != n {
		return nil, &Error{File: file, Line: no, Msg: fmt.Sprintf("%d fields, the header has %d: %q", len(f), n, clip(line))}
	}
	return f, nil
}
