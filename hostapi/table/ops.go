package table

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// open ensures the call's table (and the ones named in extra) and returns a
// locked instance that has them attached as data and the extra names.
func (e *engine) open(ctx context.Context, c *hostapi.Call, ref string, sheet sheetSpec, extra map[string]string) (*tableDB, *instance, error) {
	names := make([]string, 0, len(extra))
	seen := map[string]bool{"data": true}
	for n := range extra {
		if seen[strings.ToLower(n)] {
			if strings.EqualFold(n, "data") {
				return nil, nil, apierr.New(apierr.ValidationFailed, "tables: the name %q is taken by the file of this call; choose another table name", n)
			}
			return nil, nil, apierr.New(apierr.ValidationFailed, "tables: %q is given twice (table names are case-insensitive)", n)
		}
		seen[strings.ToLower(n)] = true
		names = append(names, n)
	}
	sort.Strings(names)
	for attempt := 0; ; attempt++ {
		t, err := e.ensure(ctx, c.WS, ref, sheet)
		if err != nil {
			return nil, nil, err
		}
		atts := []attachment{{Name: "data", Path: t.path}}
		for _, n := range names {
			et, err := e.ensure(ctx, c.WS, extra[n], sheetSpec{})
			if err != nil {
				ae := apierr.Of(err)
				return nil, nil, apierr.Wrap(ae.Code, err, "tables.%s (%q): %s", n, extra[n], ae.Message)
			}
			atts = append(atts, attachment{Name: n, Path: et.path})
		}
		inst, err := e.pool.acquire(ctx, atts)
		if err == nil {
			return t, inst, nil
		}
		// A database deleted under us (by a sweep, or another process
		// sharing the data directory) is rebuilt once.
		missing := false
		for _, a := range atts {
			if _, serr := os.Stat(a.Path); serr != nil {
				e.forget(a.Path)
				missing = true
			}
		}
		if !missing || attempt > 0 {
			return nil, nil, err
		}
	}
}

func (e *engine) getMap(ctx context.Context, c *hostapi.Call) (any, error) {
	m, err := e.ensureMap(ctx, c.WS, c.Args.String("path"), sheetArg(c.Args, "sheet"))
	if err != nil {
		return nil, err
	}
	return e.mapResult(*m), nil
}

func (e *engine) mapResult(m tableMeta) MapResult {
	r := MapResult{
		Format: m.Format, FormatInferred: m.FormatInferred, Sheet: m.Sheet, Sheets: m.Sheets,
		Delimiter: m.Delimiter, QuoteChar: m.QuoteChar, Newline: m.Newline, DecimalSeparator: m.DecimalSeparator,
		EncodingDetected: m.Encoding, EncodingConfidence: m.EncodingConfidence,
		HasHeader: m.HasHeader, RowCount: m.RowCount, ColumnCount: len(m.Columns),
		Columns: make([]MapColumn, len(m.Columns)), ChunkSize: e.opts.ChunkSize, Chunks: []Chunk{},
		Warnings: append([]string{}, m.Warnings...),
	}
	for i, col := range m.Columns {
		r.Columns[i] = MapColumn{Name: col.Name, Index: i, InferredType: typeName(col.SQLType)}
	}
	size := int64(e.opts.ChunkSize)
	for i, start := 0, int64(1); start <= m.RowCount; i, start = i+1, start+size {
		end := min(start+size-1, m.RowCount)
		r.Chunks = append(r.Chunks, Chunk{Index: i, Rows: fmt.Sprintf("%d-%d", start, end)})
	}
	return r
}

func (e *engine) describe(ctx context.Context, c *hostapi.Call) (any, error) {
	t, inst, err := e.open(ctx, c, c.Args.String("path"), sheetArg(c.Args, "sheet"), nil)
	if err != nil {
		return nil, err
	}
	defer e.pool.release(inst)
	cols := t.meta.Columns
	res := DescribeResult{RowCount: t.meta.RowCount, ColumnCount: len(cols), Columns: make([]DescribeColumn, len(cols))}
	for i, col := range cols {
		res.Columns[i] = DescribeColumn{Name: col.Name, Index: i, InferredType: typeName(col.SQLType), SQLType: col.SQLType}
	}
	if len(cols) == 0 || t.meta.RowCount == 0 {
		return res, nil
	}
	var aggs []string
	for _, col := range cols {
		q := quoteIdent(col.Name)
		aggs = append(aggs, "count("+q+")", "approx_count_distinct("+q+")")
	}
	qctx, cancel := e.queryContext(ctx)
	defer cancel()
	vals := make([]any, len(aggs))
	ptrs := make([]any, len(aggs))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := inst.db.QueryRowContext(qctx, "SELECT "+strings.Join(aggs, ", ")+" FROM "+srcAlias(0)+".main.data").Scan(ptrs...); err != nil {
		return nil, sqlError(qctx, err)
	}
	for i := range res.Columns {
		dc := &res.Columns[i]
		dc.NonNullCount = toInt(vals[2*i])
		dc.NullCount = t.meta.RowCount - dc.NonNullCount
		dc.Nullable = dc.NullCount > 0
		// The estimate may overshoot slightly; it never exceeds the values.
		dc.DistinctEstimate = min(toInt(vals[2*i+1]), dc.NonNullCount)
	}
	return res, nil
}

// pickColumns resolves requested column names (exact, then
// case-insensitive) to indexes; nil selects every column.
func pickColumns(meta tableMeta, want []string) ([]int, error) {
	if len(want) == 0 {
		idx := make([]int, len(meta.Columns))
		for i := range idx {
			idx[i] = i
		}
		return idx, nil
	}
	var out []int
	for _, w := range want {
		found := -1
		for i, c := range meta.Columns {
			if c.Name == w {
				found = i
				break
			}
		}
		if found < 0 {
			for i, c := range meta.Columns {
				if strings.EqualFold(c.Name, w) {
					found = i
					break
				}
			}
		}
		if found < 0 {
			names := make([]string, len(meta.Columns))
			for i, c := range meta.Columns {
				names[i] = c.Name
			}
			return nil, apierr.New(apierr.ValidationFailed, "column %q not found; columns are: %s", w, strings.Join(names, ", "))
		}
		out = append(out, found)
	}
	return out, nil
}
