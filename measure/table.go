package measure

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// Table is a Markdown table that also reads well in a terminal: columns padded to equal
// width, the first left-aligned and the rest right-aligned (they hold numbers).
type Table struct {
	Header []string
	Rows   [][]string
}

// Add appends a row.
func (t *Table) Add(cells ...string) { t.Rows = append(t.Rows, cells) }

// WriteTo writes the table to w.
func (t *Table) WriteTo(w io.Writer) (int64, error) {
	width := make([]int, len(t.Header))
	for _, row := range append([][]string{t.Header}, t.Rows...) {
		for i, c := range row {
			if i < len(width) {
				width[i] = max(width[i], utf8.RuneCountInString(c), 3)
			}
		}
	}
	var b strings.Builder
	line := func(cells []string) {
		b.WriteString("|")
		for i, wd := range width {
			c := ""
			if i < len(cells) {
				c = cells[i]
			}
			pad := strings.Repeat(" ", wd-utf8.RuneCountInString(c))
			if i == 0 {
				fmt.Fprintf(&b, " %s%s |", c, pad)
			} else {
				fmt.Fprintf(&b, " %s%s |", pad, c)
			}
		}
		b.WriteString("\n")
	}
	line(t.Header)
	b.WriteString("|")
	for i, wd := range width {
		if i == 0 {
			b.WriteString(" " + strings.Repeat("-", wd) + " |")
		} else {
			b.WriteString(" " + strings.Repeat("-", wd-1) + ": |")
		}
	}
	b.WriteString("\n")
	for _, r := range t.Rows {
		line(r)
	}
	n, err := io.WriteString(w, b.String())
	return int64(n), err
}
