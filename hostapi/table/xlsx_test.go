package table

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/xuri/excelize/v2"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// workbook builds an xlsx with a typed "Sales" sheet, a headerless
// "Numbers" sheet and an empty third sheet.
func workbook(t *testing.T, rows int) []byte {
	t.Helper()
	x := excelize.NewFile()
	defer x.Close()
	x.SetSheetName("Sheet1", "Sales")
	dateStyle, _ := x.NewStyle(&excelize.Style{NumFmt: 14})
	stampStyle, _ := x.NewStyle(&excelize.Style{NumFmt: 22})
	x.SetSheetRow("Sales", "A1", &[]any{"Región", "Units", "Price", "Day", "At", "Paid", "Comment", ""})
	base := time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC)
	for i := 0; i < rows; i++ {
		r := i + 2
		comment := any(fmt.Sprintf("c%d", i))
		if i%4 == 0 {
			comment = nil
		}
		x.SetSheetRow("Sales", fmt.Sprintf("A%d", r), &[]any{
			[]string{"Norte", "Sur", "Este"}[i%3], i * 2, float64(i) + 0.25, base.AddDate(0, 0, i), base.Add(time.Duration(i) * time.Hour), i%2 == 0, comment, i,
		})
		x.SetCellStyle("Sales", fmt.Sprintf("D%d", r), fmt.Sprintf("D%d", r), dateStyle)
		x.SetCellStyle("Sales", fmt.Sprintf("E%d", r), fmt.Sprintf("E%d", r), stampStyle)
	}
	x.NewSheet("Numbers")
	x.SetSheetRow("Numbers", "A1", &[]any{1, 2, 3})
	x.SetSheetRow("Numbers", "A2", &[]any{4, 5, 6})
	x.NewSheet("Empty")
	var buf bytes.Buffer
	if err := x.Write(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestWorkbookSheets(t *testing.T) {
	th := newTestHost(t)
	th.upload("book.xlsx", workbook(t, 600))
	m := th.call("table_get_map", map[string]any{"path": "book.xlsx"})
	if m["format"] != "xlsx" || m["sheet"] != "Sales" || fmt.Sprint(strs(m["sheets"])) != "[Sales Numbers Empty]" ||
		num(t, m["row_count"]) != 600 || m["has_header"] != true || len(m["chunks"].([]any)) != 2 {
		t.Fatalf("map: %v", m)
	}
	var names, types []string
	for _, c := range m["columns"].([]any) {
		names = append(names, c.(map[string]any)["name"].(string))
		types = append(types, c.(map[string]any)["inferred_type"].(string))
	}
	if fmt.Sprint(names) != "[Región Units Price Day At Paid Comment H]" {
		t.Fatalf("names %v", names)
	}
	if fmt.Sprint(types) != "[string integer float date datetime boolean string integer]" {
		t.Fatalf("types %v", types)
	}
	rr := th.call("table_read_rows", map[string]any{"path": "book.xlsx", "row_start": 9, "row_count": 1})
	if got := fmt.Sprint(rowsOf(rr["rows"])[0]); got != "[Este 16 8.25 2024-03-09 2024-03-01T08:00:00 true <nil> 8]" {
		t.Fatalf("row 9: %s", got)
	}
	st := th.call("table_stats", map[string]any{"path": "book.xlsx", "columns": []any{"Units", "Paid"}})
	u := st["columns"].([]any)[0].(map[string]any)
	if num(t, u["sum"]) != 599*600 || num(t, st["columns"].([]any)[1].(map[string]any)["true_count"]) != 300 {
		t.Fatalf("stats: %v", st)
	}
	q := th.call("table_query", map[string]any{"path": "book.xlsx", "query": `SELECT "Región", count(*) FROM data GROUP BY 1 ORDER BY 1`})
	if got := fmt.Sprint(rowsOf(q["rows"])); got != "[[Este 200] [Norte 200] [Sur 200]]" {
		t.Fatalf("query: %s", got)
	}

	// Other sheets by name (any case) or 1-based index, in every operation.
	m = th.call("table_get_map", map[string]any{"path": "book.xlsx", "sheet": "numbers"})
	if m["sheet"] != "Numbers" || m["has_header"] != false || num(t, m["row_count"]) != 2 || len(strs(m["warnings"])) != 1 {
		t.Fatalf("headerless sheet: %v", m)
	}
	rr = th.call("table_read_rows", map[string]any{"path": "book.xlsx", "sheet": 2, "row_start": 1, "row_count": 5})
	if fmt.Sprint(strs(rr["columns"])) != "[A B C]" || fmt.Sprint(rowsOf(rr["rows"])) != "[[1 2 3] [4 5 6]]" {
		t.Fatalf("sheet 2: %v", rr)
	}
	q = th.call("table_query", map[string]any{"path": "book.xlsx", "sheet": "Numbers", "query": "SELECT sum(A + B + C) FROM data"})
	if num(t, rowsOf(q["rows"])[0][0]) != 21 {
		t.Fatalf("query sheet: %v", q)
	}
	th.callErr("table_get_map", map[string]any{"path": "book.xlsx", "sheet": "Empty"}, apierr.FileReadFailed)
	err := th.callErr("table_get_map", map[string]any{"path": "book.xlsx", "sheet": "Nope"}, apierr.NotFound)
	if !bytes.Contains([]byte(err.Error()), []byte("Sales, Numbers, Empty")) {
		t.Fatalf("the error should list the sheets: %v", err)
	}
	th.callErr("table_get_map", map[string]any{"path": "book.xlsx", "sheet": 4}, apierr.NotFound)
	th.callErr("table_get_map", map[string]any{"path": "book.xlsx", "sheet": 0}, apierr.ValidationFailed)
}
