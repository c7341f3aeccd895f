package api

import (
	"context"
	"errors"
	"net/http"

	"github.com/gputide/gputide/quota-broker/acl"
)

// caller is the rights of one request (DESIGN §9 rights table).
type caller struct {
	auth *acl.Authorizer // nil for an open read while ACLs are off
	// open: ACLs are off, no admin token, open_reads_without_acl: every
	// read, no write.
	open bool
}

// canRead reports read-job on ns: its entries show in full.
func (c *caller) canRead(ns string) bool { return c.open || c.auth.Allowed(ns, acl.CapReadJob) }

// canSubmit reports submit-job on ns: booking, cancelling and previewing
// new jobs there.
func (c *caller) canSubmit(ns string) bool { return !c.open && c.auth.Allowed(ns, acl.CapSubmitJob) }

// admin reports an admin (management token, admin_policy holder, or the
// broker's admin token while ACLs are off).
func (c *caller) admin() bool { return !c.open && c.auth.IsAdmin() }

// accessor is the accessor ID recorded in history (never the secret);
// "admin-token" for the broker's own token.
func (c *caller) accessor() string {
	if c.auth.Source() == acl.SourceAdminToken {
		return "admin-token"
	}
	return c.auth.AccessorID()
}

type handlerFunc func(w http.ResponseWriter, r *http.Request, c *caller)

// The results counted by gputide_token_checks_total{result}.
const (
	resultAllowed     = "allowed"
	resultDenied      = "denied"
	resultUnavailable = "unavailable"
	resultACLDisabled = "acl_disabled"
)

// guard resolves the caller's token (acl package) and checks the route's
// coarse right n before calling h; 403 without a valid token, 503 while
// Nomad cannot check it (fail closed).
func (s *Server) guard(n need, h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			w = readAnswer{w}
		}
		c, err := s.callerOf(r.Context(), acl.TokenFromRequest(r), n)
		if err != nil {
			writeError(w, err)
			return
		}
		h(w, r, c)
	})
}

// callerOf resolves token (acl package) and checks the coarse right n: the
// one rights decision of the JSON API and the status page (/ui/). Errors:
// a 403 Problem without a valid token or the right, acl.ErrUnavailable
// (503) while Nomad cannot check it (fail closed). Counts
// gputide_token_checks_total.
func (s *Server) callerOf(ctx context.Context, token string, n need) (*caller, error) {
	auth, err := s.cfg.Resolver.Resolve(ctx, token)
	c := &caller{auth: auth}
	switch {
	case err == nil:
		s.metrics.tokenChecks.WithLabelValues(resultAllowed).Inc()
	case errors.Is(err, acl.ErrACLDisabled):
		s.metrics.tokenChecks.WithLabelValues(resultACLDisabled).Inc()
		if !s.cfg.OpenReadsWithoutACL || (n != needRead && n != needAdminGet) {
			return nil, forbidden("Nomad ACLs are off: this request needs the broker's admin_token")
		}
		c = &caller{open: true}
	case errors.Is(err, acl.ErrUnavailable):
		s.metrics.tokenChecks.WithLabelValues(resultUnavailable).Inc()
		return nil, err
	default:
		s.metrics.tokenChecks.WithLabelValues(resultDenied).Inc()
		return nil, forbidden("permission denied: a valid Nomad ACL token is needed (X-Nomad-Token or Authorization: Bearer)")
	}
	if (n == needAdmin || n == needAdminGet) && !c.open && !c.admin() {
		return nil, forbidden("permission denied: this request needs a management token or the admin policy")
	}
	return c, nil
}
