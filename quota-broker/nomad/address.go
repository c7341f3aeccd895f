package nomad

import (
	"net/url"
	"strings"
)

// RedactAddress returns a Nomad address with its userinfo ("user:secret@")
// replaced by "redacted@", for every place an address is printed or
// logged (the agent's start line, the watcher's retries, config errors).
// An address whose userinfo url.Parse does not find ("user:pw@host:4646"
// parses as scheme "user") but that holds an '@' loses everything up to
// its last '@'.
func RedactAddress(addr string) string {
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
