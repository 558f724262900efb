// Package table runs SQL on tabular files (seed 001): CSV, TSV, PSV,
// delimiter-sniffed text tables and xlsx sheets are loaded once into an
// on-disk DuckDB database per file content (cache/tabular), and the
// operations files.table.getMap, describe, stats, readRows, query and
// export (meta-tools table_*) read them through locked-down, read-only
// DuckDB instances.
//
// DuckDB never runs in the host process: every build and query runs in an
// SQL worker process (worker.go) that the kernel holds to a memory limit
// and that is killed when it outlives its call's deadline. The host side
// (ops.go, build.go, lifecycle.go) resolves files, shares builds between
// callers and keeps the cache in step with the store; the worker side
// (workerproc.go, duck.go and the ingest and query files) only ever sees
// the paths a request names.
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
	h.Registry.Add(e.ops()...)
	return e, nil
}

func pathParam() hostapi.Param {
	return hostapi.Param{Name: "path", Schema: hostapi.FileRef(), Required: true,
		Doc: "The table file: id or workspace path of a .csv, .tsv, .psv, delimited .txt or .xlsx file"}
}

// maxSheetIndex bounds a sheet given by number.
const maxSheetIndex = 65535

// maxPosition bounds row positions, counts and windows: 2^53-1, the
// largest integer a JavaScript number holds exactly. With both a start
// and a count below it, start-1+count never overflows an int64.
const maxPosition = 1<<53 - 1

// position is the schema of a row position or count.
func position(min int) hostapi.Schema {
	return hostapi.Schema{"type": "integer", "minimum": min, "maximum": maxPosition}
}

func sheetSchema() hostapi.Schema {
	return hostapi.Schema{"type": []any{"string", "integer"}, "minLength": 1, "maxLength": 255, "minimum": 1, "maximum": maxSheetIndex}
}

func sheetParam(doc string) hostapi.Param {
	if doc == "" {
		doc = "xlsx only: sheet name or 1-based index (default: the first sheet)"
	}
	return hostapi.Param{Name: "sheet", Group: "options", Doc: doc, Schema: sheetSchema()}
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
			Examples: []hostapi.Example{{
				Doc:   "Map a CSV before querying it: delimiter, header, row count and column types",
				Args:  map[string]any{"path": "orders.csv"},
				Files: []string{"orders.csv"},
				Want: map[string]any{"format": "csv", "delimiter": ",", "has_header": true, "encoding_detected": "utf-8", "row_count": 12, "column_count": 6,
					"columns": []any{
						map[string]any{"name": "order_id", "index": 0, "inferred_type": "integer"},
						map[string]any{"name": "customer_id", "index": 1, "inferred_type": "string"},
						map[string]any{"name": "product", "index": 2, "inferred_type": "string"},
						map[string]any{"name": "quantity", "index": 3, "inferred_type": "integer"},
						map[string]any{"name": "unit_price", "index": 4, "inferred_type": "float"},
						map[string]any{"name": "order_date", "index": 5, "inferred_type": "date"},
					},
					"chunks": []any{map[string]any{"index": 0, "rows": "1-12"}}},
			}, {
				Doc:   "A Windows-1252 export with semicolons and decimal commas is detected and read as numbers",
				Args:  map[string]any{"path": "suppliers-cp1252.csv"},
				Files: []string{"suppliers-cp1252.csv"},
				Want: map[string]any{"format": "csv", "delimiter": ";", "decimal_separator": ",", "encoding_detected": "windows-1252", "row_count": 3,
					"columns": []any{
						map[string]any{"name": "Lieferant", "inferred_type": "string"},
						map[string]any{"name": "Ort", "inferred_type": "string"},
						map[string]any{"name": "Umsatz (€)", "inferred_type": "float"},
					}},
			}, {
				Doc:   "Map one sheet of a workbook, by name",
				Args:  map[string]any{"path": "sales.xlsx", "sheet": "Sales"},
				Files: []string{"sales.xlsx"},
				Want: map[string]any{"format": "xlsx", "sheet": "Sales", "sheets": []any{"Sales", "Notes"}, "has_header": true, "column_count": 6,
					"columns": []any{
						map[string]any{"name": "Region", "inferred_type": "string"},
						map[string]any{"name": "Product", "inferred_type": "string"},
						map[string]any{"name": "Units", "inferred_type": "integer"},
					}},
			}},
			Handler: e.getMap,
		},
		{
			Name: "files.table.describe", Tool: "table_describe",
			Doc:      "Describe every column of a tabular file: inferred type, SQL type, nullability, non-null count and distinct-value estimate.",
			Params:   []hostapi.Param{pathParam(), sheetParam("")},
			Result:   DescribeResult{},
			ReadOnly: true, Idempotent: true,
			Examples: []hostapi.Example{{
				Doc:   "Column types, nulls and distinct counts of a CSV",
				Args:  map[string]any{"path": "orders.csv"},
				Files: []string{"orders.csv"},
				Want: map[string]any{"row_count": 12, "column_count": 6, "columns": []any{
					map[string]any{"name": "order_id", "inferred_type": "integer", "sql_type": "BIGINT", "nullable": false, "non_null_count": 12, "null_count": 0, "distinct_estimate": 12},
					map[string]any{"name": "customer_id", "inferred_type": "string", "sql_type": "VARCHAR", "non_null_count": 12, "distinct_estimate": 5},
					map[string]any{"name": "product", "inferred_type": "string", "distinct_estimate": 3},
				}},
			}},
			Handler: e.describe,
		},
		{
			Name: "files.table.stats", Tool: "table_stats",
			Doc: "Summary statistics per column of a tabular file. Numeric: min, max, mean, sum, stddev; string: min/max length and most common values; " +
				"date/datetime: min, max; boolean: true/false counts. Pass columns to limit the work.",
			Params:   []hostapi.Param{pathParam(), columnsParam(""), sheetParam("")},
			Result:   StatsResult{},
			ReadOnly: true, Idempotent: true,
			Examples: []hostapi.Example{{
				Doc:   "Statistics of two columns: a number and a text",
				Args:  map[string]any{"path": "orders.csv", "columns": []any{"quantity", "product"}},
				Files: []string{"orders.csv"},
				Want: map[string]any{"row_count": 12, "columns": []any{
					map[string]any{"name": "quantity", "type": "integer", "non_null_count": 12, "min": 1, "max": 10, "sum": 49},
					map[string]any{"name": "product", "type": "string", "min_length": 5, "max_length": 6, "most_common": []any{
						map[string]any{"value": "Widget", "count": 5},
						map[string]any{"value": "Gadget", "count": 4},
						map[string]any{"value": "Gizmo", "count": 3},
					}},
				}},
			}},
			Handler: e.stats,
		},
		{
			Name: "files.table.readRows", Tool: "table_read_rows",
			Doc: "Read rows of a tabular file by position (row_start is 1-based, the header is not a row), without writing SQL. " +
				"Returns columns, column types and rows (numbers as numbers, dates as ISO strings, empty fields as null).",
			Params: []hostapi.Param{
				pathParam(),
				{Name: "row_start", Schema: position(1), Required: true, Doc: "First row to read, 1-based, excluding the header"},
				{Name: "row_count", Schema: position(1), Required: true, Doc: "Number of rows to read (fewer come back at the end of the table)"},
				columnsParam("options"),
				sheetParam(""),
			},
			Result:   RowsResult{},
			ReadOnly: true, Idempotent: true,
			Examples: []hostapi.Example{{
				Doc:   "Rows 2–3, two columns, without SQL",
				Args:  map[string]any{"path": "orders.csv", "row_start": 2, "row_count": 2, "columns": []any{"order_id", "product"}},
				Files: []string{"orders.csv"},
				Want: map[string]any{"columns": []any{"order_id", "product"}, "column_types": []any{"integer", "string"},
					"rows": []any{[]any{1002, "Gadget"}, []any{1003, "Gizmo"}}, "row_start": 2, "row_count": 2, "total_rows": 12, "has_more": true},
			}},
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
				{Name: "window_rows", Group: "options", Schema: position(1), Doc: "Rows to return in this window (default 100); an answer carries at most 64 MB of rows"},
				{Name: "window_offset", Group: "options", Schema: position(0), Doc: "Rows of the result to skip (0 for the first window)"},
				{Name: "tables", Group: "options", Doc: "More files as named tables: {\"orders\": \"orders.csv\"} makes orders.csv the table orders",
					Schema: hostapi.Schema{"type": "object", "maxProperties": 16,
						"propertyNames":        hostapi.Schema{"pattern": "^[A-Za-z_][A-Za-z0-9_]{0,62}$"},
						"additionalProperties": hostapi.FileRef()}},
				sheetParam(""),
			},
			Result:   QueryResult{},
			ReadOnly: true, Idempotent: true,
			Examples: []hostapi.Example{{
				Doc:   "Revenue per product, largest first",
				Args:  map[string]any{"path": "orders.csv", "query": "SELECT product, sum(quantity * unit_price) AS revenue FROM data GROUP BY product ORDER BY revenue DESC"},
				Files: []string{"orders.csv"},
				Want: map[string]any{"columns": []any{"product", "revenue"}, "column_types": []any{"string", "float"},
					"rows": []any{[]any{"Gizmo", 160}, []any{"Gadget", 100}, []any{"Widget", 77.5}}, "row_count": 3, "total_row_count": 3, "has_more": false},
			}, {
				Doc: "Join a second file, given as a named table",
				Args: map[string]any{"path": "orders.csv", "tables": map[string]any{"customers": "customers.csv"},
					"query": "SELECT c.country, count(*) AS orders, sum(o.quantity * o.unit_price) AS revenue FROM data o JOIN customers c USING (customer_id) GROUP BY c.country ORDER BY revenue DESC"},
				Files: []string{"orders.csv", "customers.csv"},
				Want: map[string]any{"columns": []any{"country", "orders", "revenue"},
					"rows": []any{[]any{"Spain", 2, 130}, []any{"Portugal", 3, 70}, []any{"Norway", 3, 65}, []any{"France", 2, 45}, []any{"Germany", 2, 27.5}}, "total_row_count": 5},
			}, {
				Doc:   "Page through a long result: a window of 5 rows after the first 10",
				Args:  map[string]any{"path": "orders.csv", "query": "SELECT order_id FROM data ORDER BY order_id", "window_rows": 5, "window_offset": 10},
				Files: []string{"orders.csv"},
				Want:  map[string]any{"rows": []any{[]any{1011}, []any{1012}}, "row_count": 2, "total_row_count": 12, "window_offset": 10, "has_more": false},
			}},
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
				{Name: "source_sheet", Group: "options", Schema: sheetSchema(), Doc: "xlsx sources only: the sheet to read (default the first)"},
			},
			Result: ExportResult{},
			Examples: []hostapi.Example{{
				Doc: "Write a filtered extract of a CSV to a new workbook",
				Args: map[string]any{"path": "orders.csv", "query": "SELECT order_id, quantity, unit_price FROM data WHERE product = 'Widget' ORDER BY order_id",
					"target_path": "widgets.xlsx", "format": "xlsx", "sheet": "Widgets"},
				Files: []string{"orders.csv"},
				Want:  map[string]any{"target_path": "widgets.xlsx", "format": "xlsx", "sheet": "Widgets", "row_count": 5, "column_count": 3},
			}, {
				Doc:   "Convert a workbook sheet to CSV",
				Args:  map[string]any{"path": "sales.xlsx", "source_sheet": "Sales", "target_path": "sales.csv", "format": "csv"},
				Files: []string{"sales.xlsx"},
				Want:  map[string]any{"target_path": "sales.csv", "format": "csv", "column_count": 6},
			}},
			Handler: e.export,
		},
	}
}
