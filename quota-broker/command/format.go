package command

import (
	"strings"

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
			cells[j] = strings.ReplaceAll(strings.ReplaceAll(c, cellSep, " "), "\n", " ")
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
