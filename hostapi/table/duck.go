package table

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/store"
)

// duck is the worker side of the engine: the DuckDB instances of one SQL
// worker and the operations the host sends it. Everything here runs in
// the worker process, on paths the host names in its requests.
type duck struct {
	cfg  workerConfig
	pool *pool
}

// Arguments of the worker operations.
type (
	ingestArgs struct {
		Src      string    `json:"src"` // the file body (the host holds its read lock)
		Name     string    `json:"name"`
		MimeType string    `json:"mimeType"`
		Size     int64     `json:"size"`
		FileID   string    `json:"fileId"`
		SHA256   string    `json:"sha256"`
		Sheet    sheetSpec `json:"sheet"`
		Out      string    `json:"out"` // the database file to write
		Bounds   bounds    `json:"bounds"`
	}
	metaArgs struct {
		Path string `json:"path"`
	}
	// tableArgs name one table database and what the host knows of it.
	tableArgs struct {
		Path    string    `json:"path"`
		Meta    tableMeta `json:"meta"`
		Columns []int     `json:"columns,omitempty"`
		Start   int64     `json:"start,omitempty"` // rows: 1-based first row
		Count   int64     `json:"count,omitempty"` // rows: how many
	}
	queryArgs struct {
		Tables     []attachment `json:"tables"`
		SQL        string       `json:"sql"`
		HasOrderBy bool         `json:"hasOrderBy"`
		Window     int64        `json:"window"`
		Offset     int64        `json:"offset"`
	}
	exportArgs struct {
		Path string    `json:"path"`
		Meta tableMeta `json:"meta"`
		// SQL, when set, is materialized first within QueryTimeoutMs.
		SQL            string `json:"sql,omitempty"`
		QueryTimeoutMs int64  `json:"queryTimeoutMs"`
		Format         string `json:"format"`
		Sheet          string `json:"sheet,omitempty"`
		Out            string `json:"out"`
		MaxBytes       int64  `json:"maxBytes"`
	}
	exportOut struct {
		Rows     int64    `json:"rows"`
		Columns  int      `json:"columns"`
		Warnings []string `json:"warnings"`
	}
)

// bounds limit what one ingestion may load, whatever a file declares.
type bounds struct {
	// MaxColumns caps a table's columns (after empty xlsx columns are
	// left out).
	MaxColumns int `json:"maxColumns"`
	// MaxCells caps the non-empty cells of an xlsx sheet.
	MaxCells int64 `json:"maxCells"`
}

// serve runs one request. Panics (a format library on a hostile file)
// become INTERNAL errors; the worker carries on.
func (d *duck) serve(ctx context.Context, r request, mapped func(*tableMeta)) (res any, err error) {
	defer func() {
		if p := recover(); p != nil {
			res, err = nil, apierr.New(apierr.Internal, "the SQL work failed unexpectedly (%v); the input may be malformed", p)
		}
	}()
	for _, p := range r.Drop {
		d.pool.evictPath(p)
	}
	decode := func(v any) error {
		if err := decodeExact(r.Args, v); err != nil {
			return apierr.New(apierr.Internal, "bad %s request: %v", r.Op, err)
		}
		return nil
	}
	switch r.Op {
	case opEvict:
		return true, nil
	case opIngest:
		var a ingestArgs
		if err := decode(&a); err != nil {
			return nil, err
		}
		return d.ingest(ctx, a, mapped)
	case opMeta:
		var a metaArgs
		if err := decode(&a); err != nil {
			return nil, err
		}
		return d.meta(ctx, a.Path)
	case opDescribe, opStats, opRows:
		var a tableArgs
		if err := decode(&a); err != nil {
			return nil, err
		}
		inst, err := d.pool.acquire(ctx, []attachment{{Name: "data", Path: a.Path}})
		if err != nil {
			return nil, err
		}
		defer d.pool.release(inst)
		switch r.Op {
		case opDescribe:
			return describeTableDB(ctx, inst, a.Meta)
		case opStats:
			return statsOf(ctx, inst, a.Meta, a.Columns)
		}
		return readRowsOf(ctx, inst, a)
	case opQuery:
		var a queryArgs
		if err := decode(&a); err != nil {
			return nil, err
		}
		return d.query(ctx, a)
	case opExport:
		var a exportArgs
		if err := decode(&a); err != nil {
			return nil, err
		}
		return d.export(ctx, a)
	}
	return nil, apierr.New(apierr.Internal, "unknown SQL worker operation %q", r.Op)
}

// ingest loads a file into an in-memory DuckDB (announcing the map as
// soon as it is known), then writes the table and its metadata into a new
// database file at a.Out.
func (d *duck) ingest(ctx context.Context, a ingestArgs, mapped func(*tableMeta)) (*tableMeta, error) {
	db, err := d.ingestDB(a.Out)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	f := &store.File{ID: a.FileID, Name: a.Name, Size: a.Size, MimeType: a.MimeType, SHA256: a.SHA256}
	var meta *tableMeta
	if isWorkbook(f) {
		meta, err = ingestWorkbook(ctx, db, f, a.Src, a.Sheet, a.Bounds)
	} else if !a.Sheet.isDefault() {
		return nil, apierr.New(apierr.ValidationFailed, "sheet %q was given but %q is not an xlsx workbook; omit sheet for text tables", a.Sheet.String(), f.Name)
	} else {
		meta, err = ingestText(ctx, db, f, a.Src, a.Out, a.Bounds)
	}
	if err != nil {
		if ctx.Err() != nil && apierr.CodeOf(err) != apierr.Timeout {
			return nil, apierr.Wrap(apierr.Timeout, err, "loading %q as a table ran out of time", f.Name)
		}
		return nil, err
	}
	meta.Version, meta.FileID, meta.SHA256 = metaVersion, a.FileID, a.SHA256
	mapped(meta)
	if err := persist(ctx, db, meta, a.Out); err != nil {
		return nil, err
	}
	return meta, nil
}

// ingestDB opens the in-memory DuckDB a build loads the file into. It runs
// only SQL this package writes, on paths the host gave it; it may spill
// to a folder beside the database being built.
func (d *duck) ingestDB(out string) (*sql.DB, error) {
	dsn := fmt.Sprintf("?threads=%d&memory_limit=%dMB&autoinstall_known_extensions=false&autoload_known_extensions=false",
		d.cfg.Threads, d.cfg.MemoryLimit>>20)
	db, err := sql.Open("duckdb", dsn)
	if err != nil {
		return nil, apierr.Wrap(apierr.ToolWorkerUnavailable, err, "cannot start the SQL engine: %v", err)
	}
	db.SetMaxOpenConns(1)
	if _, err := db.Exec("SET temp_directory = " + sqlString(out+".spill")); err != nil {
		db.Close()
		return nil, apierr.Wrap(apierr.ToolWorkerUnavailable, err, "cannot start the SQL engine: %v", err)
	}
	return db, nil
}

// persist writes table data and the metadata from the in-memory db into a
// new database file at path (insertion order, and so file order, kept).
func persist(ctx context.Context, db *sql.DB, meta *tableMeta, path string) error {
	raw, err := json.Marshal(meta)
	if err != nil {
		return apierr.Wrap(apierr.Internal, err, "encoding the table metadata failed: %v", err)
	}
	for _, s := range []string{
		"ATTACH " + sqlString(path) + " AS out",
		"CREATE TABLE out.main.data AS SELECT * FROM memory.main.data",
		"CREATE TABLE out.main._metaclaw_meta (k VARCHAR PRIMARY KEY, v VARCHAR)",
		"INSERT INTO out.main._metaclaw_meta VALUES ('meta', " + sqlString(string(raw)) + ")",
		"CHECKPOINT out",
		"DETACH out",
	} {
		if _, err := db.ExecContext(ctx, s); err != nil {
			if ctx.Err() != nil {
				return apierr.Wrap(apierr.Timeout, err, "storing the table ran out of time")
			}
			return apierr.Wrap(apierr.FileWriteFailed, err, "storing the table database failed: %v", err)
		}
	}
	return nil
}

// meta reads the metadata stored in an existing database.
func (d *duck) meta(ctx context.Context, path string) (*tableMeta, error) {
	inst, err := d.pool.acquire(ctx, []attachment{{Name: "data", Path: path}})
	if err != nil {
		return nil, err
	}
	defer d.pool.release(inst)
	var raw string
	if err := inst.db.QueryRowContext(ctx, `SELECT v FROM `+srcAlias(0)+`.main._metaclaw_meta WHERE k = 'meta'`).Scan(&raw); err != nil {
		return nil, apierr.Wrap(apierr.FileReadFailed, err, "the table database is unreadable: %v", firstLine(err.Error()))
	}
	var m tableMeta
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		return nil, apierr.Wrap(apierr.FileReadFailed, err, "the table database is unreadable: %v", err)
	}
	return &m, nil
}

// describeTableDB counts the values of every column of the table.
func describeTableDB(ctx context.Context, inst *instance, meta tableMeta) (DescribeResult, error) {
	cols := meta.Columns
	res := DescribeResult{RowCount: meta.RowCount, ColumnCount: len(cols), Columns: make([]DescribeColumn, len(cols))}
	for i, col := range cols {
		res.Columns[i] = DescribeColumn{Name: col.Name, Index: i, InferredType: typeName(col.SQLType), SQLType: col.SQLType}
	}
	if len(cols) == 0 || meta.RowCount == 0 {
		return res, nil
	}
	// In batches, so that a very wide table never makes one huge SELECT
	// (DuckDB's planner is slow and uninterruptible on those).
	for lo := 0; lo < len(cols); lo += aggBatch {
		hi := min(lo+aggBatch, len(cols))
		var aggs []string
		for _, col := range cols[lo:hi] {
			q := quoteIdent(col.Name)
			aggs = append(aggs, "count("+q+")", "approx_count_distinct("+q+")")
		}
		vals, err := scanAggregates(ctx, inst.db, aggs, " FROM "+srcAlias(0)+".main.data")
		if err != nil {
			return res, err
		}
		for i := lo; i < hi; i++ {
			dc := &res.Columns[i]
			dc.NonNullCount = toInt(vals[2*(i-lo)])
			dc.NullCount = meta.RowCount - dc.NonNullCount
			dc.Nullable = dc.NullCount > 0
			// The estimate may overshoot slightly; it never exceeds the values.
			dc.DistinctEstimate = min(toInt(vals[2*(i-lo)+1]), dc.NonNullCount)
		}
	}
	return res, nil
}

// aggBatch is how many columns one aggregate SELECT covers.
const aggBatch = 256

// scanAggregates runs SELECT aggs… from and returns the one row.
func scanAggregates(ctx context.Context, db *sql.DB, aggs []string, from string) ([]any, error) {
	vals := make([]any, len(aggs))
	ptrs := make([]any, len(aggs))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := db.QueryRowContext(ctx, "SELECT "+strings.Join(aggs, ", ")+from).Scan(ptrs...); err != nil {
		return nil, sqlError(ctx, err)
	}
	return vals, nil
}
