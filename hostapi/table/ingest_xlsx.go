package table

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	duckdb "github.com/duckdb/duckdb-go/v2"
	"github.com/xuri/excelize/v2"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/store"
)

const xlsxMIME = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"

// isWorkbook reports whether f is an xlsx workbook (by name or by the MIME
// type the store sniffed).
func isWorkbook(f *store.File) bool {
	switch strings.ToLower(filepath.Ext(f.Name)) {
	case ".xlsx", ".xlsm":
		return true
	}
	return f.MimeType == xlsxMIME
}

// hintRows is how many rows the first, formatted pass looks at to learn
// which columns Excel displays as dates or booleans.
const hintRows = 200

// ingestWorkbook loads one sheet of an xlsx workbook: the rows stream
// (excelize's row iterator, raw cell values) into a staging list column
// through DuckDB's appender, then one CREATE TABLE … AS SELECT gives each
// column the narrowest type all its values fit.
//
// A sheet's declared dimension is not trusted: the rows are counted as
// they stream, non-empty cells are capped at b.MaxCells, columns that hold
// neither a header nor a value are left out (a sheet with cells A1 and
// XFD1048576 has two columns, not 16,384), and the rest are capped at
// b.MaxColumns.
func ingestWorkbook(ctx context.Context, db *sql.DB, f *store.File, src string, sheet sheetSpec, b bounds) (meta *tableMeta, err error) {
	defer func() {
		if p := recover(); p != nil {
			meta, err = nil, apierr.New(apierr.UnsupportedFormat, "%q could not be read as an xlsx workbook (%v); it may be damaged", f.Name, p)
		}
	}()
	wb, err := excelize.OpenFile(src, excelize.Options{UnzipSizeLimit: 2 << 30, UnzipXMLSizeLimit: 64 << 20})
	if err != nil {
		return nil, apierr.Wrap(apierr.UnsupportedFormat, err, "%q is not a readable xlsx workbook: %v", f.Name, err)
	}
	defer wb.Close()
	sheets := wb.GetSheetList()
	name, err := pickSheet(f.Name, sheets, sheet)
	if err != nil {
		return nil, err
	}
	date1904 := false
	if p, err := wb.GetWorkbookProps(); err == nil && p.Date1904 != nil {
		date1904 = *p.Date1904
	}

	// Pass 1: displayed values of the first rows, for type hints.
	shown, err := readRows(ctx, wb, name, hintRows, false, nil)
	if err != nil {
		return nil, workbookError(f.Name, err)
	}

	if _, err := db.ExecContext(ctx, `CREATE TEMP TABLE staging (r VARCHAR[])`); err != nil {
		return nil, apierr.Wrap(apierr.Internal, err, "cannot prepare the table: %v", err)
	}

	// Pass 2: raw values of every row, appended as they stream.
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, apierr.Wrap(apierr.Internal, err, "cannot prepare the table: %v", err)
	}
	var header []string
	width := 0
	var used []bool // columns holding a header or a value
	var cells int64
	var raw0 [][]string // the first rows, raw, to pair with shown
	err = conn.Raw(func(dc any) error {
		app, err := duckdb.NewAppender(dc.(driver.Conn), "temp", "main", "staging")
		if err != nil {
			return err
		}
		_, err = readRows(ctx, wb, name, -1, true, func(i int, row []string) error {
			if i < hintRows {
				raw0 = append(raw0, row)
			}
			if isBlankRow(row) {
				return nil
			}
			for k, c := range row {
				if c == "" {
					continue
				}
				for len(used) <= k {
					used = append(used, false)
				}
				used[k] = true
				if cells++; cells > b.MaxCells {
					return apierr.New(apierr.TooLarge, "sheet %q of %q has more than %d non-empty cells, more than the table engine loads; export the sheet as CSV or split it", name, f.Name, b.MaxCells)
				}
			}
			if header == nil {
				header = row
				if isNumericRow(row) {
					header = []string{} // no header: columns are named by letter
				} else {
					return nil
				}
			}
			width = max(width, len(row))
			vals := make([]any, len(row))
			for k, c := range row {
				if c != "" {
					vals[k] = c
				}
			}
			return app.AppendRow(vals)
		})
		if cerr := app.Close(); err == nil {
			err = cerr
		}
		return err
	})
	conn.Close()
	if err != nil {
		if ctx.Err() != nil {
			return nil, apierr.Wrap(apierr.Timeout, err, "loading %q ran out of time", f.Name)
		}
		return nil, workbookError(f.Name, err)
	}
	if header == nil {
		return nil, apierr.New(apierr.FileReadFailed, "sheet %q of %q is empty: there is no header or data to read as a table", name, f.Name)
	}
	hasHeader := len(header) > 0
	width = max(width, len(header))
	var keep []int
	for k := 0; k < width; k++ {
		if k < len(used) && used[k] {
			keep = append(keep, k)
		}
	}
	if len(keep) > b.MaxColumns {
		return nil, apierr.New(apierr.TooLarge, "sheet %q of %q has %d columns with data, more than the %d the table engine loads; split the sheet or keep the columns you need", name, f.Name, len(keep), b.MaxColumns)
	}
	names := columnNames(header, keep)
	hints := typeHints(shown, raw0, width, hasHeader)

	exprs, err := inferColumns(ctx, db, keep, names, hints, date1904)
	if err != nil {
		return nil, apierr.Wrap(apierr.Internal, err, "inferring the column types of %q failed: %v", f.Name, err)
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE data AS SELECT `+strings.Join(exprs, ", ")+` FROM temp.staging`); err != nil {
		return nil, apierr.Wrap(apierr.Internal, err, "building the table of %q failed: %v", f.Name, err)
	}
	if _, err := db.ExecContext(ctx, `DROP TABLE temp.staging`); err != nil {
		return nil, apierr.Wrap(apierr.Internal, err, "building the table of %q failed: %v", f.Name, err)
	}
	meta = &tableMeta{
		Format: "xlsx", Sheet: name, Sheets: sheets, DecimalSeparator: ".",
		Encoding: "utf-8", EncodingConfidence: 1, HasHeader: hasHeader, Warnings: []string{},
	}
	if !hasHeader {
		meta.Warnings = append(meta.Warnings, "the first row holds only numbers, so it was read as data and the columns are named by their letters (A, B, …)")
	}
	if skipped := width - len(keep); skipped > 0 {
		meta.Warnings = append(meta.Warnings, fmt.Sprintf("%d empty columns (no header, no values) were left out; the other columns keep their letters as names where they have no header", skipped))
	}
	if err := describeTable(ctx, db, meta); err != nil {
		return nil, err
	}
	return meta, nil
}

func workbookError(name string, err error) error {
	if ae, ok := err.(*apierr.Error); ok {
		return ae
	}
	return apierr.Wrap(apierr.UnsupportedFormat, err, "%q could not be read as an xlsx workbook: %v", name, err)
}

// pickSheet resolves a sheet given by name (exact, then case-insensitive)
// or 1-based index; the default is the first sheet.
func pickSheet(file string, sheets []string, s sheetSpec) (string, error) {
	if len(sheets) == 0 {
		return "", apierr.New(apierr.UnsupportedFormat, "%q has no worksheets", file)
	}
	switch {
	case s.Index > 0:
		if s.Index <= len(sheets) {
			return sheets[s.Index-1], nil
		}
	case s.Name != "":
		for _, n := range sheets {
			if n == s.Name {
				return n, nil
			}
		}
		for _, n := range sheets {
			if strings.EqualFold(n, s.Name) {
				return n, nil
			}
		}
	default:
		return sheets[0], nil
	}
	return "", apierr.New(apierr.NotFound, "sheet %q not found in %q; sheets are: %s", s.String(), file, strings.Join(sheets, ", "))
}

// readRows iterates the rows of sheet (at most limit, all when limit < 0),
// calling fn with each row's cells, or collecting them when fn is nil.
func readRows(ctx context.Context, wb *excelize.File, sheet string, limit int, raw bool, fn func(i int, cells []string) error) ([][]string, error) {
	rows, err := wb.Rows(sheet)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out [][]string
	for i := 0; rows.Next() && (limit < 0 || i < limit); i++ {
		if i%1024 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		cells, err := rows.Columns(excelize.Options{RawCellValue: raw})
		if err != nil {
			return nil, err
		}
		if fn == nil {
			out = append(out, cells)
			continue
		}
		if err := fn(i, cells); err != nil {
			return nil, err
		}
	}
	return out, rows.Error()
}

func isBlankRow(cells []string) bool {
	for _, c := range cells {
		if strings.TrimSpace(c) != "" {
			return false
		}
	}
	return true
}

func isNumericRow(cells []string) bool {
	seen := false
	for _, c := range cells {
		if c == "" {
			continue
		}
		if _, err := strconv.ParseFloat(c, 64); err != nil {
			return false
		}
		seen = true
	}
	return seen
}

// columnNames makes unique, non-empty names for the columns cols (0-based
// sheet columns); an empty header cell is named after its column letter.
func columnNames(header []string, cols []int) []string {
	names := make([]string, len(cols))
	seen := map[string]int{}
	for i, k := range cols {
		n := ""
		if k < len(header) {
			n = strings.TrimSpace(header[k])
		}
		if n == "" {
			n, _ = excelize.ColumnNumberToName(k + 1)
		}
		base := n
		for j := 2; seen[strings.ToLower(n)] > 0; j++ {
			n = fmt.Sprintf("%s_%d", base, j)
		}
		seen[strings.ToLower(n)]++
		names[i] = n
	}
	return names
}

type typeHint struct{ date, datetime, boolean bool }

var dateLike = regexp.MustCompile(`(?i)(^\d{1,4}[-/.]\d{1,2}[-/.]\d{1,4})|(\b(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\b)|(\d{1,2}:\d{2})`)
var timeLike = regexp.MustCompile(`\d{1,2}:\d{2}`)

// typeHints compares displayed and raw values of the first data rows: a
// number displayed as a date is a date serial, 1/0 displayed as
// TRUE/FALSE is a boolean.
func typeHints(shown, raw [][]string, width int, hasHeader bool) []typeHint {
	hints := make([]typeHint, width)
	dateVotes := make([]int, width)
	boolVotes := make([]int, width)
	timeVotes := make([]int, width)
	seen := make([]int, width)
	skippedHeader := !hasHeader
	for i := 0; i < len(shown) && i < len(raw); i++ {
		if isBlankRow(raw[i]) {
			continue
		}
		if !skippedHeader {
			skippedHeader = true
			continue
		}
		for k := 0; k < width && k < len(raw[i]) && k < len(shown[i]); k++ {
			r, s := raw[i][k], shown[i][k]
			if r == "" {
				continue
			}
			seen[k]++
			if (s == "TRUE" || s == "FALSE") && (r == "1" || r == "0") {
				boolVotes[k]++
			}
			if _, err := strconv.ParseFloat(r, 64); err == nil && s != r && dateLike.MatchString(s) {
				dateVotes[k]++
				if timeLike.MatchString(s) || strings.Contains(r, ".") {
					timeVotes[k]++
				}
			}
		}
	}
	for k := range hints {
		if seen[k] == 0 {
			continue
		}
		hints[k].boolean = boolVotes[k] == seen[k]
		if dateVotes[k] == seen[k] {
			hints[k].date = true
			hints[k].datetime = timeVotes[k] > 0
		}
	}
	return hints
}

// inferColumns picks the type of each column cols[i] (0-based sheet
// column, named names[i]) from all its values and returns the select
// expressions that convert the staged text. Each scan covers a batch of
// columns: one SELECT over thousands of columns takes DuckDB's planner
// minutes, and the planner does not stop for an interrupt.
func inferColumns(ctx context.Context, db *sql.DB, cols []int, names []string, hints []typeHint, date1904 bool) ([]string, error) {
	const per = 7 // aggregates per column
	counts := make([]int64, 0, len(cols)*per)
	for lo := 0; lo < len(cols); lo += aggBatch / per * 4 {
		hi := min(lo+aggBatch/per*4, len(cols))
		var aggs []string
		for _, k := range cols[lo:hi] {
			v := fmt.Sprintf("r[%d]", k+1)
			aggs = append(aggs,
				fmt.Sprintf("count(%s)", v),
				// TRY_CAST('0.25' AS BIGINT) rounds; integers must look like ones
				fmt.Sprintf("count(*) FILTER (WHERE regexp_full_match(%s, '[-+]?[0-9]+') AND TRY_CAST(%s AS BIGINT) IS NOT NULL)", v, v),
				fmt.Sprintf("count(TRY_CAST(%s AS DOUBLE))", v),
				fmt.Sprintf("count(TRY_CAST(%s AS DATE))", v),
				fmt.Sprintf("count(TRY_CAST(%s AS TIMESTAMP))", v),
				fmt.Sprintf("count(*) FILTER (WHERE %s IN ('0', '1'))", v),
				fmt.Sprintf("count(*) FILTER (WHERE lower(%s) IN ('true', 'false'))", v))
		}
		batch := make([]int64, len(aggs))
		ptrs := make([]any, len(aggs))
		for i := range batch {
			ptrs[i] = &batch[i]
		}
		if err := db.QueryRowContext(ctx, `SELECT `+strings.Join(aggs, ", ")+` FROM temp.staging`).Scan(ptrs...); err != nil {
			return nil, err
		}
		counts = append(counts, batch...)
	}
	epoch := "1899-12-30"
	if date1904 {
		epoch = "1904-01-01"
	}
	exprs := make([]string, len(cols))
	for i, k := range cols {
		c := counts[i*per : i*per+per]
		all, ints, dbls, dates, stamps, bits, bools := c[0], c[1], c[2], c[3], c[4], c[5], c[6]
		v := fmt.Sprintf("r[%d]", k+1)
		h := typeHint{}
		if k < len(hints) {
			h = hints[k]
		}
		var x string
		switch {
		case all == 0:
			x = v
		case h.boolean && bits == all:
			x = fmt.Sprintf("(%s = '1')", v)
		case h.date && dbls == all && ints == all && !h.datetime:
			x = fmt.Sprintf("CAST(DATE '%s' + CAST(%s AS INTEGER) AS DATE)", epoch, v)
		case h.date && dbls == all:
			x = fmt.Sprintf("TIMESTAMP '%s' + to_microseconds(CAST(round(CAST(%s AS DOUBLE) * 86400000000) AS BIGINT))", epoch, v)
		case ints == all:
			x = fmt.Sprintf("CAST(%s AS BIGINT)", v)
		case dbls == all:
			x = fmt.Sprintf("CAST(%s AS DOUBLE)", v)
		case dates == all:
			x = fmt.Sprintf("CAST(%s AS DATE)", v)
		case stamps == all:
			x = fmt.Sprintf("CAST(%s AS TIMESTAMP)", v)
		case bools == all:
			x = fmt.Sprintf("(lower(%s) = 'true')", v)
		default:
			x = v
		}
		exprs[i] = x + " AS " + quoteIdent(names[i])
	}
	return exprs, nil
}
