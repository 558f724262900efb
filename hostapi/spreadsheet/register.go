// Package spreadsheet implements files.spreadsheet.* and the spreadsheet_*
// meta-tools (SPEC 3): reading and editing .xlsx workbooks, and reading
// .csv/.tsv files as one sheet.
//
// Reads stream the sheet XML straight out of the zip with a small
// tokenizer and stop at the last row asked for, so the top of a 100k-row
// sheet answers in milliseconds; deeper pages come from a decoded cache of
// the sheet built in one pass and keyed by the file's sha256. Value and
// format edits rewrite the sheet XML in one streaming pass (patch.go); a
// write into a blank sheet generates its rows while the workbook is saved,
// straight into the zip, so that a million cells never sit in memory as
// XML. excelize owns the rest of the package (styles, formulas, row
// shifting), and the store's Modify replaces the file atomically and keeps
// a backup.
package spreadsheet

import (
	"io"

	"github.com/xuri/excelize/v2"

	"github.com/metaclaw/metaclaw/hostapi"
)

// Register adds the spreadsheet operations to h's registry, and the blank
// workbook files.create makes for an .xlsx name. Nothing is opened or
// computed until the first call.
func Register(h *hostapi.Host) error {
	svc := newService(h)
	h.Registry.Add(svc.ops()...)
	h.AddBlank(".xlsx", blankWorkbook)
	return nil
}

// blankWorkbook writes a new workbook as Excel starts one: a single empty
// worksheet "Sheet1".
func blankWorkbook(w io.Writer) error {
	f := excelize.NewFile()
	defer f.Close()
	return f.Write(w)
}

// sheetSchema is a sheet given by name or 1-based index.
func sheetSchema() hostapi.Schema {
	return hostapi.Schema{"type": []any{"string", "integer"}, "minLength": 1, "minimum": 1}
}

func sheetParam() hostapi.Param {
	return hostapi.Param{Name: "sheet", Required: true, Schema: sheetSchema(),
		Doc: "Sheet name (e.g. \"Sheet1\") or 1-based sheet index"}
}

func cellParam() hostapi.Param {
	return hostapi.Param{Name: "cell", Required: true, Schema: hostapi.Schema{"type": "string", "minLength": 2}, Doc: "Cell in A1 form, e.g. \"B7\""}
}

func rangeParam(doc string) hostapi.Param {
	return hostapi.Param{Name: "range", Required: true, Schema: hostapi.Schema{"type": "string", "minLength": 1}, Doc: doc}
}

// cellSchema is writeCell's value: null is not a value but "absent" (the
// registry drops null optional arguments), so that the call keeps the
// cell's value; "" clears it.
func cellSchema() hostapi.Schema {
	return hostapi.Schema{"type": []any{"string", "number", "boolean", "object"}}
}

// dataSchema is writeRange's rows. The cells are not described to the
// schema validator: it would spend about 0.4 µs on each (0.4 s for a
// million), and newCellBlock checks every cell anyway, naming it
// (data[3][2]) in its message. The parameter's Doc describes them.
func dataSchema() hostapi.Schema {
	return hostapi.Schema{"type": "array", "items": hostapi.Schema{"type": "array"}}
}

// formatProps are setFormat's options; writeCell's format object accepts
// the same keys (camelCase from scripts, snake_case from tools).
func formatProps() []hostapi.Param {
	color := hostapi.Schema{"type": "string", "pattern": "^#?[0-9A-Fa-f]{6}$"}
	return []hostapi.Param{
		{Name: "bold", Schema: hostapi.Boolean(), Group: "format", Doc: "Bold font"},
		{Name: "italic", Schema: hostapi.Boolean(), Group: "format", Doc: "Italic font"},
		{Name: "font_color", Schema: color, Group: "format", Doc: "Font colour as hex, e.g. \"#C00000\""},
		{Name: "fill_color", Schema: color, Group: "format", Doc: "Solid background colour as hex, e.g. \"#FFF2CC\""},
		{Name: "number_format", Schema: hostapi.Schema{"type": "string", "minLength": 1, "maxLength": 255}, Group: "format",
			Doc: "Excel number format code, e.g. \"$#,##0\", \"0.00%\", \"yyyy-mm-dd\", \"General\""},
		{Name: "column_width", Schema: hostapi.Schema{"type": "number", "exclusiveMinimum": 0, "maximum": 255}, Group: "format",
			Doc: "Width of the range's columns in characters"},
		{Name: "horizontal_alignment", Schema: hostapi.Enum(hAligns...), Group: "format", Doc: "Horizontal alignment"},
		{Name: "wrap_text", Schema: hostapi.Boolean(), Group: "format", Doc: "Wrap text inside the cells"},
		{Name: "border", Schema: hostapi.Schema{"oneOf": []any{hostapi.Boolean(), hostapi.Enum(borderNames...)}}, Group: "format",
			Doc: "Border on all four sides of every cell: true (thin), a line style, or \"none\"/false to remove"},
	}
}

// formatObjectSchema is writeCell's format: a number format code, or an
// object of setFormat's options.
func formatObjectSchema() hostapi.Schema {
	props := hostapi.Schema{}
	for _, p := range formatProps() {
		props[p.Name] = p.Schema
		props[hostapi.CamelName(p.Name)] = p.Schema
	}
	return hostapi.Schema{"oneOf": []any{
		hostapi.Schema{"type": "string", "minLength": 1, "maxLength": 255},
		hostapi.Schema{"type": "object", "properties": props, "additionalProperties": false},
	}}
}

// salesFixture is the workbook the examples work on (testdata/examples):
// a "Sales" sheet (header, five rows of region, product, units, price,
// date and a Units×Price formula, a SUM row) and a "Notes" sheet, written
// by LibreOffice.
var salesFixture = []string{"sales.xlsx"}

func (svc *service) ops() []hostapi.Op {
	return []hostapi.Op{
		{
			Name: "files.spreadsheet.listSheets", Tool: "spreadsheet_list_sheets",
			Doc: "List the sheets of an .xlsx workbook (or a .csv/.tsv, which reads as one sheet \"Sheet1\") with their used size: " +
				"[{name, rows, columns}], rows/columns being the last row and column holding a value. Call this first on an unknown workbook.",
			Params:   []hostapi.Param{hostapi.Ref("")},
			Result:   []SheetInfo(nil),
			ReadOnly: true, Idempotent: true,
			Examples: []hostapi.Example{{
				Doc:   "The sheets of a two-sheet workbook, with the size of what they hold",
				Args:  map[string]any{"id": "sales.xlsx"},
				Want:  []any{map[string]any{"name": "Sales", "rows": 7, "columns": 6}, map[string]any{"name": "Notes", "rows": 2, "columns": 1}},
				Files: salesFixture,
			}},
			Handler: svc.listSheets,
		},
		{
			Name: "files.spreadsheet.getSheetSummary", Tool: "spreadsheet_get_sheet_summary",
			Doc: "Describe one sheet without reading it all: {sheet, rows, columns, headerRow, headers, columnTypes " +
				"(number|string|date|boolean|mixed|empty per column), topRows, bottomRows, firstDataRow}. topRows start at firstDataRow, " +
				"bottomRows end at the last row; at most 100 columns are described. Use readRange next for the rows you need.",
			Params:   []hostapi.Param{hostapi.Ref(""), sheetParam()},
			Result:   SheetSummary{},
			ReadOnly: true, Idempotent: true,
			Examples: []hostapi.Example{{
				Doc:  "Headers, column types and sample rows of a sheet before reading it",
				Args: map[string]any{"id": "sales.xlsx", "sheet": "Sales"},
				Want: map[string]any{"sheet": "Sales", "rows": 7, "columns": 6, "header_row": 1,
					"headers":      []any{"Region", "Product", "Units", "Price", "Date", "Total"},
					"column_types": []any{"string", "string", "number", "number", "date", "number"},
					"top_rows":     []any{[]any{"North", "Widget", 12, 2.5, "2024-01-15", 30}}},
				Files: salesFixture,
			}},
			Handler: svc.getSheetSummary,
		},
		{
			Name: "files.spreadsheet.readRange", Tool: "spreadsheet_read_range",
			Doc: "Read a cell range as a 2-D array of rows: numbers, booleans, dates as ISO 8601 strings, text, null for empty cells; " +
				"formula cells give their value; merged areas give their value at the top-left cell. Rows past the sheet's last " +
				"value are left out. At most 1,000,000 cells per call: page big sheets, e.g. \"A1:J5000\", then \"A5001:J10000\".",
			Params: []hostapi.Param{hostapi.Ref(""), sheetParam(),
				rangeParam("A1 range such as \"A1:D50\", a cell \"B7\", whole columns \"A:C\" or whole rows \"2:10\"")},
			Result:   [][]any(nil),
			ReadOnly: true, Idempotent: true,
			Examples: []hostapi.Example{{
				Doc:  "The header and first two rows: numbers as numbers, dates as ISO strings, formulas as their values",
				Args: map[string]any{"id": "sales.xlsx", "sheet": "Sales", "range": "A1:F3"},
				Want: []any{[]any{"Region", "Product", "Units", "Price", "Date", "Total"},
					[]any{"North", "Widget", 12, 2.5, "2024-01-15", 30}, []any{"South", "Gadget", 5, 10, "2024-01-20", 50}},
				Files: salesFixture,
			}, {
				Doc:   "A sheet by its 1-based index, and a total row with empty cells as null",
				Args:  map[string]any{"id": "sales.xlsx", "sheet": 1, "range": "A7:F7"},
				Want:  []any{[]any{"Total", nil, 35, nil, nil, 230}},
				Files: salesFixture,
			}},
			Handler: svc.readRange,
		},
		{
			Name: "files.spreadsheet.writeRange", Tool: "spreadsheet_write_range",
			Doc: "Write a 2-D array of rows into a sheet starting at a cell (e.g. \"E2\"). Cells are numbers, text, booleans, " +
				"ISO dates (\"2024-01-15\", written as real dates), null or \"\" (clears the cell) or {formula: \"SUM(A1:A3)\"}. " +
				"Other cells, styles, formulas and sheets are kept. Returns {range, cells}. Writing 100,000 rows into a new sheet " +
				"takes well under a second. .csv files cannot be written here.",
			Params: []hostapi.Param{hostapi.Ref(""), sheetParam(),
				{Name: "start_cell", Required: true, Schema: hostapi.Schema{"type": "string", "minLength": 2}, Doc: "Top-left cell to write at, e.g. \"A1\""},
				{Name: "data", Required: true, Schema: dataSchema(),
					Doc: "Rows of cells, e.g. [[\"Name\", \"Total\"], [\"Ann\", 12.5]]. A cell is a number, text, true/false, an ISO date " +
						"(\"2024-01-15\" or \"2024-01-15T10:30:00\"), null or \"\" (clears the cell), or {\"formula\": \"SUM(A1:A3)\"}"},
			},
			Result:      WriteRangeResult{},
			Destructive: true, Idempotent: true,
			Examples: []hostapi.Example{{
				Doc: "Append a row under the data: text, numbers, a date and a formula",
				Args: map[string]any{"id": "sales.xlsx", "sheet": "Sales", "start_cell": "A8",
					"data": []any{[]any{"West", "Widget", 4, 2.5, "2024-03-05", map[string]any{"formula": "C8*D8"}}}},
				Want:  map[string]any{"range": "A8:F8", "cells": 6},
				Files: salesFixture,
			}, {
				Doc:   "Write a small table into the second sheet, leaving a cell empty with null",
				Args:  map[string]any{"id": "sales.xlsx", "sheet": 2, "start_cell": "C1", "data": []any{[]any{"Rate", 1.08}, []any{"Updated", nil}}},
				Want:  map[string]any{"range": "C1:D2", "cells": 4},
				Files: salesFixture,
			}},
			Handler: svc.writeRange,
		},
		{
			Name: "files.spreadsheet.readCell", Tool: "spreadsheet_read_cell",
			Doc: "Read one cell in detail: {value, formula (without \"=\", null if none), type (number|string|boolean|date|error|empty), " +
				"format: {numberFormat, bold, italic, fontColor, fillColor, horizontalAlignment, wrapText, border, columnWidth}}. " +
				"Formulas without a cached value are calculated.",
			Params:   []hostapi.Param{hostapi.Ref(""), sheetParam(), cellParam()},
			Result:   CellInfo{},
			ReadOnly: true, Idempotent: true,
			Examples: []hostapi.Example{{
				Doc:   "A formula cell: its value, its formula and its number format",
				Args:  map[string]any{"id": "sales.xlsx", "sheet": "Sales", "cell": "F7"},
				Want:  map[string]any{"value": 230, "formula": "SUM(F2:F6)", "type": "number", "format": map[string]any{"number_format": "0.00"}},
				Files: salesFixture,
			}, {
				Doc:   "A date cell reads as an ISO date",
				Args:  map[string]any{"id": "sales.xlsx", "sheet": "Sales", "cell": "E2"},
				Want:  map[string]any{"value": "2024-01-15", "type": "date", "formula": nil},
				Files: salesFixture,
			}},
			Handler: svc.readCell,
		},
		{
			Name: "files.spreadsheet.writeCell", Tool: "spreadsheet_write_cell",
			Doc: "Write one cell: a value (number, text, boolean or ISO date; \"\" clears the cell), or a formula via the formula option " +
				"(\"SUM(A1:A3)\", leading \"=\" optional); format is a number format code such as \"0.00%\" or an object of setFormat's " +
				"options. A value that is null or left out keeps the current value (to change only the format). Returns {ok: true}.",
			Params: []hostapi.Param{hostapi.Ref(""), sheetParam(), cellParam(),
				{Name: "value", Schema: cellSchema(), Doc: "The value: a number, text, true/false or an ISO date; \"\" clears the cell; null or omitted keeps it"},
				{Name: "formula", Schema: hostapi.Schema{"type": "string", "minLength": 1}, Group: "options", Doc: "Formula to write instead of a value, e.g. \"SUM(A1:A3)\""},
				{Name: "format", Schema: formatObjectSchema(), Group: "options", Doc: "Number format code, or {bold, italic, fontColor, fillColor, numberFormat, …}"},
			},
			Result:      OKResult{},
			Destructive: true, Idempotent: true,
			Examples: []hostapi.Example{{
				Doc:   "Change a price; the totals that use it are recalculated when read",
				Args:  map[string]any{"id": "sales.xlsx", "sheet": "Sales", "cell": "D2", "value": 2.75},
				Want:  map[string]any{"ok": true},
				Files: salesFixture,
			}, {
				Doc:   "A new bold header cell",
				Args:  map[string]any{"id": "sales.xlsx", "sheet": "Sales", "cell": "G1", "value": "Margin", "format": map[string]any{"bold": true}},
				Want:  map[string]any{"ok": true},
				Files: salesFixture,
			}, {
				Doc:   "A formula with a number format",
				Args:  map[string]any{"id": "sales.xlsx", "sheet": "Sales", "cell": "G2", "formula": "F2/C2", "format": "0.00"},
				Want:  map[string]any{"ok": true},
				Files: salesFixture,
			}},
			Handler: svc.writeCell,
		},
		{
			Name: "files.spreadsheet.addSheet", Tool: "spreadsheet_add_sheet",
			Doc: "Add an empty worksheet at the end of the workbook. Names have at most 31 characters and none of : \\ / ? * [ ]. Returns {sheets: [names]}.",
			Params: []hostapi.Param{hostapi.Ref(""),
				{Name: "name", Required: true, Schema: hostapi.Schema{"type": "string", "minLength": 1, "maxLength": 31}, Doc: "New sheet name"}},
			Result: SheetsResult{},
			Examples: []hostapi.Example{{
				Doc:   "Add a sheet at the end",
				Args:  map[string]any{"id": "sales.xlsx", "name": "Summary"},
				Want:  map[string]any{"sheets": []any{"Sales", "Notes", "Summary"}},
				Files: salesFixture,
			}},
			Handler: svc.addSheet,
		},
		{
			Name: "files.spreadsheet.deleteSheet", Tool: "spreadsheet_delete_sheet",
			Doc: "Delete a sheet (by name or 1-based index) and everything on it; the last visible sheet cannot be deleted. Returns {sheets: [names]}.",
			Params: []hostapi.Param{hostapi.Ref(""),
				{Name: "name", Required: true, Schema: sheetSchema(), Doc: "Sheet name or 1-based index"}},
			Result:      SheetsResult{},
			Destructive: true,
			Examples: []hostapi.Example{{
				Doc:   "Delete a sheet by name",
				Args:  map[string]any{"id": "sales.xlsx", "name": "Notes"},
				Want:  map[string]any{"sheets": []any{"Sales"}},
				Files: salesFixture,
			}},
			Handler: svc.deleteSheet,
		},
		{
			Name: "files.spreadsheet.insertRows", Tool: "spreadsheet_insert_rows",
			Doc: "Insert empty rows after a row (0 inserts at the top); cells below move down and formulas, merges and " +
				"filters are adjusted. Returns {rows}: the sheet's used row count afterwards.",
			Params: []hostapi.Param{hostapi.Ref(""), sheetParam(),
				{Name: "after_row", Required: true, Schema: hostapi.Schema{"type": "integer", "minimum": 0, "maximum": maxRows - 1}, Doc: "Row to insert after; 0 for the top"},
				{Name: "count", Required: true, Schema: hostapi.Schema{"type": "integer", "minimum": 1, "maximum": maxRows - 1}, Doc: "Number of rows to insert"},
			},
			Result: RowsResult{},
			Examples: []hostapi.Example{{
				Doc:   "Two empty rows under the header; the data and the formulas move down",
				Args:  map[string]any{"id": "sales.xlsx", "sheet": "Sales", "after_row": 1, "count": 2},
				Want:  map[string]any{"rows": 9},
				Files: salesFixture,
			}},
			Handler: svc.insertRows,
		},
		{
			Name: "files.spreadsheet.deleteRows", Tool: "spreadsheet_delete_rows",
			Doc: "Delete rows start_row … start_row+count-1; cells below move up. Returns {rows}: the sheet's used row count afterwards. " +
				"Deleting many thousands of rows of a big sheet is slow; to filter big data use files.table.query and export.",
			Params: []hostapi.Param{hostapi.Ref(""), sheetParam(),
				{Name: "start_row", Required: true, Schema: hostapi.Schema{"type": "integer", "minimum": 1, "maximum": maxRows}, Doc: "First row to delete (1-based)"},
				{Name: "count", Required: true, Schema: hostapi.Schema{"type": "integer", "minimum": 1, "maximum": maxRows}, Doc: "Number of rows to delete"},
			},
			Result:      RowsResult{},
			Destructive: true,
			Examples: []hostapi.Example{{
				Doc:   "Delete one data row; the rows below move up",
				Args:  map[string]any{"id": "sales.xlsx", "sheet": "Sales", "start_row": 6, "count": 1},
				Want:  map[string]any{"rows": 6},
				Files: salesFixture,
			}},
			Handler: svc.deleteRows,
		},
		{
			Name: "files.spreadsheet.setFormat", Tool: "spreadsheet_set_format",
			Doc: "Format a range: bold, italic, fontColor, fillColor (hex), numberFormat (\"$#,##0\", \"0.00%\", \"yyyy-mm-dd\"), " +
				"columnWidth, horizontalAlignment, wrapText, border. Only the given options change; the cells' other formatting is " +
				"kept. Whole columns/rows cover the used area. Returns {ok: true}.",
			Params: append([]hostapi.Param{hostapi.Ref(""), sheetParam(),
				rangeParam("A1 range to format, e.g. \"A1:D1\" or whole columns \"B:C\"")}, formatProps()...),
			Result:     OKResult{},
			Idempotent: true,
			Examples: []hostapi.Example{{
				Doc: "A bold, shaded header row with wider columns",
				Args: map[string]any{"id": "sales.xlsx", "sheet": "Sales", "range": "A1:F1", "bold": true, "fill_color": "#DDEBF7",
					"column_width": 14},
				Want:  map[string]any{"ok": true},
				Files: salesFixture,
			}, {
				Doc:   "Money format on whole columns (they cover the used rows)",
				Args:  map[string]any{"id": "sales.xlsx", "sheet": "Sales", "range": "D:D", "number_format": "#,##0.00"},
				Want:  map[string]any{"ok": true},
				Files: salesFixture,
			}},
			Handler: svc.setFormat,
		},
		{
			Name: "files.spreadsheet.autoFilter", Tool: "spreadsheet_auto_filter",
			Doc: "Turn on Excel's filter drop-downs for a range whose first row holds the headers, e.g. \"A1:F200\" (whole columns \"A:F\" cover the used rows). Returns {ok: true}.",
			Params: []hostapi.Param{hostapi.Ref(""), sheetParam(),
				rangeParam("A1 range including the header row, e.g. \"A1:F200\"")},
			Result:     OKResult{},
			Idempotent: true,
			Examples: []hostapi.Example{{
				Doc:   "Filter drop-downs on the header of the data",
				Args:  map[string]any{"id": "sales.xlsx", "sheet": "Sales", "range": "A1:F6"},
				Want:  map[string]any{"ok": true},
				Files: salesFixture,
			}},
			Handler: svc.autoFilter,
		},
	}
}

// OKResult is {ok: true}.
type OKResult struct {
	OK bool `json:"ok"`
}

// WriteRangeResult is writeRange's answer.
type WriteRangeResult struct {
	Range string `json:"range"`
	Cells int    `json:"cells"`
}

// SheetsResult lists the sheet names after addSheet/deleteSheet.
type SheetsResult struct {
	Sheets []string `json:"sheets"`
}

// RowsResult is the used row count after insertRows/deleteRows.
type RowsResult struct {
	Rows int `json:"rows"`
}
