package spreadsheet

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"

	"github.com/xuri/excelize/v2"
	"golang.org/x/text/encoding/charmap"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

func TestListSheets(t *testing.T) {
	te := newEnv(t)
	te.upload("book.xlsx", typedBook(t))
	got := te.mustTool("spreadsheet_list_sheets", map[string]any{"id": "book.xlsx"})
	want := []any{
		map[string]any{"name": "Sheet1", "rows": 6.0, "columns": 5.0},
		map[string]any{"name": "Data", "rows": 2.0, "columns": 2.0},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v", got)
	}
	te.upload("hand.xlsx", handBook(t, "", false))
	got = te.mustTool("spreadsheet_list_sheets", map[string]any{"id": "hand.xlsx"})
	want = []any{
		map[string]any{"name": "Hand", "rows": 7.0, "columns": 4.0},
		map[string]any{"name": "Hidden", "rows": 1.0, "columns": 1.0, "hidden": true},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v", got)
	}
	// A chart sheet is listed but holds no cells.
	f := excelize.NewFile()
	f.SetSheetRow("Sheet1", "A1", &[]any{"x", 1})
	f.SetSheetRow("Sheet1", "A2", &[]any{"y", 2})
	if err := f.AddChartSheet("Chart", &excelize.Chart{Type: excelize.Col, Series: []excelize.ChartSeries{{Name: "Sheet1!$A$1", Categories: "Sheet1!$A$1:$A$2", Values: "Sheet1!$B$1:$B$2"}}}); err != nil {
		t.Fatal(err)
	}
	te.upload("chart.xlsx", xlsxBytes(t, f))
	got = te.mustTool("spreadsheet_list_sheets", map[string]any{"id": "chart.xlsx"})
	want = []any{
		map[string]any{"name": "Sheet1", "rows": 2.0, "columns": 2.0},
		map[string]any{"name": "Chart", "rows": 0.0, "columns": 0.0, "type": "chartsheet"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v", got)
	}
	_, err := te.tool("spreadsheet_read_range", map[string]any{"id": "chart.xlsx", "sheet": "Chart", "range": "A1"})
	wantCode(t, err, apierr.UnsupportedFormat, "chartsheet")
	_, err = te.tool("spreadsheet_write_cell", map[string]any{"id": "chart.xlsx", "sheet": "Chart", "cell": "A1", "value": 1})
	wantCode(t, err, apierr.UnsupportedFormat, "chartsheet")
}

func TestGetSheetSummary(t *testing.T) {
	te := newEnv(t)
	te.upload("big.xlsx", bigBook(t, 1200))
	v, err := te.js("files.spreadsheet.getSheetSummary", map[string]any{"id": "big.xlsx", "sheet": "Data"})
	if err != nil {
		t.Fatal(err)
	}
	s := v.(map[string]any)
	if s["sheet"] != "Data" || s["rows"] != 1200.0 || s["columns"] != 10.0 || s["headerRow"] != 1.0 || s["firstDataRow"] != 2.0 {
		t.Fatalf("summary %v", s)
	}
	if !reflect.DeepEqual(s["headers"], []any{"id", "name", "category", "amount", "qty", "date", "paid", "region", "score", "note"}) {
		t.Fatalf("headers %v", s["headers"])
	}
	if !reflect.DeepEqual(s["columnTypes"], []any{"number", "string", "string", "number", "number", "date", "boolean", "string", "number", "string"}) {
		t.Fatalf("types %v", s["columnTypes"])
	}
	top, bottom := s["topRows"].([]any), s["bottomRows"].([]any)
	if len(top) != 5 || len(bottom) != 5 {
		t.Fatalf("top %d bottom %d", len(top), len(bottom))
	}
	if r := top[0].([]any); r[0] != 1.0 || r[1] != "Customer 1" || r[5] != "2020-01-02" || r[6] != true {
		t.Fatalf("top row %v", r)
	}
	if r := bottom[4].([]any); r[0] != 1199.0 || r[9] != "note 8393" {
		t.Fatalf("bottom row %v", r)
	}
	// The same values as readRange gives for those rows.
	wantGrid(t, toGrid(t, bottom), te.readRange("big.xlsx", "Data", "A1196:J1200"))

	// Mixed and empty columns, no header row, a short sheet.
	f := excelize.NewFile()
	f.SetSheetRow("Sheet1", "B3", &[]any{1, "a", true})
	f.SetSheetRow("Sheet1", "B4", &[]any{"x", 2.5, false})
	te.upload("mixed.xlsx", xlsxBytes(t, f))
	got := te.mustTool("spreadsheet_get_sheet_summary", map[string]any{"id": "mixed.xlsx", "sheet": 1}).(map[string]any)
	want := map[string]any{"sheet": "Sheet1", "rows": 4.0, "columns": 4.0, "header_row": 0.0, "first_data_row": 3.0,
		"headers": []any{"A", "B", "C", "D"}, "column_types": []any{"empty", "mixed", "mixed", "boolean"},
		"top_rows": []any{[]any{nil, 1.0, "a", true}, []any{nil, "x", 2.5, false}}, "bottom_rows": []any{}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("summary\n got %v\nwant %v", got, want)
	}
	// An empty sheet.
	f = excelize.NewFile()
	te.upload("empty.xlsx", xlsxBytes(t, f))
	got = te.mustTool("spreadsheet_get_sheet_summary", map[string]any{"id": "empty.xlsx", "sheet": "Sheet1"}).(map[string]any)
	if got["rows"] != 0.0 || len(got["headers"].([]any)) != 0 || len(got["top_rows"].([]any)) != 0 {
		t.Fatalf("empty summary %v", got)
	}
	wantGrid(t, te.readRange("empty.xlsx", "Sheet1", "A1:C3"), [][]any{})
	_, err = te.tool("spreadsheet_get_sheet_summary", map[string]any{"id": "mixed.xlsx", "sheet": "Nope"})
	wantCode(t, err, apierr.NotFound, `"Sheet1"`)
}

// TestPagingMatchesDirectReads checks that the decoded cache and the direct
// stream give the same answers, and that a page deep in the sheet is
// served without re-reading from the top.
func TestPagingMatchesDirectReads(t *testing.T) {
	te := newEnv(t)
	te.upload("big.xlsx", bigBook(t, 30000))
	cacheDir := filepath.Join(te.h.Store.CacheDir(), "spreadsheet")
	direct := te.readRange("big.xlsx", "Data", "A9000:J9999") // streamed, no cache
	if entries, _ := os.ReadDir(cacheDir); len(entries) != 0 {
		t.Fatalf("a shallow read built a cache: %v", entries)
	}
	deep := te.readRange("big.xlsx", "Data", "A29990:J30010") // builds the cache
	if len(deep) != 11 || deep[10][0] != 29999.0 {
		t.Fatalf("deep page %v", deep[len(deep)-1])
	}
	if entries, _ := os.ReadDir(cacheDir); len(entries) != 1 {
		t.Fatalf("cache files: %v", entries)
	}
	wantGrid(t, te.readRange("big.xlsx", "Data", "A9000:J9999"), direct) // now from the cache
	// Every page of a full read in order covers the sheet exactly.
	n := 0
	for r := 1; r <= 30000; r += 5000 {
		page := te.readRange("big.xlsx", "Data", fmt.Sprintf("A%d:J%d", r, r+4999))
		for i, row := range page {
			if r+i > 1 && row[0] != float64(r+i-1) {
				t.Fatalf("row %d reads %v", r+i, row)
			}
			n++
		}
	}
	if n != 30000 {
		t.Fatalf("%d rows", n)
	}
	// A damaged cache file is noticed and rebuilt.
	entries, _ := os.ReadDir(cacheDir)
	p := filepath.Join(cacheDir, entries[0].Name())
	os.WriteFile(p, []byte("garbage"), 0o600)
	wantGrid(t, te.readRange("big.xlsx", "Data", "A29999:B30000"), [][]any{{29998.0, "Customer 29998"}, {29999.0, "Customer 29999"}})
	// Whole-column reads and the cell limit.
	col := te.readRange("big.xlsx", "Data", "A:A")
	if len(col) != 30000 || col[29999][0] != 29999.0 {
		t.Fatalf("A:A has %d rows", len(col))
	}
	_, err := te.tool("spreadsheet_read_range", map[string]any{"id": "big.xlsx", "sheet": "Data", "range": "A1:BZ20000"})
	wantCode(t, err, apierr.TooLarge, "pages such as")
}

// TestAgreesWithExcelize compares every value the streaming reader returns
// with what excelize reads from the same files (typed the same way).
func TestAgreesWithExcelize(t *testing.T) {
	te := newEnv(t)
	books := map[string][]byte{"typed.xlsx": typedBook(t), "hand.xlsx": handBook(t, "x:", false), "big.xlsx": bigBook(t, 500),
		"h1904.xlsx": handBook(t, "", true)}
	for name, b := range books {
		te.upload(name, b)
		f, err := excelize.OpenReader(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		date1904 := false
		if pr, err := f.GetWorkbookProps(); err == nil && pr.Date1904 != nil {
			date1904 = *pr.Date1904
		}
		for _, sheet := range f.GetSheetList() {
			m := te.mustTool("spreadsheet_get_sheet_summary", map[string]any{"id": name, "sheet": sheet}).(map[string]any)
			rows, cols := int(m["rows"].(float64)), int(m["columns"].(float64))
			if rows == 0 {
				continue
			}
			got := te.readRange(name, sheet, cellName(1, 1)+":"+cellName(cols, rows))
			for r := 1; r <= rows; r++ {
				for c := 1; c <= cols; c++ {
					ref := cellName(c, r)
					want := excelizeTyped(t, f, sheet, ref, date1904)
					var g any
					if r-1 < len(got) {
						g = got[r-1][c-1]
					}
					if !sameValue(g, want) {
						t.Errorf("%s %s!%s: reader %#v, excelize %#v", name, sheet, ref, g, want)
					}
				}
			}
		}
		f.Close()
	}
}

// excelizeTyped reads a cell with excelize (raw value, cell type, style's
// number format) and types it as readRange does. Merged areas are read at
// their top-left cell only.
func excelizeTyped(t *testing.T, f *excelize.File, sheet, ref string, date1904 bool) any {
	merged, _ := f.GetMergeCells(sheet)
	for _, m := range merged {
		if m.GetStartAxis() != ref && inMerge(m, ref) {
			return nil
		}
	}
	ct, _ := f.GetCellType(sheet, ref)
	raw, err := f.GetCellValue(sheet, ref, excelize.Options{RawCellValue: true})
	if err != nil {
		t.Fatalf("excelize %s: %v", ref, err)
	}
	if formula, _ := f.GetCellFormula(sheet, ref); formula != "" && raw == "" {
		raw, _ = f.CalcCellValue(sheet, ref, excelize.Options{RawCellValue: true})
		ct = excelize.CellTypeUnset
	}
	if raw == "" {
		return nil
	}
	switch ct {
	case excelize.CellTypeBool:
		return raw == "1" || raw == "TRUE"
	case excelize.CellTypeSharedString, excelize.CellTypeInlineString, excelize.CellTypeFormula, excelize.CellTypeError:
		return raw
	case excelize.CellTypeDate:
		return normalizeISO(raw)
	}
	n, err := strconv.ParseFloat(raw, 64)
	if err != nil {
		return raw
	}
	style, _ := f.GetCellStyle(sheet, ref)
	st, _ := f.GetStyle(style)
	dk := notDate
	if st != nil {
		if st.CustomNumFmt != nil {
			dk = formatDateKind(*st.CustomNumFmt)
		} else {
			dk = builtinDateKind(st.NumFmt)
		}
	}
	if dk != notDate {
		tm, err := excelize.ExcelDateToTime(n, date1904)
		if err == nil {
			iso, _ := serialToISO(n, dk, date1904)
			// excelize's own conversion must name the same instant.
			if (dk == dateOnly && tm.Format("2006-01-02") != iso[:10]) || (dk == timeOnly && n < 1 && tm.Format("15:04:05") != iso) {
				t.Errorf("%s: excelize converts %v to %v, reader to %s", ref, n, tm, iso)
			}
			return iso
		}
	}
	return n
}

func inMerge(m excelize.MergeCell, ref string) bool {
	c1, r1, _ := excelize.CellNameToCoordinates(m.GetStartAxis())
	c2, r2, _ := excelize.CellNameToCoordinates(m.GetEndAxis())
	c, r, _ := excelize.CellNameToCoordinates(ref)
	return c >= c1 && c <= c2 && r >= r1 && r <= r2
}

func sameValue(a, b any) bool {
	fa, ok1 := a.(float64)
	fb, ok2 := b.(float64)
	if ok1 && ok2 {
		return fa == fb || math.Abs(fa-fb) < 1e-12*math.Max(1, math.Abs(fa))
	}
	return reflect.DeepEqual(a, b)
}

func TestCSVReadsAsOneSheet(t *testing.T) {
	te := newEnv(t)
	csv := "name,amount,when,ok,zip,note\nAnn,12.5,2024-01-15,true,00123,\"multi\nline, quoted\"\nBob,-3,2024-02-01T10:30:00,FALSE,94110,\n\n,,,,,\nCe,1e3,soon,yes,7,x\n"
	te.upload("data.csv", []byte(csv))
	ls := te.mustTool("spreadsheet_list_sheets", map[string]any{"id": "data.csv"})
	if !reflect.DeepEqual(ls, []any{map[string]any{"name": "Sheet1", "rows": 5.0, "columns": 6.0}}) {
		t.Fatalf("list %v", ls)
	}
	wantGrid(t, te.readRange("data.csv", "Sheet1", "A1:F5"), [][]any{
		{"name", "amount", "when", "ok", "zip", "note"},
		{"Ann", 12.5, "2024-01-15", true, "00123", "multi\nline, quoted"},
		{"Bob", -3.0, "2024-02-01T10:30:00", false, 94110.0, nil},
		{nil, nil, nil, nil, nil, nil},
		{"Ce", 1000.0, "soon", "yes", 7.0, "x"},
	})
	s := te.mustTool("spreadsheet_get_sheet_summary", map[string]any{"id": "data.csv", "sheet": 1}).(map[string]any)
	if !reflect.DeepEqual(s["column_types"], []any{"string", "number", "mixed", "mixed", "mixed", "string"}) {
		t.Fatalf("types %v", s["column_types"])
	}
	c := te.cell("data.csv", "Sheet1", "C2")
	if c["type"] != "date" || c["value"] != "2024-01-15" || c["formula"] != nil {
		t.Fatalf("cell %v", c)
	}
	// Tab- and semicolon-separated, and Windows-1252 text.
	te.upload("t.tsv", []byte("a\tb;c\n1\t2\n"))
	wantGrid(t, te.readRange("t.tsv", "Sheet1", "A1:B2"), [][]any{{"a", "b;c"}, {1.0, 2.0}})
	te.upload("semi.csv", []byte("a;b;c\n1,5;2;3\n"))
	wantGrid(t, te.readRange("semi.csv", "Sheet1", "A1:C2"), [][]any{{"a", "b", "c"}, {"1,5", 2.0, 3.0}})
	w1252, _ := charmap.Windows1252.NewEncoder().String("café,€5\n")
	te.upload("latin.csv", []byte(w1252))
	wantGrid(t, te.readRange("latin.csv", "Sheet1", "A1:B1"), [][]any{{"café", "€5"}})
	te.upload("bom.csv", append([]byte{0xEF, 0xBB, 0xBF}, []byte("x,y\n")...))
	wantGrid(t, te.readRange("bom.csv", "Sheet1", "A1:B1"), [][]any{{"x", "y"}})

	// Writes answer UNSUPPORTED_FORMAT with the way out, and change nothing.
	before := te.info("data.csv").SHA256
	for tool, args := range map[string]map[string]any{
		"spreadsheet_write_range":  {"sheet": "Sheet1", "start_cell": "A1", "data": []any{[]any{1}}},
		"spreadsheet_write_cell":   {"sheet": "Sheet1", "cell": "A1", "value": 1},
		"spreadsheet_add_sheet":    {"name": "X"},
		"spreadsheet_set_format":   {"sheet": "Sheet1", "range": "A1", "bold": true},
		"spreadsheet_insert_rows":  {"sheet": "Sheet1", "after_row": 1, "count": 1},
		"spreadsheet_delete_rows":  {"sheet": "Sheet1", "start_row": 1, "count": 1},
		"spreadsheet_delete_sheet": {"name": "Sheet1"},
		"spreadsheet_auto_filter":  {"sheet": "Sheet1", "range": "A1:B2"},
	} {
		args["id"] = "data.csv"
		_, err := te.tool(tool, args)
		wantCode(t, err, apierr.UnsupportedFormat, "files.table.export", `format: "xlsx"`)
	}
	if te.info("data.csv").SHA256 != before {
		t.Fatal("a refused write changed the CSV")
	}
}
