package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
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

// harnessChildEnv makes TestHarnessChild run, as the child of
// TestHarnessLeavesNoProcessWhenATestDies: "fatal" fails the test (its
// cleanups run), "kill" kills the test process (none run, as when
// `go test -timeout` panics); harnessChildInfoEnv names the file where the
// child writes what it started.
const (
	harnessChildEnv     = "GPUTIDE_E2E_HARNESS_CHILD"
	harnessChildInfoEnv = "GPUTIDE_E2E_HARNESS_CHILD_INFO"
)

// TestHarnessLeavesNoProcessWhenATestDies runs a test (TestHarnessChild, in
// this binary run again) that starts a Nomad dev agent with a raw_exec
// task, so that the agent has a `nomad logmon` in its process group and a
// `nomad executor` leading its own session, and then dies: by t.Fatal,
// whose cleanups stop the agent, and by SIGKILL, which runs no cleanup and
// leaves it to the agent's reaper (startGuarded). Either way no process of
// the agent's group, no executor naming its folder and no task survives,
// nothing stays mounted under the folder, and the folder is gone.
func TestHarnessLeavesNoProcessWhenATestDies(t *testing.T) {
	nomadBinary(t)
	for _, how := range []string{"fatal", "kill"} {
		t.Run(how, func(t *testing.T) {
			infoFile := filepath.Join(t.TempDir(), "info.json")
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHarnessChild$", "-test.count=1", "-test.v")
			cmd.Env = append(os.Environ(), harnessChildEnv+"="+how, harnessChildInfoEnv+"="+infoFile)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the child test passed, want it to die (%s):\n%s", how, out)
			}
			raw, rerr := os.ReadFile(infoFile)
			if rerr != nil {
				t.Fatalf("the child wrote nothing (%v): %v\n%s", err, rerr, tail(string(out), 4000))
			}
			var info harnessChildInfo
			if err := json.Unmarshal(raw, &info); err != nil {
				t.Fatal(err)
			}
			if len(info.Before.Logmon) == 0 || len(info.Before.Executor) == 0 || len(info.Before.Task) == 0 {
				t.Fatalf("the child's agent had no logmon, executor or task to leave behind: %+v", info.Before)
			}
			var left agentProcs
			err = waitFor(20*time.Second, 100*time.Millisecond, func() error {
				left = agentProcesses(info.Group, info.Dir, info.Marker)
				if left.any() {
					return fmt.Errorf("left behind: %+v", left)
				}
				if m := mountsUnder(info.Dir); len(m) > 0 {
					return fmt.Errorf("mounts left under the child's agent folder: %v", m)
				}
				if _, err := os.Stat(info.Dir); !errors.Is(err, fs.ErrNotExist) {
					return fmt.Errorf("the child's agent folder %s is still there (%v)", info.Dir, err)
				}
				return nil
			})
			if err != nil {
				for _, p := range left.all() {
					if pid, err := strconv.Atoi(strings.Fields(p)[0]); err == nil {
						_ = syscall.Kill(pid, syscall.SIGKILL)
					}
				}
				for _, m := range mountsUnder(info.Dir) {
					_ = syscall.Unmount(m, syscall.MNT_DETACH)
				}
				_ = os.RemoveAll(info.Dir)
				t.Fatalf("after the child died (%s), before: %+v; %v", how, info.Before, err)
			}
		})
	}
}

// harnessChildInfo is what TestHarnessChild writes for its parent.
type harnessChildInfo struct {
	Group  int        // the agent's process group (its PID)
	Dir    string     // the agent's folder
	Marker string     // the task's argument
	Before agentProcs // what ran before the child died
}

// TestHarnessChild is the dying test of
// TestHarnessLeavesNoProcessWhenATestDies; run alone, it skips.
func TestHarnessChild(t *testing.T) {
	how, infoFile := os.Getenv(harnessChildEnv), os.Getenv(harnessChildInfoEnv)
	if how == "" || infoFile == "" {
		t.Skip("run by TestHarnessLeavesNoProcessWhenATestDies")
	}
	a := newNomadAgent(t, nomadOptions{})
	marker := fmt.Sprintf("3600.%d", os.Getpid())
	job := &api.Job{
		ID:          harnessPtr("harness-child"),
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
	if _, _, err := a.Client.Jobs().Register(job, nil); err != nil {
		t.Fatal(err)
	}
	group := a.cmd.Process.Pid
	var before agentProcs
	err := waitFor(60*time.Second, 200*time.Millisecond, func() error {
		before = agentProcesses(group, a.Dir, marker)
		if len(before.Logmon) == 0 || len(before.Executor) == 0 || len(before.Task) == 0 {
			return fmt.Errorf("not all running yet: %+v", before)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(harnessChildInfo{Group: group, Dir: a.Dir, Marker: marker, Before: before})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(infoFile, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	if how == "kill" {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	}
	t.Fatal("failing on purpose: the harness's cleanups must stop the agent")
}

// agentProcs lists processes of one Nomad agent, each as "PID command line".
type agentProcs struct {
	Group    []string // in the agent's process group: the agent, its logmon, plugins
	Logmon   []string // `nomad logmon` in the group
	Executor []string // `nomad executor` naming the agent's folder (own session)
	Task     []string // with the task's marker argument
}

func (p agentProcs) all() []string {
	return slices.Concat(p.Group, p.Executor, p.Task)
}

func (p agentProcs) any() bool { return len(p.all()) > 0 }

// agentProcesses scans /proc for the processes of the agent whose process
// group is group, whose folder is dir and whose task has the argument
// marker.
func agentProcesses(group int, dir, marker string) agentProcs {
	var out agentProcs
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil || pid == os.Getpid() {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err != nil || len(raw) == 0 {
			continue // gone, or a zombie
		}
		args := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
		desc := fmt.Sprintf("%d %s", pid, tail(strings.Join(args, " "), 120))
		pgid, _ := syscall.Getpgid(pid)
		switch {
		case pgid == group:
			out.Group = append(out.Group, desc)
			if len(args) > 1 && args[1] == "logmon" {
				out.Logmon = append(out.Logmon, desc)
			}
		case len(args) > 1 && args[1] == "executor" && bytes.Contains(raw, []byte(dir+"/")):
			out.Executor = append(out.Executor, desc)
		case slices.Contains(args, marker):
			out.Task = append(out.Task, desc)
		}
	}
	return out
}
