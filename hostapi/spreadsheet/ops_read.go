package spreadsheet

import (
	"context"
	"errors"
	"fmt"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// SheetInfo is one entry of listSheets.
type SheetInfo struct {
	Name    string `json:"name"`
	Rows    int    `json:"rows"`
	Columns int    `json:"columns"`
	// Hidden sheets are listed too; Type is set for sheets that are not
	// worksheets (chartsheet …), which hold no cells.
	Hidden bool   `json:"hidden,omitempty"`
	Type   string `json:"type,omitempty"`
}

// SheetSummary is getSheetSummary's answer.
type SheetSummary struct {
	Sheet       string   `json:"sheet"`
	Rows        int      `json:"rows"`
	Columns     int      `json:"columns"`
	HeaderRow   int      `json:"headerRow"`
	Headers     []string `json:"headers"`
	ColumnTypes []string `json:"columnTypes"`
	TopRows     [][]any  `json:"topRows"`
	BottomRows  [][]any  `json:"bottomRows"`
	// FirstDataRow is the row number of topRows[0]; the bottom rows end at
	// row Rows.
	FirstDataRow int `json:"firstDataRow"`
}

// Summary sizes: sample rows at each end, and the widest part described.
const (
	summaryRows = 5
	summaryCols = 100
)

func (svc *service) listSheets(ctx context.Context, c *hostapi.Call) (any, error) {
	var out []SheetInfo
	err := svc.view(ctx, c, func(src *source) error {
		out = make([]SheetInfo, 0, len(src.sheets))
		for i, s := range src.sheets {
			info := SheetInfo{Name: s.Name, Hidden: s.Hidden}
			if s.Kind != "worksheet" {
				info.Type = s.Kind
				if info.Type == "" {
					info.Type = "unknown"
				}
				out = append(out, info)
				continue
			}
			m, err := svc.sheetSize(ctx, src, i)
			if err != nil {
				return err
			}
			info.Rows, info.Columns = m.Rows, m.Columns
			out = append(out, info)
		}
		return nil
	})
	return out, err
}

func (svc *service) getSheetSummary(ctx context.Context, c *hostapi.Call) (any, error) {
	var out SheetSummary
	err := svc.view(ctx, c, func(src *source) error {
		idx, err := src.sheetIndex(c.Args.Raw("sheet"))
		if err != nil {
			return err
		}
		out.Sheet = src.sheets[idx].Name
		if src.sheets[idx].Kind != "worksheet" {
			_, err := src.wb.openSheet(idx)
			return err
		}
		cf, err := svc.decoded(ctx, src, idx)
		if err != nil {
			return err
		}
		m := cf.meta
		cf.Close()
		out.Rows, out.Columns, out.HeaderRow = m.Rows, m.Columns, m.HeaderRow
		width := min(m.Columns, summaryCols)
		out.ColumnTypes = append([]string{}, m.ColumnTypes[:width]...)
		out.Headers = make([]string, width)
		out.TopRows, out.BottomRows = [][]any{}, [][]any{}
		if m.Rows == 0 {
			return nil
		}
		if m.HeaderRow > 0 {
			hdr, err := svc.readArea(ctx, src, idx, area{c1: 1, c2: width, r1: m.HeaderRow, r2: m.HeaderRow})
			if err != nil {
				return err
			}
			for i := range out.Headers {
				if len(hdr) > 0 && hdr[0][i] != nil {
					out.Headers[i] = fmt.Sprint(hdr[0][i])
				}
			}
		} else {
			for i := range out.Headers {
				out.Headers[i] = colName(i + 1)
			}
		}
		first := m.HeaderRow + 1
		if m.HeaderRow == 0 {
			first, err = svc.firstRow(ctx, src, idx)
			if err != nil {
				return err
			}
		}
		out.FirstDataRow = first
		if first > m.Rows {
			return nil
		}
		topEnd := m.Rows
		if m.Rows-first+1 > 2*summaryRows {
			topEnd = first + summaryRows - 1
			bottom, err := svc.readArea(ctx, src, idx, area{c1: 1, c2: width, r1: m.Rows - summaryRows + 1, r2: m.Rows})
			if err != nil {
				return err
			}
			out.BottomRows = bottom
		}
		top, err := svc.readArea(ctx, src, idx, area{c1: 1, c2: width, r1: first, r2: topEnd})
		if err != nil {
			return err
		}
		out.TopRows = top
		return nil
	})
	return out, err
}

// firstRow finds the first row holding a value.
func (svc *service) firstRow(ctx context.Context, src *source, idx int) (int, error) {
	cf, err := svc.decoded(ctx, src, idx)
	if err != nil {
		return 0, err
	}
	defer cf.Close()
	first := 0
	err = cf.rows(ctx, 1, maxRows, func(row int, _ []colValue) error {
		first = row
		return errStopScan
	})
	if err != nil && !errors.Is(err, errStopScan) {
		return 0, err
	}
	return max(first, 1), nil
}

var errStopScan = errors.New("scan stopped")

// rangeArg parses the range argument and checks a "Sheet!" prefix in it
// against the sheet being read.
func rangeArg(c *hostapi.Call, name string, sheetName string) (area, error) {
	a, prefix, err := parseRange(c.Args.String(name))
	if err != nil {
		return a, err
	}
	if prefix != "" && prefix != sheetName {
		return a, apierr.New(apierr.ValidationFailed,
			"range %q names sheet %q but the sheet argument is %q; pass the sheet separately and the range as \"A1:D50\"",
			c.Args.String(name), prefix, sheetName)
	}
	return a, nil
}

// cellArg parses a cell argument in A1 form.
func cellArg(c *hostapi.Call, name string) (col, row int, err error) {
	col, row, ok := parseCell(c.Args.String(name))
	if !ok {
		return 0, 0, cellError(c.Args.String(name))
	}
	return col, row, nil
}

func (svc *service) readRange(ctx context.Context, c *hostapi.Call) (any, error) {
	var out [][]any
	err := svc.view(ctx, c, func(src *source) error {
		idx, err := src.sheetIndex(c.Args.Raw("sheet"))
		if err != nil {
			return err
		}
		a, err := rangeArg(c, "range", src.sheets[idx].Name)
		if err != nil {
			return err
		}
		out, err = svc.readArea(ctx, src, idx, a)
		return err
	})
	return out, err
}
