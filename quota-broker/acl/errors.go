package acl

import (
	"errors"
	"strings"
)

// Sentinels callers branch on with errors.Is. The HTTP layer maps ErrDenied
// to 403, ErrUnavailable to 503, and ErrACLDisabled to its ACL-off handling
// (DESIGN §9: admin_token, open reads).
var (
	// ErrDenied: no token, an expired or unknown token, a token Nomad
	// refuses, or a policy/role it cannot read. Maps to 403.
	ErrDenied = errors.New("denied")
	// ErrUnavailable: Nomad did not answer usably (unreachable, timeout,
	// 5xx, a body that does not decode). Maps to 503; never access.
	ErrUnavailable = errors.New("nomad unavailable for token checks")
	// ErrACLDisabled: Nomad answered token/self with its exact "ACLs are
	// off" answer and the caller did not present the broker's admin token.
	ErrACLDisabled = errors.New("nomad ACLs disabled")
	// ErrInvalidRules: a policy's rules do not parse or hold a bad value.
	ErrInvalidRules = errors.New("invalid policy rules")
)

// Error is the one error shape of this package. Kind is one of the
// sentinels above; Op names the step ("token/self", "policy team-b",
// "rules team-b namespace \"x\" policy"); Msg says what was wrong; Err is
// the cause, if any. No field ever holds a token secret or its hash.
type Error struct {
	Kind error
	Op   string
	Msg  string
	Err  error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("acl: ")
	if e.Op != "" {
		b.WriteString(e.Op)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	if e.Kind != nil {
		b.WriteString(" (")
		b.WriteString(e.Kind.Error())
		b.WriteString(")")
	}
	return b.String()
}

// Unwrap gives both the sentinel and the cause to errors.Is and errors.As.
func (e *Error) Unwrap() []error {
	out := make([]error, 0, 2)
	if e.Kind != nil {
		out = append(out, e.Kind)
	}
	if e.Err != nil {
		out = append(out, e.Err)
	}
	return out
}
