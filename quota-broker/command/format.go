package command

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/ryanuber/columnize"
)

// cellSep separates cells in the rows given to formatList; it cannot occur
// in names or reasons, unlike columnize's default "|".
const cellSep = "\x1f"

// formatList draws rows of cells as a table with aligned columns, as the
// nomad CLI does. The first row is the header; empty cells show "-".
func formatList(rows [][]string) string {
	lines := make([]string, len(rows))
	for i, r := range rows {
		cells := make([]string, len(r))
		for j, c := range r {
			cells[j] = printable(c)
		}
		lines[i] = strings.Join(cells, cellSep)
	}
	conf := columnize.DefaultConfig()
	conf.Delim = cellSep
	conf.Empty = "-"
	return columnize.Format(lines, conf)
}

// shortID cuts a UUID to its first 8 characters, as nomad does without
// -verbose; other IDs are kept whole.
func shortID(id string, verbose bool) string {
	if verbose || !isUUID(id) {
		return id
	}
	return id[:8]
}

func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, r := range s {
		switch i {
		case 8, 13, 18, 23:
			if r != '-' {
				return false
			}
		default:
			if !strings.ContainsRune("0123456789abcdefABCDEF", r) {
				return false
			}
		}
	}
	return true
}

// printable returns s with every character that is not printable written
// as a Go escape (a newline as \n, ESC as \x1b, U+202E as \u202e, a byte
// that is not UTF-8 as \xff). Names in a snapshot come from Nomad jobs
// that anyone may submit: printed raw, control characters could rewrite
// the operator's terminal, and bidirectional overrides could make one name
// read as another.
func printable(s string) string {
	clean := true
	for i := 0; i < len(s) && clean; i++ {
		clean = s[i] >= 0x20 && s[i] < 0x7f
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case unicode.IsPrint(r):
			b.WriteString(s[i : i+n])
		default:
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		}
		i += n
	}
	return b.String()
}
