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

	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

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

// parse reads markdown into blocks. Sources the parser would take too long
// over (nesting deeper than MaxNesting) are refused first: goldmark cannot
// be interrupted once it runs.
func parse(src []byte) ([]block, error) {
	if err := checkNesting(src); err != nil {
		return nil, err
	}
	md := goldmark.New(goldmark.WithExtensions(extension.GFM))
	doc := md.Parser().Parse(text.NewReader(src))
	return blocksOf(doc, src, 0), nil
}

// checkNesting refuses a source with a line nested deeper than MaxNesting
// containers: block quote markers, list markers, and the indentation in
// front of them (a nested list item is indented by at least two columns
// per level).
func checkNesting(src []byte) error {
	line := 1
	for len(src) > 0 {
		end := bytes.IndexByte(src, '\n')
		l := src
		if end >= 0 {
			l = src[:end]
			src = src[end+1:]
		} else {
			src = nil
		}
		if d := nestingDepth(l); d > MaxNesting {
			return apierr.New(apierr.UnsupportedFormat, "line %d nests block quotes or lists %d levels deep; at most %d levels can be converted", line, d, MaxNesting)
		}
		line++
	}
	return nil
}

// nestingDepth estimates how many containers a line opens or continues.
func nestingDepth(l []byte) int {
	markers, indent, pending := 0, 0, 0
	i := 0
	for i < len(l) {
		switch c := l[i]; {
		case c == ' ':
			pending++
			i++
		case c == '\t':
			pending += 4
			i++
		case c == '>':
			markers++
			indent += pending
			pending = 0
			i++
		case (c == '-' || c == '+' || c == '*') && i+1 < len(l) && (l[i+1] == ' ' || l[i+1] == '\t'):
			markers++
			indent += pending
			pending = 0
			i++
		case c >= '0' && c <= '9':
			j := i
			for j < len(l) && j-i < 9 && l[j] >= '0' && l[j] <= '9' {
				j++
			}
			if j+1 < len(l) && (l[j] == '.' || l[j] == ')') && (l[j+1] == ' ' || l[j+1] == '\t') {
				markers++
				indent += pending
				pending = 0
				i = j + 1
				continue
			}
			return markers + indent/2
		default:
			return markers + indent/2
		}
	}
	return markers + indent/2
}

// maxTreeDepth is how deep blocksOf and inlines follow the tree before they
// flatten what lies below (emphasis can nest without limit: "***…a***…").
const maxTreeDepth = 64

func blocksOf(parent ast.Node, src []byte, depth int) []block {
	var out []block
	if depth > maxTreeDepth {
		if s := strings.TrimSpace(flatText(parent, src)); s != "" {
			out = append(out, block{kind: bParagraph, spans: []span{{text: s}}})
		}
		return out
	}
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
				b.items = append(b.items, blocksOf(it, src, depth+1))
			}
			out = append(out, b)
		case *ast.Blockquote:
			out = append(out, block{kind: bQuote, quote: blocksOf(t, src, depth+1)})
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
				out = append(out, blocksOf(n, src, depth+1)...)
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
	var walk func(n ast.Node, st span, depth int)
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
	walk = func(n ast.Node, st span, depth int) {
		if depth > maxTreeDepth {
			add(st, flatText(n, src))
			return
		}
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
				walk(t, es, depth+1)
			case *east.Strikethrough:
				ss := st
				ss.strike = true
				walk(t, ss, depth+1)
			case *ast.Link:
				ls := st
				ls.link = string(t.Destination)
				walk(t, ls, depth+1)
			case *ast.AutoLink:
				ls := st
				ls.link = string(t.URL(src))
				add(ls, string(t.Label(src)))
			case *ast.Image:
				alt := strings.TrimSpace(flatText(t, src))
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
				walk(c, st, depth+1)
			}
		}
	}
	walk(n, span{}, 0)
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

// flatText is the text below n, gathered without recursion (the tree may
// be deeper than the stack should grow).
func flatText(n ast.Node, src []byte) string {
	var b strings.Builder
	c := n.FirstChild()
	for c != nil {
		switch t := c.(type) {
		case *ast.Text:
			b.Write(t.Segment.Value(src))
			if t.SoftLineBreak() || t.HardLineBreak() {
				b.WriteByte(' ')
			}
		case *ast.String:
			b.Write(t.Value)
		}
		if b.Len() > DefaultMaxInput {
			break
		}
		// Depth first: down, else along, else up until a sibling.
		if c.FirstChild() != nil {
			c = c.FirstChild()
			continue
		}
		for c != nil && c != n && c.NextSibling() == nil {
			c = c.Parent()
		}
		if c == nil || c == n {
			break
		}
		c = c.NextSibling()
	}
	return b.String()
}

func sameStyle(a, b span) bool {
	return a.bold == b.bold && a.italic == b.italic && a.code == b.code && a.strike == b.strike && a.link == b.link
}

// unescape applies markdown's backslash escapes and character references
// the way goldmark's HTML writer does.
func unescape(b []byte) string {
	return string(util.ResolveEntityNames(util.ResolveNumericReferences(util.UnescapePunctuations(b))))
}
