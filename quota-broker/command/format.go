package command

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxColumnWidth bounds how wide a column is padded: a cell wider than it
// overflows its column instead of widening it, so that one wide cell (an
// admit on 6,000 nodes, a hostile name) does not pad every other row to
// its width. The output is then at most the cells' text plus
// maxColumnWidth+2 bytes per cell: proportional to the plan.
const maxColumnWidth = 48

// formatList draws rows of cells as a table with aligned columns, as the
// nomad CLI does (two spaces between columns, the last one not padded).
// The first row is the header; empty cells show "-"; every cell goes
// through printable.
func formatList(rows [][]string) string {
	cols := 0
	for _, r := range rows {
		cols = max(cols, len(r))
	}
	cells := make([][]string, len(rows))
	widths := make([]int, cols)
	for i, r := range rows {
		cells[i] = make([]string, len(r))
		for j, c := range r {
			if c == "" {
				c = "-"
			}
			c = printable(c)
			cells[i][j] = c
			if w := utf8.RuneCountInString(c); w <= maxColumnWidth {
				widths[j] = max(widths[j], w)
			}
		}
	}
	var b strings.Builder
	for i, r := range cells {
		if i > 0 {
			b.WriteByte('\n')
		}
		for j, c := range r {
			b.WriteString(c)
			if j == len(r)-1 {
				break
			}
			pad := max(widths[j]-utf8.RuneCountInString(c), 0)
			b.WriteString(strings.Repeat(" ", pad+2))
		}
	}
	return b.String()
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
