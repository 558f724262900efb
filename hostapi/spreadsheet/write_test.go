package spreadsheet

import (
	"archive/zip"
	"bytes"
	"io"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/xuri/excelize/v2"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/store"
)

// stored returns the current body of a workspace file.
func (te *testEnv) stored(name string) []byte {
	te.t.Helper()
	var b []byte
	err := te.env.WS.View(te.ctx, name, func(_ *store.File, p string) error {
		var err error
		b, err = os.ReadFile(p)
		return err
	})
	if err != nil {
		te.t.Fatal(err)
	}
	return b
}

// excel opens the stored workbook with excelize, the second reader.
func (te *testEnv) excel(name string) *excelize.File {
	te.t.Helper()
	f, err := excelize.OpenReader(bytes.NewReader(te.stored(name)))
	if err != nil {
		te.t.Fatalf("excelize cannot open %s: %v", name, err)
	}
	te.t.Cleanup(func() { f.Close() })
	return f
}

// part returns one inflated part of the stored workbook.
func (te *testEnv) part(name, part string) string {
	te.t.Helper()
	b := te.stored(name)
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		te.t.Fatal(err)
	}
	for _, f := range zr.File {
		if f.Name == part {
			rc, _ := f.Open()
			defer rc.Close()
			d, _ := io.ReadAll(rc)
			return string(d)
		}
	}
	te.t.Fatalf("%s has no part %s", name, part)
	return ""
}

func (te *testEnv) cell(file string, sheet any, ref string) map[string]any {
	te.t.Helper()
	v, err := te.js("files.spreadsheet.readCell", map[string]any{"id": file, "sheet": sheet, "cell": ref})
	if err != nil {
		te.t.Fatalf("readCell %s: %v", ref, err)
	}
	return v.(map[string]any)
}

// decoratedBook has what writes must keep: styles, widths, merges, a
// defined name, another sheet, a data validation.
func decoratedBook(t testing.TB, withFormula bool) []byte {
	f := excelize.NewFile()
	defer f.Close()
	s := "Sheet1"
	bold, _ := f.NewStyle(&excelize.Style{Font: &excelize.Font{Bold: true, Color: "1F4E78"}, Fill: excelize.Fill{Type: "pattern", Pattern: 1, Color: []string{"DDEBF7"}}})
	for i, h := range []string{"id", "name", "paid", "date", "total"} {
		f.SetCellValue(s, cellName(i+1, 1), h)
	}
	f.SetCellStyle(s, "A1", "E1", bold)
	f.SetColWidth(s, "B", "B", 30)
	f.SetCellValue(s, "A8", "keep me")
	f.SetCellValue(s, "C10", "merged")
	f.MergeCell(s, "C10", "D11")
	f.SetDefinedName(&excelize.DefinedName{Name: "Totals", RefersTo: "Sheet1!$E$2:$E$5"})
	dv := excelize.NewDataValidation(true)
	dv.Sqref = "C2:C5"
	dv.SetDropList([]string{"yes", "no"})
	f.AddDataValidation(s, dv)
	f.NewSheet("Other")
	f.SetCellValue("Other", "A1", "other sheet")
	f.SetCellValue("Other", "B2", 3.25)
	if withFormula {
		f.SetCellFormula("Other", "C2", "B2*2")
	}
	return xlsxBytes(t, f)
}

func checkDecorations(t *testing.T, te *testEnv, name string) {
	t.Helper()
	f := te.excel(name)
	st, _ := f.GetCellStyle("Sheet1", "B1")
	style, _ := f.GetStyle(st)
	if style == nil || style.Font == nil || !style.Font.Bold || len(style.Fill.Color) == 0 || !strings.EqualFold(style.Fill.Color[0], "DDEBF7") {
		t.Fatalf("header style lost: %+v", style)
	}
	if w, _ := f.GetColWidth("Sheet1", "B"); w != 30 {
		t.Fatalf("column width lost: %v", w)
	}
	if m, _ := f.GetMergeCells("Sheet1"); len(m) != 1 || m[0].GetStartAxis() != "C10" || m[0].GetEndAxis() != "D11" {
		t.Fatalf("merge lost: %v", m)
	}
	found := false
	for _, dn := range f.GetDefinedName() {
		found = found || (dn.Name == "Totals" && dn.RefersTo == "Sheet1!$E$2:$E$5")
	}
	if !found {
		t.Fatalf("defined name lost: %v", f.GetDefinedName())
	}
	if dvs, _ := f.GetDataValidations("Sheet1"); len(dvs) != 1 || dvs[0].Sqref != "C2:C5" {
		t.Fatalf("data validation lost: %v", dvs)
	}
	if v, _ := f.GetCellValue("Other", "B2"); v != "3.25" {
		t.Fatalf("other sheet lost: %q", v)
	}
	if v, _ := f.GetCellValue("Sheet1", "A8"); v != "keep me" {
		t.Fatalf("untouched cell lost: %q", v)
	}
}

var roundTripData = []any{
	[]any{1, "Ann", true, "2024-01-15", nil},
	[]any{2.5, "B <&> \"q\" _x0041_\ttab", false, "2024-01-15T10:30:00", map[string]any{"formula": "A2+A3"}},
	[]any{-7, "  spaced  ", nil, "1999-12-31", map[string]any{"formula": "=SUM(A2:A4)"}},
}

var roundTripWant = [][]any{
	{1.0, "Ann", true, "2024-01-15", nil},
	{2.5, "B <&> \"q\" _x0041_\ttab", false, "2024-01-15T10:30:00", 3.5},
	{-7.0, "  spaced  ", nil, "1999-12-31", -3.5},
}

// TestWriteRangeRoundTrip writes every kind of cell into sheets that take
// each write path (rewrite of an existing sheet, excelize when formulas
// exist, stream into a blank sheet) and reads back the same values,
// types and formats.
func TestWriteRangeRoundTrip(t *testing.T) {
	blank := func() []byte {
		f := excelize.NewFile()
		defer f.Close()
		f.SetColWidth("Sheet1", "A", "A", 14)
		return xlsxBytes(t, f)
	}
	for _, tc := range []struct {
		name     string
		book     []byte
		decorate bool
	}{
		{"patched", decoratedBook(t, false), true},
		{"excelize", decoratedBook(t, true), true},
		{"stream", blank(), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			te := newEnv(t)
			te.upload("w.xlsx", tc.book)
			res := te.mustTool("spreadsheet_write_range", map[string]any{"id": "w.xlsx", "sheet": "Sheet1", "start_cell": "A2", "data": roundTripData})
			if m := res.(map[string]any); m["range"] != "A2:E4" || m["cells"] != 15.0 {
				t.Fatalf("result %v", m)
			}
			wantGrid(t, te.readRange("w.xlsx", "Sheet1", "A2:E4"), roundTripWant)
			c := te.cell("w.xlsx", "Sheet1", "D3")
			if c["type"] != "date" || c["value"] != "2024-01-15T10:30:00" || c["format"].(map[string]any)["numberFormat"] != "yyyy-mm-dd hh:mm:ss" {
				t.Fatalf("date cell %v", c)
			}
			c = te.cell("w.xlsx", "Sheet1", "E3")
			if c["formula"] != "A2+A3" || c["value"] != 3.5 || c["type"] != "number" {
				t.Fatalf("formula cell %v", c)
			}
			// The second reader sees the same values.
			f := te.excel("w.xlsx")
			rows, _ := f.GetRows("Sheet1", excelize.Options{RawCellValue: true})
			if rows[1][1] != "Ann" || rows[2][0] != "2.5" || rows[2][1] != "B <&> \"q\" _x0041_\ttab" || rows[3][1] != "  spaced  " {
				t.Fatalf("excelize reads %q", rows)
			}
			if v, _ := f.CalcCellValue("Sheet1", "E4"); v != "-3.5" {
				t.Fatalf("excelize calculates E4 = %q", v)
			}
			if tc.decorate {
				checkDecorations(t, te, "w.xlsx")
			} else if w := te.cell("w.xlsx", 1, "A2")["format"].(map[string]any)["columnWidth"]; w != 14.0 {
				t.Fatalf("column width %v", w)
			}
			// Writing again over the same cells (now existing) round-trips too.
			te.mustTool("spreadsheet_write_range", map[string]any{"id": "w.xlsx", "sheet": "Sheet1", "start_cell": "A2", "data": roundTripData})
			wantGrid(t, te.readRange("w.xlsx", "Sheet1", "A2:E4"), roundTripWant)
		})
	}
}

// TestWriteRefreshesFormulas: a formula's cached result must not survive a
// change to the cells it reads, on its own sheet or another.
func TestWriteRefreshesFormulas(t *testing.T) {
	te := newEnv(t)
	book := rawBook{sheets: []rawSheet{
		{name: "Data", data: `<row r="1"><c r="A1"><v>1</v></c></row><row r="2"><c r="A2"><v>2</v></c></row><row r="3"><c r="A3"><f>SUM(A1:A2)</f><v>3</v></c></row>`},
		{name: "Report", data: `<row r="1"><c r="A1"><f>Data!A3*10</f><v>30</v></c></row>`},
	}}.bytes(t)
	te.upload("f.xlsx", book)
	wantGrid(t, te.readRange("f.xlsx", "Data", "A3"), [][]any{{3.0}})
	te.mustTool("spreadsheet_write_range", map[string]any{"id": "f.xlsx", "sheet": "Data", "start_cell": "A1", "data": []any{[]any{10}}})
	wantGrid(t, te.readRange("f.xlsx", "Data", "A1:A3"), [][]any{{10.0}, {2.0}, {12.0}})
	wantGrid(t, te.readRange("f.xlsx", "Report", "A1"), [][]any{{120.0}})
	if wbx := te.part("f.xlsx", "xl/workbook.xml"); !strings.Contains(wbx, `fullCalcOnLoad="1"`) && !strings.Contains(wbx, `fullCalcOnLoad="true"`) {
		t.Fatal("the workbook does not ask for recalculation on open")
	}
	te.mustTool("spreadsheet_write_cell", map[string]any{"id": "f.xlsx", "sheet": "Data", "cell": "A2", "value": 5})
	wantGrid(t, te.readRange("f.xlsx", "Report", "A1"), [][]any{{150.0}})
}

func TestWriteCell(t *testing.T) {
	te := newEnv(t)
	te.upload("c.xlsx", decoratedBook(t, false))
	ok := func(args map[string]any) {
		t.Helper()
		args["id"], args["sheet"] = "c.xlsx", "Sheet1"
		if res := te.mustTool("spreadsheet_write_cell", args); res.(map[string]any)["ok"] != true {
			t.Fatalf("result %v", res)
		}
	}
	ok(map[string]any{"cell": "B2", "value": "hello"})
	ok(map[string]any{"cell": "C2", "value": 42, "format": "0.00%"})
	ok(map[string]any{"cell": "D2", "formula": "=C2*2", "format": map[string]any{"bold": true, "fill_color": "#FFFF00"}})
	ok(map[string]any{"cell": "E2", "value": "2024-06-30"})
	ok(map[string]any{"cell": "A9", "value": "gone soon"})
	ok(map[string]any{"cell": "A9", "value": ""}) // clears
	// null is an absent value (the door's rule for optional arguments):
	// with nothing else to write it is refused, with a format it keeps
	// the value.
	_, err := te.tool("spreadsheet_write_cell", map[string]any{"id": "c.xlsx", "sheet": "Sheet1", "cell": "A8", "value": nil})
	wantCode(t, err, apierr.ValidationFailed, "nothing to write", `"" clears the cell`)
	ok(map[string]any{"cell": "A8", "value": nil, "format": map[string]any{"bold": true}})
	ok(map[string]any{"cell": "B1", "format": map[string]any{"italic": true}})
	wantGrid(t, te.readRange("c.xlsx", "Sheet1", "A2:E2"), [][]any{{nil, "hello", 42.0, 84.0, "2024-06-30"}})
	wantGrid(t, te.readRange("c.xlsx", "Sheet1", "A8:A9"), [][]any{{"keep me"}, {nil}})
	if c := te.cell("c.xlsx", "Sheet1", "A8"); c["value"] != "keep me" || c["format"].(map[string]any)["bold"] != true {
		t.Fatalf("A8 %v", c)
	}
	if c := te.cell("c.xlsx", "Sheet1", "A9"); c["type"] != "empty" || c["value"] != nil {
		t.Fatalf("A9 %v", c)
	}
	c := te.cell("c.xlsx", "Sheet1", "C2")
	if c["format"].(map[string]any)["numberFormat"] != "0.00%" || c["value"] != 42.0 {
		t.Fatalf("C2 %v", c)
	}
	c = te.cell("c.xlsx", "Sheet1", "D2")
	f := c["format"].(map[string]any)
	if c["formula"] != "C2*2" || f["bold"] != true || f["fillColor"] != "#FFFF00" {
		t.Fatalf("D2 %v", c)
	}
	// Formatting B1 kept its bold, colour and fill and added italic.
	f = te.cell("c.xlsx", "Sheet1", "B1")["format"].(map[string]any)
	if f["italic"] != true || f["bold"] != true || f["fontColor"] != "#1F4E78" || f["fillColor"] != "#DDEBF7" {
		t.Fatalf("B1 format %v", f)
	}
	// JS form: writeCell(id, sheet, cell, value, {format: {numberFormat}}).
	if _, err := te.js("files.spreadsheet.writeCell", map[string]any{"id": "c.xlsx", "sheet": "Sheet1", "cell": "F2", "value": 0.5, "format": map[string]any{"numberFormat": "0.0%", "fontColor": "#00B050"}}); err != nil {
		t.Fatal(err)
	}
	f = te.cell("c.xlsx", "Sheet1", "F2")["format"].(map[string]any)
	if f["numberFormat"] != "0.0%" || f["fontColor"] != "#00B050" {
		t.Fatalf("F2 format %v", f)
	}
	checkDecorations(t, te, "c.xlsx")

	before := te.info("c.xlsx").SHA256
	for _, bad := range []struct {
		args map[string]any
		code apierr.Code
		want string
	}{
		{map[string]any{"cell": "B2"}, apierr.ValidationFailed, "nothing to write"},
		{map[string]any{"cell": "B2", "value": 1, "formula": "A1"}, apierr.ValidationFailed, "either"},
		{map[string]any{"cell": "B0", "value": 1}, apierr.ValidationFailed, "B7"},
		{map[string]any{"cell": "B2", "value": []any{1}}, apierr.ValidationFailed, "value"},
		{map[string]any{"cell": "B2", "value": map[string]any{"x": 1}}, apierr.ValidationFailed, "formula"},
		{map[string]any{"cell": "B2", "format": map[string]any{"bold": "yes"}}, apierr.ValidationFailed, "format"},
		{map[string]any{"cell": "B2", "value": strings.Repeat("x", 32768)}, apierr.ValidationFailed, "32767"},
		{map[string]any{"cell": "B2", "value": 1, "sheet": "Nope"}, apierr.NotFound, `"Sheet1", "Other"`},
	} {
		args := map[string]any{"id": "c.xlsx", "sheet": "Sheet1"}
		for k, v := range bad.args {
			args[k] = v
		}
		_, err := te.tool("spreadsheet_write_cell", args)
		wantCode(t, err, bad.code, bad.want)
	}
	if te.info("c.xlsx").SHA256 != before {
		t.Fatal("a refused write changed the file")
	}
}

func TestSetFormat(t *testing.T) {
	te := newEnv(t)
	te.upload("s.xlsx", decoratedBook(t, false))
	te.mustTool("spreadsheet_write_range", map[string]any{"id": "s.xlsx", "sheet": "Sheet1", "start_cell": "A2",
		"data": []any{[]any{1234.5, "a", 0.25, 45306}, []any{99, "b", 0.5, 45307}}})
	set := func(rng string, opts map[string]any) {
		t.Helper()
		args := map[string]any{"id": "s.xlsx", "sheet": "Sheet1", "range": rng}
		for k, v := range opts {
			args[k] = v
		}
		te.mustTool("spreadsheet_set_format", args)
	}
	set("A2:A3", map[string]any{"number_format": "$#,##0", "bold": true})
	set("A2:A3", map[string]any{"fill_color": "FCE4D6", "horizontal_alignment": "center"})
	set("C2:C3", map[string]any{"number_format": "0.00%"})
	set("D2:D3", map[string]any{"number_format": "yyyy-mm-dd", "column_width": 18})
	set("B2:B3", map[string]any{"italic": true, "font_color": "#C00000", "wrap_text": true, "border": true})
	set("B3", map[string]any{"border": "double"})
	set("E:E", map[string]any{"fill_color": "#E2EFDA"}) // whole column: the used rows
	a2 := te.cell("s.xlsx", "Sheet1", "A2")["format"].(map[string]any)
	want := map[string]any{"numberFormat": "$#,##0", "bold": true, "italic": false, "fontColor": "#000000", "fillColor": "#FCE4D6",
		"horizontalAlignment": "center", "wrapText": false, "border": nil, "columnWidth": defaultColWidth}
	if !reflect.DeepEqual(a2, want) {
		t.Fatalf("A2 format\n got %v\nwant %v", a2, want)
	}
	b2 := te.cell("s.xlsx", "Sheet1", "B2")["format"].(map[string]any)
	if b2["italic"] != true || b2["fontColor"] != "#C00000" || b2["wrapText"] != true || b2["border"] != "thin" || b2["columnWidth"] != 30.0 {
		t.Fatalf("B2 format %v", b2)
	}
	if b3 := te.cell("s.xlsx", "Sheet1", "B3")["format"].(map[string]any); b3["border"] != "double" || b3["italic"] != true {
		t.Fatalf("B3 format %v", b3)
	}
	if c := te.cell("s.xlsx", "Sheet1", "C3"); c["format"].(map[string]any)["numberFormat"] != "0.00%" || c["value"] != 0.5 {
		t.Fatalf("C3 %v", c)
	}
	// A date number format turns the serials into dates on read.
	d := te.cell("s.xlsx", "Sheet1", "D2")
	if d["value"] != "2024-01-15" || d["type"] != "date" || d["format"].(map[string]any)["columnWidth"] != 18.0 {
		t.Fatalf("D2 %v", d)
	}
	if f := te.cell("s.xlsx", "Sheet1", "E10")["format"].(map[string]any); f["fillColor"] != "#E2EFDA" {
		t.Fatalf("E10 (last used row) not filled: %v", f)
	}
	if f := te.cell("s.xlsx", "Sheet1", "E11")["format"].(map[string]any); f["fillColor"] != nil {
		t.Fatalf("E11 (past the used rows) filled: %v", f)
	}
	// Values are untouched by formatting.
	wantGrid(t, te.readRange("s.xlsx", "Sheet1", "A2:D3"), [][]any{{1234.5, "a", 0.25, "2024-01-15"}, {99.0, "b", 0.5, "2024-01-16"}})
	set("B2", map[string]any{"border": false})
	if b2 := te.cell("s.xlsx", "Sheet1", "B2")["format"].(map[string]any); b2["border"] != nil || b2["italic"] != true {
		t.Fatalf("border not removed: %v", b2)
	}
	checkDecorations(t, te, "s.xlsx")
	// The second reader agrees on the number format and the fill.
	f := te.excel("s.xlsx")
	if v, _ := f.GetCellValue("Sheet1", "A2"); v != "$1,235" {
		t.Fatalf("excelize formats A2 as %q", v)
	}
	before := te.info("s.xlsx").SHA256
	_, err := te.tool("spreadsheet_set_format", map[string]any{"id": "s.xlsx", "sheet": "Sheet1", "range": "A1"})
	wantCode(t, err, apierr.ValidationFailed, "no format")
	_, err = te.tool("spreadsheet_set_format", map[string]any{"id": "s.xlsx", "sheet": "Sheet1", "range": "A1", "font_color": "red"})
	wantCode(t, err, apierr.ValidationFailed, "font_color")
	_, err = te.tool("spreadsheet_set_format", map[string]any{"id": "s.xlsx", "sheet": "Sheet1", "range": "A1", "horizontal_alignment": "middle"})
	wantCode(t, err, apierr.ValidationFailed, "horizontal_alignment")
	_, err = te.tool("spreadsheet_set_format", map[string]any{"id": "s.xlsx", "sheet": "Sheet1", "range": "A1:B", "bold": true})
	wantCode(t, err, apierr.ValidationFailed, "A1:D50")
	if te.info("s.xlsx").SHA256 != before {
		t.Fatal("a refused format changed the file")
	}
	// JS form: setFormat(id, sheet, range, {bold, numberFormat, ...}).
	if _, err := te.js("files.spreadsheet.setFormat", map[string]any{"id": "s.xlsx", "sheet": "Sheet1", "range": "C2", "bold": true, "column_width": 12}); err != nil {
		t.Fatal(err)
	}
	if f := te.cell("s.xlsx", "Sheet1", "C2")["format"].(map[string]any); f["bold"] != true || f["columnWidth"] != 12.0 || f["numberFormat"] != "0.00%" {
		t.Fatalf("C2 %v", f)
	}
}

func TestSheetsAddDelete(t *testing.T) {
	te := newEnv(t)
	te.upload("b.xlsx", decoratedBook(t, false))
	res := te.mustTool("spreadsheet_add_sheet", map[string]any{"id": "b.xlsx", "name": "Summary"})
	if got := res.(map[string]any)["sheets"]; !reflect.DeepEqual(got, []any{"Sheet1", "Other", "Summary"}) {
		t.Fatalf("sheets %v", got)
	}
	te.mustTool("spreadsheet_write_range", map[string]any{"id": "b.xlsx", "sheet": "Summary", "start_cell": "B2", "data": []any{[]any{"new"}}})
	wantGrid(t, te.readRange("b.xlsx", 3, "B2"), [][]any{{"new"}})
	for _, bad := range []struct {
		name string
		code apierr.Code
	}{{"summary", apierr.AlreadyExists}, {"a/b", apierr.ValidationFailed}, {"'quoted'", apierr.ValidationFailed}, {strings.Repeat("n", 32), apierr.ValidationFailed}} {
		_, err := te.tool("spreadsheet_add_sheet", map[string]any{"id": "b.xlsx", "name": bad.name})
		wantCode(t, err, bad.code)
	}
	res = te.mustTool("spreadsheet_delete_sheet", map[string]any{"id": "b.xlsx", "name": "Other"})
	if got := res.(map[string]any)["sheets"]; !reflect.DeepEqual(got, []any{"Sheet1", "Summary"}) {
		t.Fatalf("sheets %v", got)
	}
	res = te.mustTool("spreadsheet_delete_sheet", map[string]any{"id": "b.xlsx", "name": 2})
	if got := res.(map[string]any)["sheets"]; !reflect.DeepEqual(got, []any{"Sheet1"}) {
		t.Fatalf("sheets %v", got)
	}
	_, err := te.tool("spreadsheet_delete_sheet", map[string]any{"id": "b.xlsx", "name": "Sheet1"})
	wantCode(t, err, apierr.ValidationFailed, "last visible sheet")
	_, err = te.tool("spreadsheet_delete_sheet", map[string]any{"id": "b.xlsx", "name": "Gone"})
	wantCode(t, err, apierr.NotFound, `"Sheet1"`)
	ls := te.mustTool("spreadsheet_list_sheets", map[string]any{"id": "b.xlsx"}).([]any)
	if len(ls) != 1 || ls[0].(map[string]any)["name"] != "Sheet1" || ls[0].(map[string]any)["rows"] != 10.0 {
		t.Fatalf("list %v", ls)
	}
	// A workbook whose only other sheet is hidden keeps its visible one.
	te.upload("h.xlsx", handBook(t, "", false))
	_, err = te.tool("spreadsheet_delete_sheet", map[string]any{"id": "h.xlsx", "name": "Hand"})
	wantCode(t, err, apierr.ValidationFailed, "last visible")
}

func TestInsertDeleteRows(t *testing.T) {
	te := newEnv(t)
	book := rawBook{sheets: []rawSheet{{name: "S", data: `<row r="1"><c r="A1" t="inlineStr"><is><t>h</t></is></c></row>` +
		`<row r="2"><c r="A2"><v>1</v></c></row><row r="3"><c r="A3"><v>2</v></c></row><row r="4"><c r="A4"><v>3</v></c></row>` +
		`<row r="5"><c r="A5"><f>SUM(A2:A4)</f><v>6</v></c></row>`}}}.bytes(t)
	te.upload("r.xlsx", book)
	res := te.mustTool("spreadsheet_insert_rows", map[string]any{"id": "r.xlsx", "sheet": "S", "after_row": 2, "count": 2})
	if res.(map[string]any)["rows"] != 7.0 {
		t.Fatalf("insert result %v", res)
	}
	wantGrid(t, te.readRange("r.xlsx", "S", "A1:A7"), [][]any{{"h"}, {1.0}, {nil}, {nil}, {2.0}, {3.0}, {6.0}})
	if f := te.cell("r.xlsx", "S", "A7")["formula"]; f != "SUM(A2:A6)" {
		t.Fatalf("formula not adjusted: %v", f)
	}
	te.mustTool("spreadsheet_write_range", map[string]any{"id": "r.xlsx", "sheet": "S", "start_cell": "A3", "data": []any{[]any{10}, []any{20}}})
	wantGrid(t, te.readRange("r.xlsx", "S", "A7"), [][]any{{36.0}})
	res = te.mustTool("spreadsheet_delete_rows", map[string]any{"id": "r.xlsx", "sheet": "S", "start_row": 2, "count": 3})
	if res.(map[string]any)["rows"] != 4.0 {
		t.Fatalf("delete result %v", res)
	}
	// (excelize moves the start of a range whose first row is deleted up
	// by one; the sum is the same here.)
	wantGrid(t, te.readRange("r.xlsx", "S", "A1:A4"), [][]any{{"h"}, {2.0}, {3.0}, {5.0}})
	// At the top, and deleting past the end.
	te.mustTool("spreadsheet_insert_rows", map[string]any{"id": "r.xlsx", "sheet": "S", "after_row": 0, "count": 1})
	wantGrid(t, te.readRange("r.xlsx", "S", "A1:A2"), [][]any{{nil}, {"h"}})
	res = te.mustTool("spreadsheet_delete_rows", map[string]any{"id": "r.xlsx", "sheet": "S", "start_row": 4, "count": 1000})
	if res.(map[string]any)["rows"] != 3.0 {
		t.Fatalf("delete past the end %v", res)
	}
	_, err := te.tool("spreadsheet_insert_rows", map[string]any{"id": "r.xlsx", "sheet": "S", "after_row": maxRows - 1, "count": 5})
	wantCode(t, err, apierr.ValidationFailed, "last row")
	_, err = te.tool("spreadsheet_insert_rows", map[string]any{"id": "r.xlsx", "sheet": "S", "after_row": -1, "count": 5})
	wantCode(t, err, apierr.ValidationFailed, "after_row")
	_, err = te.tool("spreadsheet_delete_rows", map[string]any{"id": "r.xlsx", "sheet": "S", "start_row": 1, "count": 0})
	wantCode(t, err, apierr.ValidationFailed, "count")
}

func TestAutoFilter(t *testing.T) {
	te := newEnv(t)
	te.upload("a.xlsx", decoratedBook(t, false))
	if res := te.mustTool("spreadsheet_auto_filter", map[string]any{"id": "a.xlsx", "sheet": "Sheet1", "range": "A1:E8"}); res.(map[string]any)["ok"] != true {
		t.Fatalf("result %v", res)
	}
	if x := strings.ReplaceAll(te.part("a.xlsx", "xl/worksheets/sheet1.xml"), "$", ""); !strings.Contains(x, `<autoFilter ref="A1:E8"`) {
		t.Fatalf("no autoFilter element in %s", x)
	}
	found := false
	for _, dn := range te.excel("a.xlsx").GetDefinedName() {
		found = found || (dn.Name == "_xlnm._FilterDatabase" && strings.Contains(dn.RefersTo, "$A$1:$E$8"))
	}
	if !found {
		t.Fatal("no _FilterDatabase name")
	}
	te.mustTool("spreadsheet_auto_filter", map[string]any{"id": "a.xlsx", "sheet": "Sheet1", "range": "A:C"})
	if x := strings.ReplaceAll(te.part("a.xlsx", "xl/worksheets/sheet1.xml"), "$", ""); !strings.Contains(x, `<autoFilter ref="A1:C10"`) {
		t.Fatalf("whole columns not bound to the used rows: %s", x)
	}
	checkDecorations(t, te, "a.xlsx")
	_, err := te.tool("spreadsheet_auto_filter", map[string]any{"id": "a.xlsx", "sheet": "Sheet1", "range": "nope"})
	wantCode(t, err, apierr.ValidationFailed, "A1:D50")
}

// TestConcurrentEditsLoseNothing: edits of the same workbook from many
// callers at once are serialised by the store; none is lost.
func TestConcurrentEditsLoseNothing(t *testing.T) {
	te := newEnv(t)
	te.upload("c.xlsx", decoratedBook(t, false))
	const n = 12
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		go func(i int) {
			_, err := te.tool("spreadsheet_write_range", map[string]any{"id": "c.xlsx", "sheet": "Other", "start_cell": cellName(1, 10+i),
				"data": []any{[]any{i, "row " + strconv.Itoa(i)}}})
			errs <- err
		}(i)
	}
	for i := 0; i < n; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	got := te.readRange("c.xlsx", "Other", "A10:B21")
	for i := 0; i < n; i++ {
		if got[i][0] != float64(i) || got[i][1] != "row "+strconv.Itoa(i) {
			t.Fatalf("row %d: %v", 10+i, got[i])
		}
	}
	checkDecorations(t, te, "c.xlsx")
}
