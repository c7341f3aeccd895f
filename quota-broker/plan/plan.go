// Package plan is gputide's pure planning core: given a Snapshot of the
// cluster and the quota tree it returns a Plan (admit, wait, stop, expire)
// with the rule of DESIGN §3 that justifies each action.
//
// The package does no I/O, reads no clock and uses no randomness: the same
// snapshot always gives the same plan.
package plan

import "github.com/gputide/gputide/quota-broker/quota"

// Compute plans the snapshot. It returns an error only when the quota tree
// breaks law L1; the snapshot itself is not changed.
func Compute(s *Snapshot) (*Plan, error) {
	if err := quota.Validate(s.Quota); err != nil {
		return nil, err
	}
	return &Plan{}, nil
}
