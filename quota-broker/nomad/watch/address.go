package watch

import "github.com/gputide/gputide/internal/redact"

// RedactAddress is redact.Address, the one rule for addresses printed or
// logged (the agent, the CLI and the client share it).
func RedactAddress(addr string) string { return redact.Address(addr) }
