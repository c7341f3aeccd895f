package watch

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strings"

	"github.com/hashicorp/nomad/api"
)

// NamespaceTopic is the event stream topic of namespace changes. Nomad
// (v1.11.3, measured in e2e TestBrokerWithItsReferencePolicy) gives it to
// management tokens only, whatever the token's policies: a stream of
// another token that asks for it is closed as soon as it opens.
const NamespaceTopic api.Topic = "Namespace"

// NamespaceWatch says how the watcher learns namespace changes.
type NamespaceWatch int

const (
	// NamespacesStreamed: the event stream carries the Namespace topic
	// (a management token, or Nomad's ACLs off).
	NamespacesStreamed NamespaceWatch = iota + 1
	// NamespacesListed: the stream leaves the topic out and State.Refresh
	// lists the namespaces again (GET /v1/namespaces) at each planning cycle.
	NamespacesListed
)

func (m NamespaceWatch) String() string {
	switch m {
	case NamespacesStreamed:
		return "event stream"
	case NamespacesListed:
		return "list at each refresh"
	}
	return fmt.Sprintf("NamespaceWatch(%d)", int(m))
}

// Nomad's answers of GET /v1/acl/token/self while ACLs are off: 400 with
// this exact body (Nomad's documented answer), or (v1.11.3) 200 with a
// pseudo token of this accessor ID and no secret; the same rule as
// quota-broker/acl's resolver.
const (
	aclDisabledBody     = "ACL support disabled"
	aclDisabledAccessor = "acls-disabled"
)

// ErrTokenUnreadable means token/self could not be answered (Nomad
// unreachable, or a 5xx): how to watch namespaces is decided on a later try.
var ErrTokenUnreadable = errors.New("cannot read the broker's own token")

// ResolveNamespaceWatch reads the client's own token (GET
// /v1/acl/token/self, which every token may read) once and says how
// namespaces can be watched, with the reason in words for the log:
//   - a management token, or ACLs off: NamespacesStreamed;
//   - any other token, or a 4xx answer (an unknown token, the anonymous
//     one): NamespacesListed.
//
// A transport error or a 5xx gives an error wrapping ErrTokenUnreadable.
func ResolveNamespaceWatch(ctx context.Context, c *api.Client) (NamespaceWatch, string, error) {
	tok, _, err := c.ACLTokens().Self((&api.QueryOptions{}).WithContext(ctx))
	if err != nil {
		status, body, ok := responseOf(err)
		switch {
		case ok && status == http.StatusBadRequest && strings.TrimSuffix(body, "\n") == aclDisabledBody:
			return NamespacesStreamed, "Nomad's ACLs are disabled", nil
		case ok && status >= 400 && status < 500:
			return NamespacesListed, fmt.Sprintf("GET /v1/acl/token/self answered %d, so the token is not a management token", status), nil
		}
		return 0, "", fmt.Errorf("%w: GET /v1/acl/token/self: %w", ErrTokenUnreadable, err)
	}
	switch {
	case tok.AccessorID == aclDisabledAccessor && tok.SecretID == "":
		return NamespacesStreamed, "Nomad's ACLs are disabled", nil
	case tok.Type == "management":
		return NamespacesStreamed, "the token is a management token", nil
	}
	return NamespacesListed, fmt.Sprintf("the token is of type %q and Nomad gives the Namespace topic to management tokens only", tok.Type), nil
}

// responseOf returns the HTTP status and body of a Nomad answer error.
func responseOf(err error) (int, string, bool) {
	var ue api.UnexpectedResponseError
	if errors.As(err, &ue) && ue.HasStatusCode() {
		return ue.StatusCode(), ue.Body(), true
	}
	var uep *api.UnexpectedResponseError
	if errors.As(err, &uep) && uep.HasStatusCode() {
		return uep.StatusCode(), uep.Body(), true
	}
	return 0, "", false
}

// topicsFor returns the stream topics for a namespace watch mode: Topics,
// less NamespaceTopic unless the namespaces are streamed.
func topicsFor(m NamespaceWatch) map[api.Topic][]string {
	out := map[api.Topic][]string{}
	for _, t := range Topics {
		if t == NamespaceTopic && m != NamespacesStreamed {
			continue
		}
		out[t] = []string{"*"}
	}
	return out
}

// listNamespaces reads the names of Nomad's namespaces (GET /v1/namespaces;
// Nomad filters the answer by the token's namespace rules).
func listNamespaces(ctx context.Context, c *api.Client) (map[string]bool, error) {
	nss, _, err := c.Namespaces().List((&api.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("failed to list namespaces: %w", err)
	}
	out := make(map[string]bool, len(nss))
	for _, ns := range nss {
		out[ns.Name] = true
	}
	return out, nil
}

// refreshNamespaces lists the namespaces again when the stream does not
// carry them (NamespacesListed, set by the watcher) and replaces the
// state's set; otherwise it does nothing.
func (s *State) refreshNamespaces(ctx context.Context, c *api.Client) error {
	s.mu.RLock()
	listed := s.nsWatch == NamespacesListed
	s.mu.RUnlock()
	if !listed {
		return nil
	}
	nss, err := listNamespaces(ctx, c)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !maps.Equal(nss, s.namespaces) {
		s.namespaces = nss
	}
	return nil
}
