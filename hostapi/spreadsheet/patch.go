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
	// covers columns vc … vc+len(vals[i])-1.
	vals   [][]cellWrite
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

func (p *patchSpec) valueRows() (int, int) {
	if len(p.vals) == 0 {
		return 0, -1
	}
	return p.vr, p.vr + len(p.vals) - 1
}

func (p *patchSpec) rowHasEdits(r int) bool {
	if lo, hi := p.valueRows(); r >= lo && r <= hi && len(p.vals[r-lo]) > 0 {
		return true
	}
	return p.styleArea != nil && r >= p.styleArea.r1 && r <= p.styleArea.r2
}

// nextEditRow returns the first row after `after` that has edits.
func (p *patchSpec) nextEditRow(after int) (int, bool) {
	best := math.MaxInt
	if lo, hi := p.valueRows(); hi >= lo {
		for r := max(after+1, lo); r <= hi; r++ {
			if len(p.vals[r-lo]) > 0 {
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
		vlo, vhi = p.vc, p.vc+len(p.vals[r-lo])-1
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
		row := p.vals[r-lo]
		if j := c - p.vc; j >= 0 && j < len(row) {
			return row[j], true
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

// finish writes the final <dimension> in place of the original one.
func (pt *patcher) finish() []byte {
	out := pt.out.Bytes()
	if !pt.hasDim || !pt.hasUsed {
		return out
	}
	ref := pt.used.String()
	if pt.used.c1 == pt.used.c2 && pt.used.r1 == pt.used.r2 {
		ref = cellName(pt.used.c1, pt.used.r1)
	}
	dim := setAttr(out[pt.dimStart:pt.dimEnd], "ref", ref)
	res := make([]byte, 0, len(out)-(pt.dimEnd-pt.dimStart)+len(dim))
	res = append(res, out[:pt.dimStart]...)
	res = append(res, dim...)
	return append(res, out[pt.dimEnd:]...)
}

// patchSheet applies p to the sheet XML read from r.
func patchSheet(ctx context.Context, r io.Reader, size int64, p *patchSpec) ([]byte, error) {
	pt := &patcher{p: p, s: newXMLScanner(r, 64<<20)}
	pt.s.keepAll = true
	pt.out.Grow(int(min(size, 64<<20)) + 4096)
	state := 0 // 0: before sheetData, 1: inside, 2: after
	sawCols := false
	lastRow := 0
	depth := 0
	for n := 0; ; n++ {
		if n&65535 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			if pt.out.Len() > maxPatchXML {
				return nil, apierr.New(apierr.TooLarge, "the rewritten sheet would exceed %d MB of XML; write the data to a new sheet or workbook", maxPatchXML>>20)
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
			return pt.finish(), nil
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
					pt.out.Write(s.raw)
					continue
				}
				if err := pt.editRow(rnum); err != nil {
					return nil, err
				}
			case k == tokEnd && string(s.name) == "sheetData":
				if err := pt.newRowsUpTo(&lastRow, maxRows+1); err != nil {
					return nil, err
				}
				pt.out.Write(s.raw)
				state = 2
			case k == tokStart && string(s.name) == "c" && pt.curRow > 0:
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
// the file does not have.
func (pt *patcher) newRowsUpTo(last *int, limit int) error {
	after := *last
	for {
		r, ok := pt.p.nextEditRow(after)
		if !ok || r >= limit {
			return nil
		}
		var cells bytes.Buffer
		pt.colBuf = pt.p.rowCols(r, pt.colBuf)
		for _, c := range pt.colBuf {
			if err := pt.cellXML(&cells, r, c, nil, nil, pt.colStyle(c)); err != nil {
				return err
			}
		}
		if cells.Len() > 0 {
			fmt.Fprintf(&pt.out, `<%srow r="%d">`, pt.prefix, r)
			pt.out.Write(cells.Bytes())
			pt.out.WriteString("</" + pt.prefix + "row>")
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
			if err := pt.cellXML(&pt.out, rnum, cols[next], nil, nil, inherit(cols[next])); err != nil {
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
					_, ok, err := s.nextIn("c")
					if err != nil {
						return err
					}
					if !ok {
						break
					}
					inner = append(inner, s.raw...)
				}
			}
			if err := flushBefore(col); err != nil {
				return err
			}
			if next < len(cols) && cols[next] == col {
				if err := pt.cellXML(&pt.out, rnum, col, startRaw, inner, 0); err != nil {
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

// cellXML writes the new form of cell (row, col). start/inner are the
// existing element (nil for a new cell, whose style is inherited).
func (pt *patcher) cellXML(w *bytes.Buffer, row, col int, start, inner []byte, inherited int) error {
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
	var err error
	if hasVal && val.k == kDate && !p.isDate(style) {
		if style, err = p.dateStyle(style, val.dk); err != nil {
			return err
		}
	}
	if p.styled(row, col) {
		if style, err = p.styleFn(style); err != nil {
			return err
		}
	}
	if start == nil && hasVal && val.k == kEmpty && style == inherited && !p.styled(row, col) {
		return nil // clearing a cell that does not exist
	}
	pt.note(row, col)
	pre := pt.prefix
	w.WriteString("<" + pre + `c r="` + cellName(col, row) + `"`)
	if style != 0 {
		w.WriteString(` s="` + strconv.Itoa(style) + `"`)
	}
	var content []byte
	switch {
	case !hasVal:
		if oldType != nil {
			w.WriteString(` t="` + string(oldType) + `"`)
		}
		content = inner
	case val.k == kNumber || val.k == kDate:
		content = []byte("<" + pre + "v>" + formatNumber(val.n) + "</" + pre + "v>")
	case val.k == kBool:
		w.WriteString(` t="b"`)
		content = []byte("<" + pre + "v>" + strconv.Itoa(int(val.n)) + "</" + pre + "v>")
	case val.k == kString:
		w.WriteString(` t="inlineStr"`)
		content = []byte("<" + pre + `is><` + pre + `t xml:space="preserve">` + escapeCellText(val.s) + "</" + pre + "t></" + pre + "is>")
	case val.k == kPending:
		p.recalc = true
		content = []byte("<" + pre + "f>" + escapeCellText(val.s) + "</" + pre + "f>")
	}
	for _, a := range attrs {
		// Value metadata belongs to the old value.
		if hasVal && (string(a[0]) == "cm" || string(a[0]) == "vm") {
			continue
		}
		w.WriteString(" " + string(a[0]) + `="` + string(a[1]) + `"`)
	}
	if len(content) == 0 {
		w.WriteString("/>")
		return nil
	}
	w.WriteString(">")
	w.Write(content)
	w.WriteString("</" + pre + "c>")
	return nil
}

// formatNumber writes a number as Excel does: plain decimals, exponent
// form only for very large or very small magnitudes.
func formatNumber(f float64) string {
	if a := math.Abs(f); a != 0 && (a >= 1e15 || a < 1e-5) {
		return strconv.FormatFloat(f, 'E', -1, 64)
	}
	return strconv.FormatFloat(f, 'f', -1, 64)
}

// escapeCellText escapes text for element content: XML specials, and
// bstrEscape.
func escapeCellText(s string) string {
	s = bstrEscape(s)
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '&':
			b.WriteString("&amp;")
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// bstrEscape writes the characters XML 1.0 cannot carry as Excel's _xHHHH_
// escapes, and escapes the underscore of a literal "_xHHHH_" so that it
// reads back unchanged.
func bstrEscape(s string) string {
	need := false
	for i := 0; i < len(s) && !need; i++ {
		need = (s[i] < 0x20 && s[i] != '\t' && s[i] != '\n') || (s[i] == '_' && i+7 <= len(s) && s[i+1] == 'x' && s[i+6] == '_' && isHex4(s[i+2:i+6]))
	}
	if !need {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '_' && i+7 <= len(s) && s[i+1] == 'x' && s[i+6] == '_' && isHex4(s[i+2:i+6]):
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
