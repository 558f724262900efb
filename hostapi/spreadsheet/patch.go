package spreadsheet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"unicode/utf8"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// The sheet patcher rewrites a worksheet's XML in one streaming pass,
// copying every byte it does not change. excelize loads a whole sheet into
// structs to change one cell (about 1 GB and 6 s for 100k × 10), so value
// and format edits go through here instead; excelize still owns the rest
// of the package (styles, workbook, zip) and receives the new sheet bytes.
//
// Changed cells are rewritten (new text is written as an inline string),
// missing cells and rows are inserted in order, <dimension> is widened and
// <cols> is rewritten for width changes.

// patchSpec is the set of changes to one sheet.
type patchSpec struct {
	// vals is a block of new values with its top-left at (vr, vc); row i
	// covers columns vc … vc+len(vals.rows[i])-1. Nil: no values.
	vals   *cellBlock
	vr, vc int
	// styleArea gets styleFn applied to every cell's style index.
	styleArea *area
	styleFn   func(old int) (int, error)
	// width sets the width of columns w1 … w2.
	width *widthEdit
	// autoFilter replaces the sheet's <autoFilter> with one over this area.
	autoFilter *area

	dateStyle func(style int, dk dateKind) (int, error)
	isDate    func(style int) bool
	recalc    bool // a formula was written
}

type widthEdit struct {
	c1, c2 int
	w      float64
}

var errPatchOrder = errors.New("rows or cells are stored out of order")

// maxPatchXML bounds the sheet XML a rewrite may produce (it is held in
// memory until the workbook is written).
const maxPatchXML = 512 << 20

var errPatchTooLarge = apierr.New(apierr.TooLarge, "the rewritten sheet would exceed %d MB of XML; write the data to a new sheet or workbook", maxPatchXML>>20)

// sizeHint estimates the XML the new values add, so that the output
// buffer is allocated about once.
func (p *patchSpec) sizeHint() int {
	if p.vals == nil {
		return 0
	}
	n := 24*len(p.vals.rows) + 24*p.vals.cells
	for _, row := range p.vals.rows {
		for _, v := range row {
			if s, ok := v.(string); ok {
				n += 24 + len(s)
			}
		}
	}
	return min(n, maxPatchXML)
}

func (p *patchSpec) valueRows() (int, int) {
	if p.vals == nil || len(p.vals.rows) == 0 {
		return 0, -1
	}
	return p.vr, p.vr + len(p.vals.rows) - 1
}

func (p *patchSpec) rowHasEdits(r int) bool {
	if lo, hi := p.valueRows(); r >= lo && r <= hi && len(p.vals.rows[r-lo]) > 0 {
		return true
	}
	return p.styleArea != nil && r >= p.styleArea.r1 && r <= p.styleArea.r2
}

// nextEditRow returns the first row after `after` that has edits.
func (p *patchSpec) nextEditRow(after int) (int, bool) {
	best := math.MaxInt
	if lo, hi := p.valueRows(); hi >= lo {
		for r := max(after+1, lo); r <= hi; r++ {
			if len(p.vals.rows[r-lo]) > 0 {
				best = r
				break
			}
		}
	}
	if a := p.styleArea; a != nil && after < a.r2 {
		best = min(best, max(after+1, a.r1))
	}
	return best, best != math.MaxInt
}

// rowCols lists the edited columns of row r in order.
func (p *patchSpec) rowCols(r int, buf []int) []int {
	buf = buf[:0]
	vlo, vhi := 0, -1
	if lo, hi := p.valueRows(); r >= lo && r <= hi {
		vlo, vhi = p.vc, p.vc+len(p.vals.rows[r-lo])-1
	}
	slo, shi := 0, -1
	if a := p.styleArea; a != nil && r >= a.r1 && r <= a.r2 {
		slo, shi = a.c1, a.c2
	}
	lo, hi := math.MaxInt, 0
	if vhi >= vlo {
		lo, hi = min(lo, vlo), max(hi, vhi)
	}
	if shi >= slo {
		lo, hi = min(lo, slo), max(hi, shi)
	}
	for c := lo; c <= hi; c++ {
		if (c >= vlo && c <= vhi) || (c >= slo && c <= shi) {
			buf = append(buf, c)
		}
	}
	return buf
}

func (p *patchSpec) value(r, c int) (cellWrite, bool) {
	if lo, hi := p.valueRows(); r >= lo && r <= hi {
		if j := c - p.vc; j >= 0 && j < len(p.vals.rows[r-lo]) {
			return p.vals.at(r-lo, j), true
		}
	}
	return cellWrite{}, false
}

func (p *patchSpec) styled(r, c int) bool {
	a := p.styleArea
	return a != nil && r >= a.r1 && r <= a.r2 && c >= a.c1 && c <= a.c2
}

type colSpan struct {
	min, max, style int
	raw             []byte
}

// patcher holds the state of one rewrite.
type patcher struct {
	ctx    context.Context
	p      *patchSpec
	s      *xmlScanner
	out    bytes.Buffer
	prefix string // namespace prefix of the sheet's elements ("" or "x:")
	cols   []colSpan
	colBuf []int

	// The used area of the result, for <dimension>: every cell element
	// counts, as Excel counts formatted cells.
	used             area
	hasUsed          bool
	dimStart, dimEnd int // the <dimension> element's place in out, if any
	hasDim           bool
	curRow, lastCol  int // position of unedited rows' cells
	filterDone       bool
	lastDate         dateMemo

	// Deferred rows (patchBlankSheet): where they go in out, and, while
	// writeTo generates them, where they are flushed to.
	deferRows bool
	rowsAt    int
	sink      io.Writer
	flushed   int
}

// afterFilter are the worksheet children that follow <autoFilter> in the
// schema's order, so that a new filter goes before the first of them.
var afterFilter = map[string]bool{"sortState": true, "dataConsolidate": true, "customSheetViews": true, "mergeCells": true,
	"phoneticPr": true, "conditionalFormatting": true, "dataValidations": true, "hyperlinks": true, "printOptions": true,
	"pageMargins": true, "pageSetup": true, "headerFooter": true, "rowBreaks": true, "colBreaks": true,
	"customProperties": true, "cellWatches": true, "ignoredErrors": true, "smartTags": true, "drawing": true,
	"legacyDrawing": true, "legacyDrawingHF": true, "drawingHF": true, "picture": true, "oleObjects": true,
	"controls": true, "webPublishItems": true, "tableParts": true, "extLst": true}

func (pt *patcher) writeFilter() {
	if pt.p.autoFilter == nil || pt.filterDone {
		return
	}
	pt.filterDone = true
	a := *pt.p.autoFilter
	pt.out.WriteString("<" + pt.prefix + `autoFilter ref="` + cellName(a.c1, a.r1) + ":" + cellName(a.c2, a.r2) + `"/>`)
}

func (pt *patcher) note(row, col int) {
	if !pt.hasUsed {
		pt.used, pt.hasUsed = area{c1: col, c2: col, r1: row, r2: row}, true
		return
	}
	u := &pt.used
	u.c1, u.c2, u.r1, u.r2 = min(u.c1, col), max(u.c2, col), min(u.r1, row), max(u.r2, row)
}

// finish writes the final <dimension> in place of the original one; shift
// is how far that moved the bytes after it.
func (pt *patcher) finish() (out []byte, shift int) {
	out = pt.out.Bytes()
	if !pt.hasDim || !pt.hasUsed {
		return out, 0
	}
	ref := pt.used.String()
	if pt.used.c1 == pt.used.c2 && pt.used.r1 == pt.used.r2 {
		ref = cellName(pt.used.c1, pt.used.r1)
	}
	dim := setAttr(out[pt.dimStart:pt.dimEnd], "ref", ref)
	res := make([]byte, 0, len(out)-(pt.dimEnd-pt.dimStart)+len(dim))
	res = append(res, out[:pt.dimStart]...)
	res = append(res, dim...)
	return append(res, out[pt.dimEnd:]...), len(dim) - (pt.dimEnd - pt.dimStart)
}

// patchSheet applies p to the sheet XML read from r.
func patchSheet(ctx context.Context, r io.Reader, size int64, p *patchSpec) ([]byte, error) {
	pt, err := runPatch(ctx, r, size, p, false)
	if err != nil {
		return nil, err
	}
	out, _ := pt.finish()
	return out, nil
}

// deferredRows is a blank sheet patched with its new rows left out: head
// and tail are the XML around them, and writeTo generates them in between,
// straight into the zip entry being saved.
type deferredRows struct {
	head, tail []byte
	pt         *patcher
}

// patchBlankSheet applies p, a block of values, to the XML of a sheet
// without rows, deferring the rows themselves.
func patchBlankSheet(ctx context.Context, r io.Reader, size int64, p *patchSpec) (*deferredRows, error) {
	pt, err := runPatch(ctx, r, size, p, true)
	if err != nil {
		return nil, err
	}
	if u, ok := p.vals.used(p.vr, p.vc); ok {
		pt.note(u.r1, u.c1)
		pt.note(u.r2, u.c2)
	}
	out, shift := pt.finish()
	at := pt.rowsAt
	if pt.hasDim && at >= pt.dimEnd {
		at += shift
	}
	return &deferredRows{head: out[:at:at], tail: out[at:], pt: pt}, nil
}

// stub is the sheet without the deferred rows, for excelize to hold.
func (d *deferredRows) stub() []byte {
	return append(append([]byte{}, d.head...), d.tail...)
}

// writeTo writes the whole sheet to w, generating the rows in chunks that
// w (a zip entry: deflate, then the store's hashing file writer) takes on
// another goroutine, so that both halves of the work overlap.
func (d *deferredRows) writeTo(w io.Writer) (err error) {
	aw := newAsyncWriter(w, flushAt+64<<10)
	defer func() {
		if cerr := aw.Close(); err == nil {
			err = cerr
		}
	}()
	pt := d.pt
	pt.out = bytes.Buffer{}
	pt.out.Grow(flushAt + 64<<10)
	pt.sink = aw
	if _, err := aw.Write(d.head); err != nil {
		return err
	}
	last := 0
	if err := pt.newRowsUpTo(&last, maxRows+1); err != nil {
		return err
	}
	if err := pt.flush(); err != nil {
		return err
	}
	_, err = aw.Write(d.tail)
	return err
}

// asyncWriter writes to w on its own goroutine. Write copies p into one of
// a few buffers and returns at once (or with the first error w gave);
// Close waits for everything written to reach w.
type asyncWriter struct {
	w      io.Writer
	full   chan []byte
	free   chan []byte
	done   chan struct{}
	failed atomic.Bool
	err    error // w's first error; read after failed or done
}

func newAsyncWriter(w io.Writer, size int) *asyncWriter {
	const buffers = 3
	a := &asyncWriter{w: w, full: make(chan []byte, buffers), free: make(chan []byte, buffers), done: make(chan struct{})}
	for i := 0; i < buffers; i++ {
		a.free <- make([]byte, 0, size)
	}
	go a.run()
	return a
}

func (a *asyncWriter) run() {
	defer close(a.done)
	for b := range a.full {
		if a.err == nil {
			if _, a.err = a.w.Write(b); a.err != nil {
				a.failed.Store(true)
			}
		}
		a.free <- b[:0]
	}
}

func (a *asyncWriter) Write(p []byte) (int, error) {
	if a.failed.Load() {
		return 0, a.err
	}
	b := <-a.free
	a.full <- append(b, p...)
	return len(p), nil
}

func (a *asyncWriter) Close() error {
	close(a.full)
	<-a.done
	return a.err
}

// flushAt is how much generated XML a patcher with a sink buffers.
const flushAt = 256 << 10

// flush hands the buffered XML to the sink.
func (pt *patcher) flush() error {
	n, err := pt.sink.Write(pt.out.Bytes())
	pt.flushed += n
	pt.out.Reset()
	return err
}

// runPatch runs the rewrite; with deferRows the sheet must have no rows,
// and where new rows would go is only marked (rowsAt).
func runPatch(ctx context.Context, r io.Reader, size int64, p *patchSpec, deferRows bool) (*patcher, error) {
	pt := &patcher{ctx: ctx, p: p, s: newXMLScanner(r, 64<<20), deferRows: deferRows}
	pt.s.keepAll = true
	if deferRows {
		pt.out.Grow(int(min(size, 64<<20)) + 4096)
	} else {
		pt.out.Grow(int(min(size, 64<<20)) + 4096 + p.sizeHint())
	}
	state := 0 // 0: before sheetData, 1: inside, 2: after
	// Inside an unedited row (and cell) that is copied token by token.
	rowOpen, cellOpen := false, false
	sawCols := false
	lastRow := 0
	depth := 0
	for n := 0; ; n++ {
		if n&65535 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			if pt.out.Len() > maxPatchXML {
				return nil, errPatchTooLarge
			}
		}
		k, err := pt.s.next()
		if err != nil {
			return nil, err
		}
		if k == tokEOF {
			if state != 2 {
				return nil, errors.New("the worksheet has no complete <sheetData>")
			}
			return pt, nil
		}
		s := pt.s
		switch state {
		case 0:
			if k == tokStart {
				switch string(s.name) {
				case "dimension":
					pt.dimStart, pt.hasDim = pt.out.Len(), true
					pt.out.Write(s.raw)
					pt.dimEnd = pt.out.Len()
					continue
				case "cols":
					sawCols = true
					if err := pt.readCols(); err != nil {
						return nil, err
					}
					continue
				case "sheetData":
					pt.prefix = prefixOf(s.qname)
					if p.width != nil && !sawCols {
						pt.writeCols()
					}
					if s.empty {
						pt.out.WriteString("<" + pt.prefix + "sheetData>")
						if err := pt.newRowsUpTo(&lastRow, maxRows+1); err != nil {
							return nil, err
						}
						pt.out.WriteString("</" + pt.prefix + "sheetData>")
						state = 2
						continue
					}
					pt.out.Write(s.raw)
					state = 1
					continue
				}
			}
			pt.out.Write(s.raw)
		case 1:
			switch {
			case k == tokStart && string(s.name) == "row":
				if deferRows {
					return nil, errors.New("the sheet is not blank: it has rows")
				}
				if rowOpen {
					return nil, errors.New("a row starts inside another row")
				}
				rnum := lastRow + 1
				if v, ok := attrValue(s.attrs, "r"); ok {
					n, ok := atoiBytes(v, maxRows)
					if !ok || n < 1 {
						return nil, fmt.Errorf("row number %q is outside 1..%d", truncBytes(v), maxRows)
					}
					rnum = n
				}
				if rnum <= lastRow {
					return nil, errPatchOrder
				}
				if err := pt.newRowsUpTo(&lastRow, rnum); err != nil {
					return nil, err
				}
				lastRow = rnum
				if !p.rowHasEdits(rnum) {
					pt.curRow, pt.lastCol = rnum, 0
					rowOpen, cellOpen = !s.empty, false
					pt.out.Write(s.raw)
					continue
				}
				if err := pt.editRow(rnum); err != nil {
					return nil, err
				}
			case k == tokEnd && string(s.name) == "row":
				if cellOpen {
					return nil, errUnclosed(s.name, "c")
				}
				rowOpen = false
				pt.out.Write(s.raw)
			case k == tokEnd && string(s.name) == "c":
				cellOpen = false
				pt.out.Write(s.raw)
			case k == tokEnd && string(s.name) == "sheetData":
				if rowOpen {
					// New rows written here would land inside it.
					return nil, errUnclosed(s.name, "row")
				}
				if err := pt.newRowsUpTo(&lastRow, maxRows+1); err != nil {
					return nil, err
				}
				pt.out.Write(s.raw)
				state = 2
			case k == tokStart && string(s.name) == "c" && pt.curRow > 0:
				cellOpen = rowOpen && !s.empty
				col := pt.lastCol + 1
				if v, ok := attrValue(s.attrs, "r"); ok {
					col = refColumn(v)
				}
				if col >= 1 && col <= maxCols {
					pt.lastCol = col
					pt.note(pt.curRow, col)
				}
				pt.out.Write(s.raw)
			default:
				pt.out.Write(s.raw)
			}
		default:
			// After <sheetData>: depth is relative to <worksheet>'s children.
			if p.autoFilter != nil && !pt.filterDone {
				switch {
				case k == tokStart && depth == 0 && string(s.name) == "autoFilter":
					pt.writeFilter()
					if !s.empty {
						if err := skipElement(s); err != nil {
							return nil, err
						}
					}
					continue
				case k == tokStart && depth == 0 && afterFilter[string(s.name)]:
					pt.writeFilter()
				case k == tokEnd && depth == 0:
					pt.writeFilter() // </worksheet>
				}
			}
			switch {
			case k == tokStart && !s.empty:
				depth++
			case k == tokEnd:
				depth--
			}
			pt.out.Write(s.raw)
		}
	}
}

// skipElement consumes tokens up to the end of the element whose start
// tag the scanner is on.
func skipElement(s *xmlScanner) error {
	for depth := 1; depth > 0; {
		k, err := s.next()
		if err != nil {
			return err
		}
		switch {
		case k == tokEOF:
			return errXMLTruncated
		case k == tokStart && !s.empty:
			depth++
		case k == tokEnd:
			depth--
		}
	}
	return nil
}

func prefixOf(qname []byte) string {
	if i := bytes.LastIndexByte(qname, ':'); i >= 0 {
		return string(qname[:i+1])
	}
	return ""
}

// readCols reads the <cols> element (the scanner is on its start tag),
// remembers column styles and writes it back, rewritten for a width edit.
func (pt *patcher) readCols() error {
	s := pt.s
	startRaw := bytes.Clone(s.raw)
	empty := s.empty
	var inner []byte
	if !empty {
		for {
			k, ok, err := s.nextIn("cols")
			if err != nil {
				return err
			}
			if !ok {
				break
			}
			if k == tokStart && string(s.name) == "col" {
				lo, _ := attrValue(s.attrs, "min")
				hi, _ := attrValue(s.attrs, "max")
				// <col> has no children: keep it self-closing so that
				// it can be rewritten alone.
				raw := bytes.Clone(s.raw)
				if !s.empty {
					raw = append(bytes.TrimRight(raw[:len(raw)-1], " \t\r\n"), '/', '>')
				}
				cs := colSpan{raw: raw}
				cs.min, _ = atoiBytes(lo, maxCols)
				cs.max, _ = atoiBytes(hi, maxCols)
				if v, ok := attrValue(s.attrs, "style"); ok {
					cs.style, _ = atoiBytes(v, 1<<30)
				}
				if cs.min >= 1 && cs.max >= cs.min {
					pt.cols = append(pt.cols, cs)
				}
			}
			inner = append(inner, s.raw...)
		}
	}
	if pt.p.width == nil {
		pt.out.Write(startRaw)
		if !empty {
			pt.out.Write(inner)
			pt.out.Write(s.raw)
		}
		return nil
	}
	pt.prefix = prefixOf(pt.s.qname)
	pt.writeCols()
	return nil
}

// writeCols writes <cols> with the width edit applied to the known spans.
func (pt *patcher) writeCols() {
	w := pt.p.width
	width := strconv.FormatFloat(w.w, 'f', -1, 64)
	var spans []colSpan
	covered := make([]bool, w.c2-w.c1+1)
	for _, c := range pt.cols {
		if c.max < w.c1 || c.min > w.c2 {
			spans = append(spans, c)
			continue
		}
		if c.min < w.c1 {
			spans = append(spans, withRange(c, c.min, w.c1-1))
		}
		lo, hi := max(c.min, w.c1), min(c.max, w.c2)
		in := withRange(c, lo, hi)
		in.raw = setAttr(setAttr(in.raw, "width", width), "customWidth", "1")
		spans = append(spans, in)
		for i := lo; i <= hi; i++ {
			covered[i-w.c1] = true
		}
		if c.max > w.c2 {
			spans = append(spans, withRange(c, w.c2+1, c.max))
		}
	}
	for i := 0; i < len(covered); {
		if covered[i] {
			i++
			continue
		}
		j := i
		for j+1 < len(covered) && !covered[j+1] {
			j++
		}
		raw := fmt.Sprintf(`<%scol min="%d" max="%d" width="%s" customWidth="1"/>`, pt.prefix, w.c1+i, w.c1+j, width)
		spans = append(spans, colSpan{min: w.c1 + i, max: w.c1 + j, raw: []byte(raw)})
		i = j + 1
	}
	sort.SliceStable(spans, func(i, j int) bool { return spans[i].min < spans[j].min })
	pt.out.WriteString("<" + pt.prefix + "cols>")
	for _, c := range spans {
		pt.out.Write(c.raw)
	}
	pt.out.WriteString("</" + pt.prefix + "cols>")
	pt.cols = spans
}

func withRange(c colSpan, lo, hi int) colSpan {
	c.min, c.max = lo, hi
	c.raw = setAttr(setAttr(c.raw, "min", strconv.Itoa(lo)), "max", strconv.Itoa(hi))
	return c
}

func (pt *patcher) colStyle(col int) int {
	for _, c := range pt.cols {
		if col >= c.min && col <= c.max {
			return c.style
		}
	}
	return 0
}

// newRowsUpTo writes the edited rows after *last and before limit that
// the file does not have. A big write into a blank sheet spends its time
// here, so rows are appended straight into the output buffer. A patcher
// deferring rows only marks where they go.
func (pt *patcher) newRowsUpTo(last *int, limit int) error {
	if pt.deferRows && pt.sink == nil {
		pt.rowsAt = pt.out.Len()
		return nil
	}
	after := *last
	for n := 0; ; n++ {
		r, ok := pt.p.nextEditRow(after)
		if !ok || r >= limit {
			return nil
		}
		if n&1023 == 1023 {
			if err := pt.ctx.Err(); err != nil {
				return err
			}
			if pt.flushed+pt.out.Len() > maxPatchXML {
				return errPatchTooLarge
			}
		}
		if pt.sink != nil && pt.out.Len() >= flushAt {
			if err := pt.flush(); err != nil {
				return err
			}
		}
		b := pt.out.AvailableBuffer()
		b = append(b, '<')
		b = append(b, pt.prefix...)
		b = append(b, `row r="`...)
		b = strconv.AppendInt(b, int64(r), 10)
		b = append(b, `">`...)
		open := len(b)
		pt.colBuf = pt.p.rowCols(r, pt.colBuf)
		var err error
		for _, c := range pt.colBuf {
			if b, err = pt.appendCell(b, r, c, nil, nil, pt.colStyle(c)); err != nil {
				return err
			}
		}
		if len(b) > open {
			b = append(b, "</"...)
			b = append(b, pt.prefix...)
			b = append(b, "row>"...)
			pt.out.Write(b)
		}
		after = r
	}
}

// editRow rewrites the row whose start tag the scanner is on.
func (pt *patcher) editRow(rnum int) error {
	s := pt.s
	rowQ := string(s.qname)
	rowStyle := -1
	if v, ok := attrValue(s.attrs, "customFormat"); ok && (string(v) == "1" || string(v) == "true") {
		if sv, ok := attrValue(s.attrs, "s"); ok {
			rowStyle, _ = atoiBytes(sv, 1<<30)
		}
	}
	inherit := func(col int) int {
		if rowStyle >= 0 {
			return rowStyle
		}
		return pt.colStyle(col)
	}
	// spans is a hint about the row's columns; it may no longer hold.
	rowEmpty := s.empty
	start := removeAttr(s.raw, "spans")
	if rowEmpty {
		start = openTag(start)
	}
	pt.out.Write(start)
	pt.colBuf = pt.p.rowCols(rnum, pt.colBuf)
	cols := pt.colBuf
	next := 0 // index of the next edited column not yet written
	lastCol := 0
	flushBefore := func(col int) error {
		for next < len(cols) && cols[next] < col {
			if err := pt.writeCell(rnum, cols[next], nil, nil, inherit(cols[next])); err != nil {
				return err
			}
			next++
		}
		return nil
	}
	if !rowEmpty {
		for {
			k, ok, err := s.nextIn("row")
			if err != nil {
				return err
			}
			if !ok {
				break
			}
			if k == tokEnd && string(s.name) == "sheetData" {
				return errUnclosed(s.name, "row")
			}
			if k != tokStart || string(s.name) != "c" {
				pt.out.Write(s.raw)
				continue
			}
			col := lastCol + 1
			hasRef := false
			if v, ok := attrValue(s.attrs, "r"); ok {
				col, hasRef = refColumn(v), true
			}
			if col < 1 || col > maxCols || col <= lastCol {
				return errPatchOrder
			}
			lastCol = col
			startRaw := bytes.Clone(s.raw)
			if !hasRef {
				startRaw = setAttr(startRaw, "r", cellName(col, rnum))
			}
			var inner []byte
			if !s.empty {
				for {
					k, ok, err := s.nextIn("c")
					if err != nil {
						return err
					}
					if !ok {
						break
					}
					if k == tokEnd && (string(s.name) == "row" || string(s.name) == "sheetData") {
						return errUnclosed(s.name, "c")
					}
					inner = append(inner, s.raw...)
				}
			}
			if err := flushBefore(col); err != nil {
				return err
			}
			if next < len(cols) && cols[next] == col {
				if err := pt.writeCell(rnum, col, startRaw, inner, 0); err != nil {
					return err
				}
				next++
				continue
			}
			pt.note(rnum, col)
			if inner == nil && bytes.HasSuffix(startRaw, []byte("/>")) {
				pt.out.Write(startRaw)
				continue
			}
			pt.out.Write(openTag(startRaw))
			pt.out.Write(inner)
			pt.out.WriteString("</" + prefixOf(tagName(startRaw)) + "c>")
		}
	}
	if err := flushBefore(maxCols + 1); err != nil {
		return err
	}
	pt.out.WriteString("</" + rowQ + ">")
	return nil
}

// writeCell writes the new form of cell (row, col) to the output.
func (pt *patcher) writeCell(row, col int, start, inner []byte, inherited int) error {
	b, err := pt.appendCell(pt.out.AvailableBuffer(), row, col, start, inner, inherited)
	if err != nil {
		return err
	}
	pt.out.Write(b)
	return nil
}

// appendCell appends the new form of cell (row, col) to dst. start/inner
// are the existing element (nil for a new cell, whose style is inherited).
func (pt *patcher) appendCell(dst []byte, row, col int, start, inner []byte, inherited int) ([]byte, error) {
	p := pt.p
	style := inherited
	var attrs [][2][]byte
	var oldType []byte
	if start != nil {
		style = 0
		forEachAttr(tagAttrs(start), func(name, val []byte) {
			switch string(name) {
			case "s":
				style, _ = atoiBytes(val, 1<<30)
			case "t":
				oldType = bytes.Clone(val)
			case "r":
			default:
				attrs = append(attrs, [2][]byte{bytes.Clone(name), bytes.Clone(val)})
			}
		})
	}
	val, hasVal := p.value(row, col)
	styled := p.styled(row, col)
	var err error
	if hasVal && val.k == kDate {
		if style, err = pt.dateStyle(style, val.dk); err != nil {
			return dst, err
		}
	}
	if styled {
		if style, err = p.styleFn(style); err != nil {
			return dst, err
		}
	}
	if start == nil && hasVal && val.k == kEmpty && style == inherited && !styled {
		return dst, nil // clearing a cell that does not exist
	}
	pt.note(row, col)
	pre := pt.prefix
	dst = append(dst, '<')
	dst = append(dst, pre...)
	dst = append(dst, `c r="`...)
	dst = appendCellName(dst, col, row)
	dst = append(dst, '"')
	if style != 0 {
		dst = append(dst, ` s="`...)
		dst = strconv.AppendInt(dst, int64(style), 10)
		dst = append(dst, '"')
	}
	switch {
	case !hasVal:
		if oldType != nil {
			dst = append(dst, ` t="`...)
			dst = append(dst, oldType...)
			dst = append(dst, '"')
		}
	case val.k == kBool:
		dst = append(dst, ` t="b"`...)
	case val.k == kString:
		dst = append(dst, ` t="inlineStr"`...)
	}
	for _, a := range attrs {
		// Value metadata belongs to the old value.
		if hasVal && (string(a[0]) == "cm" || string(a[0]) == "vm") {
			continue
		}
		dst = append(dst, ' ')
		dst = append(dst, a[0]...)
		dst = append(dst, `="`...)
		dst = append(dst, a[1]...)
		dst = append(dst, '"')
	}
	open := func(tag string) {
		dst = append(dst, '<')
		dst = append(dst, pre...)
		dst = append(dst, tag...)
	}
	closeTag := func(tag string) {
		dst = append(dst, "</"...)
		dst = append(dst, pre...)
		dst = append(dst, tag...)
		dst = append(dst, '>')
	}
	switch {
	case !hasVal && len(inner) == 0, hasVal && val.k == kEmpty:
		return append(dst, "/>"...), nil
	case !hasVal:
		dst = append(dst, '>')
		dst = append(dst, inner...)
	case val.k == kNumber || val.k == kDate:
		dst = append(dst, '>')
		open("v>")
		dst = appendNumber(dst, val.n)
		closeTag("v")
	case val.k == kBool:
		dst = append(dst, '>')
		open("v>")
		dst = append(dst, '0'+byte(val.n))
		closeTag("v")
	case val.k == kString:
		dst = append(dst, '>')
		open("is>")
		open("t")
		if needsPreserve(val.s) {
			dst = append(dst, ` xml:space="preserve"`...)
		}
		dst = append(dst, '>')
		dst = appendCellText(dst, val.s)
		closeTag("t")
		closeTag("is")
	case val.k == kPending:
		p.recalc = true
		dst = append(dst, '>')
		open("f>")
		dst = appendCellText(dst, val.s)
		closeTag("f")
	}
	closeTag("c")
	return dst, nil
}

// dateStyle is the style a date written over style gets: style itself
// when it formats dates already. Runs of dates share the answer.
func (pt *patcher) dateStyle(style int, dk dateKind) (int, error) {
	if m := pt.lastDate; m.ok && m.from == style && m.dk == dk {
		return m.to, nil
	}
	to := style
	if !pt.p.isDate(style) {
		var err error
		if to, err = pt.p.dateStyle(style, dk); err != nil {
			return 0, err
		}
	}
	pt.lastDate = dateMemo{ok: true, from: style, dk: dk, to: to}
	return to, nil
}

type dateMemo struct {
	ok       bool
	from, to int
	dk       dateKind
}

// appendCellName appends an A1 reference without allocating.
func appendCellName(dst []byte, col, row int) []byte {
	var b [4]byte
	i := len(b)
	for n := col; n > 0; n /= 26 {
		n--
		i--
		b[i] = byte('A' + n%26)
	}
	dst = append(dst, b[i:]...)
	return strconv.AppendInt(dst, int64(row), 10)
}

// appendNumber writes a number as Excel does: integers and plain decimals,
// exponent form only for very large or very small magnitudes.
func appendNumber(dst []byte, f float64) []byte {
	a := math.Abs(f)
	switch {
	case a < 1e15 && f == math.Trunc(f):
		return strconv.AppendInt(dst, int64(f), 10)
	case a != 0 && (a >= 1e15 || a < 1e-5):
		return strconv.AppendFloat(dst, f, 'E', -1, 64)
	}
	return strconv.AppendFloat(dst, f, 'f', -1, 64)
}

// needsPreserve reports whether text starts or ends with whitespace, which
// XML readers keep only under xml:space="preserve" (excelize's rule).
func needsPreserve(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range [2]byte{s[0], s[len(s)-1]} {
		if c == ' ' || c == '\t' || c == '\n' || c == '\r' {
			return true
		}
	}
	return false
}

// textSpecial marks the ASCII bytes appendCellText must look at: XML's
// specials, control characters XML 1.0 cannot carry, and the underscore
// of a literal "_xHHHH_".
var textSpecial = func() (t [utf8.RuneSelf]bool) {
	for c := 0; c < 0x20; c++ {
		t[c] = c != '\t' && c != '\n'
	}
	t['&'], t['<'], t['>'], t['_'] = true, true, true, true
	return t
}()

// appendCellText appends text as element content: XML specials escaped,
// control characters as Excel's _xHHHH_ escapes, a literal "_xHHHH_" with
// its underscore escaped so that it reads back unchanged, and bytes that
// are not UTF-8 (or U+FFFE/U+FFFF, which XML forbids) as U+FFFD.
func appendCellText(dst []byte, s string) []byte {
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if !textSpecial[c] || (c == '_' && !literalEscape(s, i)) {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '&':
				dst = append(dst, "&amp;"...)
			case '<':
				dst = append(dst, "&lt;"...)
			case '>':
				dst = append(dst, "&gt;"...)
			case '_':
				dst = append(dst, "_x005F_"...)
			default:
				const hex = "0123456789ABCDEF"
				dst = append(dst, '_', 'x', '0', '0', hex[c>>4], hex[c&15], '_')
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size == 1) || r == 0xFFFE || r == 0xFFFF {
			dst = append(dst, s[start:i]...)
			dst = append(dst, "\uFFFD"...)
			i += size
			start = i
			continue
		}
		i += size
	}
	return append(dst, s[start:]...)
}

// literalEscape reports whether s[i:] starts with text of the form _xHHHH_.
func literalEscape(s string, i int) bool {
	return i+7 <= len(s) && s[i+1] == 'x' && s[i+6] == '_' && isHex4(s[i+2:i+6])
}

// bstrEscape writes the characters XML 1.0 cannot carry as Excel's _xHHHH_
// escapes, and escapes the underscore of a literal "_xHHHH_" so that it
// reads back unchanged.
func bstrEscape(s string) string {
	need := false
	for i := 0; i < len(s) && !need; i++ {
		need = (s[i] < 0x20 && s[i] != '\t' && s[i] != '\n') || (s[i] == '_' && literalEscape(s, i))
	}
	if !need {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '_' && literalEscape(s, i):
			b.WriteString("_x005F_")
		case c < 0x20 && c != '\t' && c != '\n':
			fmt.Fprintf(&b, "_x%04X_", c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

func isHex4(s string) bool {
	for i := 0; i < 4; i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

// tagName returns the qualified name of a raw start tag.
func tagName(raw []byte) []byte {
	b := raw[1:]
	i := 0
	for i < len(b) && !isSpace(b[i]) && b[i] != '/' && b[i] != '>' {
		i++
	}
	return b[:i]
}

// tagAttrs returns the attribute bytes of a raw start tag.
func tagAttrs(raw []byte) []byte {
	b := bytes.TrimSuffix(bytes.TrimSuffix(raw, []byte(">")), []byte("/"))
	return b[1+len(tagName(raw)):]
}

// openTag turns a self-closing start tag into an opening one.
func openTag(raw []byte) []byte {
	if bytes.HasSuffix(raw, []byte("/>")) {
		out := bytes.Clone(raw[:len(raw)-2])
		return append(bytes.TrimRight(out, " \t\r\n"), '>')
	}
	return raw
}

// forEachAttr calls fn with every attribute's name and raw value.
func forEachAttr(attrs []byte, fn func(name, val []byte)) {
	for {
		for len(attrs) > 0 && isSpace(attrs[0]) {
			attrs = attrs[1:]
		}
		eq := bytes.IndexByte(attrs, '=')
		if eq < 0 {
			return
		}
		name := bytes.TrimSpace(attrs[:eq])
		rest := bytes.TrimLeft(attrs[eq+1:], " \t\r\n")
		if len(rest) == 0 || (rest[0] != '"' && rest[0] != '\'') {
			return
		}
		end := bytes.IndexByte(rest[1:], rest[0])
		if end < 0 {
			return
		}
		fn(name, rest[1:1+end])
		attrs = rest[2+end:]
	}
}

// attrSpan finds attribute name in a raw start tag and returns the byte
// range of its whole " name=\"value\"" text.
func attrSpan(raw []byte, name string) (int, int, bool) {
	off := 1 + len(tagName(raw))
	attrs := raw[off:]
	pos := 0
	for {
		st := pos
		for pos < len(attrs) && isSpace(attrs[pos]) {
			pos++
		}
		eq := bytes.IndexByte(attrs[pos:], '=')
		if eq < 0 {
			return 0, 0, false
		}
		key := bytes.TrimSpace(attrs[pos : pos+eq])
		q := pos + eq + 1
		for q < len(attrs) && isSpace(attrs[q]) {
			q++
		}
		if q >= len(attrs) || (attrs[q] != '"' && attrs[q] != '\'') {
			return 0, 0, false
		}
		end := bytes.IndexByte(attrs[q+1:], attrs[q])
		if end < 0 {
			return 0, 0, false
		}
		pos = q + 1 + end + 1
		if string(key) == name {
			return off + st, off + pos, true
		}
	}
}

// setAttr sets an attribute in a raw start tag, adding it when missing.
func setAttr(raw []byte, name, value string) []byte {
	attr := " " + name + `="` + value + `"`
	if i, j, ok := attrSpan(raw, name); ok {
		out := append([]byte{}, raw[:i]...)
		out = append(out, attr...)
		return append(out, raw[j:]...)
	}
	end := len(raw) - 1
	if bytes.HasSuffix(raw, []byte("/>")) {
		end = len(raw) - 2
	}
	out := append([]byte{}, raw[:end]...)
	out = append(out, attr...)
	return append(out, raw[end:]...)
}

// removeAttr drops an attribute from a raw start tag.
func removeAttr(raw []byte, name string) []byte {
	if i, j, ok := attrSpan(raw, name); ok {
		out := append([]byte{}, raw[:i]...)
		return append(out, raw[j:]...)
	}
	return raw
}
