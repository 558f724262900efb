package spreadsheet

import (
	"context"
	"strings"
	"unicode/utf8"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/store"
)

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
		data, err := newCellBlock(c.Args.Raw("data"), e.wb.date1904)
		if err != nil {
			return err
		}
		if data.width == 0 {
			return apierr.New(apierr.ValidationFailed, "data is empty; pass rows such as [[1, 2], [3, 4]]")
		}
		a := area{c1: col, r1: row, c2: col + data.width - 1, r2: row + len(data.rows) - 1}
		if a.r2 > maxRows || a.c2 > maxCols {
			return apierr.New(apierr.ValidationFailed, "%d rows × %d columns from %s do not fit in a sheet (last cell XFD%d)", len(data.rows), data.width, cellName(col, row), maxRows)
		}
		blank := false
		if idx < len(e.wb.sheets) && e.wb.sheets[idx].Name == sheet {
			if blank, err = e.wb.blankSheet(ctx, idx); err != nil {
				return err
			}
		}
		p := &patchSpec{vals: data, vr: a.r1, vc: a.c1}
		switch {
		case blank:
			// A blank sheet has no cached results for excelize to drop,
			// so its rows are streamed into the saved workbook even when
			// formulas elsewhere are marked for recalculation.
			if err := e.valuesChange(); err != nil {
				return err
			}
			err = e.streamPatch(idx, p)
		case e.hasFormulas():
			// Cached formula results may go stale: excelize drops them
			// across the workbook, which needs every sheet loaded, and
			// then owns this sheet's cells.
			if err := e.loadGuard(idx); err != nil {
				return err
			}
			if err := e.valuesChange(); err != nil {
				return err
			}
			err = e.setRows(sheet, a, data)
		default:
			err = e.applyPatch(idx, p)
		}
		if err != nil {
			return err
		}
		res.Cells, res.Range = data.cells, a.String()
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// setRows writes cells one by one into a sheet that already has content.
func (e *editor) setRows(sheet string, a area, data *cellBlock) error {
	for i, r := range data.rows {
		if i&1023 == 1023 {
			if err := e.ctx.Err(); err != nil {
				return apierr.From(err)
			}
		}
		for j := range r {
			if err := e.setCell(sheet, cellName(a.c1+j, a.r1+i), data.at(i, j)); err != nil {
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

func (svc *service) writeCell(ctx context.Context, c *hostapi.Call) (any, error) {
	col, row, err := cellArg(c, "cell")
	if err != nil {
		return nil, err
	}
	// null means absent (decode.go): the value is kept. "" clears it.
	hasValue := c.Args.Has("value")
	formula := strings.TrimPrefix(strings.TrimSpace(c.Args.String("formula")), "=")
	if c.Args.Has("formula") && formula == "" {
		return nil, apierr.New(apierr.ValidationFailed, "formula is empty; pass a formula such as \"SUM(A1:A3)\"")
	}
	if formula != "" && hasValue {
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
		return nil, apierr.New(apierr.ValidationFailed, "nothing to write: pass a value (\"\" clears the cell), a formula or a format")
	}
	_, err = svc.edit(ctx, c, func(e *editor) error {
		idx, sheet, err := e.sheet(c.Args.Raw("sheet"))
		if err != nil {
			return err
		}
		var cell *cellBlock
		if hasValue || formula != "" {
			v := c.Args.Raw("value")
			if formula != "" {
				v = map[string]any{"formula": formula}
			}
			if cell, err = newCellBlock([]any{[]any{v}}, e.wb.date1904); err != nil {
				return apierr.New(apierr.ValidationFailed, "value: %s", strings.TrimPrefix(apierr.Of(err).Message, "data[0][0]: "))
			}
		}
		one := area{c1: col, c2: col, r1: row, r2: row}
		if cell == nil || !e.hasFormulas() {
			p := &patchSpec{vals: cell, vr: row, vc: col}
			setPatchFormat(e, p, one, fo)
			return e.applyPatch(idx, p)
		}
		if err := e.loadGuard(idx); err != nil {
			return err
		}
		if err := e.valuesChange(); err != nil {
			return err
		}
		if err := e.setCell(sheet, cellName(col, row), cell.at(0, 0)); err != nil {
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
