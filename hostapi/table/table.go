// Package table runs SQL on tabular files (seed 001): CSV, TSV, PSV,
// delimiter-sniffed text tables and xlsx sheets are loaded once into an
// on-disk DuckDB database per file content (cache/tabular), and the
// operations files.table.getMap, describe, stats, readRows, query and
// export (meta-tools table_*) read them through locked-down, read-only
// DuckDB instances.
package table

import (
	"github.com/metaclaw/metaclaw/hostapi"
)

// Register adds the table operations to h's registry.
func Register(h *hostapi.Host) error {
	_, err := register(h, defaultOptions())
	return err
}

func register(h *hostapi.Host, opts options) (*engine, error) {
	e := newEngine(h, opts)
	h.OnClose(e.close)
	e.startSweep()
	h.Registry.Add(e.ops()...)
	return e, nil
}

func pathParam() hostapi.Param {
	return hostapi.Param{Name: "path", Schema: hostapi.FileRef(), Required: true,
		Doc: "The table file: id or workspace path of a .csv, .tsv, .psv, delimited .txt or .xlsx file"}
}

func sheetParam(doc string) hostapi.Param {
	if doc == "" {
		doc = "xlsx only: sheet name or 1-based index (default: the first sheet)"
	}
	return hostapi.Param{Name: "sheet", Group: "options", Doc: doc,
		Schema: hostapi.Schema{"type": []any{"string", "integer"}, "minLength": 1, "minimum": 1}}
}

func columnsParam(group string) hostapi.Param {
	return hostapi.Param{Name: "columns", Group: group, Schema: hostapi.ArrayOf(hostapi.Schema{"type": "string", "minLength": 1}),
		Doc: "Column names to include; omit for all columns"}
}

func (e *engine) ops() []hostapi.Op {
	return []hostapi.Op{
		{
			Name: "files.table.getMap", Tool: "table_get_map",
			Doc: "Map a tabular file (CSV/TSV/PSV/delimited text, or an xlsx sheet) before reading or querying it: " +
				"format, delimiter, quote char, detected encoding with confidence, header, row and column counts, inferred column types " +
				"and deterministic 500-row chunks. The first call loads the file into an embedded SQL table (later calls are fast).",
			Params:   []hostapi.Param{pathParam(), sheetParam("")},
			Result:   MapResult{},
			ReadOnly: true, Idempotent: true,
			Handler: e.getMap,
		},
		{
			Name: "files.table.describe", Tool: "table_describe",
			Doc:      "Describe every column of a tabular file: inferred type, SQL type, nullability, non-null count and distinct-value estimate.",
			Params:   []hostapi.Param{pathParam(), sheetParam("")},
			Result:   DescribeResult{},
			ReadOnly: true, Idempotent: true,
			Handler: e.describe,
		},
		{
			Name: "files.table.stats", Tool: "table_stats",
			Doc: "Summary statistics per column of a tabular file. Numeric: min, max, mean, sum, stddev; string: min/max length and most common values; " +
				"date/datetime: min, max; boolean: true/false counts. Pass columns to limit the work.",
			Params:   []hostapi.Param{pathParam(), columnsParam(""), sheetParam("")},
			Result:   StatsResult{},
			ReadOnly: true, Idempotent: true,
			Handler: e.stats,
		},
		{
			Name: "files.table.readRows", Tool: "table_read_rows",
			Doc: "Read rows of a tabular file by position (row_start is 1-based, the header is not a row), without writing SQL. " +
				"Returns columns, column types and rows (numbers as numbers, dates as ISO strings, empty fields as null).",
			Params: []hostapi.Param{
				pathParam(),
				{Name: "row_start", Schema: hostapi.Integer(1), Required: true, Doc: "First row to read, 1-based, excluding the header"},
				{Name: "row_count", Schema: hostapi.Integer(1), Required: true, Doc: "Number of rows to read"},
				columnsParam("options"),
				sheetParam(""),
			},
			Result:   RowsResult{},
			ReadOnly: true, Idempotent: true,
			Handler: e.readRows,
		},
		{
			Name: "files.table.query", Tool: "table_query",
			Doc: "Run one read-only SQL SELECT (DuckDB dialect) on a tabular file, which is the table `data` " +
				"(e.g. SELECT category, sum(amount) FROM data GROUP BY 1 ORDER BY 2 DESC). `tables` adds other files as named tables for joins " +
				"({\"orders\": \"orders.csv\"}). Results come in windows: run a COUNT(*) first, then page with window_rows/window_offset; " +
				"add ORDER BY for a stable order across windows.",
			Params: []hostapi.Param{
				pathParam(),
				{Name: "query", Schema: hostapi.Schema{"type": "string", "minLength": 1}, Required: true, Doc: "One SQL SELECT statement; the file is table data"},
				{Name: "window_rows", Group: "options", Schema: hostapi.Integer(1), Doc: "Rows to return in this window (default 100; no upper cap)"},
				{Name: "window_offset", Group: "options", Schema: hostapi.Integer(0), Doc: "Rows of the result to skip (0 for the first window)"},
				{Name: "tables", Group: "options", Doc: "More files as named tables: {\"orders\": \"orders.csv\"} makes orders.csv the table orders",
					Schema: hostapi.Schema{"type": "object", "maxProperties": 16,
						"propertyNames":        hostapi.Schema{"pattern": "^[A-Za-z_][A-Za-z0-9_]{0,62}$"},
						"additionalProperties": hostapi.FileRef()}},
				sheetParam(""),
			},
			Result:   QueryResult{},
			ReadOnly: true, Idempotent: true,
			Handler: e.query,
		},
		{
			Name: "files.table.export", Tool: "table_export",
			Doc: "Write a tabular file, or the result of a SQL query on it (table data), to a new .csv or .xlsx file in the workspace. " +
				"Use it for CSV→XLSX conversions and filtered extracts; add ORDER BY to the query for a stable row order.",
			Params: []hostapi.Param{
				pathParam(),
				{Name: "query", Group: "options", Schema: hostapi.Schema{"type": "string", "minLength": 1}, Doc: "Optional SELECT to filter or transform before export; omit to export the whole table in file order"},
				{Name: "target_path", Group: "options", Schema: hostapi.FileRef(), Required: true, Doc: "Name of the new file, ending in .csv or .xlsx"},
				{Name: "format", Group: "options", Schema: hostapi.Enum("csv", "xlsx"), Required: true, Doc: "Output format"},
				{Name: "sheet", Group: "options", Schema: hostapi.Schema{"type": "string", "minLength": 1, "maxLength": 31}, Doc: "Sheet name for xlsx output (default Sheet1)"},
				{Name: "overwrite", Group: "options", Schema: hostapi.Boolean(), Doc: "Replace target_path if it exists (default false: ALREADY_EXISTS)"},
				{Name: "source_sheet", Group: "options", Schema: hostapi.Schema{"type": []any{"string", "integer"}, "minLength": 1, "minimum": 1}, Doc: "xlsx sources only: the sheet to read (default the first)"},
			},
			Result:  ExportResult{},
			Handler: e.export,
		},
	}
}
