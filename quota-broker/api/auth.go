package api

import (
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
		auth, err := s.cfg.Resolver.Resolve(r.Context(), acl.TokenFromRequest(r))
		c := &caller{auth: auth}
		switch {
		case err == nil:
			s.metrics.tokenChecks.WithLabelValues(resultAllowed).Inc()
		case errors.Is(err, acl.ErrACLDisabled):
			s.metrics.tokenChecks.WithLabelValues(resultACLDisabled).Inc()
			if !s.cfg.OpenReadsWithoutACL || (n != needRead && n != needAdminGet) {
				writeError(w, forbidden("Nomad ACLs are off: this request needs the broker's admin_token"))
				return
			}
			c = &caller{open: true}
		case errors.Is(err, acl.ErrUnavailable):
			s.metrics.tokenChecks.WithLabelValues(resultUnavailable).Inc()
			writeError(w, err)
			return
		default:
			s.metrics.tokenChecks.WithLabelValues(resultDenied).Inc()
			writeError(w, forbidden("permission denied: a valid Nomad ACL token is needed (X-Nomad-Token or Authorization: Bearer)"))
			return
		}
		if (n == needAdmin || n == needAdminGet) && !c.open && !c.admin() {
			writeError(w, forbidden("permission denied: this request needs a management token or the admin policy"))
			return
		}
		h(w, r, c)
	})
}
