// Package convert turns markdown into documents a person opens: PDF with
// real, selectable text (headings, lists, emphasis, code, tables, links)
// and DOCX (a WordprocessingML package that Word and LibreOffice open).
// Both renderers share one parse: goldmark's CommonMark + GFM tree reduced
// to the few block and inline kinds a document needs.
package convert

import (
	"bytes"
	"strings"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	east "github.com/yuin/goldmark/extension/ast"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"
)

// Options tune a conversion.
type Options struct {
	// Title is the document title (PDF /Title, DOCX core title).
	Title string
}

type blockKind int

const (
	bParagraph blockKind = iota
	bHeading
	bCode
	bList
	bQuote
	bRule
	bTable
)

// block is one document block.
type block struct {
	kind    blockKind
	level   int    // heading level 1-6
	spans   []span // paragraph and heading text
	code    string // code block text
	lang    string
	ordered bool
	start   int
	items   [][]block // list items, each a sequence of blocks
	quote   []block
	header  [][]span   // table header cells
	rows    [][][]span // table body rows of cells
	aligns  []string   // per column: "", "left", "center", "right"
}

// span is a run of text with one style.
type span struct {
	text                       string
	bold, italic, code, strike bool
	link                       string
}

func plain(spans []span) string {
	var b strings.Builder
	for _, s := range spans {
		b.WriteString(s.text)
	}
	return b.String()
}

// parse reads markdown into blocks.
func parse(src []byte) []block {
	md := goldmark.New(goldmark.WithExtensions(extension.GFM))
	doc := md.Parser().Parse(text.NewReader(src))
	return blocksOf(doc, src)
}

func blocksOf(parent ast.Node, src []byte) []block {
	var out []block
	for n := parent.FirstChild(); n != nil; n = n.NextSibling() {
		switch t := n.(type) {
		case *ast.Heading:
			out = append(out, block{kind: bHeading, level: t.Level, spans: inlines(t, src)})
		case *ast.Paragraph, *ast.TextBlock:
			if sp := inlines(t, src); len(sp) > 0 {
				out = append(out, block{kind: bParagraph, spans: sp})
			}
		case *ast.FencedCodeBlock:
			out = append(out, block{kind: bCode, code: linesOf(t, src), lang: string(t.Language(src))})
		case *ast.CodeBlock:
			out = append(out, block{kind: bCode, code: linesOf(t, src)})
		case *ast.HTMLBlock:
			if s := strings.TrimSpace(linesOf(t, src)); s != "" {
				out = append(out, block{kind: bParagraph, spans: []span{{text: s}}})
			}
		case *ast.List:
			b := block{kind: bList, ordered: t.IsOrdered(), start: t.Start}
			if b.start == 0 {
				b.start = 1
			}
			for it := t.FirstChild(); it != nil; it = it.NextSibling() {
				b.items = append(b.items, blocksOf(it, src))
			}
			out = append(out, b)
		case *ast.Blockquote:
			out = append(out, block{kind: bQuote, quote: blocksOf(t, src)})
		case *ast.ThematicBreak:
			out = append(out, block{kind: bRule})
		case *east.Table:
			b := block{kind: bTable}
			for _, a := range t.Alignments {
				switch a {
				case east.AlignLeft:
					b.aligns = append(b.aligns, "left")
				case east.AlignCenter:
					b.aligns = append(b.aligns, "center")
				case east.AlignRight:
					b.aligns = append(b.aligns, "right")
				default:
					b.aligns = append(b.aligns, "")
				}
			}
			for r := t.FirstChild(); r != nil; r = r.NextSibling() {
				var cells [][]span
				for c := r.FirstChild(); c != nil; c = c.NextSibling() {
					cells = append(cells, inlines(c, src))
				}
				if _, isHeader := r.(*east.TableHeader); isHeader {
					b.header = cells
				} else {
					b.rows = append(b.rows, cells)
				}
			}
			out = append(out, b)
		default:
			if n.HasChildren() {
				out = append(out, blocksOf(n, src)...)
			}
		}
	}
	return out
}

func linesOf(n ast.Node, src []byte) string {
	var b bytes.Buffer
	lines := n.Lines()
	for i := 0; i < lines.Len(); i++ {
		seg := lines.At(i)
		b.Write(seg.Value(src))
	}
	return strings.TrimRight(strings.ReplaceAll(b.String(), "\t", "    "), "\n")
}

// inlines flattens n's inline children into styled spans.
func inlines(n ast.Node, src []byte) []span {
	var out []span
	var walk func(n ast.Node, st span)
	add := func(st span, s string) {
		if s == "" {
			return
		}
		st.text = s
		if k := len(out) - 1; k >= 0 && sameStyle(out[k], st) {
			out[k].text += s
			return
		}
		out = append(out, st)
	}
	walk = func(n ast.Node, st span) {
		for c := n.FirstChild(); c != nil; c = c.NextSibling() {
			switch t := c.(type) {
			case *ast.Text:
				if t.IsRaw() {
					add(st, string(t.Segment.Value(src)))
				} else {
					add(st, unescape(t.Segment.Value(src)))
				}
				if t.HardLineBreak() {
					add(st, "\n")
				} else if t.SoftLineBreak() {
					add(st, " ")
				}
			case *ast.String:
				if t.IsCode() || t.IsRaw() {
					add(st, string(t.Value))
				} else {
					add(st, unescape(t.Value))
				}
			case *ast.CodeSpan:
				cs := st
				cs.code = true
				var b strings.Builder
				for g := t.FirstChild(); g != nil; g = g.NextSibling() {
					if tx, ok := g.(*ast.Text); ok {
						b.Write(tx.Segment.Value(src))
					} else if s, ok := g.(*ast.String); ok {
						b.Write(s.Value)
					}
				}
				add(cs, b.String())
			case *ast.Emphasis:
				es := st
				if t.Level >= 2 {
					es.bold = true
				} else {
					es.italic = true
				}
				walk(t, es)
			case *east.Strikethrough:
				ss := st
				ss.strike = true
				walk(t, ss)
			case *ast.Link:
				ls := st
				ls.link = string(t.Destination)
				walk(t, ls)
			case *ast.AutoLink:
				ls := st
				ls.link = string(t.URL(src))
				add(ls, string(t.Label(src)))
			case *ast.Image:
				alt := plain(inlines(t, src))
				if alt == "" {
					alt = string(t.Destination)
				}
				add(st, "[image: "+alt+"]")
			case *east.TaskCheckBox:
				if t.IsChecked {
					add(st, "[x] ")
				} else {
					add(st, "[ ] ")
				}
			case *ast.RawHTML:
				// Inline HTML tags carry no text of their own.
			default:
				walk(c, st)
			}
		}
	}
	walk(n, span{})
	// Trim the paragraph's trailing whitespace.
	for len(out) > 0 {
		k := len(out) - 1
		out[k].text = strings.TrimRight(out[k].text, " \n")
		if out[k].text != "" {
			break
		}
		out = out[:k]
	}
	return out
}

func sameStyle(a, b span) bool {
	return a.bold == b.bold && a.italic == b.italic && a.code == b.code && a.strike == b.strike && a.link == b.link
}

// unescape applies markdown's backslash escapes and character references
// the way goldmark's HTML writer does.
func unescape(b []byte) string {
	return string(util.ResolveEntityNames(util.ResolveNumericReferences(util.UnescapePunctuations(b))))
}
