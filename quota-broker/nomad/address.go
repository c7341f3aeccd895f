package nomad

import (
	"net/url"
	"strings"
)

// RedactAddress returns a Nomad address with its userinfo ("user:secret@")
// replaced by "redacted@", for every place an address is printed or
// logged (the agent's start line, the watcher's retries, config errors).
// An address that does not parse loses everything up to its last '@'.
func RedactAddress(addr string) string {
	u, err := url.Parse(addr)
	if err != nil {
		if i := strings.LastIndexByte(addr, '@'); i >= 0 {
			return "redacted@" + addr[i+1:]
		}
		return addr
	}
	if u.User == nil {
		return addr
	}
	u.User = url.User("redacted")
	return u.String()
}
