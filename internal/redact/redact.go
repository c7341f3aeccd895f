// Package redact hides the secrets of addresses before they are printed or
// logged: the one rule of the agent, the CLI and the client library.
package redact

import (
	"errors"
	"net/url"
	"strings"
)

// Address returns an address (Nomad's, the broker's, Consul's) with its
// userinfo ("user:secret@") replaced by "redacted@", for every place an
// address is printed or logged (the agent's start line, the watcher's
// retries, config errors, the CLI's and the client's errors). An address
// whose userinfo url.Parse does not find ("user:pw@host:4646" parses as
// scheme "user") but that holds an '@' loses everything up to its last '@'.
// The values of its query ("?token=..." -> "?token=redacted") and its
// fragment are redacted too: a token may ride there as well.
func Address(addr string) string {
	u, err := url.Parse(addr)
	if err == nil && u.User != nil {
		u.User = url.User("redacted")
		return cutQuery(u.String())
	}
	if i := strings.LastIndexByte(addr, '@'); i >= 0 {
		return cutQuery("redacted@" + addr[i+1:])
	}
	return cutQuery(addr)
}

// cutQuery redacts the query values and the fragment of address s: each
// "key=value" becomes "key=redacted", a bare word "redacted", and a
// fragment "#redacted".
func cutQuery(s string) string {
	s, frag, hasFrag := strings.Cut(s, "#")
	s, query, hasQuery := strings.Cut(s, "?")
	if hasQuery {
		parts := strings.Split(query, "&")
		for i, p := range parts {
			if k, _, ok := strings.Cut(p, "="); ok {
				parts[i] = k + "=redacted"
			} else if p != "" {
				parts[i] = "redacted"
			}
		}
		s += "?" + strings.Join(parts, "&")
	}
	if hasFrag && frag != "" {
		s += "#redacted"
	}
	return s
}

// AddressIn returns err with every copy of addr in its message replaced
// by Address(addr), unwrapping to err: for errors that copy an address
// into their text (Nomad's client: "invalid address '...': parse ..."),
// which URLError cannot reach.
func AddressIn(err error, addr string) error {
	if err == nil || addr == "" {
		return err
	}
	red := Address(addr)
	msg := err.Error()
	if red == addr || !strings.Contains(msg, addr) {
		return err
	}
	return &redacted{msg: strings.ReplaceAll(msg, addr, red), err: err}
}

type redacted struct {
	msg string
	err error
}

func (r *redacted) Error() string { return r.msg }
func (r *redacted) Unwrap() error { return r.err }

// URLError redacts, with Address, the URL of every *url.Error in err's
// chain (net/http's client errors name the request URL; it masks only a
// password, and keeps a user-only userinfo such as a token), and returns
// err. Call it on the error as returned, before any fmt.Errorf copies its
// message into another.
func URLError(err error) error {
	for e := err; e != nil; {
		var ue *url.Error
		if !errors.As(e, &ue) {
			break
		}
		ue.URL = Address(ue.URL)
		e = ue.Err
	}
	return err
}
