package acl

import "time"

// Source says how an Authorizer came to be.
type Source string

// Sources of rights.
const (
	// SourceToken: a Nomad ACL token resolved through token/self.
	SourceToken Source = "nomad-token"
	// SourceAdminToken: the broker's own admin token, accepted only while
	// Nomad ACLs are off (DESIGN §9).
	SourceAdminToken Source = "admin-token"
)

// Authorizer holds the rights of one caller. A nil *Authorizer has none.
type Authorizer struct {
	source     Source
	accessorID string
	name       string
	management bool
	admin      bool
	expires    time.Time // zero: no expiry
	rules      RuleSet
}

// Allowed reports whether the caller holds capability c in namespace ns:
// always for a management token and for the broker's admin token, else as
// the merged namespace rules say (see RuleSet).
func (a *Authorizer) Allowed(ns string, c Capability) bool {
	if a == nil {
		return false
	}
	if a.management || a.source == SourceAdminToken {
		return true
	}
	return a.rules.Allowed(ns, c)
}

// IsAdmin reports whether the caller may change the quota tree and read
// whole-cluster state (DESIGN §9): a management token, a token holding the
// configured admin policy (directly or through a role), or the broker's
// admin token while ACLs are off.
func (a *Authorizer) IsAdmin() bool {
	return a != nil && (a.management || a.admin || a.source == SourceAdminToken)
}

// IsManagement reports whether Nomad called the token a management token.
func (a *Authorizer) IsManagement() bool { return a != nil && a.management }

// AccessorID is the token's public accessor ID (never the secret), for
// history records; "" for the broker's admin token.
func (a *Authorizer) AccessorID() string {
	if a == nil {
		return ""
	}
	return a.accessorID
}

// Name is the token's name as Nomad holds it.
func (a *Authorizer) Name() string {
	if a == nil {
		return ""
	}
	return a.name
}

// Source says whether these rights come from a Nomad token or from the
// broker's admin token.
func (a *Authorizer) Source() Source {
	if a == nil {
		return ""
	}
	return a.source
}

// Capabilities lists, sorted, the capabilities the caller holds in ns
// (nil for management and admin tokens, which hold all).
func (a *Authorizer) Capabilities(ns string) []Capability {
	if a == nil || a.management || a.source == SourceAdminToken {
		return nil
	}
	return a.rules.Capabilities(ns)
}

// expired reports whether the token's ExpirationTime is at or before now.
func (a *Authorizer) expired(now time.Time) bool {
	return !a.expires.IsZero() && !now.Before(a.expires)
}
