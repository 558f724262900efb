package spreadsheet

import (
	"bytes"
	"encoding/xml"
	"io"
	"strings"
	"testing"

	"github.com/xuri/excelize/v2"
)

// wellFormed decodes XML to the end.
func wellFormed(t *testing.T, x string) {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(x))
	for {
		_, err := d.Token()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatalf("malformed XML (%v):\n%s", err, x)
		}
	}
}

// agreeWithExcelize compares readRange over the used area with excelize.
func agreeWithExcelize(t *testing.T, te *testEnv, name, sheet string) {
	t.Helper()
	f := te.excel(name)
	m := te.mustTool("spreadsheet_get_sheet_summary", map[string]any{"id": name, "sheet": sheet}).(map[string]any)
	rows, cols := int(m["rows"].(float64)), int(m["columns"].(float64))
	got := te.readRange(name, sheet, "A1:"+cellName(cols, rows))
	for r := 1; r <= rows; r++ {
		for c := 1; c <= cols; c++ {
			want := excelizeTyped(t, f, sheet, cellName(c, r), false)
			if !sameValue(got[r-1][c-1], want) {
				t.Errorf("%s!%s: reader %#v, excelize %#v", sheet, cellName(c, r), got[r-1][c-1], want)
			}
		}
	}
}

func TestPatchKeepsWhatItDoesNotTouch(t *testing.T) {
	te := newEnv(t)
	keep := `<row r="2" spans="1:3" x14ac:dyDescent="0.25"><c r="A2" s="0"><v>2</v></c><c r="C2" t="inlineStr"><is><t>keep</t></is></c></row>`
	data := `<row r="1"><c r="A1"><v>1</v></c><c r="D1"><v>4</v></c></row>` + keep +
		`<row r="5" s="5" customFormat="1"><c r="A5"><v>5</v></c></row><row><c><v>6</v></c><c t="b"><v>1</v></c></row>`
	extra := `<mergeCells count="1"><mergeCell ref="E1:F2"/></mergeCells><extLst><ext uri="{X}"><x14:thing xmlns:x14="urn:x14">opaque</x14:thing></ext></extLst>`
	book := rawBook{sheets: []rawSheet{{name: "S", data: data, extra: extra}, {name: "T", data: `<row r="1"><c r="A1"><v>9</v></c></row>`}}}.bytes(t)
	// Add a <cols> with a column style and a width before sheetData, and the
	// x14ac namespace.
	sheet := `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>` + "\n" +
		`<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships" xmlns:x14ac="urn:x14ac">` +
		`<dimension ref="A1:D6"/><cols><col min="2" max="6" width="20" style="5" customWidth="1"/></cols><sheetData>` + data + `</sheetData>` + extra + `</worksheet>`
	book = replaceEntry(t, book, "xl/worksheets/sheet1.xml", []byte(sheet))
	te.upload("p.xlsx", book)
	te.mustTool("spreadsheet_write_range", map[string]any{"id": "p.xlsx", "sheet": "S", "start_cell": "B1",
		"data": []any{[]any{"b1", nil, "d1"}, []any{}, []any{"b3"}}})
	te.mustTool("spreadsheet_write_cell", map[string]any{"id": "p.xlsx", "sheet": "S", "cell": "D6", "value": 0.25})
	te.mustTool("spreadsheet_write_cell", map[string]any{"id": "p.xlsx", "sheet": "S", "cell": "C5", "value": "row style"})
	te.mustTool("spreadsheet_write_cell", map[string]any{"id": "p.xlsx", "sheet": "S", "cell": "H9", "value": "\x01bell\r"})
	te.mustTool("spreadsheet_set_format", map[string]any{"id": "p.xlsx", "sheet": "S", "range": "C:D", "column_width": 7.5})
	wantGrid(t, te.readRange("p.xlsx", "S", "A1:H9"), [][]any{
		{1.0, "b1", nil, "d1", nil, nil, nil, nil},
		{2.0, nil, "keep", nil, nil, nil, nil, nil},
		{nil, "b3", nil, nil, nil, nil, nil, nil},
		{nil, nil, nil, nil, nil, nil, nil, nil},
		{5.0, nil, "row style", nil, nil, nil, nil, nil},
		{6.0, true, nil, 0.25, nil, nil, nil, nil}, // row 6 had no r: its cells were A6, B6
		{nil, nil, nil, nil, nil, nil, nil, nil},
		{nil, nil, nil, nil, nil, nil, nil, nil},
		{nil, nil, nil, nil, nil, nil, nil, "\x01bell\r"},
	})
	x := te.part("p.xlsx", "xl/worksheets/sheet1.xml")
	wellFormed(t, x)
	for _, want := range []string{keep, extra, `xmlns:x14ac="urn:x14ac"`, `<dimension ref="A1:H9"/>`,
		`<col min="2" max="2" width="20" style="5" customWidth="1"/><col min="3" max="4" width="7.5" style="5" customWidth="1"/><col min="5" max="6" width="20" style="5" customWidth="1"/>`} {
		if !strings.Contains(x, want) {
			t.Errorf("sheet XML lost %s:\n%s", want, x)
		}
	}
	// New cells take the column's style (5: 0.00%), or the row's.
	if f := te.cell("p.xlsx", "S", "D6")["format"].(map[string]any); f["numberFormat"] != "0.00%" {
		t.Errorf("D6 did not inherit the column style: %v", f)
	}
	if f := te.cell("p.xlsx", "S", "C5")["format"].(map[string]any); f["numberFormat"] != "0.00%" || f["columnWidth"] != 7.5 {
		t.Errorf("C5 %v", f)
	}
	if te.part("p.xlsx", "xl/worksheets/sheet2.xml") != `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>`+"\n"+
		`<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"><sheetData><row r="1"><c r="A1"><v>9</v></c></row></sheetData></worksheet>` {
		t.Error("the other sheet changed")
	}
	agreeWithExcelize(t, te, "p.xlsx", "S")
}

func TestPatchPrefixedAndEmptySheets(t *testing.T) {
	te := newEnv(t)
	te.upload("x.xlsx", handBook(t, "x:", false))
	// handBook has formulas, so value writes go through excelize; formats
	// are patched whatever the workbook holds.
	te.mustTool("spreadsheet_set_format", map[string]any{"id": "x.xlsx", "sheet": "Hand", "range": "A1:E8", "italic": true, "column_width": 11})
	x := te.part("x.xlsx", "xl/worksheets/sheet1.xml")
	wellFormed(t, x)
	if strings.Contains(x, "<c ") || !strings.Contains(x, "<x:cols><x:col min=\"1\" max=\"5\" width=\"11\" customWidth=\"1\"/></x:cols><x:sheetData>") {
		t.Fatalf("prefix not kept:\n%s", x)
	}
	if !strings.Contains(x, `<x:f t="shared" si="0"/>`) {
		t.Fatalf("shared formula lost:\n%s", x)
	}
	wantGrid(t, te.readRange("x.xlsx", "Hand", "B2:B4"), [][]any{{2.0}, {25.0}, {-30.0}})
	if c := te.cell("x.xlsx", "Hand", "B4"); c["formula"] != "A4*10" || c["format"].(map[string]any)["italic"] != true {
		t.Fatalf("B4 %v", c)
	}
	if c := te.cell("x.xlsx", "Hand", "E8"); c["format"].(map[string]any)["italic"] != true || c["value"] != nil {
		t.Fatalf("E8 %v", c)
	}
	agreeWithExcelize(t, te, "x.xlsx", "Hand")

	// <sheetData/> with a cell write (not a range: no stream writer).
	b := rawBook{sheets: []rawSheet{{name: "E", data: ""}}}.bytes(t)
	b = replaceEntry(t, b, "xl/worksheets/sheet1.xml", []byte(`<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData/></worksheet>`))
	te.upload("e.xlsx", b)
	te.mustTool("spreadsheet_write_cell", map[string]any{"id": "e.xlsx", "sheet": "E", "cell": "C3", "value": "alone"})
	wantGrid(t, te.readRange("e.xlsx", "E", "C3"), [][]any{{"alone"}})
	wellFormed(t, te.part("e.xlsx", "xl/worksheets/sheet1.xml"))
	agreeWithExcelize(t, te, "e.xlsx", "E")
}

func TestPatchEscapes(t *testing.T) {
	for _, s := range []string{"plain", "a<b>&c", "_x0041_", "_x005F_", "\x01\x1f", "tab\tnl\ncr\r", "ünï€😀"} {
		var b bytes.Buffer
		b.WriteString(`<is><t>` + string(appendCellText(nil, s)) + `</t></is>`)
		var is struct {
			T string `xml:"t"`
		}
		if err := xml.Unmarshal(b.Bytes(), &is); err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		if got := decodeEscapes(is.T); got != s {
			t.Errorf("%q reads back as %q", s, got)
		}
	}
	// Bytes that are not UTF-8, and the two code points XML forbids, read
	// back as U+FFFD instead of making the sheet unreadable.
	for s, want := range map[string]string{"a\xffb": "a\uFFFDb", "x\uFFFEy\uFFFF": "x\uFFFDy\uFFFD", "\xc3": "\uFFFD"} {
		var is struct {
			T string `xml:"t"`
		}
		if err := xml.Unmarshal(append(append([]byte(`<is><t>`), appendCellText(nil, s)...), `</t></is>`...), &is); err != nil || is.T != want {
			t.Errorf("%q reads back as %q (%v), want %q", s, is.T, err, want)
		}
	}
	for f, want := range map[float64]string{0: "0", 1.5: "1.5", -2: "-2", 1e20: "1E+20", 1.25e-7: "1.25E-07", 123456789.125: "123456789.125",
		4503599627370497: "4.503599627370497E+15", -1e15: "-1E+15", 999999999999999: "999999999999999", 0.1: "0.1"} {
		if got := string(appendNumber(nil, f)); got != want {
			t.Errorf("appendNumber(%v) = %s, want %s", f, got, want)
		}
	}
	if g := setAttr([]byte(`<c r="A1" s="2"/>`), "s", "7"); string(g) != `<c r="A1" s="7"/>` {
		t.Error(string(g))
	}
	if g := setAttr([]byte(`<c r="A1">`), "s", "7"); string(g) != `<c r="A1" s="7">` {
		t.Error(string(g))
	}
	if g := removeAttr([]byte(`<row r="1" spans="1:4" x14ac:dyDescent="0.2">`), "spans"); string(g) != `<row r="1" x14ac:dyDescent="0.2">` {
		t.Error(string(g))
	}
	_ = excelize.TotalCellChars
}

// TestMergeKeepsColoursWithoutTheme: in a workbook without a theme part
// (LibreOffice writes none) formatting keeps fill and border colours.
func TestMergeKeepsColoursWithoutTheme(t *testing.T) {
	te := newEnv(t)
	te.upload("nt.xlsx", rawBook{sheets: []rawSheet{{name: "S", data: `<row r="1"><c r="A1" s="6"><v>1</v></c><c r="B1" s="6"><v>2</v></c></row>`}}}.bytes(t))
	if f := te.cell("nt.xlsx", "S", "A1")["format"].(map[string]any); f["fillColor"] != "#FF0000" || f["border"] != "thin" {
		t.Fatalf("A1 before %v", f)
	}
	te.mustTool("spreadsheet_set_format", map[string]any{"id": "nt.xlsx", "sheet": "S", "range": "A1:B1", "bold": true})
	te.mustTool("spreadsheet_write_cell", map[string]any{"id": "nt.xlsx", "sheet": "S", "cell": "B1", "value": "2024-05-06", "format": map[string]any{"italic": true}})
	for _, ref := range []string{"A1", "B1"} {
		f := te.cell("nt.xlsx", "S", ref)["format"].(map[string]any)
		if f["fillColor"] != "#FF0000" || f["border"] != "thin" || f["bold"] != true {
			t.Fatalf("%s after %v", ref, f)
		}
	}
	if c := te.cell("nt.xlsx", "S", "B1"); c["value"] != "2024-05-06" || c["format"].(map[string]any)["italic"] != true {
		t.Fatalf("B1 %v", c)
	}
	ex := te.excel("nt.xlsx")
	st, _ := ex.GetCellStyle("S", "B1")
	style, _ := ex.GetStyle(st)
	if len(style.Border) != 4 {
		t.Fatalf("borders %v", style.Border)
	}
	if x := te.part("nt.xlsx", "xl/styles.xml"); !strings.Contains(x, `rgb="FF00B050"`) || strings.Count(x, `rgb="FFFF0000"`) < 2 {
		t.Fatalf("colours lost from the stylesheet: %s", x)
	}
}
