package table

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// Reading results without unbounded memory. duckdb-go materializes every
// result in full (outside DuckDB's memory limit) before the first row
// reaches Go, so no statement here ever returns an unbounded number of
// rows: a caller's query is first materialized into a temporary table —
// DuckDB storage, held to the instance's memory limit, so an explosion
// fails with RESOURCE_EXHAUSTED or TIMEOUT instead of eating the host —
// and tables are read back in rowid pages of pageRows.

// pageRows is how many rows one round trip fetches.
const pageRows = 16384

// resultTable is the temporary table of the pinned connection that holds a
// caller's result.
const resultTable = "temp.main._result"

// materialize runs the caller's SELECT q (already checked) into
// resultTable, keeping at most limit rows after skipping offset (limit < 0:
// all). Columns are renamed c1…cn so that any result shape fits a table
// (duplicate or empty names); names holds the real ones.
func materialize(ctx context.Context, conn *sql.Conn, q string, width int, limit, offset int64) (int64, error) {
	aliases := make([]string, width)
	for i := range aliases {
		aliases[i] = fmt.Sprintf("c%d", i+1)
	}
	window := ""
	if limit >= 0 {
		window = fmt.Sprintf(" LIMIT %d OFFSET %d", limit, offset)
	}
	stmt := fmt.Sprintf("CREATE OR REPLACE TEMP TABLE _result AS SELECT * FROM (\n%s\n) AS _q(%s)%s", q, strings.Join(aliases, ", "), window)
	if _, err := conn.ExecContext(ctx, stmt); err != nil {
		return 0, sqlError(ctx, err)
	}
	var n int64
	if err := conn.QueryRowContext(ctx, "SELECT count(*) FROM "+resultTable).Scan(&n); err != nil {
		return 0, sqlError(ctx, err)
	}
	return n, nil
}

// dropResult frees resultTable; it runs even when the call's context has
// ended, so that the pooled connection is clean for the next call.
func dropResult(conn *sql.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn.ExecContext(ctx, "DROP TABLE IF EXISTS "+resultTable)
}

// readPages streams rows [from, to) of table (by rowid, in order) page by
// page: head is told the columns once, fn gets every row.
func readPages(ctx context.Context, db querier, table, cols string, from, to int64, head func(cols, kinds []string) error, fn func(row []any) error) error {
	told := false
	for a := from; ; a += pageRows {
		b := min(a+pageRows, to)
		q := fmt.Sprintf("SELECT %s FROM %s WHERE rowid >= %d AND rowid < %d ORDER BY rowid", cols, table, a, max(a, b))
		h := head
		if told {
			h = func(_, _ []string) error { return nil }
		}
		if err := stream(ctx, db, q, h, fn); err != nil {
			return err
		}
		told = true
		if b >= to {
			return nil
		}
	}
}

// maxResultBytes bounds the memory of the rows one answer carries (as Go
// values); larger windows are refused with advice to page.
const maxResultBytes = 64 << 20

// collector gathers JSON-shaped rows within maxResultBytes.
type collector struct {
	kinds []string
	rows  [][]any
	bytes int
}

func (c *collector) add(row []any) error {
	out := make([]any, len(row))
	c.bytes += 24 + 16*len(row)
	for i, v := range row {
		out[i] = jsonValue(v, c.kinds[i])
		c.bytes += approxSize(out[i])
	}
	if c.bytes > maxResultBytes {
		return apierr.New(apierr.ResourceExhausted, "the rows asked for exceed %d MB; ask for fewer rows per call (window_rows / row_count) and page through the rest", maxResultBytes>>20)
	}
	c.rows = append(c.rows, out)
	return nil
}

// approxSize is the heap a value holds beyond its interface slot.
func approxSize(v any) int {
	switch t := v.(type) {
	case nil, bool:
		return 0
	case string:
		return len(t) + 16
	case []any:
		n := 24
		for _, x := range t {
			n += 16 + approxSize(x)
		}
		return n
	case map[string]any:
		n := 48
		for k, x := range t {
			n += len(k) + 48 + approxSize(x)
		}
		return n
	}
	return 8
}
