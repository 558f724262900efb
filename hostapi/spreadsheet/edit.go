package spreadsheet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/xuri/excelize/v2"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/store"
)

// editor is one in-place edit of a workbook: excelize holds the workbook
// being changed, wb the original for fast structural questions.
type editor struct {
	svc     *service
	ctx     context.Context
	f       *excelize.File
	wb      *workbook
	cur     *store.File
	curPath string

	prepared   bool
	recalc     bool
	dateStyles map[[2]int]int // (style, dateKind) → style with a date format
	created    map[int]*excelize.Style
	formulas   *bool // whether any sheet holds a formula
	// streams generate zip entries (by name) while the workbook is saved.
	streams map[string]func(io.Writer) error
}

// maxLoadXML caps the sheet XML excelize may load for one edit: it builds
// the whole sheet as structs, about 25 bytes of memory per byte of XML.
const maxLoadXML = 48 << 20

// edit modifies the workbook c.Args["id"] in place with fn. Returning an
// error from fn leaves the file unchanged.
func (svc *service) edit(ctx context.Context, c *hostapi.Call, fn func(e *editor) error) (*store.File, error) {
	var old string
	nf, err := c.WS.Modify(ctx, c.Args.String("id"), func(cur *store.File, curPath string, out io.Writer) error {
		old = cur.SHA256
		return guard("editing the workbook", func() error {
			k, err := detectKind(cur, curPath)
			if err != nil {
				return err
			}
			if k == srcCSV {
				return apierr.New(apierr.UnsupportedFormat, "%q is delimited text (CSV/TSV): it reads as one sheet but cannot be edited in place; %s", cur.Name, csvHint)
			}
			wb, err := openWorkbook(curPath)
			if err != nil {
				return err
			}
			defer wb.Close()
			if total := wb.inflatedSize(); total > excelUnzipLimit {
				return apierr.New(apierr.TooLarge, "the workbook inflates to %d MB, over the %d MB an in-place edit may load; write results to a new workbook", total>>20, excelUnzipLimit>>20)
			}
			formulas, err := wb.verify(ctx)
			if err != nil {
				return err
			}
			f, err := openExcel(curPath)
			if err != nil {
				return err
			}
			defer f.Close()
			e := &editor{svc: svc, ctx: ctx, f: f, wb: wb, cur: cur, curPath: curPath, dateStyles: map[[2]int]int{},
				created: map[int]*excelize.Style{}, formulas: &formulas, streams: map[string]func(io.Writer) error{}}
			if err := fn(e); err != nil {
				return err
			}
			if e.recalc {
				// Excel and LibreOffice recalculate on open; our own reads
				// calculate formulas that have no cached value.
				t := true
				if err := f.SetCalcProps(&excelize.CalcPropsOptions{FullCalcOnLoad: &t}); err != nil {
					return excelWriteError(err)
				}
			}
			if err := ctx.Err(); err != nil {
				return apierr.From(err)
			}
			// The zip goes straight to the store's writer rather than
			// through a buffer excelize would grow to the workbook's size.
			f.SetZipWriter(func(io.Writer) excelize.ZipWriter { return newZipWriter(out, e.streams) })
			if err := f.Write(strayBytes{}); err != nil {
				switch {
				case coded(err):
					return err
				case ctx.Err() != nil:
					return apierr.From(ctx.Err())
				}
				return apierr.Wrap(apierr.FileWriteFailed, err, "the workbook could not be written: %v", err)
			}
			return nil
		})
	})
	if err == nil && nf.SHA256 != old {
		svc.dropCaches(old)
	}
	return nf, err
}

// strayBytes is where excelize would copy a workbook it had buffered; it
// writes through newZipWriter instead, so anything arriving here is a bug.
type strayBytes struct{}

func (strayBytes) Write(p []byte) (int, error) {
	return 0, errors.New("excelize wrote workbook bytes outside its zip writer")
}

// excelWriteError maps an excelize error during an edit.
func excelWriteError(err error) error {
	if err == nil || coded(err) {
		return err
	}
	msg := err.Error()
	switch {
	case errors.Is(err, excelize.ErrMaxRows), strings.Contains(msg, "row number exceeds"):
		return apierr.Wrap(apierr.ValidationFailed, err, "the change would push rows past row %d, the last row a sheet has; delete rows first or add a sheet", maxRows)
	case errors.Is(err, excelize.ErrColumnNumber):
		return apierr.Wrap(apierr.ValidationFailed, err, "the change would go past column XFD, the last column a sheet has")
	case errors.Is(err, excelize.ErrCellCharsLength):
		return apierr.Wrap(apierr.ValidationFailed, err, "a cell holds at most %d characters; shorten the text", excelize.TotalCellChars)
	case errors.Is(err, excelize.ErrCellStyles):
		return apierr.Wrap(apierr.ResourceExhausted, err, "the workbook has reached Excel's limit of %d cell styles", excelize.MaxCellStyles)
	case strings.Contains(msg, "is not a worksheet"), strings.Contains(msg, "chartsheet"):
		return apierr.Wrap(apierr.UnsupportedFormat, err, "%v; only worksheets hold cells", err)
	}
	return excelError(err)
}

// sheet resolves the sheet argument against the workbook being edited and
// requires a worksheet.
func (e *editor) sheet(arg any) (int, string, error) {
	names := e.f.GetSheetList()
	idx, err := resolveSheet(names, arg)
	if err != nil {
		return 0, "", err
	}
	if idx < len(e.wb.sheets) && e.wb.sheets[idx].Name == names[idx] && e.wb.sheets[idx].Kind != "worksheet" {
		return 0, "", apierr.New(apierr.UnsupportedFormat, "sheet %q is a %s, not a worksheet; it holds no cells to edit", names[idx], e.wb.sheets[idx].Kind)
	}
	return idx, names[idx], nil
}

// hasFormulas reports whether any worksheet holds a formula (found while
// verifying the parts).
func (e *editor) hasFormulas() bool { return e.formulas != nil && *e.formulas }

// valuesChange is called before an edit through excelize that changes cell
// values: cached results of formulas anywhere in the workbook may go stale,
// so they are dropped (reads then calculate them) and the workbook asks
// spreadsheet programs to recalculate on open.
func (e *editor) valuesChange() error {
	if e.prepared {
		return nil
	}
	e.prepared = true
	if !e.hasFormulas() {
		return nil
	}
	if err := e.loadGuard(e.worksheets()...); err != nil {
		return err
	}
	e.recalc = true
	return excelWriteError(e.f.UpdateLinkedValue())
}

// worksheets lists the indexes of the workbook's worksheets.
func (e *editor) worksheets() []int {
	var out []int
	for i, s := range e.wb.sheets {
		if s.Kind == "worksheet" {
			out = append(out, i)
		}
	}
	return out
}

// loadGuard refuses an edit that would make excelize load more sheet XML
// than maxLoadXML.
func (e *editor) loadGuard(idxs ...int) error {
	var total uint64
	for _, i := range idxs {
		if i < len(e.wb.sheets) {
			if f := e.wb.entry(e.wb.sheets[i].Path); f != nil {
				total += f.UncompressedSize64
			}
		}
	}
	if total > maxLoadXML {
		return apierr.New(apierr.TooLarge,
			"this edit has to load %d MB of sheet XML, over the limit of %d MB (moving rows, filters, and value edits in workbooks with formulas load whole sheets); "+
				"write the results to a new sheet or workbook instead, or use files.table.* for large data", total>>20, maxLoadXML>>20)
	}
	return nil
}

// stubSheetXML is what excelize parses instead of a real sheet inside
// withStubs.
const stubSheetXML = `<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData/></worksheet>`

// withStubs runs fn while excelize sees the worksheets idxs as empty, and
// afterwards forgets what it parsed of them, so that the real bytes (or a
// patch of them) are written. Some excelize calls touch sheets they do not
// change: DeleteSheet visits every sheet to move the selected tab, and
// AutoFilter parses the whole sheet to set one element (which the patcher
// writes instead); parsing a 100k-row sheet costs about 1 GB.
func (e *editor) withStubs(idxs []int, fn func() error) error {
	type saved struct {
		v   any
		had bool
	}
	keep := map[string]saved{}
	for _, i := range idxs {
		entry := e.wb.entry(e.wb.sheets[i].Path)
		if entry == nil || e.wb.sheets[i].Kind != "worksheet" {
			continue
		}
		p := strings.ReplaceAll(entry.Name, "\\", "/")
		v, had := e.f.Pkg.Load(p)
		keep[p] = saved{v, had}
		e.f.Pkg.Store(p, []byte(stubSheetXML))
	}
	err := fn()
	for p, sv := range keep {
		e.f.Sheet.Delete(p)
		switch {
		case sv.had:
			e.f.Pkg.Store(p, sv.v)
		default:
			e.f.Pkg.Delete(p) // excelize reads it from its temp file
		}
	}
	return err
}

// applyPatch rewrites sheet idx with p (see patch.go) and hands the new
// XML to excelize, which has not loaded that sheet.
func (e *editor) applyPatch(idx int, p *patchSpec) error {
	entry := e.wb.entry(e.wb.sheets[idx].Path)
	rc, err := e.wb.openSheet(idx)
	if err != nil {
		return err
	}
	defer rc.Close()
	p.dateStyle, p.isDate = e.dateStyle, e.isDateStyle
	out, err := patchSheet(e.ctx, rc, int64(entry.UncompressedSize64), p)
	if err != nil {
		return parseError(e.ctx, err, fmt.Sprintf("sheet %q could not be rewritten", e.wb.sheets[idx].Name))
	}
	if p.recalc {
		e.recalc = true
	}
	name := strings.ReplaceAll(entry.Name, "\\", "/")
	e.f.Pkg.Store(name, out)
	// A copy excelize parsed on the way (valuesChange loads every sheet)
	// would be written over the patch; callers patch only sheets whose
	// parsed copy holds no changes.
	e.f.Sheet.Delete(name)
	return nil
}

// streamPatch writes p, a block of values, into sheet idx, which has no
// rows. The rows are generated while the workbook is saved, straight into
// its zip entry, so that a million cells never sit in memory as XML (on a
// small machine, fresh memory costs more time than making the XML).
func (e *editor) streamPatch(idx int, p *patchSpec) error {
	entry := e.wb.entry(e.wb.sheets[idx].Path)
	rc, err := e.wb.openSheet(idx)
	if err != nil {
		return err
	}
	defer rc.Close()
	p.dateStyle, p.isDate = e.dateStyle, e.isDateStyle
	d, err := patchBlankSheet(e.ctx, rc, int64(entry.UncompressedSize64), p)
	if err != nil {
		return parseError(e.ctx, err, fmt.Sprintf("sheet %q could not be rewritten", e.wb.sheets[idx].Name))
	}
	// excelize saves the styles before the sheets: make every date style
	// the rows need now, and let the rows only look them up.
	for j, kinds := range p.vals.dates {
		for dk := dateOnly; dk <= timeOnly; dk++ {
			if kinds&(1<<dk) != 0 {
				if _, err := d.pt.dateStyle(d.pt.colStyle(p.vc+j), dk); err != nil {
					return err
				}
			}
		}
	}
	p.dateStyle = func(style int, dk dateKind) (int, error) {
		if id, ok := e.dateStyles[[2]int{style, int(dk)}]; ok {
			return id, nil
		}
		return 0, fmt.Errorf("no date style was prepared for style %d", style)
	}
	if p.vals.formulas {
		e.recalc = true
	}
	name := strings.ReplaceAll(entry.Name, "\\", "/")
	e.f.Pkg.Store(name, d.stub())
	e.f.Sheet.Delete(name)
	e.streams[name] = d.writeTo
	return nil
}

// usedSize is the used area of sheet idx of the workbook before the edit.
func (e *editor) usedSize(idx int) (cacheMeta, error) {
	src, err := e.svc.openSource(e.cur, e.curPath)
	if err != nil {
		return cacheMeta{}, err
	}
	defer src.Close()
	return e.svc.sheetSize(e.ctx, src, idx)
}

// closedArea resolves whole-column/row ranges against the used area.
func (e *editor) closedArea(idx int, a area) (area, error) {
	if !a.wholeCols && !a.wholeRows {
		return a, nil
	}
	m, err := e.usedSize(idx)
	if err != nil {
		return a, err
	}
	return a.bound(m.Rows, m.Columns), nil
}

// isDateStyle reports whether style formats numbers as dates.
func (e *editor) isDateStyle(style int) bool {
	if st, ok := e.created[style]; ok {
		if st.CustomNumFmt != nil {
			return formatDateKind(*st.CustomNumFmt) != notDate
		}
		return builtinDateKind(st.NumFmt) != notDate
	}
	st, err := e.wb.styleTable()
	return err == nil && st.kind(style) != notDate
}

// dateStyle returns style merged with a date number format.
func (e *editor) dateStyle(style int, dk dateKind) (int, error) {
	key := [2]int{style, int(dk)}
	if id, ok := e.dateStyles[key]; ok {
		return id, nil
	}
	code := "yyyy-mm-dd"
	if dk == dateTime {
		code = "yyyy-mm-dd hh:mm:ss"
	}
	id, err := e.merger(formatOpts{numFmt: &code}).merged(style)
	if err != nil {
		return 0, err
	}
	e.dateStyles[key] = id
	return id, nil
}

// containsFormulaTag reports whether a sheet's XML holds a formula element,
// by searching the inflated bytes, which is far cheaper than parsing them.
// It reads r only as far as the first one.
func containsFormulaTag(ctx context.Context, r io.Reader) (bool, error) {
	const overlap = 8
	buf := make([]byte, 256<<10)
	carry := 0
	for {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		n, err := io.ReadFull(r, buf[carry:])
		chunk := buf[:carry+n]
		if formulaTagIn(chunk) {
			return true, nil
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		carry = copy(buf, chunk[len(chunk)-overlap:])
	}
}

// formulaTagIn finds "<f" or "<x:f" (any prefix) followed by '>', '/' or
// whitespace.
func formulaTagIn(b []byte) bool {
	for _, pat := range [][]byte{[]byte("<f"), []byte(":f")} {
		rest := b
		for {
			i := bytes.Index(rest, pat)
			if i < 0 || i+2 >= len(rest) {
				break
			}
			if c := rest[i+2]; c == '>' || c == '/' || isSpace(c) {
				if pat[0] == '<' {
					return true
				}
				// a prefixed name: '<' then name characters before ':'
				j := i - 1
				for j >= 0 && (isLetter(rest[j]) || (rest[j] >= '0' && rest[j] <= '9')) {
					j--
				}
				if j >= 0 && j < i-1 && rest[j] == '<' {
					return true
				}
			}
			rest = rest[i+2:]
		}
	}
	return false
}

// blankSheet reports whether sheet idx has no rows, merges or tables, so
// that a big write can stream it fresh without losing anything.
func (wb *workbook) blankSheet(ctx context.Context, idx int) (bool, error) {
	rc, err := wb.openSheet(idx)
	if err != nil {
		return false, err
	}
	defer rc.Close()
	s := newXMLScanner(rc, 16<<20)
	for {
		k, err := s.next()
		if err != nil {
			return false, readFailed(err, "a sheet is malformed")
		}
		switch k {
		case tokEOF:
			return true, nil
		case tokStart:
			switch string(s.name) {
			case "row", "mergeCell", "tablePart":
				return false, nil
			}
		}
	}
}

// lastRowElement is the number of the last <row> of sheet idx, with or
// without values (styled empty rows count: deleting rows moves them).
func (wb *workbook) lastRowElement(ctx context.Context, idx int) (int, error) {
	rc, err := wb.openSheet(idx)
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	s := newXMLScanner(rc, 64<<20)
	last := 0
	for n := 0; ; n++ {
		if n&8191 == 0 {
			if err := ctx.Err(); err != nil {
				return 0, apierr.From(err)
			}
		}
		k, err := s.next()
		if err != nil {
			return 0, readFailed(err, "a sheet is malformed")
		}
		switch k {
		case tokEOF:
			return last, nil
		case tokStart:
			switch string(s.name) {
			case "row":
				if v, ok := attrValue(s.attrs, "r"); ok {
					if r, ok := atoiBytes(v, maxRows); ok {
						last = r
						continue
					}
				}
				last++
			}
		case tokEnd:
			if string(s.name) == "sheetData" {
				return last, nil
			}
		}
	}
}
