package report

import (
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gputide/gputide/quota-broker/sim"
)

func TestWrite(t *testing.T) {
	sc, err := sim.LoadReference()
	if err != nil {
		t.Fatal(err)
	}
	sc.Length = 12 * time.Hour
	w, err := sc.Workload()
	if err != nil {
		t.Fatal(err)
	}
	sh := sim.PolicyShares(sc, w)
	var rs []*sim.Result
	for _, p := range []sim.Policy{sim.NewStatic(sh), sim.NewKueue(sh), sim.Gputide{}} {
		r, err := sim.Run(sc, w, sim.Options{Policy: p})
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	dir := t.TempDir()
	if err := Write(dir, rs[2], rs, w.Notes); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, ReportFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# gputide simulation: reference", "## Utilisation", "## Quotas", "| Quota1.1 | 48 |",
		"## Workspaces", "## Preemptions by rule", "| L5.1 |", "## Inference scale-ups", "| Mon 08:00 | workspace-a/chat/server | 1 -> 4 | schedule |",
		"## Policy comparison", "| | static | kueue | gputide |", "philly-sample.csv"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
	for _, name := range []string{OccupancyFile, "occupancy-static.svg", "occupancy-kueue.svg"} {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		d := xml.NewDecoder(f)
		paths := 0
		for {
			tok, err := d.Token()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "path" {
				paths++
			}
		}
		f.Close()
		if paths < 10 {
			t.Errorf("%s: %d paths, want a chart", name, paths)
		}
	}
	var b strings.Builder
	Summary(&b, rs[2], rs, dir)
	if lines := strings.Count(b.String(), "\n"); lines > 24 {
		t.Errorf("summary is %d lines, want one screen:\n%s", lines, b.String())
	}
}

func TestDur(t *testing.T) {
	for d, want := range map[time.Duration]string{0: "0s", 45 * time.Second: "45s", 754 * time.Second: "12m34s",
		3*time.Hour + 5*time.Minute: "3h05m", 52 * time.Hour: "2d04h"} {
		if got := Dur(d); got != want {
			t.Errorf("Dur(%s) = %q, want %q", d, got, want)
		}
	}
}
