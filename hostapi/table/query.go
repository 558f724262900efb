package table

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"
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

// readRowsOf reads rows a.Start … a.Start+a.Count-1 of columns a.Columns
// (worker side). rowid is the 0-based position in the file: tables are
// written once, in file order, and never updated.
func readRowsOf(ctx context.Context, inst *instance, a tableArgs) (RowsResult, error) {
	start := time.Now()
	sel := make([]string, len(a.Columns))
	for k, i := range a.Columns {
		sel[k] = quoteIdent(a.Meta.Columns[i].Name)
	}
	total := a.Meta.RowCount
	var cols, kinds []string
	col := &collector{}
	err := readPages(ctx, inst.db, srcAlias(0)+".main.data", strings.Join(sel, ", "), a.Start-1, min(a.Start-1+a.Count, total), func(c, k []string) error {
		cols, kinds, col.kinds = c, k, k
		return nil
	}, col.add)
	if err != nil {
		return RowsResult{}, err
	}
	if col.rows == nil {
		col.rows = [][]any{}
	}
	if cols == nil {
		// No page was read (an empty table): the names come from the map.
		for _, i := range a.Columns {
			cols = append(cols, a.Meta.Columns[i].Name)
			kinds = append(kinds, typeName(a.Meta.Columns[i].SQLType))
		}
	}
	return RowsResult{
		Columns: cols, ColumnTypes: kinds, Rows: col.rows,
		RowStart: a.Start, RowCount: len(col.rows), TotalRows: total, TotalRowCount: total,
		HasMore:        a.Start-1+int64(len(col.rows)) < total,
		QueryElapsedMs: elapsedMs(start),
	}, nil
}

func elapsedMs(start time.Time) float64 {
	return float64(time.Since(start).Microseconds()) / 1000
}

// orderWarning is the determinism note of seed 001 for results read in
// windows without an ORDER BY.
const orderWarning = "the query has no ORDER BY, so the order of rows across windows is not guaranteed; add ORDER BY (e.g. on a key column) before paging with window_offset"

// query runs a caller's SELECT on the tables of a (worker side): the
// result is materialized under the instance's memory limit, then the
// window is read back.
func (d *duck) query(ctx context.Context, a queryArgs) (QueryResult, error) {
	inst, err := d.pool.acquire(ctx, a.Tables)
	if err != nil {
		return QueryResult{}, err
	}
	defer d.pool.release(inst)
	start := time.Now()
	conn, err := inst.db.Conn(ctx)
	if err != nil {
		return QueryResult{}, sqlError(ctx, err)
	}
	defer conn.Close()
	names, err := checkPrepared(ctx, conn, a.SQL)
	if err != nil {
		return QueryResult{}, err
	}
	n, err := materialize(ctx, conn, a.SQL, len(names), a.Window, a.Offset)
	defer dropResult(conn)
	if err != nil {
		return QueryResult{}, err
	}
	col := &collector{}
	err = readPages(ctx, conn, resultTable, "*", 0, n, func(_, kinds []string) error {
		col.kinds = kinds
		return nil
	}, col.add)
	if err != nil {
		return QueryResult{}, err
	}
	total := a.Offset + n
	if n == a.Window || (n == 0 && a.Offset > 0) {
		// The window is full (or past the end): count the whole result.
		if err := conn.QueryRowContext(ctx, fmt.Sprintf("SELECT count(*) FROM (\n%s\n) AS _count", a.SQL)).Scan(&total); err != nil {
			return QueryResult{}, sqlError(ctx, err)
		}
	}
	res := QueryResult{
		Columns: names, ColumnTypes: col.kinds, Rows: col.rows, RowCount: len(col.rows),
		TotalRowCount: total, WindowRows: a.Window, WindowOffset: a.Offset,
		HasMore: a.Offset+n < total,
	}
	if res.Rows == nil {
		res.Rows = [][]any{}
	}
	if res.ColumnTypes == nil {
		res.ColumnTypes = []string{}
	}
	if !a.HasOrderBy && (res.HasMore || a.Offset > 0) {
		res.Warnings = []string{orderWarning}
	}
	res.QueryElapsedMs = elapsedMs(start)
	return res, nil
}
