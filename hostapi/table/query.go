package table

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// querier is what runs SQL: an instance's pool or one pinned connection.
type querier interface {
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
}

// stream runs q, reports its columns (names and seed-001 types) and hands
// every row's raw values to fn. The row slice is reused between calls.
func stream(ctx context.Context, db querier, q string, head func(cols, kinds []string) error, fn func(row []any) error) error {
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return sqlError(ctx, err)
	}
	defer rows.Close()
	cts, err := rows.ColumnTypes()
	if err != nil {
		return sqlError(ctx, err)
	}
	cols := make([]string, len(cts))
	kinds := make([]string, len(cts))
	for i, ct := range cts {
		cols[i] = ct.Name()
		kinds[i] = typeName(ct.DatabaseTypeName())
	}
	if err := head(cols, kinds); err != nil {
		return err
	}
	vals := make([]any, len(cts))
	ptrs := make([]any, len(cts))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return sqlError(ctx, err)
		}
		if err := fn(vals); err != nil {
			return err
		}
	}
	return sqlError(ctx, rows.Err())
}

func (e *engine) readRows(ctx context.Context, c *hostapi.Call) (any, error) {
	t, inst, err := e.open(ctx, c, c.Args.String("path"), sheetArg(c.Args, "sheet"), nil)
	if err != nil {
		return nil, err
	}
	defer e.pool.release(inst)
	start := time.Now()
	idx, err := pickColumns(t.meta, c.Args.Strings("columns"))
	if err != nil {
		return nil, err
	}
	rowStart, _ := c.Args.Int("row_start")
	rowCount, _ := c.Args.Int("row_count")
	total := t.meta.RowCount
	if rowStart > total && !(total == 0 && rowStart == 1) {
		return nil, apierr.New(apierr.ValidationFailed, "row_start %d is past the last row (%d); the table has %d data rows", rowStart, total, total)
	}
	sel := make([]string, len(idx))
	for k, i := range idx {
		sel[k] = quoteIdent(t.meta.Columns[i].Name)
	}
	if len(sel) == 0 {
		return nil, apierr.New(apierr.ValidationFailed, "the table has no columns")
	}
	qctx, cancel := e.queryContext(ctx)
	defer cancel()
	// rowid is the 0-based position in the file: tables are written once,
	// in file order, and never updated.
	var cols, kinds []string
	col := &collector{}
	err = readPages(qctx, inst.db, srcAlias(0)+".main.data", strings.Join(sel, ", "), rowStart-1, min(rowStart-1+rowCount, total), func(c, k []string) error {
		cols, kinds, col.kinds = c, k, k
		return nil
	}, col.add)
	if err != nil {
		return nil, err
	}
	if col.rows == nil {
		col.rows = [][]any{}
	}
	return RowsResult{
		Columns: cols, ColumnTypes: kinds, Rows: col.rows,
		RowStart: rowStart, RowCount: len(col.rows), TotalRows: total, TotalRowCount: total,
		HasMore:        rowStart-1+int64(len(col.rows)) < total,
		QueryElapsedMs: elapsedMs(start),
	}, nil
}

func elapsedMs(start time.Time) float64 {
	return float64(time.Since(start).Microseconds()) / 1000
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

// orderWarning is the determinism note of seed 001 for results read in
// windows without an ORDER BY.
const orderWarning = "the query has no ORDER BY, so the order of rows across windows is not guaranteed; add ORDER BY (e.g. on a key column) before paging with window_offset"

func (e *engine) query(ctx context.Context, c *hostapi.Call) (any, error) {
	q, err := checkSQL(c.Args.String("query"))
	if err != nil {
		return nil, err
	}
	window := c.Args.IntOr("window_rows", e.opts.DefaultWindow)
	offset := c.Args.IntOr("window_offset", 0)
	_, inst, err := e.open(ctx, c, c.Args.String("path"), sheetArg(c.Args, "sheet"), tablesArg(c.Args))
	if err != nil {
		return nil, err
	}
	defer e.pool.release(inst)
	start := time.Now() // query time, not the first call's loading

	qctx, cancel := e.queryContext(ctx)
	defer cancel()
	conn, err := inst.db.Conn(qctx)
	if err != nil {
		return nil, sqlError(qctx, err)
	}
	defer conn.Close()
	names, err := checkPrepared(qctx, conn, q.Text)
	if err != nil {
		return nil, err
	}
	n, err := materialize(qctx, conn, q.Text, len(names), window, offset)
	defer dropResult(conn)
	if err != nil {
		return nil, err
	}
	col := &collector{}
	err = readPages(qctx, conn, resultTable, "*", 0, n, func(_, kinds []string) error {
		col.kinds = kinds
		return nil
	}, col.add)
	if err != nil {
		return nil, err
	}
	total := offset + n
	if n == window || (n == 0 && offset > 0) {
		// The window is full (or past the end): count the whole result.
		if err := conn.QueryRowContext(qctx, fmt.Sprintf("SELECT count(*) FROM (\n%s\n) AS _count", q.Text)).Scan(&total); err != nil {
			return nil, sqlError(qctx, err)
		}
	}
	res := QueryResult{
		Columns: names, ColumnTypes: col.kinds, Rows: col.rows, RowCount: len(col.rows),
		TotalRowCount: total, WindowRows: window, WindowOffset: offset,
		HasMore: offset+n < total,
	}
	if res.Rows == nil {
		res.Rows = [][]any{}
	}
	if !q.HasOrderBy && (res.HasMore || offset > 0) {
		res.Warnings = []string{orderWarning}
	}
	res.QueryElapsedMs = elapsedMs(start)
	return res, nil
}
