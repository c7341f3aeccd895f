package snapshot

import (
	"encoding/json"

	"github.com/gputide/gputide/quota-broker/plan"

	"github.com/gputide/gputide/quota-broker/quota"
)

// A quota tree on its own, as JSON (PUT /v1/quotas, the answers of quota
// writes): {"root": {...}, "settings": {...}}, where "root" is a snapshot's
// "quota" object and "settings" its "settings" object, in the same
// spelling as the HCL quota file: snake_case keys, durations as Go
// duration strings ("10m"), reservation_max_per_namespace a whole number
// (docs/snapshot-format.md). Decoding is as strict as a snapshot's:
// unknown keys (such as the Go field names "GPUs", "DebtGrace"), keys given
// twice and wrong types are errors naming the key by its JSON path.

type wireTree struct {
	Flavors  []wireFlavor  `json:"flavors,omitempty"`
	Root     *wireQuota    `json:"root" snap:"required"`
	Settings *wireSettings `json:"settings,omitempty"`
}

// DecodeTree reads a quota tree document. Settings is nil when the document
// has no "settings" (the caller keeps the ones it has); keys left out of
// "settings" take their defaults, as in the HCL file. Durations are checked
// against quota.MaxSetting. Errors are *Error values naming the JSON path
// ("root.children[0].gpus", "settings.debt_grace"). The tree is not
// checked against law L1 nor its names (quota.Validate does that, with
// each node's Pos its JSON path, "root.children[0]").
func DecodeTree(data []byte) (*quota.Node, *quota.Settings, error) {
	var w wireTree
	if err := decodeStrict(data, &w); err != nil {
		return nil, nil, err
	}
	if w.Root == nil {
		return nil, nil, errf("root", "is missing: the document needs the tree's root node")
	}
	c := converter{}
	if err := c.flavorList(w.Flavors, "flavors"); err != nil {
		return nil, nil, err
	}
	root, err := c.quota(w.Root, "root", 1)
	if err != nil {
		return nil, nil, err
	}
	if w.Settings == nil {
		return root, nil, nil
	}
	st := quota.DefaultSettings()
	if err := c.settings(w.Settings, &st); err != nil {
		return nil, nil, err
	}
	if name, v, problem := st.OutOfBounds(); name != "" {
		return nil, nil, errf("settings."+name, "%s %s", plan.Quote(v.String()), problem)
	}
	return root, &st, nil
}

// MarshalQuota writes the quota tree rooted at n as a snapshot's "quota"
// object (snake_case keys; positions are left out), with the tree's
// declared flavors in the root's "flavors" (DESIGN L13), since the object
// stands alone.
func MarshalQuota(n *quota.Node) ([]byte, error) {
	w := quotaToWire(n, quota.TreeFlavors(n))
	if w != nil {
		w.Flavors = flavorsToWire(n)
	}
	return json.Marshal(w)
}

// UnmarshalQuota reads a quota object as MarshalQuota writes it (null: a
// nil tree). The tree is not validated.
func UnmarshalQuota(data []byte) (*quota.Node, error) {
	var w struct {
		Root *wireQuota `json:"root"`
	}
	doc := append(append([]byte(`{"root":`), data...), '}')
	if err := decodeStrict(doc, &w); err != nil {
		return nil, err
	}
	if w.Root == nil {
		return nil, nil
	}
	c := converter{}
	return c.quota(w.Root, "root", 1)
}
