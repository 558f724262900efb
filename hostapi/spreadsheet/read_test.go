package spreadsheet

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/xuri/excelize/v2"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// typedBook is a workbook written by excelize with every kind of value.
func typedBook(t testing.TB) []byte {
	f := excelize.NewFile()
	defer f.Close()
	s := "Sheet1"
	set := func(cell string, v any) {
		if err := f.SetCellValue(s, cell, v); err != nil {
			t.Fatal(err)
		}
	}
	for i, h := range []string{"name", "amount", "when", "ok", "note"} {
		set(cellName(i+1, 1), h)
	}
	set("A2", "Ann")
	set("B2", 12.5)
	set("C2", time.Date(2024, 1, 15, 0, 0, 0, 0, time.UTC))
	set("D2", true)
	set("A3", "Bob")
	set("B3", 7)
	set("C3", time.Date(2024, 2, 29, 13, 45, 30, 0, time.UTC))
	set("D3", false)
	set("E3", "a <b> & \"c\"")
	set("A4", "Sum")
	if err := f.SetCellFormula(s, "B4", "SUM(B2:B3)"); err != nil {
		t.Fatal(err)
	}
	if err := f.SetCellRichText(s, "E2", []excelize.RichTextRun{{Text: "bold", Font: &excelize.Font{Bold: true}}, {Text: " plain"}}); err != nil {
		t.Fatal(err)
	}
	set("A6", "merged")
	if err := f.MergeCell(s, "A6", "C7"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.NewSheet("Data"); err != nil {
		t.Fatal(err)
	}
	f.SetCellValue("Data", "B2", 42)
	return xlsxBytes(t, f)
}

func TestReadRangeTypedValues(t *testing.T) {
	te := newEnv(t)
	te.upload("book.xlsx", typedBook(t))
	got := te.readRange("book.xlsx", "Sheet1", "A1:E7")
	wantGrid(t, got, [][]any{
		{"name", "amount", "when", "ok", "note"},
		{"Ann", 12.5, "2024-01-15", true, "bold plain"},
		{"Bob", 7.0, "2024-02-29T13:45:30", false, "a <b> & \"c\""},
		{"Sum", 19.5, nil, nil, nil}, // formula without a cached value: calculated
		{nil, nil, nil, nil, nil},
		{"merged", nil, nil, nil, nil}, // merged A6:C7: value at the top-left
	})
	// Rows past the sheet's last value are dropped, columns are kept.
	wantGrid(t, te.readRange("book.xlsx", 1, "D6:F20"), [][]any{{nil, nil, nil}})
	wantGrid(t, te.readRange("book.xlsx", "Sheet1", "A30:B40"), [][]any{})
	// Sheet by index, name case-insensitively, a single cell, $ refs.
	wantGrid(t, te.readRange("book.xlsx", 2, "B2"), [][]any{{42.0}})
	wantGrid(t, te.readRange("book.xlsx", "data", "$A$1:$B$2"), [][]any{{nil, nil}, {nil, 42.0}})
	wantGrid(t, te.readRange("book.xlsx", "Sheet1", "Sheet1!B2:B3"), [][]any{{12.5}, {7.0}})
	// Whole columns and whole rows cover the used area.
	wantGrid(t, te.readRange("book.xlsx", "Sheet1", "B:B"), [][]any{{"amount"}, {12.5}, {7.0}, {19.5}, {nil}, {nil}})
	wantGrid(t, te.readRange("book.xlsx", "Sheet1", "2:2"), [][]any{{"Ann", 12.5, "2024-01-15", true, "bold plain"}})
	// JS callers get the same values.
	v, err := te.js("files.spreadsheet.readRange", map[string]any{"id": "book.xlsx", "sheet": "Sheet1", "range": "A2:B2"})
	if err != nil {
		t.Fatal(err)
	}
	wantGrid(t, toGrid(t, v), [][]any{{"Ann", 12.5}})
}

func TestReadRangeErrorsNameTheWayOut(t *testing.T) {
	te := newEnv(t)
	f := te.upload("book.xlsx", typedBook(t))
	cases := []struct {
		args     map[string]any
		code     apierr.Code
		contains []string
	}{
		{map[string]any{"id": "book.xlsx", "sheet": "Sales", "range": "A1"}, apierr.NotFound, []string{`"Sales"`, `"Sheet1", "Data"`}},
		{map[string]any{"id": "book.xlsx", "sheet": 3, "range": "A1"}, apierr.NotFound, []string{"2 sheet", `"Sheet1"`}},
		{map[string]any{"id": "book.xlsx", "sheet": "Sheet1", "range": "A1-D5"}, apierr.ValidationFailed, []string{`"A1:D50"`}},
		{map[string]any{"id": "book.xlsx", "sheet": "Sheet1", "range": "XFE1:XFE2"}, apierr.ValidationFailed, []string{`"A1:D50"`}},
		{map[string]any{"id": "book.xlsx", "sheet": "Sheet1", "range": "A0:B1"}, apierr.ValidationFailed, []string{`"A1:D50"`}},
		{map[string]any{"id": "book.xlsx", "sheet": "Sheet1", "range": "Data!A1:B2"}, apierr.ValidationFailed, []string{"names sheet"}},
		{map[string]any{"id": "book.xlsx", "sheet": 0, "range": "A1"}, apierr.ValidationFailed, []string{"sheet"}},
		{map[string]any{"id": "book.xlsx", "sheet": "Sheet1"}, apierr.ValidationFailed, []string{"range"}},
		{map[string]any{"id": "nope.xlsx", "sheet": "Sheet1", "range": "A1"}, apierr.NotFound, []string{"nope.xlsx"}},
	}
	for _, c := range cases {
		_, err := te.tool("spreadsheet_read_range", c.args)
		wantCode(t, err, c.code, c.contains...)
	}
	if te.info("book.xlsx").SHA256 != f.SHA256 {
		t.Fatal("a read changed the file")
	}
}

// A hand-written workbook with what excelize does not write: cached
// formula values, shared formulas, rich text with phonetic runs, escapes,
// t="d" and t="e" cells, cells and rows without references, CDATA.
func handBook(t testing.TB, prefix string, date1904 bool) []byte {
	p := prefix
	data := strings.NewReplacer("<![", "<![", "</", "</"+p, "<", "<"+p).Replace(
		`<row r="1"><c r="A1" t="s"><v>0</v></c><c r="B1" t="s"><v>1</v></c><c r="C1" t="s"><v>2</v></c><c r="D1" t="s"><v>3</v></c></row>` +
			`<row r="2"><c r="A2"><v>1</v></c><c r="B2"><f>A2*2</f><v>2</v></c><c r="C2" s="1"><v>45306</v></c><c r="D2" t="e"><v>#DIV/0!</v></c></row>` +
			`<row r="3"><c r="A3"><v>2.5</v></c><c r="B3"><f t="shared" ref="B3:B4" si="0">A3*10</f><v>25</v></c><c r="C3" s="2"><v>45306.75</v></c><c r="D3" t="d"><v>2024-03-01T00:00:00Z</v></c></row>` +
			`<row r="4"><c r="A4"><v>-3</v></c><c r="B4"><f t="shared" si="0"/><v>-30</v></c><c r="C4" s="3"><v>0.5</v></c><c r="D4" t="inlineStr"><is><t>inline &amp; </t><r><t>rich</t></r></is></c></row>` +
			`<row><c t="b"><v>1</v></c><c t="str"><f>"x"&amp;"y"</f><v>xy</v></c><c s="4"><v>1.5</v></c><c s="5"><v>0.125</v></c></row>` +
			`<row r="7"><c r="A7" s="1"/><c r="B7" t="s"><v>4</v></c><c r="C7" t="s"><v>5</v></c><c r="D7"><v><![CDATA[7]]></v></c></row>`)
	return rawBook{
		prefix:   prefix,
		date1904: date1904,
		sheets:   []rawSheet{{name: "Hand", data: data}, {name: "Hidden", data: `<row r="1"><c r="A1"><v>1</v></c></row>`, hidden: true}},
		sst: []string{"<t>id</t>", "<t>double</t>", "<t>da</t>", "<t>kind</t>",
			`<r><rPr><b/></rPr><t>Ri</t></r><r><t xml:space="preserve">ch </t></r><rPh sb="0" eb="1"><t>ルビ</t></rPh>`,
			"<t>line_x000D_\r\nbreak _x005F_x0041_</t>"},
	}.bytes(t)
}

func TestReadRangeHandWritten(t *testing.T) {
	for _, tc := range []struct {
		prefix   string
		date1904 bool
	}{{"", false}, {"x:", false}, {"", true}} {
		t.Run(fmt.Sprintf("prefix=%q/1904=%v", tc.prefix, tc.date1904), func(t *testing.T) {
			te := newEnv(t)
			te.upload("hand.xlsx", handBook(t, tc.prefix, tc.date1904))
			got := te.readRange("hand.xlsx", "Hand", "A1:D7")
			d2, d3 := "2024-01-15", "2024-01-15T18:00:00"
			if tc.date1904 {
				d2, d3 = "2028-01-16", "2028-01-16T18:00:00"
			}
			wantGrid(t, got, [][]any{
				{"id", "double", "da", "kind"},
				{1.0, 2.0, d2, "#DIV/0!"},
				{2.5, 25.0, d3, "2024-03-01"},
				{-3.0, -30.0, "12:00:00", "inline & rich"},
				{true, "xy", 1.5, 0.125}, // [h]:mm:ss is a duration: stays a number
				{nil, nil, nil, nil},
				{nil, "Rich ", "line\r\nbreak _x0041_", 7.0},
			})
		})
	}
}
