package plan

import "github.com/gputide/gputide/quota-broker/quota"

// flavorLabel returns the flavor a planner of s names in its actions and
// usage rows: its flavor, or "" in a tree without flavor blocks.
func flavorLabel(s *Snapshot) string {
	if s.Quota == nil || len(s.Quota.Flavors) == 0 {
		return ""
	}
	return flavorOfSnapshot(s)
}

// flavorOfSnapshot returns the flavor a planner of s plans: the tree's
// first flavor (its only one, or the implicit quota.ImplicitFlavor).
func flavorOfSnapshot(s *Snapshot) string {
	return quota.FlavorNames(s.Quota)[0]
}
