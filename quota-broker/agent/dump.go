package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// dumpKinds are the name prefixes of the files the agent writes into
// dump_dir: "<kind>-<stamp>.json", stamp "20060102T150405.000000000" in UTC,
// so names of one kind sort by time.
var dumpKinds = []string{"snapshot-", "plan-", "panic-"}

// dumpFile is one file of dump_dir written by the agent: its name and the
// stamp in it.
type dumpFile struct {
	name, stamp string
}

// parseDumpName reads "<kind>-<stamp>.json"; ok is false for any other
// name (files the agent did not write are never counted nor removed).
func parseDumpName(name string) (dumpFile, bool) {
	if !strings.HasSuffix(name, ".json") {
		return dumpFile{}, false
	}
	for _, k := range dumpKinds {
		if stamp, ok := strings.CutPrefix(strings.TrimSuffix(name, ".json"), k); ok && stamp != "" {
			return dumpFile{name: name, stamp: stamp}, true
		}
	}
	return dumpFile{}, false
}

// dumpsToRemove returns the names to remove from dump_dir so that at most
// max of the agent's dump files remain: the oldest first (by stamp, then
// name, so a snapshot and its plan go together). max 0 keeps everything.
// Other names are ignored.
func dumpsToRemove(names []string, max int) []string {
	if max <= 0 {
		return nil
	}
	var files []dumpFile
	for _, n := range names {
		if f, ok := parseDumpName(n); ok {
			files = append(files, f)
		}
	}
	if len(files) <= max {
		return nil
	}
	sort.Slice(files, func(i, j int) bool {
		if files[i].stamp != files[j].stamp {
			return files[i].stamp < files[j].stamp
		}
		return files[i].name < files[j].name
	})
	out := make([]string, 0, len(files)-max)
	for _, f := range files[:len(files)-max] {
		out = append(out, f.name)
	}
	return out
}

// pruneDumps removes the oldest dump files of dir beyond max (config key
// dump_max_files; 0 never prunes). It returns how many it removed and the
// first error (the directory unreadable, or a file that could not be
// removed; the other files are still tried).
func pruneDumps(dir string, max int) (int, error) {
	if max <= 0 {
		return 0, nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, fmt.Errorf("failed to list dump_dir %s: %w", dir, err)
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		if e.Type().IsRegular() {
			names = append(names, e.Name())
		}
	}
	removed := 0
	var first error
	for _, n := range dumpsToRemove(names, max) {
		if err := os.Remove(filepath.Join(dir, n)); err != nil && !os.IsNotExist(err) {
			if first == nil {
				first = fmt.Errorf("failed to prune dump_dir: %w", err)
			}
			continue
		}
		removed++
	}
	return removed, first
}
