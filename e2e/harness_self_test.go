package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
)

// TestHarnessStopsCleanly checks the harness itself: startNomad gives a
// working client, and stop leaves no task process behind and no agent.
func TestHarnessStopsCleanly(t *testing.T) {
	c, stop := startNomad(t, nomadOptions{})
	// A task with a command line no other process has.
	marker := "3600.4242"
	job := &api.Job{
		ID:          harnessPtr("harness-sleep"),
		Type:        harnessPtr("service"),
		Datacenters: []string{"dc1"},
		TaskGroups: []*api.TaskGroup{{
			Name: harnessPtr("g"),
			Tasks: []*api.Task{{
				Name:      "sleep",
				Driver:    "raw_exec",
				Config:    map[string]any{"command": "/bin/sleep", "args": []string{marker}},
				Resources: &api.Resources{CPU: harnessPtr(20), MemoryMB: harnessPtr(16)},
			}},
		}},
	}
	if _, _, err := c.Jobs().Register(job, nil); err != nil {
		t.Fatal(err)
	}
	err := waitFor(60*time.Second, 200*time.Millisecond, func() error {
		if len(processesWithArg(marker)) == 0 {
			return errors.New("task not running")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	stop()
	if pids := processesWithArg(marker); len(pids) != 0 {
		t.Fatalf("task processes %v outlived the agent", pids)
	}
	if _, err := c.Agent().Self(); err == nil {
		t.Fatal("the agent still answers after stop")
	}
	stop() // a second stop is harmless
}

func harnessPtr[T any](v T) *T { return &v }

// processesWithArg lists PIDs whose command line has arg as an argument.
func processesWithArg(arg string) []string {
	var out []string
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		raw, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err != nil {
			continue
		}
		for _, a := range bytes.Split(raw, []byte{0}) {
			if string(a) == arg {
				out = append(out, filepath.Base(d))
				break
			}
		}
	}
	return out
}

// stopTB records how a test was stopped instead of stopping it.
type stopTB struct {
	testing.TB
	fatal, skip string
}

func (s *stopTB) Helper()                        {}
func (s *stopTB) Fatalf(format string, a ...any) { s.fatal = fmt.Sprintf(format, a...) }
func (s *stopTB) Skip(a ...any)                  { s.skip = fmt.Sprint(a...) }

// Under CI a test that needs an agent and has none fails; elsewhere it
// skips with the same message (issue 8, item 6).
func TestNeedAgentFailsUnderCIAndSkipsElsewhere(t *testing.T) {
	for _, tc := range []struct {
		ci          string
		fatal, skip string
	}{
		{"true", "CI=true: no agent", ""},
		{"1", "CI=1: no agent", ""},
		{"", "", "no agent"},
		{"false", "", "no agent"},
		{"0", "", "no agent"},
	} {
		t.Setenv("CI", tc.ci)
		s := &stopTB{TB: t}
		needAgent(s, "no agent")
		if s.fatal != tc.fatal || s.skip != tc.skip {
			t.Errorf("CI=%q: fatal %q skip %q, want fatal %q skip %q", tc.ci, s.fatal, s.skip, tc.fatal, tc.skip)
		}
	}
}
