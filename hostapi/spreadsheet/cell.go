package spreadsheet

import (
	"bytes"
	"context"
	"strconv"

	"github.com/metaclaw/metaclaw/hostapi"
)

// CellInfo is readCell's answer.
type CellInfo struct {
	Value   any        `json:"value"`
	Formula *string    `json:"formula"`
	Type    string     `json:"type"`
	Format  CellFormat `json:"format"`
}

// defaultColWidth is Excel's default column width in characters.
const defaultColWidth = 9.140625

// findCell streams sheet idx to row and returns that cell as stored (a
// styled empty cell too); found is false when the file has no such cell.
func (src *source) findCell(ctx context.Context, idx, col, row int) (rawCell, bool, error) {
	rc, err := src.wb.openSheet(idx)
	if err != nil {
		return rawCell{}, false, err
	}
	defer rc.Close()
	var out rawCell
	found := false
	err = scanSheet(ctx, rc, true, func(r int, cells []rawCell) (bool, error) {
		if r < row {
			return false, nil
		}
		if r == row {
			for _, c := range cells {
				if c.col == col {
					out, found = c, true
					out.v, out.f, out.is = bytes.Clone(c.v), bytes.Clone(c.f), bytes.Clone(c.is)
				}
			}
		}
		return true, nil
	})
	if err != nil {
		return out, false, parseError(ctx, err, "the sheet could not be parsed")
	}
	return out, found, nil
}

func (svc *service) readCell(ctx context.Context, c *hostapi.Call) (any, error) {
	col, row, err := cellArg(c, "cell")
	if err != nil {
		return nil, err
	}
	var out CellInfo
	err = svc.view(ctx, c, func(src *source) error {
		idx, err := src.sheetIndex(c.Args.Raw("sheet"))
		if err != nil {
			return err
		}
		if src.kind == srcCSV {
			vals, err := svc.readArea(ctx, src, idx, area{c1: col, c2: col, r1: row, r2: row})
			if err != nil {
				return err
			}
			var v value
			if len(vals) > 0 {
				v = valueOfAny(vals[0][0])
			}
			out = CellInfo{Value: v.toAny(), Type: v.typeName(), Format: CellFormat{NumberFormat: "General", ColumnWidth: defaultColWidth}}
			return nil
		}
		raw, found, err := src.findCell(ctx, idx, col, row)
		if err != nil {
			return err
		}
		var v value
		if found {
			rv, err := src.resolver()
			if err != nil {
				return err
			}
			if v, err = rv.resolve(&raw); err != nil {
				return err
			}
		}
		f, err := openExcel(src.path)
		if err != nil {
			return err
		}
		defer f.Close()
		sheet, ref := src.sheets[idx].Name, cellName(col, row)
		if v.k == kPending {
			v = calcValue(f, sheet, ref, dateKind(v.n), src.wb.date1904)
		}
		if raw.hasF {
			formula := string(raw.f)
			if formula == "" {
				// A cell sharing another cell's formula: excelize shifts
				// the master formula to this cell.
				if formula, err = f.GetCellFormula(sheet, ref); err != nil {
					return excelError(err)
				}
			}
			out.Formula = &formula
		}
		out.Value, out.Type = v.toAny(), v.typeName()
		out.Format = describeStyle(f, raw.style)
		if out.Format.FillColor == nil {
			if st, err := src.wb.styleTable(); err == nil {
				out.Format.FillColor = hexColor(st.fill(raw.style))
			}
		}
		// Not f.GetColWidth: it would load the whole worksheet.
		if out.Format.ColumnWidth, err = src.wb.columnWidth(ctx, idx, col); err != nil {
			return err
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// valueOfAny types a value read from delimited text back.
func valueOfAny(x any) value {
	switch t := x.(type) {
	case float64:
		return value{k: kNumber, n: t}
	case bool:
		if t {
			return value{k: kBool, n: 1}
		}
		return value{k: kBool}
	case string:
		return typeText(t)
	}
	return value{}
}

// columnWidth reads a column's width from the <cols> and <sheetFormatPr>
// elements at the head of the sheet, without reading its rows.
func (wb *workbook) columnWidth(ctx context.Context, idx, col int) (float64, error) {
	rc, err := wb.openSheet(idx)
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	s := newXMLScanner(rc, 16<<20)
	width := defaultColWidth
	for {
		k, err := s.next()
		if err != nil {
			return 0, readFailed(err, "the sheet is malformed")
		}
		if k == tokEOF {
			return width, nil
		}
		if k != tokStart {
			continue
		}
		switch string(s.name) {
		case "sheetFormatPr":
			if v, ok := attrValue(s.attrs, "defaultColWidth"); ok {
				if w, err := strconv.ParseFloat(string(v), 64); err == nil && w > 0 {
					width = w
				}
			}
		case "col":
			lo, ok1 := attrValue(s.attrs, "min")
			hi, ok2 := attrValue(s.attrs, "max")
			wv, ok3 := attrValue(s.attrs, "width")
			if ok1 && ok2 && ok3 {
				l, _ := atoiBytes(lo, maxCols)
				h, _ := atoiBytes(hi, maxCols)
				if w, err := strconv.ParseFloat(string(wv), 64); err == nil && col >= l && col <= h {
					return w, nil
				}
			}
		case "sheetData":
			return width, nil
		}
	}
}
