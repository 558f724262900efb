package convert

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/go-pdf/fpdf"
)

// fontFiles are Unicode TrueType fonts looked for on the machine (Debian's
// fonts-dejavu-core, fonts-liberation2). Without them the PDF uses the
// standard Helvetica and Courier, which cover Windows-1252 only.
var fontFiles = []struct {
	dir                                               string
	regular, bold, italic, boldItalic, mono, monoBold string
}{
	{"/usr/share/fonts/truetype/dejavu", "DejaVuSans.ttf", "DejaVuSans-Bold.ttf", "DejaVuSans-Oblique.ttf", "DejaVuSans-BoldOblique.ttf", "DejaVuSansMono.ttf", "DejaVuSansMono-Bold.ttf"},
	{"/usr/share/fonts/truetype/liberation2", "LiberationSans-Regular.ttf", "LiberationSans-Bold.ttf", "LiberationSans-Italic.ttf", "LiberationSans-BoldItalic.ttf", "LiberationMono-Regular.ttf", "LiberationMono-Bold.ttf"},
	{"/usr/share/fonts/truetype/liberation", "LiberationSans-Regular.ttf", "LiberationSans-Bold.ttf", "LiberationSans-Italic.ttf", "LiberationSans-BoldItalic.ttf", "LiberationMono-Regular.ttf", "LiberationMono-Bold.ttf"},
}

type fontSet struct{ regular, bold, italic, boldItalic, mono, monoBold []byte }

var (
	fontsOnce sync.Once
	fonts     *fontSet
)

// unicodeFonts loads the first complete set of Unicode fonts, once.
func unicodeFonts() *fontSet {
	fontsOnce.Do(func() {
		for _, c := range fontFiles {
			var fs fontSet
			ok := true
			for _, p := range []struct {
				name string
				dst  *[]byte
			}{{c.regular, &fs.regular}, {c.bold, &fs.bold}, {c.italic, &fs.italic}, {c.boldItalic, &fs.boldItalic}, {c.mono, &fs.mono}, {c.monoBold, &fs.monoBold}} {
				b, err := os.ReadFile(filepath.Join(c.dir, p.name))
				if err != nil {
					ok = false
					break
				}
				*p.dst = b
			}
			if ok {
				fonts = &fs
				return
			}
		}
	})
	return fonts
}

// Page geometry (mm) and type sizes (pt).
const (
	marginMM   = 20.0
	bodyPt     = 10.5
	codePt     = 9.0
	lineFactor = 0.3528 * 1.45 // pt → mm line height
)

type pdfDoc struct {
	f          *fpdf.Fpdf
	body, mono string
	tr         func(string) string
	pageW      float64
	pageH      float64
	// color is the text color of the current block (grey inside quotes).
	color [3]int
}

// MarkdownToPDF renders markdown as an A4 PDF whose text is real text
// (extractable, selectable and searchable), with an outline of the headings.
func MarkdownToPDF(md []byte, opt Options) (out []byte, err error) {
	defer func() {
		if p := recover(); p != nil {
			out, err = nil, fmt.Errorf("pdf layout failed: %v", p)
		}
	}()
	blocks := parse(md)
	f := fpdf.New("P", "mm", "A4", "")
	d := &pdfDoc{f: f, tr: bmpOnly, color: [3]int{28, 32, 44}}
	if fs := unicodeFonts(); fs != nil {
		f.AddUTF8FontFromBytes("body", "", fs.regular)
		f.AddUTF8FontFromBytes("body", "B", fs.bold)
		f.AddUTF8FontFromBytes("body", "I", fs.italic)
		f.AddUTF8FontFromBytes("body", "BI", fs.boldItalic)
		f.AddUTF8FontFromBytes("mono", "", fs.mono)
		f.AddUTF8FontFromBytes("mono", "B", fs.monoBold)
		d.body, d.mono = "body", "mono"
	} else {
		d.body, d.mono = "Helvetica", "Courier"
		cp1252 := f.UnicodeTranslatorFromDescriptor("")
		d.tr = func(s string) string { return cp1252(bmpOnly(s)) }
	}
	d.pageW, d.pageH = f.GetPageSize()
	f.SetMargins(marginMM, marginMM, marginMM)
	f.SetAutoPageBreak(true, marginMM)
	if opt.Title != "" {
		f.SetTitle(opt.Title, true)
	}
	f.SetCreator("metaclaw", true)
	f.SetFooterFunc(func() {
		f.SetY(-12)
		f.SetFont(d.body, "", 8)
		f.SetTextColor(140, 140, 140)
		f.CellFormat(0, 5, fmt.Sprintf("%d", f.PageNo()), "", 0, "C", false, 0, "")
	})
	f.AddPage()
	f.SetFont(d.body, "", bodyPt)
	d.blocks(blocks, marginMM, false)
	if err := f.Error(); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := f.Output(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func (d *pdfDoc) right() float64 { return d.pageW - marginMM }

// blocks lays out bs with left margin left. continueLine: the first
// paragraph continues the current line (after a list marker).
func (d *pdfDoc) blocks(bs []block, left float64, continueLine bool) {
	f := d.f
	f.SetLeftMargin(left)
	for i, b := range bs {
		first := i == 0 && continueLine
		if !first && f.GetX() != left {
			f.SetX(left)
		}
		switch b.kind {
		case bParagraph:
			lh := bodyPt * lineFactor
			d.spans(b.spans, bodyPt, "", lh)
			f.Ln(lh)
			f.Ln(1.6)
		case bHeading:
			size := map[int]float64{1: 20, 2: 16, 3: 13.5, 4: 12, 5: 11, 6: 10.5}[b.level]
			lh := size * 0.3528 * 1.3
			if f.GetY() > d.pageH-marginMM-3*lh {
				f.AddPage()
			}
			if f.GetY() > marginMM+1 {
				f.Ln(size * 0.3528 * 0.5)
			}
			f.Bookmark(plain(b.spans), min(b.level-1, 5), -1)
			d.spans(b.spans, size, "B", lh)
			f.Ln(lh)
			if b.level <= 2 {
				y := f.GetY() + 0.6
				f.SetDrawColor(210, 214, 222)
				f.SetLineWidth(0.3)
				f.Line(left, y, d.right(), y)
				f.Ln(2.2)
			} else {
				f.Ln(1)
			}
		case bCode:
			f.Ln(0.8)
			f.SetFont(d.mono, "", codePt)
			f.SetFillColor(244, 245, 248)
			f.SetTextColor(36, 41, 54)
			f.SetX(left)
			f.MultiCell(d.right()-left, codePt*0.3528*1.4, d.tr(b.code), "", "L", true)
			f.SetFont(d.body, "", bodyPt)
			f.Ln(2)
		case bList:
			d.list(b, left)
			f.Ln(1)
		case bQuote:
			y0, p0 := f.GetY(), f.PageNo()
			saved := d.color
			d.color = [3]int{90, 96, 112}
			d.blocks(b.quote, left+6, false)
			d.color = saved
			f.SetLeftMargin(left)
			if f.PageNo() == p0 {
				f.SetDrawColor(190, 196, 210)
				f.SetLineWidth(0.8)
				f.Line(left+2, y0, left+2, f.GetY()-1.6)
			}
			f.SetX(left)
		case bRule:
			f.Ln(2)
			y := f.GetY()
			f.SetDrawColor(200, 204, 212)
			f.SetLineWidth(0.3)
			f.Line(left, y, d.right(), y)
			f.Ln(4)
		case bTable:
			d.table(b, left)
			f.Ln(3)
		}
		f.SetLeftMargin(left)
	}
}

// spans writes styled text at size (pt) with line height lh (mm), wrapping
// at the right margin; wrapped lines start at the current left margin.
func (d *pdfDoc) spans(sp []span, size float64, base string, lh float64) {
	f := d.f
	for _, s := range sp {
		style := base
		if s.bold && !strings.Contains(style, "B") {
			style += "B"
		}
		if s.italic {
			style += "I"
		}
		if s.strike {
			style += "S"
		}
		switch {
		case s.code:
			f.SetFont(d.mono, "", size*0.92)
			f.SetTextColor(176, 48, 56)
		case s.link != "":
			f.SetFont(d.body, style+"U", size)
			f.SetTextColor(38, 84, 214)
		default:
			f.SetFont(d.body, style, size)
			f.SetTextColor(d.color[0], d.color[1], d.color[2])
		}
		if s.link != "" {
			f.WriteLinkString(lh, d.tr(s.text), s.link)
		} else {
			f.Write(lh, d.tr(s.text))
		}
	}
	f.SetFont(d.body, "", bodyPt)
	f.SetTextColor(d.color[0], d.color[1], d.color[2])
}

// list lays out a list: markers in the gutter, items indented.
func (d *pdfDoc) list(b block, left float64) {
	f := d.f
	indent := 6.5
	lh := bodyPt * lineFactor
	for i, item := range b.items {
		marker := "•"
		if b.ordered {
			marker = fmt.Sprintf("%d.", b.start+i)
		} else if left > marginMM+1 {
			marker = "–"
		}
		if f.GetY() > d.pageH-marginMM-lh {
			f.AddPage()
		}
		f.SetLeftMargin(left)
		f.SetX(left + 1)
		f.SetFont(d.body, "", bodyPt)
		f.SetTextColor(d.color[0], d.color[1], d.color[2])
		f.Write(lh, d.tr(marker))
		f.SetX(left + indent)
		cont := len(item) > 0 && item[0].kind == bParagraph
		if !cont {
			f.Ln(lh)
		}
		d.blocks(item, left+indent, cont)
		// Tight items: take back most of the paragraph gap.
		if len(item) == 1 && item[0].kind == bParagraph {
			f.SetY(f.GetY() - 1.0)
		}
	}
	f.SetLeftMargin(left)
}

// table lays out a table with wrapped cells, a shaded header row repeated on
// each page, and the columns' alignments.
func (d *pdfDoc) table(b block, left float64) {
	f := d.f
	ncols := len(b.header)
	for _, r := range b.rows {
		ncols = max(ncols, len(r))
	}
	if ncols == 0 {
		return
	}
	const pad = 1.6
	size := bodyPt - 1
	lh := size * 0.3528 * 1.35
	avail := d.right() - left
	// Natural widths from the longest word and the whole text of each column.
	natural := make([]float64, ncols)
	minW := make([]float64, ncols)
	measure := func(cells [][]span, bold bool) {
		style := ""
		if bold {
			style = "B"
		}
		f.SetFont(d.body, style, size)
		for c := 0; c < ncols && c < len(cells); c++ {
			t := plain(cells[c])
			natural[c] = max(natural[c], f.GetStringWidth(d.tr(t))+2*pad+0.5)
			for _, w := range strings.Fields(t) {
				minW[c] = max(minW[c], f.GetStringWidth(d.tr(w))+2*pad+0.5)
			}
		}
	}
	measure(b.header, true)
	for _, r := range b.rows {
		measure(r, false)
	}
	widths := make([]float64, ncols)
	total := 0.0
	for c := range widths {
		widths[c] = max(natural[c], 10)
		total += widths[c]
	}
	if total > avail {
		// Give each column at least its longest word (capped), share the rest
		// in proportion to the natural widths.
		fixed := 0.0
		for c := range widths {
			widths[c] = min(max(minW[c], 10), avail/float64(ncols)*1.5)
			fixed += widths[c]
		}
		extra := avail - fixed
		if extra < 0 {
			for c := range widths {
				widths[c] = avail / float64(ncols)
			}
		} else {
			sumNat := 0.0
			for c := range widths {
				sumNat += natural[c] - widths[c]
			}
			for c := range widths {
				if sumNat > 0 {
					widths[c] += extra * (natural[c] - widths[c]) / sumNat
				}
			}
		}
	}
	layout := func(cells [][]span, header bool) ([][]string, float64) {
		style := ""
		if header {
			style = "B"
		}
		f.SetFont(d.body, style, size)
		lines := make([][]string, ncols)
		n := 1
		for c := 0; c < ncols; c++ {
			t := ""
			if c < len(cells) {
				t = plain(cells[c])
			}
			lines[c] = d.wrap(t, widths[c]-2*pad)
			n = max(n, len(lines[c]))
		}
		return lines, float64(n)*lh + 2*pad
	}
	row := func(cells [][]span, header bool) {
		lines, h := layout(cells, header)
		if f.GetY()+h > d.pageH-marginMM {
			f.AddPage()
			if !header && len(b.header) > 0 {
				hl, hh := layout(b.header, true)
				d.drawRow(hl, widths, left, pad, lh, hh, true, b.aligns)
				layout(cells, header) // restore the row's font
			}
		}
		d.drawRow(lines, widths, left, pad, lh, h, header, b.aligns)
	}
	if len(b.header) > 0 {
		row(b.header, true)
	}
	for _, r := range b.rows {
		row(r, false)
	}
	f.SetFont(d.body, "", bodyPt)
	f.SetTextColor(d.color[0], d.color[1], d.color[2])
	f.SetX(left)
}

func (d *pdfDoc) drawRow(lines [][]string, widths []float64, left, pad, lh, h float64, header bool, aligns []string) {
	f := d.f
	y := f.GetY()
	x := left
	f.SetDrawColor(196, 201, 212)
	f.SetLineWidth(0.25)
	for c, w := range widths {
		if header {
			f.SetFillColor(236, 239, 245)
			f.Rect(x, y, w, h, "FD")
		} else {
			f.Rect(x, y, w, h, "D")
		}
		align := "L"
		if c < len(aligns) {
			switch aligns[c] {
			case "center":
				align = "C"
			case "right":
				align = "R"
			}
		}
		f.SetTextColor(d.color[0], d.color[1], d.color[2])
		for li, line := range lines[c] {
			f.SetXY(x+pad, y+pad+float64(li)*lh)
			f.CellFormat(w-2*pad, lh, d.tr(line), "", 0, align, false, 0, "")
		}
		x += w
	}
	f.SetXY(left, y+h)
}

// wrap breaks text into lines no wider than w (mm) in the current font,
// splitting words longer than a line.
func (d *pdfDoc) wrap(text string, w float64) []string {
	f := d.f
	var out []string
	for _, para := range strings.Split(text, "\n") {
		line := ""
		for _, word := range strings.Fields(para) {
			cand := word
			if line != "" {
				cand = line + " " + word
			}
			if f.GetStringWidth(d.tr(cand)) <= w {
				line = cand
				continue
			}
			if line != "" {
				out = append(out, line)
				line = ""
			}
			// A word wider than the column is cut by characters.
			for f.GetStringWidth(d.tr(word)) > w {
				r := []rune(word)
				k := len(r) - 1
				for k > 1 && f.GetStringWidth(d.tr(string(r[:k]))) > w {
					k--
				}
				out = append(out, string(r[:k]))
				word = string(r[k:])
			}
			line = word
		}
		out = append(out, line)
	}
	return out
}

// bmpOnly keeps text within what the embedded fonts can address: characters
// beyond the Basic Multilingual Plane (emoji) and control characters other
// than newline become U+FFFD.
func bmpOnly(s string) string {
	clean := true
	for _, r := range s {
		if r > 0xFFFF || (r < 0x20 && r != '\n') || r == 0x7f {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	return strings.Map(func(r rune) rune {
		if r > 0xFFFF || (r < 0x20 && r != '\n') || r == 0x7f {
			if r == '\t' {
				return ' '
			}
			return '\uFFFD'
		}
		return r
	}, s)
}
