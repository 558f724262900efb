package table

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/xuri/excelize/v2"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/store"
)

func (th *testHost) body(ref string) []byte {
	th.t.Helper()
	rd, err := th.env.WS.Open(context.Background(), ref)
	if err != nil {
		th.t.Fatal(err)
	}
	defer rd.Close()
	b, err := io.ReadAll(rd)
	if err != nil {
		th.t.Fatal(err)
	}
	return b
}

// Export → re-read round trips, in both formats, through the same table
// operations (the xlsx through the workbook loader and through excelize).
func TestExportRoundTrip(t *testing.T) {
	th := newTestHost(t)
	recs := genRecords(1100)
	uploadRecords(th, "src.csv", recs)
	events, cancel := th.h.Store.Bus().Subscribe("default", 0)
	defer cancel()

	for _, format := range []string{"csv", "xlsx"} {
		target := "out/all." + format
		res := th.call("table_export", map[string]any{"path": "src.csv", "target_path": target, "format": format})
		if res["target_path"] != target || res["format"] != format || num(t, res["row_count"]) != 1100 || num(t, res["column_count"]) != 7 || len(res["warnings"].([]any)) != 0 {
			t.Fatalf("%s export: %v", format, res)
		}
		if (format == "xlsx") != (res["sheet"] == "Sheet1") {
			t.Fatalf("sheet: %v", res["sheet"])
		}
		f, err := th.env.WS.Resolve(context.Background(), target)
		if err != nil || f.Source != store.SourceDerived || f.ID != res["id"] || float64(f.Size) != num(t, res["size"]) {
			t.Fatalf("stored file: %+v %v", f, err)
		}
		select {
		case ev := <-events:
			if ev.Type != store.EventCreated || ev.Data["name"] != target {
				t.Fatalf("event: %+v", ev)
			}
		case <-time.After(2 * time.Second):
			t.Fatal("no file:created event")
		}

		m := th.call("table_get_map", map[string]any{"path": target})
		if num(t, m["row_count"]) != 1100 {
			t.Fatalf("%s re-read: %v", format, m)
		}
		var names, types []string
		for _, c := range m["columns"].([]any) {
			names = append(names, c.(map[string]any)["name"].(string))
			types = append(types, c.(map[string]any)["inferred_type"].(string))
		}
		if fmt.Sprint(names) != fmt.Sprint(testHeader) || fmt.Sprint(types) != "[integer string float integer date boolean string]" {
			t.Fatalf("%s re-read columns %v %v", format, names, types)
		}
		for _, start := range []int{1, 550, 1098} {
			rr := th.call("table_read_rows", map[string]any{"path": target, "row_start": start, "row_count": 3})
			for k, row := range rowsOf(rr["rows"]) {
				checkRecord(t, row, recs[start-1+k])
			}
		}
		st := th.call("table_stats", map[string]any{"path": target, "columns": []any{"importe"}})
		if s := st["columns"].([]any)[0].(map[string]any)["sum"]; !near(num(t, s), sumAmounts(recs), 1e-6) {
			t.Fatalf("%s sum %v", format, s)
		}
	}

	// The CSV text itself: header, ISO dates, empty fields for nulls.
	lines := strings.SplitN(string(th.body("out/all.csv")), "\n", 3)
	if lines[0] != strings.Join(testHeader, ",") || lines[1] != "1,José,-1000,0,2024-01-01,true," {
		t.Fatalf("csv text: %q", lines[:2])
	}
	// The workbook itself: sheet, header, a real date cell.
	x, err := excelize.OpenReader(bytes.NewReader(th.body("out/all.xlsx")))
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	if fmt.Sprint(x.GetSheetList()) != "[Sheet1]" {
		t.Fatalf("sheets %v", x.GetSheetList())
	}
	if v, _ := x.GetCellValue("Sheet1", "B1"); v != "nombre" {
		t.Fatalf("B1 %q", v)
	}
	if typ, _ := x.GetCellType("Sheet1", "E2"); typ == excelize.CellTypeInlineString || typ == excelize.CellTypeSharedString {
		t.Fatalf("E2 should be a date number, is %v", typ)
	}
	if raw, _ := x.GetCellValue("Sheet1", "E2", excelize.Options{RawCellValue: true}); raw != "45292" {
		t.Fatalf("E2 serial %q", raw)
	}
}

func TestExportQueryAndOptions(t *testing.T) {
	th := newTestHost(t)
	recs := genRecords(300)
	uploadRecords(th, "src.csv", recs)

	res := th.call("table_export", map[string]any{"path": "src.csv", "query": "SELECT id, nombre, importe FROM data WHERE importe > 0 ORDER BY importe DESC, id", "target_path": "pos.csv", "format": "csv"})
	var want []record
	for _, r := range recs {
		if r.Amount > 0 {
			want = append(want, r)
		}
	}
	if num(t, res["row_count"]) != float64(len(want)) || num(t, res["column_count"]) != 3 || len(res["warnings"].([]any)) != 0 {
		t.Fatalf("export: %v", res)
	}
	rr := th.call("table_read_rows", map[string]any{"path": "pos.csv", "row_start": 1, "row_count": 1000})
	prev := 1e18
	for _, row := range rowsOf(rr["rows"]) {
		if a := num(t, row[2]); a > prev {
			t.Fatal("order lost")
		} else {
			prev = a
		}
	}
	if len(rowsOf(rr["rows"])) != len(want) {
		t.Fatalf("rows %d, want %d", len(rowsOf(rr["rows"])), len(want))
	}

	// No ORDER BY: a warning; nested values: JSON text and a warning.
	res = th.call("table_export", map[string]any{"path": "src.csv", "query": "SELECT nombre, list(id ORDER BY id)[1:2] AS first_ids FROM data GROUP BY nombre", "target_path": "lists.csv", "format": "csv"})
	if w := strs(res["warnings"]); len(w) != 2 || !strings.Contains(w[0], "ORDER BY") || !strings.Contains(w[1], "JSON") {
		t.Fatalf("warnings: %v", w)
	}
	if !strings.Contains(string(th.body("lists.csv")), "José,\"[1,11]\"") {
		t.Fatalf("lists.csv: %s", th.body("lists.csv"))
	}

	// Named sheet; existing targets; overwrite keeps the file's id.
	res = th.call("table_export", map[string]any{"path": "src.csv", "target_path": "r.xlsx", "format": "xlsx", "sheet": "Resumen"})
	if res["sheet"] != "Resumen" {
		t.Fatal(res)
	}
	m := th.call("table_get_map", map[string]any{"path": "r.xlsx"})
	if m["sheet"] != "Resumen" || num(t, m["row_count"]) != 300 {
		t.Fatal(m)
	}
	id := res["id"]
	th.callErr("table_export", map[string]any{"path": "src.csv", "target_path": "r.xlsx", "format": "xlsx"}, apierr.AlreadyExists)
	res = th.call("table_export", map[string]any{"path": "src.csv", "query": "SELECT id FROM data ORDER BY id LIMIT 5", "target_path": "r.xlsx", "format": "xlsx", "overwrite": true})
	if res["id"] != id || num(t, res["row_count"]) != 5 {
		t.Fatalf("overwrite: %v", res)
	}
	m = th.call("table_get_map", map[string]any{"path": "r.xlsx"})
	if num(t, m["row_count"]) != 5 {
		t.Fatalf("the overwritten file's table is stale: %v", m)
	}

	// Exporting over the source itself: the file shrinks, its table follows.
	before := th.sha("src.csv")
	th.call("table_export", map[string]any{"path": "src.csv", "query": "SELECT * FROM data WHERE id <= 10 ORDER BY id", "target_path": "src.csv", "format": "csv", "overwrite": true})
	if th.sha("src.csv") == before {
		t.Fatal("source not replaced")
	}
	m = th.call("table_get_map", map[string]any{"path": "src.csv"})
	if num(t, m["row_count"]) != 10 {
		t.Fatalf("re-exported source: %v", m["row_count"])
	}
	uploadRecords(th, "src.csv", recs)

	// A workbook source: source_sheet picks the sheet.
	th.upload("book.xlsx", workbook(t, 30))
	res = th.call("table_export", map[string]any{"path": "book.xlsx", "source_sheet": "Numbers", "target_path": "numbers.csv", "format": "csv"})
	if string(th.body("numbers.csv")) != "A,B,C\n1,2,3\n4,5,6\n" {
		t.Fatalf("numbers.csv: %q", th.body("numbers.csv"))
	}

	// Bad options.
	th.callErr("table_export", map[string]any{"path": "src.csv", "target_path": "x.xlsx", "format": "csv"}, apierr.ValidationFailed)
	th.callErr("table_export", map[string]any{"path": "src.csv", "target_path": "x", "format": "csv"}, apierr.ValidationFailed)
	th.callErr("table_export", map[string]any{"path": "src.csv", "target_path": "x.csv", "format": "csv", "sheet": "S"}, apierr.ValidationFailed)
	th.callErr("table_export", map[string]any{"path": "src.csv", "target_path": "x.xlsx", "format": "xlsx", "sheet": "a/b"}, apierr.ValidationFailed)
	th.callErr("table_export", map[string]any{"path": "src.csv", "target_path": "x.pdf", "format": "pdf"}, apierr.ValidationFailed)
	th.callErr("table_export", map[string]any{"path": "src.csv", "format": "csv"}, apierr.ValidationFailed)
	th.callErr("table_export", map[string]any{"path": "src.csv", "target_path": "../x.csv", "format": "csv"}, apierr.ValidationFailed)
	th.callErr("table_export", map[string]any{"path": "src.csv", "query": "SELECT nope FROM data", "target_path": "x.csv", "format": "csv"}, apierr.ValidationFailed)
	if _, err := th.env.WS.Resolve(context.Background(), "x.csv"); !apierr.Is(err, apierr.NotFound) {
		t.Fatal("a failed export left a file")
	}
}

// Exports go through the store: the workspace quota holds.
func TestExportQuota(t *testing.T) {
	th := newTestHost(t, func(c *hostapi.Config, _ *options) { c.MaxWorkspaceSize = 150 << 10 })
	uploadRecords(th, "src.csv", genRecords(1500)) // ~90 KB
	th.callErr("table_export", map[string]any{"path": "src.csv", "target_path": "copy.csv", "format": "csv"}, apierr.QuotaExceeded)
	if _, err := th.env.WS.Resolve(context.Background(), "copy.csv"); !apierr.Is(err, apierr.NotFound) {
		t.Fatal("a refused export left a file")
	}
	th.call("table_export", map[string]any{"path": "src.csv", "query": "SELECT * FROM data ORDER BY id LIMIT 10", "target_path": "small.csv", "format": "csv"})
}
