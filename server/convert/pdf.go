package convert

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/go-pdf/fpdf"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
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
	b     *budget
}

// MarkdownToPDF renders markdown as an A4 PDF whose text is real text
// (extractable, selectable and searchable), with an outline of the headings.
// It stops with a coded error when ctx ends (TIMEOUT) or the document
// outgrows opt's budgets (TOO_LARGE).
func MarkdownToPDF(ctx context.Context, md []byte, opt Options) (out []byte, err error) {
	opt = opt.withDefaults()
	b := &budget{ctx: ctx, opt: opt}
	defer func() {
		if p := recover(); p != nil {
			out, err = nil, recovered(p, "PDF")
		}
	}()
	if len(md) > DefaultMaxInput {
		return nil, apierr.New(apierr.TooLarge, "the markdown is %d bytes; at most %d MB can be converted", len(md), DefaultMaxInput>>20)
	}
	blocks, err := parse(md)
	if err != nil {
		return nil, err
	}
	b.tick()
	d := newPDFDoc(b, opt.Title, opt.coreFonts)
	f := d.f
	d.blocks(blocks, marginMM, false)
	if err := f.Error(); err != nil {
		return nil, apierr.Wrap(apierr.Internal, err, "PDF layout failed: %v", err)
	}
	var buf bytes.Buffer
	if err := f.Output(&buf); err != nil {
		return nil, apierr.Wrap(apierr.Internal, err, "writing the PDF failed: %v", err)
	}
	b.bytes(int64(buf.Len()))
	return buf.Bytes(), nil
}

// newPDFDoc starts an A4 document with its fonts, footer and first page.
func newPDFDoc(b *budget, title string, coreFonts bool) *pdfDoc {
	f := fpdf.New("P", "mm", "A4", "")
	d := &pdfDoc{f: f, tr: bmpOnly, color: [3]int{28, 32, 44}, b: b}
	if fs := unicodeFonts(); fs != nil && !coreFonts {
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
	if title != "" {
		f.SetTitle(title, true)
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
	return d
}

// check is called between units of layout work: it stops the layout when
// the caller's time is up or the page budget is spent.
func (d *pdfDoc) check() {
	d.b.tick()
	if n := d.f.PageNo(); n > d.b.opt.MaxPages {
		d.b.fail(apierr.New(apierr.TooLarge, "the PDF would have more than %d pages; convert a shorter markdown file or split it", d.b.opt.MaxPages))
	}
	if err := d.f.Error(); err != nil {
		d.b.fail(apierr.Wrap(apierr.Internal, err, "PDF layout failed: %v", err))
	}
}

func (d *pdfDoc) right() float64 { return d.pageW - marginMM }

// maxIndentMM is how far nested quotes and lists may push the left margin:
// deeper levels keep the last indentation, so text always has room.
const maxIndentMM = 90.0

func indented(left, by float64) float64 { return min(left+by, marginMM+maxIndentMM) }

// blocks lays out bs with left margin left. continueLine: the first
// paragraph continues the current line (after a list marker).
func (d *pdfDoc) blocks(bs []block, left float64, continueLine bool) {
	f := d.f
	f.SetLeftMargin(left)
	for i, b := range bs {
		d.check()
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
			title := plain(b.spans)
			if r := []rune(title); len(r) > 200 {
				title = string(r[:200]) + "…"
			}
			f.Bookmark(title, min(b.level-1, 5), -1)
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
			d.code(b.code, left)
		case bList:
			d.list(b, left)
			f.Ln(1)
		case bQuote:
			y0, p0 := f.GetY(), f.PageNo()
			saved := d.color
			d.color = [3]int{90, 96, 112}
			inner := indented(left, 6)
			d.blocks(b.quote, inner, false)
			d.color = saved
			f.SetLeftMargin(left)
			if f.PageNo() == p0 && inner > left {
				f.SetDrawColor(190, 196, 210)
				f.SetLineWidth(0.8)
				f.Line(inner-4, y0, inner-4, f.GetY()-1.6)
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

// codeChunkLines is how many lines of a code block are laid out between
// budget checks.
const codeChunkLines = 40

// code lays out a code block on a shaded background, a chunk of lines at a
// time so that a huge block cannot run past the budgets unchecked.
func (d *pdfDoc) code(code string, left float64) {
	f := d.f
	f.Ln(0.8)
	f.SetFont(d.mono, "", codePt)
	f.SetFillColor(244, 245, 248)
	f.SetTextColor(36, 41, 54)
	lines := strings.Split(code, "\n")
	for i := 0; i < len(lines); i += codeChunkLines {
		d.check()
		chunk := strings.Join(lines[i:min(i+codeChunkLines, len(lines))], "\n")
		f.SetX(left)
		// MultiCell drops a trailing empty line; keep blank lines visible.
		if chunk == "" {
			chunk = " "
		}
		f.MultiCell(d.right()-left, codePt*0.3528*1.4, d.tr(chunk), "", "L", true)
	}
	f.SetFont(d.body, "", bodyPt)
	f.Ln(2)
}

// writeChunk is the most runes handed to fpdf's Write at once: Write
// converts its whole string to runes for every character it places
// (quadratic in the length), so long paragraphs go in pieces.
const writeChunk = 160

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
		for _, piece := range chunks(d.tr(s.text), writeChunk) {
			d.check()
			if s.link != "" {
				f.WriteLinkString(lh, piece, s.link)
			} else {
				f.Write(lh, piece)
			}
		}
	}
	f.SetFont(d.body, "", bodyPt)
	f.SetTextColor(d.color[0], d.color[1], d.color[2])
}

// chunks cuts s into pieces of at most n runes, each ending just after a
// space where there is one, so that fpdf still wraps between words.
func chunks(s string, n int) []string {
	var out []string
	for s != "" {
		count, cut, lastSpace := 0, len(s), -1
		for i, r := range s {
			if count == n {
				cut = i
				break
			}
			if r == ' ' || r == '\n' {
				lastSpace = i + 1
			}
			count++
		}
		if cut < len(s) && lastSpace > 0 {
			cut = lastSpace
		}
		out = append(out, s[:cut])
		s = s[cut:]
	}
	return out
}

// list lays out a list: markers in the gutter, items indented.
func (d *pdfDoc) list(b block, left float64) {
	f := d.f
	// Past the deepest indentation items stop moving right; their markers
	// stay in the gutter just left of the text.
	itemLeft := indented(left, 6.5)
	lh := bodyPt * lineFactor
	for i, item := range b.items {
		d.check()
		marker := "•"
		if b.ordered {
			marker = fmt.Sprintf("%d.", b.start+i)
		} else if left > marginMM+1 {
			marker = "–"
		}
		if f.GetY() > d.pageH-marginMM-lh {
			f.AddPage()
		}
		f.SetLeftMargin(itemLeft - 6.5)
		f.SetX(itemLeft - 5.5)
		f.SetFont(d.body, "", bodyPt)
		f.SetTextColor(d.color[0], d.color[1], d.color[2])
		f.Write(lh, d.tr(marker))
		f.SetX(itemLeft)
		cont := len(item) > 0 && item[0].kind == bParagraph
		if !cont {
			f.Ln(lh)
		}
		d.blocks(item, itemLeft, cont)
		// Tight items: take back most of the paragraph gap.
		if len(item) == 1 && item[0].kind == bParagraph {
			f.SetY(f.GetY() - 1.0)
		}
	}
	f.SetLeftMargin(left)
}

// Table geometry: cell padding and the narrowest column (mm). A table with
// more columns than fit at the narrowest width is laid out in groups of
// columns, each repeating the first column so that rows stay identifiable.
const (
	cellPad   = 1.6
	minColMM  = 16.0
	tablePt   = bodyPt - 1
	minTblPt  = 7.0
	headerGap = 1.2
)

// table lays out a table with wrapped cells, a shaded header row repeated on
// each page, and the columns' alignments.
func (d *pdfDoc) table(b block, left float64) {
	ncols := len(b.header)
	for _, r := range b.rows {
		ncols = max(ncols, len(r))
	}
	if ncols == 0 {
		return
	}
	avail := d.right() - left
	// Wide tables get a smaller type size first, then column groups.
	size := tablePt
	if fit := int(avail / minColMM); ncols > fit {
		size = max(minTblPt, tablePt*float64(fit)/float64(ncols))
	}
	perGroup := max(2, int(avail/(minColMM*size/tablePt)))
	if ncols <= perGroup {
		d.tableGroup(b, allColumns(ncols), left, size)
		return
	}
	for start := 1; start < ncols; start += perGroup - 1 {
		cols := []int{0}
		for c := start; c < min(ncols, start+perGroup-1); c++ {
			cols = append(cols, c)
		}
		f := d.f
		f.SetFont(d.body, "I", size)
		f.SetTextColor(120, 126, 140)
		f.SetX(left)
		f.CellFormat(avail, size*0.3528*1.5, d.tr(fmt.Sprintf("Columns %d–%d of %d, with column 1", cols[1]+1, cols[len(cols)-1]+1, ncols)), "", 1, "L", false, 0, "")
		d.tableGroup(b, cols, left, size)
		f.Ln(headerGap * 2)
	}
}

func allColumns(n int) []int {
	cols := make([]int, n)
	for i := range cols {
		cols[i] = i
	}
	return cols
}

func cellsOf(row [][]span, cols []int) [][]span {
	out := make([][]span, len(cols))
	for i, c := range cols {
		if c < len(row) {
			out[i] = row[c]
		}
	}
	return out
}

// tableGroup lays out the columns cols of table b.
func (d *pdfDoc) tableGroup(b block, cols []int, left, size float64) {
	f := d.f
	ncols := len(cols)
	pad := cellPad * size / tablePt
	lh := size * 0.3528 * 1.35
	avail := d.right() - left
	minCol := minColMM * size / tablePt
	aligns := make([]string, ncols)
	for i, c := range cols {
		if c < len(b.aligns) {
			aligns[i] = b.aligns[c]
		}
	}
	header := cellsOf(b.header, cols)
	rows := make([][][]span, len(b.rows))
	for i, r := range b.rows {
		rows[i] = cellsOf(r, cols)
	}
	// Natural widths from the longest word and the whole text of each column.
	natural := make([]float64, ncols)
	minW := make([]float64, ncols)
	measure := func(cells [][]span, bold bool) {
		style := ""
		if bold {
			style = "B"
		}
		f.SetFont(d.body, style, size)
		for c := 0; c < ncols; c++ {
			t := plain(cells[c])
			natural[c] = max(natural[c], f.GetStringWidth(d.tr(t))+2*pad+0.5)
			for _, w := range strings.Fields(t) {
				minW[c] = max(minW[c], f.GetStringWidth(d.tr(w))+2*pad+0.5)
			}
		}
	}
	measure(header, true)
	for i, r := range rows {
		if i%64 == 0 {
			d.check()
		}
		measure(r, false)
	}
	widths := make([]float64, ncols)
	total := 0.0
	for c := range widths {
		widths[c] = max(natural[c], minCol)
		total += widths[c]
	}
	if total > avail {
		// Give each column at least its longest word (capped), share the rest
		// in proportion to the natural widths.
		fixed := 0.0
		for c := range widths {
			widths[c] = min(max(minW[c], minCol), avail/float64(ncols)*1.5)
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
	layout := func(cells [][]span, header bool) [][]string {
		style := ""
		if header {
			style = "B"
		}
		f.SetFont(d.body, style, size)
		lines := make([][]string, ncols)
		for c := 0; c < ncols; c++ {
			lines[c] = d.wrap(plain(cells[c]), widths[c]-2*pad)
		}
		return lines
	}
	height := func(lines [][]string) int {
		n := 1
		for _, l := range lines {
			n = max(n, len(l))
		}
		return n
	}
	// The table breaks pages itself (a row taller than a page is drawn in
	// slices), so fpdf's automatic break must not cut in between.
	f.SetAutoPageBreak(false, marginMM)
	defer f.SetAutoPageBreak(true, marginMM)
	bottom := d.pageH - marginMM
	perPage := max(1, int((bottom-marginMM-2*pad)/lh))
	var headerLines [][]string
	if len(b.header) > 0 {
		headerLines = layout(header, true)
	}
	drawHeader := func() {
		if headerLines != nil {
			n := min(height(headerLines), perPage/2)
			d.drawRow(headerLines, 0, n, widths, left, pad, lh, size, true, aligns)
		}
	}
	drawHeader()
	for _, r := range rows {
		d.check()
		lines := layout(r, false)
		n := height(lines)
		for from := 0; from < n; {
			room := int((bottom - f.GetY() - 2*pad) / lh)
			if room < min(n-from, 2) {
				f.AddPage()
				d.check()
				drawHeader()
				continue
			}
			k := min(n-from, room)
			d.drawRow(lines, from, k, widths, left, pad, lh, size, false, aligns)
			from += k
		}
	}
	f.SetFont(d.body, "", bodyPt)
	f.SetTextColor(d.color[0], d.color[1], d.color[2])
	f.SetX(left)
}

// drawRow draws lines [from, from+n) of each cell of a row.
func (d *pdfDoc) drawRow(lines [][]string, from, n int, widths []float64, left, pad, lh, size float64, header bool, aligns []string) {
	f := d.f
	style := ""
	if header {
		style = "B"
	}
	f.SetFont(d.body, style, size)
	y := f.GetY()
	h := float64(n)*lh + 2*pad
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
		switch aligns[c] {
		case "center":
			align = "C"
		case "right":
			align = "R"
		}
		f.SetTextColor(d.color[0], d.color[1], d.color[2])
		for li := from; li < from+n && li < len(lines[c]); li++ {
			f.SetXY(x+pad, y+pad+float64(li-from)*lh)
			f.CellFormat(w-2*pad, lh, d.tr(lines[c][li]), "", 0, align, false, 0, "")
		}
		x += w
	}
	f.SetXY(left, y+h)
}

// wrap breaks text into lines no wider than w (mm) in the current font,
// cutting words longer than a line between characters. Every line holds
// at least one character, however narrow w is, and the work is linear in
// the text.
func (d *pdfDoc) wrap(text string, w float64) []string {
	f := d.f
	space := f.GetStringWidth(" ")
	var out []string
	for _, para := range strings.Split(text, "\n") {
		line, lineW := "", 0.0
		for _, word := range strings.Fields(para) {
			ww := f.GetStringWidth(d.tr(word))
			if line != "" && lineW+space+ww <= w {
				line, lineW = line+" "+word, lineW+space+ww
				continue
			}
			if line != "" {
				out = append(out, line)
			}
			if ww <= w {
				line, lineW = word, ww
				continue
			}
			var cur strings.Builder
			curW := 0.0
			for _, r := range word {
				rw := f.GetStringWidth(d.tr(string(r)))
				if cur.Len() > 0 && curW+rw > w {
					out = append(out, cur.String())
					cur.Reset()
					curW = 0
				}
				cur.WriteRune(r)
				curW += rw
			}
			line, lineW = cur.String(), curW
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
