package command

import (
	"strconv"
	"strings"
	"testing"
)

// reservation show and cancel check their ID argument before any call: an
// ID no booking can have ("..", which the HTTP path would clean into
// another endpoint, "a/b", uppercase) is an error naming it, exit 1, and
// no request is sent (the address here answers nothing).
func TestReservationIDArgument(t *testing.T) {
	t.Setenv("GPUTIDE_ADDR", "http://127.0.0.1:1")
	for _, args := range [][]string{{"reservation", "show", ".."}, {"reservation", "cancel", "-force", "."}, {"reservation", "show", "R-1"}, {"reservation", "cancel", "a/b"}} {
		code, _, errOut := runCLI(t, args...)
		id := args[len(args)-1]
		if want := `id ` + strconv.Quote(id) + `: character `; code != 1 || !strings.HasPrefix(errOut, want) || strings.Contains(errOut, "127.0.0.1:1") {
			t.Errorf("gputide %s: exit %d, stderr %q; want 1 and %q first, no call", strings.Join(args, " "), code, errOut, want)
		}
	}
}
