package report

import (
	"fmt"
	"html"
	"io"
	"regexp"
	"strings"
)

// doc is the report as blocks, written both as Markdown (report.md) and as
// one self-contained HTML page (report.html), so that the two say the
// same. Text may hold `code`, **bold** and *emphasis*.
type doc struct{ blocks []block }

type blockKind uint8

const (
	bHeading blockKind = iota
	bPara
	bList
	bTable
	bFigure
)

type block struct {
	kind  blockKind
	level int      // heading
	text  string   // heading, paragraph, figure caption
	items []string // list
	head  []string // table
	right []bool   // table: right-aligned columns
	rows  [][]string
	file  string // figure: the SVG file
	svg   []byte // figure: its content, inlined in HTML
}

func (d *doc) h(level int, format string, a ...any) {
	d.blocks = append(d.blocks, block{kind: bHeading, level: level, text: fmt.Sprintf(format, a...)})
}

func (d *doc) p(format string, a ...any) {
	d.blocks = append(d.blocks, block{kind: bPara, text: fmt.Sprintf(format, a...)})
}

func (d *doc) list(items ...string) {
	if len(items) > 0 {
		d.blocks = append(d.blocks, block{kind: bList, items: items})
	}
}

// table starts a table; columns whose header ends in ">" are right-aligned
// (the ">" is dropped). Rows are added with row.
func (d *doc) table(head ...string) *block {
	b := block{kind: bTable}
	for _, h := range head {
		right := strings.HasSuffix(h, ">")
		b.head = append(b.head, strings.TrimSuffix(h, ">"))
		b.right = append(b.right, right)
	}
	d.blocks = append(d.blocks, b)
	return &d.blocks[len(d.blocks)-1]
}

func (b *block) row(cells ...string) { b.rows = append(b.rows, cells) }

func (d *doc) figure(file, caption string, svg []byte) {
	d.blocks = append(d.blocks, block{kind: bFigure, file: file, text: caption, svg: svg})
}

// markdown writes the document as Markdown.
func (d *doc) markdown(w io.Writer) {
	for i, b := range d.blocks {
		if i > 0 {
			fmt.Fprintln(w)
		}
		switch b.kind {
		case bHeading:
			fmt.Fprintf(w, "%s %s\n", strings.Repeat("#", b.level), b.text)
		case bPara:
			fmt.Fprintln(w, b.text)
		case bList:
			for _, it := range b.items {
				fmt.Fprintf(w, "- %s\n", it)
			}
		case bTable:
			fmt.Fprintf(w, "| %s |\n|", strings.Join(b.head, " | "))
			for _, r := range b.right {
				if r {
					fmt.Fprint(w, "---:|")
				} else {
					fmt.Fprint(w, "---|")
				}
			}
			fmt.Fprintln(w)
			for _, r := range b.rows {
				fmt.Fprintf(w, "| %s |\n", strings.Join(r, " | "))
			}
		case bFigure:
			fmt.Fprintf(w, "![%s](%s)\n", b.text, b.file)
		}
	}
}

var (
	codeRE = regexp.MustCompile("`([^`]*)`")
	boldRE = regexp.MustCompile(`\*\*([^*]+)\*\*`)
	emRE   = regexp.MustCompile(`\*([^*]+)\*`)
)

// inline turns the text's Markdown marks into HTML, escaping the rest.
func inline(s string) string {
	s = html.EscapeString(s)
	s = codeRE.ReplaceAllString(s, "<code>$1</code>")
	s = boldRE.ReplaceAllString(s, "<strong>$1</strong>")
	return emRE.ReplaceAllString(s, "<em>$1</em>")
}

const htmlStyle = `body{font-family:DejaVu Sans,Arial,Helvetica,sans-serif;max-width:1240px;margin:1em auto;padding:0 1em;color:#222;line-height:1.4}
table{border-collapse:collapse;margin:.5em 0 1em}th,td{border:1px solid #ccc;padding:3px 7px}th{background:#f2f2f2}
td.r,th.r{text-align:right}code{background:#f4f4f4;padding:0 3px}figure{margin:1em 0}svg{max-width:100%;height:auto}
figcaption{font-size:90%;color:#444}`

// html writes the document as one HTML page: the charts inline, no
// script, nothing fetched.
func (d *doc) html(w io.Writer, title string) {
	fmt.Fprintf(w, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>%s</title>\n<style>\n%s\n</style>\n</head>\n<body>\n",
		html.EscapeString(title), htmlStyle)
	for _, b := range d.blocks {
		switch b.kind {
		case bHeading:
			fmt.Fprintf(w, "<h%d>%s</h%d>\n", b.level, inline(b.text), b.level)
		case bPara:
			fmt.Fprintf(w, "<p>%s</p>\n", inline(b.text))
		case bList:
			fmt.Fprintln(w, "<ul>")
			for _, it := range b.items {
				fmt.Fprintf(w, "<li>%s</li>\n", inline(it))
			}
			fmt.Fprintln(w, "</ul>")
		case bTable:
			fmt.Fprint(w, "<table>\n<thead><tr>")
			for i, h := range b.head {
				fmt.Fprintf(w, "<th%s>%s</th>", cls(b.right, i), inline(h))
			}
			fmt.Fprint(w, "</tr></thead>\n<tbody>\n")
			for _, r := range b.rows {
				fmt.Fprint(w, "<tr>")
				for i, c := range r {
					fmt.Fprintf(w, "<td%s>%s</td>", cls(b.right, i), inline(c))
				}
				fmt.Fprint(w, "</tr>\n")
			}
			fmt.Fprint(w, "</tbody>\n</table>\n")
		case bFigure:
			fmt.Fprintf(w, "<figure id=\"%s\">\n", html.EscapeString(b.file))
			w.Write(b.svg)
			fmt.Fprintf(w, "<figcaption>%s (<code>%s</code>)</figcaption>\n</figure>\n", inline(b.text), html.EscapeString(b.file))
		}
	}
	fmt.Fprint(w, "</body>\n</html>\n")
}

func cls(right []bool, i int) string {
	if i < len(right) && right[i] {
		return ` class="r"`
	}
	return ""
}
