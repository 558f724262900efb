package table

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// open ensures the call's table and the ones named in extra, and returns
// the attachments a query instance needs: the call's table as data, the
// extra ones under their names.
func (e *engine) open(ctx context.Context, c *hostapi.Call, ref string, sheet sheetSpec, extra map[string]string) (*tableDB, []attachment, error) {
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
	return t, atts, nil
}

// run sends a worker operation on the tables of atts, bounded by ctx and
// by limit. A database deleted under the call (by a sweep, or another
// process sharing the data directory) is rebuilt once, through retry.
func (e *engine) run(ctx context.Context, limit time.Duration, atts []attachment, op string, args any, out any, retry func() (any, error)) error {
	err := e.callSQL(ctx, limit, poolKey(atts), op, args, out)
	if err == nil || retry == nil || apierr.CodeOf(err) != apierr.FileReadFailed {
		return err
	}
	missing := false
	for _, a := range atts {
		if _, serr := os.Stat(a.Path); serr != nil {
			e.forget(a.Path)
			missing = true
		}
	}
	if !missing {
		return err
	}
	args, err = retry()
	if err != nil {
		return err
	}
	return e.callSQL(ctx, limit, poolKey(atts), op, args, out)
}

// callSQL runs op on a worker. limit bounds getting a worker (waiting for
// a busy one, or starting one) and, afresh once it has one, the SQL work:
// a cold start on a loaded machine does not eat into the statement's time.
// The caller's own deadline bounds both.
func (e *engine) callSQL(ctx context.Context, limit time.Duration, key, op string, args, out any) error {
	actx, acancel := e.bound(ctx, limit)
	w, err := e.workers.acquire(actx, key)
	acancel()
	if err != nil {
		return err
	}
	qctx, qcancel := e.bound(ctx, limit)
	defer qcancel()
	return e.workers.do(qctx, w, op, args, nil, out)
}

// bound limits ctx to limit and to the engine's life: closing the engine
// cancels it with errEngineClosed.
func (e *engine) bound(ctx context.Context, limit time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	ctx, cancelCause := context.WithCancelCause(ctx)
	stop := context.AfterFunc(e.ctx, func() { cancelCause(context.Cause(e.ctx)) })
	return ctx, func() {
		stop()
		cancelCause(context.Canceled)
		cancel()
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

// tableCall ensures the call's one table and runs op on it with args
// built from it.
func (e *engine) tableCall(ctx context.Context, c *hostapi.Call, sheetName, op string, build func(t *tableDB) (tableArgs, error), out any) error {
	ref, sheet := c.Args.String("path"), sheetArg(c.Args, sheetName)
	t, atts, err := e.open(ctx, c, ref, sheet, nil)
	if err != nil {
		return err
	}
	args, err := build(t)
	if err != nil {
		return err
	}
	return e.run(ctx, e.opts.QueryTimeout, atts, op, args, out, func() (any, error) {
		t, _, err := e.open(ctx, c, ref, sheet, nil)
		if err != nil {
			return nil, err
		}
		return build(t)
	})
}

func (e *engine) describe(ctx context.Context, c *hostapi.Call) (any, error) {
	var res DescribeResult
	err := e.tableCall(ctx, c, "sheet", opDescribe, func(t *tableDB) (tableArgs, error) {
		return tableArgs{Path: t.path, Meta: t.meta}, nil
	}, &res)
	return res, err
}

func (e *engine) stats(ctx context.Context, c *hostapi.Call) (any, error) {
	var res StatsResult
	err := e.tableCall(ctx, c, "sheet", opStats, func(t *tableDB) (tableArgs, error) {
		idx, err := pickColumns(t.meta, c.Args.Strings("columns"))
		return tableArgs{Path: t.path, Meta: t.meta, Columns: idx}, err
	}, &res)
	for i := range res.Columns {
		sc := &res.Columns[i]
		sc.Min, sc.Max, sc.Sum = exactNumbers(sc.Min), exactNumbers(sc.Max), exactNumbers(sc.Sum)
		for k := range sc.MostCommon {
			sc.MostCommon[k].Value = exactNumbers(sc.MostCommon[k].Value)
		}
	}
	return res, err
}

func (e *engine) readRows(ctx context.Context, c *hostapi.Call) (any, error) {
	var res RowsResult
	err := e.tableCall(ctx, c, "sheet", opRows, func(t *tableDB) (tableArgs, error) {
		idx, err := pickColumns(t.meta, c.Args.Strings("columns"))
		if err != nil {
			return tableArgs{}, err
		}
		if len(idx) == 0 {
			return tableArgs{}, apierr.New(apierr.ValidationFailed, "the table has no columns")
		}
		// The schema bounds both to 2^53, so start-1+count cannot overflow.
		start, _ := c.Args.Int("row_start")
		count, _ := c.Args.Int("row_count")
		if total := t.meta.RowCount; start > total && !(total == 0 && start == 1) {
			return tableArgs{}, apierr.New(apierr.ValidationFailed, "row_start %d is past the last row (%d); the table has %d data rows", start, total, total)
		}
		return tableArgs{Path: t.path, Meta: t.meta, Columns: idx, Start: start, Count: count}, nil
	}, &res)
	exactRows(res.Rows)
	return res, err
}

// tablesArg reads the `tables` argument: table name → file ref.
func tablesArg(a hostapi.Args) map[string]string {
	m, _ := a.Raw("tables").(map[string]any)
	out := make(map[string]string, len(m))
	for k, v := range m {
		if s, ok := v.(string); ok {
			out[k] = s
		}
	}
	return out
}

func (e *engine) query(ctx context.Context, c *hostapi.Call) (any, error) {
	q, err := checkSQL(c.Args.String("query"))
	if err != nil {
		return nil, err
	}
	args := queryArgs{SQL: q.Text, HasOrderBy: q.HasOrderBy,
		Window: c.Args.IntOr("window_rows", e.opts.DefaultWindow), Offset: c.Args.IntOr("window_offset", 0)}
	ref, sheet, extra := c.Args.String("path"), sheetArg(c.Args, "sheet"), tablesArg(c.Args)
	_, atts, err := e.open(ctx, c, ref, sheet, extra)
	if err != nil {
		return nil, err
	}
	args.Tables = atts
	var res QueryResult
	err = e.run(ctx, e.opts.QueryTimeout, atts, opQuery, args, &res, func() (any, error) {
		_, atts, err := e.open(ctx, c, ref, sheet, extra)
		args.Tables = atts
		return args, err
	})
	if err != nil {
		return nil, err
	}
	exactRows(res.Rows)
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
