// Package report renders the results of corral commands: aligned text
// tables for people and indented JSON for programs (the --json flag).
//
// The package imports nothing of corral.
package report

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// Table is a titled grid of cells. The zero value is an empty table.
type Table struct {
	Title  string
	Header []string
	Rows   [][]string
	// Right lists the columns (by index) aligned to the right, for numbers.
	Right []int
}

// Add appends a row, formatting each value with fmt's %v.
func (t *Table) Add(cells ...any) {
	row := make([]string, len(cells))
	for i, c := range cells {
		row[i] = fmt.Sprint(c)
	}
	t.Rows = append(t.Rows, row)
}

// Write renders t with columns padded to their widest cell.
func (t *Table) Write(w io.Writer) error {
	n := len(t.Header)
	for _, r := range t.Rows {
		n = max(n, len(r))
	}
	width := make([]int, n)
	for _, r := range append([][]string{t.Header}, t.Rows...) {
		for i, c := range r {
			width[i] = max(width[i], utf8.RuneCountInString(c))
		}
	}
	right := make(map[int]bool, len(t.Right))
	for _, i := range t.Right {
		right[i] = true
	}
	var b strings.Builder
	if t.Title != "" {
		b.WriteString(t.Title)
		b.WriteByte('\n')
	}
	line := func(r []string) {
		for i := range n {
			c := ""
			if i < len(r) {
				c = r[i]
			}
			pad := strings.Repeat(" ", width[i]-utf8.RuneCountInString(c))
			if i > 0 {
				b.WriteString("  ")
			}
			if right[i] {
				b.WriteString(pad + c)
			} else if i < n-1 {
				b.WriteString(c + pad)
			} else {
				b.WriteString(c)
			}
		}
		b.WriteByte('\n')
	}
	if len(t.Header) > 0 {
		line(t.Header)
		sep := make([]string, n)
		for i := range sep {
			sep[i] = strings.Repeat("-", width[i])
		}
		line(sep)
	}
	for _, r := range t.Rows {
		line(r)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// JSON writes v as indented JSON followed by a newline.
func JSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
