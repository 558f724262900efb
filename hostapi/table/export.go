package table

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"

	"github.com/xuri/excelize/v2"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/store"
)

// xlsxMaxRows is the number of data rows a sheet holds below its header.
const xlsxMaxRows = excelize.TotalRows - 1

func (e *engine) export(ctx context.Context, c *hostapi.Call) (any, error) {
	target := c.Args.String("target_path")
	format := c.Args.String("format")
	if ext := strings.ToLower(filepath.Ext(target)); ext != "."+format {
		return nil, apierr.New(apierr.ValidationFailed, "target_path %q must end in .%s for format %q", target, format, format)
	}
	sheet := c.Args.String("sheet")
	if format == "csv" && sheet != "" {
		return nil, apierr.New(apierr.ValidationFailed, "sheet names the sheet of xlsx output; a csv export has none — omit sheet or use format \"xlsx\"")
	}
	if format == "xlsx" {
		if sheet == "" {
			sheet = "Sheet1"
		}
		if strings.ContainsAny(sheet, `[]:*?/\`) || strings.HasPrefix(sheet, "'") || strings.HasSuffix(sheet, "'") {
			return nil, apierr.New(apierr.ValidationFailed, "sheet name %q is not allowed in xlsx: it may not contain [ ] : * ? / \\ or start or end with '", sheet)
		}
	}
	overwrite := c.Args.Bool("overwrite")
	if _, err := c.WS.Resolve(ctx, target); err == nil && !overwrite {
		return nil, apierr.New(apierr.AlreadyExists, "file %q already exists; pass overwrite: true to replace it, or choose another target_path", target)
	}
	args := exportArgs{Format: format, Sheet: sheet, QueryTimeoutMs: e.opts.QueryTimeout.Milliseconds()}
	var warnings []string
	if c.Args.Has("query") {
		q, err := checkSQL(c.Args.String("query"))
		if err != nil {
			return nil, err
		}
		args.SQL = q.Text
		if !q.HasOrderBy {
			warnings = append(warnings, "the query has no ORDER BY, so the row order of the export is the engine's; add ORDER BY for a reproducible order")
		}
	}
	ref, sheetIn := c.Args.String("path"), sheetArg(c.Args, "source_sheet")
	t, atts, err := e.open(ctx, c, ref, sheetIn, nil)
	if err != nil {
		return nil, err
	}
	// The worker writes the file beside the table cache; the store then
	// takes it in (quota, size limit, events) like any upload.
	if err := os.MkdirAll(e.exportDir(), 0o750); err != nil {
		return nil, apierr.Wrap(apierr.FileWriteFailed, err, "cannot prepare the export: %v", err)
	}
	out, err := os.CreateTemp(e.exportDir(), "export-*."+format)
	if err != nil {
		return nil, apierr.Wrap(apierr.FileWriteFailed, err, "cannot prepare the export: %v", err)
	}
	out.Close()
	defer os.Remove(out.Name())
	args.Path, args.Meta, args.Out = t.path, t.meta, out.Name()
	if maxFile, _ := e.host.Store.Limits(); maxFile > 0 {
		args.MaxBytes = maxFile
	}
	var res exportOut
	// A query's result is materialized under the per-query limits, so
	// that a runaway query stops there; writing the rows may then take up
	// to the ingestion limit.
	err = e.run(ctx, e.opts.IngestTimeout, atts, opExport, args, &res, func() (any, error) {
		t, _, err := e.open(ctx, c, ref, sheetIn, nil)
		if err != nil {
			return nil, err
		}
		args.Path, args.Meta = t.path, t.meta
		return args, nil
	})
	if err != nil {
		return nil, err
	}
	body, err := os.Open(out.Name())
	if err != nil {
		return nil, apierr.Wrap(apierr.FileWriteFailed, err, "reading the export back failed: %v", err)
	}
	defer body.Close()
	f, err := c.WS.Create(ctx, store.CreateOptions{Name: target, Source: store.SourceDerived, Overwrite: overwrite,
		MimeType: map[string]string{"csv": "text/csv", "xlsx": xlsxMIME}[format]}, body)
	if err != nil {
		return nil, err
	}
	result := ExportResult{ID: f.ID, TargetPath: f.Name, Format: format, RowCount: res.Rows, ColumnCount: res.Columns,
		Size: f.Size, Warnings: append(append([]string{}, warnings...), res.Warnings...)}
	if format == "xlsx" {
		result.Sheet = sheet
	}
	return result, nil
}

// exportDir holds exports being written (the sweep clears leftovers).
func (e *engine) exportDir() string { return filepath.Join(e.dir, "exports") }

// export writes the table, or a.SQL's result on it, to a.Out (worker
// side), never more than a.MaxBytes.
func (d *duck) export(ctx context.Context, a exportArgs) (exportOut, error) {
	inst, err := d.pool.acquire(ctx, []attachment{{Name: "data", Path: a.Path}})
	if err != nil {
		return exportOut{}, err
	}
	defer d.pool.release(inst)
	conn, err := inst.db.Conn(ctx)
	if err != nil {
		return exportOut{}, sqlError(ctx, err)
	}
	defer conn.Close()
	// Without a query the table is written in file order (rowid order).
	source := srcAlias(0) + ".main.data"
	count := a.Meta.RowCount
	var names []string
	for _, col := range a.Meta.Columns {
		names = append(names, col.Name)
	}
	if a.SQL != "" {
		qctx, cancel := context.WithTimeout(ctx, time.Duration(a.QueryTimeoutMs)*time.Millisecond)
		names, err = checkPrepared(qctx, conn, a.SQL)
		if err == nil {
			count, err = materialize(qctx, conn, a.SQL, len(names), -1, 0)
			defer dropResult(conn)
		}
		cancel()
		if err != nil {
			return exportOut{}, err
		}
		source = resultTable
	}
	if a.Format == "xlsx" && count > xlsxMaxRows {
		return exportOut{}, apierr.New(apierr.ValidationFailed, "the export has %d rows but an xlsx sheet holds at most %d below its header; filter the rows or export as csv", count, xlsxMaxRows)
	}
	f, err := os.Create(a.Out)
	if err != nil {
		return exportOut{}, apierr.Wrap(apierr.FileWriteFailed, err, "cannot write the export: %v", err)
	}
	defer f.Close()
	w := &cappedWriter{w: f, left: a.MaxBytes}
	if a.MaxBytes <= 0 {
		w.left = 1 << 62
	}
	src := pageSource{db: conn, table: source, rows: count, names: names}
	var o exportOut
	o.Rows = count
	if a.Format == "xlsx" {
		o.Columns, o.Warnings, err = writeXLSX(ctx, src, a.Sheet, w)
	} else {
		o.Columns, o.Warnings, err = writeCSV(ctx, src, w)
	}
	if err == nil {
		err = f.Close()
	}
	if w.over {
		return exportOut{}, apierr.New(apierr.TooLarge, "the export is larger than the %d-byte file size limit; filter or aggregate the rows, or select fewer columns", a.MaxBytes)
	}
	if err != nil {
		if ctx.Err() != nil {
			return exportOut{}, apierr.Wrap(apierr.Timeout, err, "writing the export ran out of time; filter the rows or export fewer columns")
		}
		return exportOut{}, apierr.From(err)
	}
	if o.Warnings == nil {
		o.Warnings = []string{}
	}
	return o, nil
}

// cappedWriter fails once more than left bytes are written.
type cappedWriter struct {
	w    io.Writer
	left int64
	over bool
}

var errExportTooLarge = errors.New("export over the file size limit")

func (c *cappedWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > c.left {
		c.over = true
		return 0, errExportTooLarge
	}
	c.left -= int64(len(p))
	return c.w.Write(p)
}

// pageSource is what an export writes: the first rows of a table, read
// in rowid pages, under the given column names.
type pageSource struct {
	db    querier
	table string
	rows  int64
	names []string
}

func (p pageSource) read(ctx context.Context, head func(kinds []string) error, fn func(row []any) error) error {
	return readPages(ctx, p.db, p.table, "*", 0, p.rows, func(_, kinds []string) error { return head(kinds) }, fn)
}

// writeCSV streams src as RFC 4180 CSV with a header row.
func writeCSV(ctx context.Context, src pageSource, w io.Writer) (int, []string, error) {
	bw := bufio.NewWriterSize(w, 256<<10)
	cw := csv.NewWriter(bw)
	var kinds []string
	var rec []string
	var notes coercions
	err := src.read(ctx, func(k []string) error {
		kinds = k
		rec = make([]string, len(k))
		return cw.Write(src.names)
	}, func(row []any) error {
		for i, v := range row {
			rec[i] = csvText(v, kinds[i], &notes)
		}
		return cw.Write(rec)
	})
	if err != nil {
		return 0, nil, err
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return 0, nil, err
	}
	if err := bw.Flush(); err != nil {
		return 0, nil, err
	}
	return len(kinds), notes.list(), nil
}

// coercions counts values an export could not write as they are.
type coercions struct {
	nested, nonFinite, truncated int
}

func (c *coercions) list() []string {
	out := []string{}
	if c.nested > 0 {
		out = append(out, fmt.Sprintf("%d nested values (lists, structs, maps) were written as JSON text", c.nested))
	}
	if c.nonFinite > 0 {
		out = append(out, fmt.Sprintf("%d NaN or infinite numbers were written as text", c.nonFinite))
	}
	if c.truncated > 0 {
		out = append(out, fmt.Sprintf("%d texts longer than %d characters were cut to fit an xlsx cell", c.truncated, excelize.TotalCellChars))
	}
	return out
}

func csvText(v any, kind string, notes *coercions) string {
	switch t := v.(type) {
	case nil:
		return ""
	case string:
		return t
	case float64:
		if math.IsNaN(t) || math.IsInf(t, 0) {
			notes.nonFinite++
		}
		return strconv.FormatFloat(t, 'f', -1, 64)
	case float32:
		return strconv.FormatFloat(float64(t), 'f', -1, 32)
	case int64:
		return strconv.FormatInt(t, 10)
	case bool:
		return strconv.FormatBool(t)
	case time.Time:
		return formatTime(t, kind)
	}
	j := jsonValue(v, kind)
	switch t := j.(type) {
	case []any, map[string]any:
		notes.nested++
		b, _ := json.Marshal(t)
		return string(b)
	case float64:
		return strconv.FormatFloat(t, 'f', -1, 64)
	}
	return fmt.Sprint(j)
}

// writeXLSX streams src into one sheet with excelize's stream writer
// (rows go to a temporary file, not memory), then zips the workbook into w.
func writeXLSX(ctx context.Context, src pageSource, sheet string, w io.Writer) (int, []string, error) {
	x := excelize.NewFile()
	defer x.Close()
	if sheet != "Sheet1" {
		if err := x.SetSheetName("Sheet1", sheet); err != nil {
			return 0, nil, apierr.Wrap(apierr.ValidationFailed, err, "sheet name %q: %v", sheet, err)
		}
	}
	sw, err := x.NewStreamWriter(sheet)
	if err != nil {
		return 0, nil, apierr.Wrap(apierr.Internal, err, "cannot start the xlsx writer: %v", err)
	}
	dateStyle, _ := x.NewStyle(&excelize.Style{NumFmt: 14})
	stampStyle, _ := x.NewStyle(&excelize.Style{NumFmt: 22})
	var kinds []string
	var cells []any
	var notes coercions
	r := 1
	err = src.read(ctx, func(k []string) error {
		if len(k) > excelize.MaxColumns {
			return apierr.New(apierr.ValidationFailed, "the export has %d columns but an xlsx sheet holds at most %d; select fewer columns or export as csv", len(k), excelize.MaxColumns)
		}
		kinds = k
		cells = make([]any, len(k))
		head := make([]any, len(k))
		for i, c := range src.names {
			head[i] = c
		}
		return sw.SetRow("A1", head)
	}, func(row []any) error {
		r++
		for i, v := range row {
			cells[i] = xlsxValue(v, kinds[i], dateStyle, stampStyle, &notes)
		}
		cell, err := excelize.CoordinatesToCellName(1, r)
		if err != nil {
			return apierr.Wrap(apierr.ValidationFailed, err, "row %d does not fit in an xlsx sheet", r)
		}
		return sw.SetRow(cell, cells)
	})
	if err != nil {
		return 0, nil, err
	}
	if err := sw.Flush(); err != nil {
		return 0, nil, apierr.Wrap(apierr.Internal, err, "writing the xlsx sheet failed: %v", err)
	}
	if err := x.Write(w); err != nil {
		return 0, nil, err
	}
	return len(kinds), notes.list(), nil
}

func xlsxValue(v any, kind string, dateStyle, stampStyle int, notes *coercions) any {
	switch t := v.(type) {
	case nil, bool, int64, int32, int16, int8:
		return t
	case float64:
		if math.IsNaN(t) || math.IsInf(t, 0) {
			notes.nonFinite++
			return jsonValue(t, kind)
		}
		return t
	case string:
		return fitCell(t, notes)
	case time.Time:
		switch kind {
		case "date":
			return excelize.Cell{StyleID: dateStyle, Value: t}
		case "time":
			return formatTime(t, kind)
		}
		return excelize.Cell{StyleID: stampStyle, Value: t.UTC()}
	}
	switch j := jsonValue(v, kind).(type) {
	case []any, map[string]any:
		notes.nested++
		b, _ := json.Marshal(j)
		return fitCell(string(b), notes)
	case string:
		return fitCell(j, notes)
	default:
		return j
	}
}

// fitCell cuts s to the 32,767 UTF-16 units an xlsx cell holds.
func fitCell(s string, notes *coercions) string {
	if len(s) <= excelize.TotalCellChars {
		return s
	}
	u := utf16.Encode([]rune(s))
	if len(u) <= excelize.TotalCellChars {
		return s
	}
	notes.truncated++
	return string(utf16.Decode(u[:excelize.TotalCellChars]))
}

var _ querier = (*sql.Conn)(nil)
