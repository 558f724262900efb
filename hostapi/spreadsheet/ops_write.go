package spreadsheet

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/xuri/excelize/v2"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/store"
)

// cellWrite is one cell to write: kEmpty clears the value, kPending is a
// formula (s), kDate a date serial (n) with its kind.
type cellWrite struct {
	k  kind
	n  float64
	s  string
	dk dateKind
}

// parseCellWrite converts one JSON cell of writeRange/writeCell.
func parseCellWrite(v any, date1904 bool) (cellWrite, error) {
	switch x := v.(type) {
	case nil:
		return cellWrite{}, nil
	case bool:
		if x {
			return cellWrite{k: kBool, n: 1}, nil
		}
		return cellWrite{k: kBool}, nil
	case string:
		if utf8.RuneCountInString(x) > excelize.TotalCellChars {
			return cellWrite{}, fmt.Errorf("the text has %d characters; a cell holds at most %d", utf8.RuneCountInString(x), excelize.TotalCellChars)
		}
		if isISODate(x) {
			if serial, dk, ok := isoToSerial(x, date1904); ok {
				return cellWrite{k: kDate, n: serial, dk: dk}, nil
			}
		}
		return cellWrite{k: kString, s: x}, nil
	case map[string]any:
		f, ok := x["formula"].(string)
		if !ok || len(x) != 1 {
			return cellWrite{}, fmt.Errorf("an object cell must be {formula: \"SUM(A1:A3)\"}")
		}
		f = strings.TrimPrefix(strings.TrimSpace(f), "=")
		if f == "" {
			return cellWrite{}, fmt.Errorf("the formula is empty")
		}
		return cellWrite{k: kPending, s: f}, nil
	}
	if f, ok := toFloat(v); ok {
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return cellWrite{}, fmt.Errorf("the number is not finite")
		}
		return cellWrite{k: kNumber, n: f}, nil
	}
	return cellWrite{}, fmt.Errorf("a cell is a number, text, boolean, null or {formula: \"…\"}, not %T", v)
}

// isoToSerial converts an ISO date/time to an Excel serial.
func isoToSerial(s string, date1904 bool) (float64, dateKind, bool) {
	dk := dateOnly
	var t time.Time
	var err error
	if len(s) == 10 {
		t, err = time.Parse("2006-01-02", s)
	} else {
		dk = dateTime
		s = strings.Replace(strings.TrimSuffix(s, "Z"), " ", "T", 1)
		layout := "2006-01-02T15:04"
		if len(s) > 16 {
			layout = "2006-01-02T15:04:05.999999999"
		}
		t, err = time.Parse(layout, s)
	}
	if err != nil {
		return 0, 0, false
	}
	since := func(epoch time.Time) float64 {
		return float64(t.Unix()-epoch.Unix())/86400 + float64(t.Nanosecond())/86400e9
	}
	switch {
	case t.Year() > 9999:
		return 0, 0, false
	case date1904:
		if t.Before(epoch1904) {
			return 0, 0, false
		}
		return since(epoch1904), dk, true
	case t.Before(time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC)):
		return 0, 0, false
	case t.Before(time.Date(1900, 3, 1, 0, 0, 0, 0, time.UTC)):
		return since(epoch1900) - 1, dk, true // Excel's phantom 1900-02-29
	}
	return since(epoch1900), dk, true
}

// parseData converts writeRange's rows.
func parseData(raw any, date1904 bool) ([][]cellWrite, int, error) {
	rows, ok := raw.([]any)
	if !ok {
		return nil, 0, apierr.New(apierr.ValidationFailed, "data must be an array of rows, e.g. [[\"Name\", \"Total\"], [\"Ann\", 12]]")
	}
	out := make([][]cellWrite, len(rows))
	width := 0
	for i, r := range rows {
		cells, ok := r.([]any)
		if !ok {
			return nil, 0, apierr.New(apierr.ValidationFailed, "data[%d] must be an array of cells (a row), e.g. [\"Ann\", 12]", i)
		}
		out[i] = make([]cellWrite, len(cells))
		for j, v := range cells {
			cw, err := parseCellWrite(v, date1904)
			if err != nil {
				return nil, 0, apierr.New(apierr.ValidationFailed, "data[%d][%d]: %v", i, j, err)
			}
			out[i][j] = cw
		}
		width = max(width, len(cells))
	}
	return out, width, nil
}

func (svc *service) writeRange(ctx context.Context, c *hostapi.Call) (any, error) {
	col, row, err := cellArg(c, "start_cell")
	if err != nil {
		return nil, err
	}
	var res WriteRangeResult
	_, err = svc.edit(ctx, c, func(e *editor) error {
		idx, sheet, err := e.sheet(c.Args.Raw("sheet"))
		if err != nil {
			return err
		}
		data, width, err := parseData(c.Args.Raw("data"), e.wb.date1904)
		if err != nil {
			return err
		}
		if len(data) == 0 || width == 0 {
			return apierr.New(apierr.ValidationFailed, "data is empty; pass rows such as [[1, 2], [3, 4]]")
		}
		a := area{c1: col, r1: row, c2: col + width - 1, r2: row + len(data) - 1}
		if a.r2 > maxRows || a.c2 > maxCols {
			return apierr.New(apierr.ValidationFailed, "%d rows × %d columns from %s do not fit in a sheet (last cell XFD%d)", len(data), width, cellName(col, row), maxRows)
		}
		blank := false
		if idx < len(e.wb.sheets) && e.wb.sheets[idx].Name == sheet {
			if blank, err = e.wb.blankSheet(ctx, idx); err != nil {
				return err
			}
		}
		formulas := e.hasFormulas()
		switch {
		case blank:
			if err := e.valuesChange(); err != nil {
				return err
			}
			err = e.streamRows(sheet, a, data)
		case formulas:
			// Cached formula results may go stale: excelize drops them
			// across the workbook, which needs every sheet loaded.
			if err := e.loadGuard(idx); err != nil {
				return err
			}
			if err := e.valuesChange(); err != nil {
				return err
			}
			err = e.setRows(sheet, a, data)
		default:
			err = e.applyPatch(idx, &patchSpec{vals: data, vr: a.r1, vc: a.c1})
		}
		if err != nil {
			return err
		}
		for _, r := range data {
			res.Cells += len(r)
		}
		res.Range = a.String()
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// setRows writes cells one by one into a sheet that already has content.
func (e *editor) setRows(sheet string, a area, data [][]cellWrite) error {
	for i, r := range data {
		if i&1023 == 1023 {
			if err := e.ctx.Err(); err != nil {
				return apierr.From(err)
			}
		}
		for j, cw := range r {
			if err := e.setCell(sheet, cellName(a.c1+j, a.r1+i), cw); err != nil {
				return err
			}
		}
	}
	return nil
}

// setCell writes one value or formula, keeping the cell's style (dates
// get a date number format merged in unless they already have one).
func (e *editor) setCell(sheet, ref string, cw cellWrite) error {
	f := e.f
	var err error
	switch cw.k {
	case kEmpty:
		err = f.SetCellValue(sheet, ref, nil)
	case kNumber:
		err = f.SetCellFloat(sheet, ref, cw.n, -1, 64)
	case kString:
		// excelize stores shared strings without escaping them.
		err = f.SetCellStr(sheet, ref, bstrEscape(cw.s))
	case kBool:
		err = f.SetCellBool(sheet, ref, cw.n != 0)
	case kDate:
		if err = f.SetCellFloat(sheet, ref, cw.n, -1, 64); err == nil {
			var st int
			if st, err = f.GetCellStyle(sheet, ref); err == nil && !e.isDateStyle(st) {
				var ds int
				if ds, err = e.dateStyle(st, cw.dk); err == nil {
					err = f.SetCellStyle(sheet, ref, ref, ds)
				}
			}
		}
	case kPending:
		e.recalc = true
		// Clear the old value first: excelize keeps a cell's cached value
		// when a formula is set over it.
		if err = f.SetCellValue(sheet, ref, nil); err == nil {
			err = f.SetCellFormula(sheet, ref, cw.s)
		}
	}
	return excelWriteError(err)
}

// streamRows writes a big block into a blank sheet with excelize's stream
// writer, which does not build the whole sheet in memory.
func (e *editor) streamRows(sheet string, a area, data [][]cellWrite) error {
	f := e.f
	sw, err := f.NewStreamWriter(sheet)
	if err != nil {
		return excelWriteError(err)
	}
	colStyles := map[int]int{}
	colStyle := func(col int) int {
		if s, ok := colStyles[col]; ok {
			return s
		}
		s, _ := f.GetColStyle(sheet, colName(col))
		colStyles[col] = s
		return s
	}
	vals := make([]any, 0, a.cols())
	for i, r := range data {
		if i&1023 == 1023 {
			if err := e.ctx.Err(); err != nil {
				return apierr.From(err)
			}
		}
		vals = vals[:0]
		for j, cw := range r {
			switch cw.k {
			case kEmpty:
				vals = append(vals, nil)
			case kNumber:
				vals = append(vals, cw.n)
			case kString:
				vals = append(vals, cw.s)
			case kBool:
				vals = append(vals, cw.n != 0)
			case kDate:
				ds, err := e.dateStyle(colStyle(a.c1+j), cw.dk)
				if err != nil {
					return err
				}
				vals = append(vals, excelize.Cell{StyleID: ds, Value: cw.n})
			case kPending:
				e.recalc = true
				vals = append(vals, excelize.Cell{Formula: cw.s})
			}
		}
		if err := sw.SetRow(cellName(a.c1, a.r1+i), vals); err != nil {
			return excelWriteError(err)
		}
	}
	return excelWriteError(sw.Flush())
}

func (svc *service) writeCell(ctx context.Context, c *hostapi.Call) (any, error) {
	col, row, err := cellArg(c, "cell")
	if err != nil {
		return nil, err
	}
	_, hasValue := c.Args["value"]
	formula := strings.TrimPrefix(strings.TrimSpace(c.Args.String("formula")), "=")
	if c.Args.Has("formula") && formula == "" {
		return nil, apierr.New(apierr.ValidationFailed, "formula is empty; pass a formula such as \"SUM(A1:A3)\"")
	}
	if formula != "" && c.Args.Has("value") {
		return nil, apierr.New(apierr.ValidationFailed, "pass either a value or a formula, not both; the formula's result becomes the cell's value")
	}
	var fo formatOpts
	switch fm := c.Args.Raw("format").(type) {
	case string:
		fo.numFmt = &fm
	case map[string]any:
		if fo, err = parseFormat(fm); err != nil {
			return nil, err
		}
	}
	if !hasValue && formula == "" && fo.empty() {
		return nil, apierr.New(apierr.ValidationFailed, "nothing to write: pass a value (null clears the cell), a formula or a format")
	}
	_, err = svc.edit(ctx, c, func(e *editor) error {
		idx, sheet, err := e.sheet(c.Args.Raw("sheet"))
		if err != nil {
			return err
		}
		var cw *cellWrite
		if hasValue || formula != "" {
			w := cellWrite{k: kPending, s: formula}
			if formula == "" {
				if w, err = parseCellWrite(c.Args["value"], e.wb.date1904); err != nil {
					return apierr.New(apierr.ValidationFailed, "value: %v", err)
				}
			}
			cw = &w
		}
		one := area{c1: col, c2: col, r1: row, r2: row}
		formulas := cw != nil && e.hasFormulas()
		if !formulas {
			p := &patchSpec{}
			if cw != nil {
				p.vals, p.vr, p.vc = [][]cellWrite{{*cw}}, row, col
			}
			setPatchFormat(e, p, one, fo)
			return e.applyPatch(idx, p)
		}
		if err := e.loadGuard(idx); err != nil {
			return err
		}
		if err := e.valuesChange(); err != nil {
			return err
		}
		if err := e.setCell(sheet, cellName(col, row), *cw); err != nil {
			return err
		}
		if !fo.empty() {
			return e.formatArea(sheet, one, fo)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return OKResult{OK: true}, nil
}

func (svc *service) addSheet(ctx context.Context, c *hostapi.Call) (any, error) {
	name := c.Args.String("name")
	if err := checkSheetName(name); err != nil {
		return nil, err
	}
	return svc.sheetEdit(ctx, c, func(e *editor) error {
		for _, n := range e.f.GetSheetList() {
			if strings.EqualFold(n, name) {
				return apierr.New(apierr.AlreadyExists, "sheet %q already exists; sheets are: %s", n, quoteList(e.f.GetSheetList()))
			}
		}
		if _, err := e.f.NewSheet(name); err != nil {
			return excelWriteError(err)
		}
		return nil
	})
}

func checkSheetName(name string) error {
	switch {
	case strings.TrimSpace(name) == "":
		return apierr.New(apierr.ValidationFailed, "the sheet name is blank")
	case utf8.RuneCountInString(name) > 31:
		return apierr.New(apierr.ValidationFailed, "sheet name %q has more than 31 characters", name)
	case strings.ContainsAny(name, ":\\/?*[]"):
		return apierr.New(apierr.ValidationFailed, "sheet name %q may not contain any of : \\ / ? * [ ]", name)
	case strings.HasPrefix(name, "'") || strings.HasSuffix(name, "'"):
		return apierr.New(apierr.ValidationFailed, "sheet name %q may not start or end with an apostrophe", name)
	case strings.EqualFold(name, "History"):
		return apierr.New(apierr.ValidationFailed, "\"History\" is a name Excel reserves; choose another")
	}
	return nil
}

func (svc *service) deleteSheet(ctx context.Context, c *hostapi.Call) (any, error) {
	return svc.sheetEdit(ctx, c, func(e *editor) error {
		names := e.f.GetSheetList()
		idx, err := resolveSheet(names, c.Args.Raw("name"))
		if err != nil {
			return err
		}
		visible := 0
		for i, s := range e.wb.sheets {
			if !s.Hidden && i != idx {
				visible++
			}
		}
		if len(names) == 1 || visible == 0 {
			return apierr.New(apierr.ValidationFailed, "sheet %q is the workbook's last visible sheet and cannot be deleted; add another sheet first", names[idx])
		}
		if err := e.valuesChange(); err != nil {
			return err
		}
		var others []int
		if !e.hasFormulas() { // otherwise valuesChange has loaded every sheet
			for i := range e.wb.sheets {
				if i != idx {
					others = append(others, i)
				}
			}
		}
		if err := e.withStubs(others, func() error { return e.f.DeleteSheet(names[idx]) }); err != nil {
			return excelWriteError(err)
		}
		return nil
	})
}

// sheetEdit runs a sheet addition/deletion and answers the workbook's
// sheet names afterwards.
func (svc *service) sheetEdit(ctx context.Context, c *hostapi.Call, fn func(e *editor) error) (any, error) {
	var res SheetsResult
	_, err := svc.edit(ctx, c, func(e *editor) error {
		if err := fn(e); err != nil {
			return err
		}
		res.Sheets = e.f.GetSheetList()
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

func (svc *service) insertRows(ctx context.Context, c *hostapi.Call) (any, error) {
	after, _ := c.Args.Int("after_row")
	count, _ := c.Args.Int("count")
	return svc.rowEdit(ctx, c, func(e *editor, sheet string, idx int) error {
		if after+count > maxRows {
			return apierr.New(apierr.ValidationFailed, "inserting %d rows after row %d goes past row %d, the last row of a sheet", count, after, maxRows)
		}
		last, err := e.wb.lastRowElement(ctx, idx)
		if err != nil {
			return err
		}
		if last+int(count) > maxRows {
			return apierr.New(apierr.ValidationFailed, "the sheet uses rows up to %d; inserting %d rows would push rows past %d", last, count, maxRows)
		}
		// excelize adjusts formulas and validations in every sheet.
		if err := e.loadGuard(e.worksheets()...); err != nil {
			return err
		}
		if err := e.valuesChange(); err != nil {
			return err
		}
		return excelWriteError(e.f.InsertRows(sheet, int(after)+1, int(count)))
	})
}

func (svc *service) deleteRows(ctx context.Context, c *hostapi.Call) (any, error) {
	start, _ := c.Args.Int("start_row")
	count, _ := c.Args.Int("count")
	return svc.rowEdit(ctx, c, func(e *editor, sheet string, idx int) error {
		last, err := e.wb.lastRowElement(ctx, idx)
		if err != nil {
			return err
		}
		// Rows below the last one in the file are empty already; deleting
		// them would only renumber nothing.
		n := min(int(count), last-int(start)+1)
		if n <= 0 {
			return nil
		}
		if err := e.loadGuard(e.worksheets()...); err != nil {
			return err
		}
		if err := e.valuesChange(); err != nil {
			return err
		}
		for i := 0; i < n; i++ {
			if err := ctx.Err(); err != nil {
				return apierr.Wrap(apierr.Timeout, err, "the time limit ran out after deleting %d of %d rows (nothing was changed); delete fewer rows per call", i, n)
			}
			if err := e.f.RemoveRow(sheet, int(start)); err != nil {
				return excelWriteError(err)
			}
		}
		return nil
	})
}

// rowEdit runs a row insertion/deletion and answers the sheet's used row
// count afterwards.
func (svc *service) rowEdit(ctx context.Context, c *hostapi.Call, fn func(e *editor, sheet string, idx int) error) (any, error) {
	idx := 0
	nf, err := svc.edit(ctx, c, func(e *editor) error {
		i, sheet, err := e.sheet(c.Args.Raw("sheet"))
		if err != nil {
			return err
		}
		idx = i
		return fn(e, sheet, i)
	})
	if err != nil {
		return nil, err
	}
	rows, err := svc.usedRows(ctx, c, nf, idx)
	if err != nil {
		return nil, err
	}
	return RowsResult{Rows: rows}, nil
}

// usedRows reads the used row count of a sheet of the file as it is now.
func (svc *service) usedRows(ctx context.Context, c *hostapi.Call, f *store.File, idx int) (int, error) {
	rows := 0
	err := c.WS.View(ctx, f.ID, func(cur *store.File, p string) error {
		return guard("reading the spreadsheet", func() error {
			src, err := svc.openSource(cur, p)
			if err != nil {
				return err
			}
			defer src.Close()
			if idx >= len(src.sheets) {
				return nil
			}
			m, err := svc.sheetSize(ctx, src, idx)
			rows = m.Rows
			return err
		})
	})
	return rows, err
}

func (svc *service) setFormat(ctx context.Context, c *hostapi.Call) (any, error) {
	fo, err := parseFormat(c.Args)
	if err != nil {
		return nil, err
	}
	if fo.empty() {
		return nil, apierr.New(apierr.ValidationFailed, "no format given; pass at least one of bold, italic, fontColor, fillColor, numberFormat, columnWidth, horizontalAlignment, wrapText, border")
	}
	_, err = svc.edit(ctx, c, func(e *editor) error {
		idx, _, a, err := e.rangeArea(c)
		if err != nil {
			return err
		}
		if cells := int64(a.rows()) * int64(a.cols()); fo.styleChanges() && cells > maxFormatCells {
			return apierr.New(apierr.TooLarge, "range %s has %d cells, over the limit of %d for one setFormat; format it in parts", a, cells, maxFormatCells)
		}
		p := &patchSpec{}
		setPatchFormat(e, p, a, fo)
		return e.applyPatch(idx, p)
	})
	if err != nil {
		return nil, err
	}
	return OKResult{OK: true}, nil
}

func (svc *service) autoFilter(ctx context.Context, c *hostapi.Call) (any, error) {
	_, err := svc.edit(ctx, c, func(e *editor) error {
		idx, sheet, a, err := e.rangeArea(c)
		if err != nil {
			return err
		}
		// excelize records the filter's hidden defined name; the sheet's
		// <autoFilter> element is patched in.
		ref := cellName(a.c1, a.r1) + ":" + cellName(a.c2, a.r2)
		if err := e.withStubs([]int{idx}, func() error { return e.f.AutoFilter(sheet, ref, nil) }); err != nil {
			return excelWriteError(err)
		}
		return e.applyPatch(idx, &patchSpec{autoFilter: &a})
	})
	if err != nil {
		return nil, err
	}
	return OKResult{OK: true}, nil
}

// rangeArea resolves the call's sheet and range against the workbook being
// edited; whole columns or rows cover the sheet's used area.
func (e *editor) rangeArea(c *hostapi.Call) (idx int, sheet string, a area, err error) {
	idx, sheet, err = e.sheet(c.Args.Raw("sheet"))
	if err != nil {
		return 0, "", area{}, err
	}
	if a, err = rangeArg(c, "range", sheet); err != nil {
		return 0, "", area{}, err
	}
	if a, err = e.closedArea(idx, a); err != nil {
		return 0, "", area{}, err
	}
	return idx, sheet, a, nil
}

// setPatchFormat adds format options to a patch over area a.
func setPatchFormat(e *editor, p *patchSpec, a area, fo formatOpts) {
	if fo.styleChanges() {
		a := a
		p.styleArea, p.styleFn = &a, e.merger(fo).merged
	}
	if fo.width != nil {
		p.width = &widthEdit{c1: a.c1, c2: a.c2, w: *fo.width}
	}
}
