package sim

import (
	"errors"
	"fmt"

	"github.com/gputide/gputide/internal/regfile"
	"github.com/gputide/gputide/quota-broker/quota"
)

// MaxQuotaFile is the largest quota file WithQuotaFile reads (a tree of
// quota.MaxNodes nodes is far smaller).
const MaxQuotaFile = 4 << 20

// ErrQuotaFile is wrapped by the errors of a what-if quota file that
// cannot replace the scenario's tree.
var ErrQuotaFile = errors.New("what-if quota file")

// WithQuotaFile reads a quota tree file (the format of the scenario's
// quota attribute, quota.Parse) and returns a copy of the scenario that
// runs with it: the same cluster, workload and quota moves, another tree
// and its settings. The tree must bind every namespace the scenario uses
// and hold every node a quota move names, and each move must keep law L1.
func (s *Scenario) WithQuotaFile(name string) (*Scenario, error) {
	// A regular file only (regfile): a FIFO or device is refused before
	// any read, as the scenario's own files are.
	src, err := regfile.Read(name, MaxQuotaFile)
	if err != nil {
		if errors.Is(err, regfile.ErrTooLarge) {
			return nil, fmt.Errorf("%w %s: larger than %d bytes", ErrQuotaFile, name, MaxQuotaFile)
		}
		return nil, err
	}
	tree, settings, err := quota.Parse(src, name)
	if err != nil {
		return nil, err
	}
	return s.WithQuota(tree, settings, name)
}

// WithQuota returns a copy of the scenario with another quota tree; file
// names it in errors.
func (s *Scenario) WithQuota(tree *quota.Node, settings quota.Settings, file string) (*Scenario, error) {
	for _, m := range s.Moves {
		for _, g := range m.GPUs {
			if tree.Find(g.Quota) == nil {
				return nil, fmt.Errorf("%w %s: no quota node %q, which quota_move %q (%s) changes", ErrQuotaFile, file, g.Quota, m.Name, m.Pos)
			}
		}
	}
	c := *s
	c.Quota, c.Settings, c.QuotaPos = tree, settings, file
	if err := c.check(); err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrQuotaFile, file, err)
	}
	return &c, nil
}
