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
func Address(addr string) string {
	u, err := url.Parse(addr)
	if err == nil && u.User != nil {
		u.User = url.User("redacted")
		return u.String()
	}
	if i := strings.LastIndexByte(addr, '@'); i >= 0 {
		return "redacted@" + addr[i+1:]
	}
	return addr
}

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
