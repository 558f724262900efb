//go:build !wasip1

package main

import (
	"context"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xuri/excelize/v2"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/host"
	"github.com/metaclaw/metaclaw/hostapi/hosttest"
	"github.com/metaclaw/metaclaw/runtime/wasm"
	"github.com/metaclaw/metaclaw/runtime/wasm/wasmtest"
)

// TestCSVSummary builds the example with the Go toolchain and runs it on a
// real host: DuckDB reads the CSV, excelize writes the workbook, and the
// workbook is read back cell by cell with excelize itself.
func TestCSVSummary(t *testing.T) {
	bin := wasmtest.BuildGo(t, ".")[0]
	h, _, err := host.Open(hostapi.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	r, err := wasm.New(h, wasm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	env := h.Env("default", "example")
	csv, err := os.ReadFile("testdata/orders.csv")
	if err != nil {
		t.Fatal(err)
	}
	hosttest.Upload(t, env.WS, "orders.csv", csv, false)
	ctx := context.Background()
	// Compiled first, with no deadline: on a busy machine a cold
	// compilation takes seconds, and the runs' time is not what this tests.
	if err := r.Check(ctx, env, wasm.Request{Module: bin}); err != nil {
		t.Fatal(err)
	}
	run := func(input map[string]any) *hostapi.RunResult {
		return r.Run(ctx, env, wasm.Request{Module: bin, Input: input, Limits: hostapi.RunLimits{Timeout: 2 * time.Minute}})
	}

	res := run(map[string]any{"path": "orders.csv", "group_by": "region", "sum": "amount"})
	if !res.OK {
		t.Fatalf("run failed: %+v", res.Error)
	}
	var got struct {
		Output string
		Groups int
		Rows   int
		Total  float64
	}
	b, _ := json.Marshal(res.Result)
	json.Unmarshal(b, &got)
	if got.Output != "orders-summary.xlsx" || got.Groups != 4 || got.Rows != 10 || !near(got.Total, 872.89) {
		t.Fatalf("result %s", b)
	}
	if len(res.Files) != 1 || res.Files[0].Name != "orders-summary.xlsx" || res.Files[0].Action != "created" {
		t.Fatalf("files %+v", res.Files)
	}
	if len(res.Logs) != 1 || res.Logs[0].Message != "orders.csv: 4 groups of region written to orders-summary.xlsx" {
		t.Fatalf("logs %+v", res.Logs)
	}

	// The workbook, read with excelize directly.
	rd, err := env.WS.Open(ctx, "orders-summary.xlsx")
	if err != nil {
		t.Fatal(err)
	}
	f, err := excelize.OpenReader(rd)
	rd.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	wantRows := [][]string{
		{"region", "Rows", "Total amount", "Average", "Min", "Max"},
		{"North", "4", "352.75", "88.1875", "42", "130"},
		{"East", "2", "298.1", "149.05", "88.1", "210"},
		{"South", "3", "206.29", "68.76333333333334", "31.3", "99.99"},
		{"West", "1", "15.75", "15.75", "15.75", "15.75"},
	}
	for i, want := range wantRows {
		for j, w := range want {
			cell, _ := excelize.CoordinatesToCellName(j+1, i+1)
			v, err := f.GetCellValue("Sheet1", cell, excelize.Options{RawCellValue: true})
			if err != nil || !sameCell(v, w) {
				t.Fatalf("%s = %q (%v), want %q", cell, v, err, w)
			}
		}
	}
	for cell, want := range map[string]string{"B6": "SUM(B2:B5)", "C6": "SUM(C2:C5)", "D6": "C6/B6", "E6": "MIN(E2:E5)", "F6": "MAX(F2:F5)"} {
		if got, _ := f.GetCellFormula("Sheet1", cell); got != want {
			t.Fatalf("%s formula %q, want %q", cell, got, want)
		}
	}
	for cell, want := range map[string]string{"B6": "10", "C6": "872.89", "F6": "210"} {
		if got, err := f.CalcCellValue("Sheet1", cell, excelize.Options{RawCellValue: true}); err != nil || !sameCell(got, want) {
			t.Fatalf("%s computes to %q (%v), want %q", cell, got, err, want)
		}
	}
	style, _ := f.GetCellStyle("Sheet1", "A1")
	if st, err := f.GetStyle(style); err != nil || st.Font == nil || !st.Font.Bold {
		t.Fatalf("A1 is not bold: %+v %v", st, err)
	}
	style, _ = f.GetCellStyle("Sheet1", "C3")
	// "#,##0.00" is Excel's built-in number format 4.
	if st, err := f.GetStyle(style); err != nil || (st.NumFmt != 4 && (st.CustomNumFmt == nil || *st.CustomNumFmt != "#,##0.00")) {
		t.Fatalf("C3's number format: %+v %v", st, err)
	}
	if w, _ := f.GetColWidth("Sheet1", "A"); w != 24 {
		t.Fatalf("column A is %v wide", w)
	}

	// The host reads the same through its own operations.
	cell, err := h.Registry.CallTool(ctx, env, "spreadsheet_read_cell", map[string]any{"id": "orders-summary.xlsx", "sheet": "Sheet1", "cell": "C6"})
	if err != nil {
		t.Fatal(err)
	}
	cb, _ := json.Marshal(cell)
	if !strings.Contains(string(cb), `"formula":"SUM(C2:C5)"`) || !strings.Contains(string(cb), `"value":872.8`) {
		t.Fatalf("spreadsheet_read_cell C6: %s", cb)
	}

	// A second run replaces the workbook.
	res = run(map[string]any{"path": "orders.csv", "group_by": "product", "sum": "amount", "output": "orders-summary.xlsx"})
	if !res.OK || len(res.Files) != 1 || res.Files[0].Action != "modified" {
		t.Fatalf("second run: %+v %+v", res.Error, res.Files)
	}

	// Bad input: coded errors, and no workbook.
	for _, c := range []struct {
		input map[string]any
		code  string
		part  string
	}{
		{map[string]any{"path": "orders.csv"}, "VALIDATION_FAILED", "give path, group_by and sum"},
		{map[string]any{"path": "missing.csv", "group_by": "region", "sum": "amount", "output": "x.xlsx"}, "NOT_FOUND", "missing.csv"},
		{map[string]any{"path": "orders.csv", "group_by": "nope", "sum": "amount", "output": "x.xlsx"}, "VALIDATION_FAILED", "nope"},
	} {
		res := run(c.input)
		if res.OK || string(res.Error.Code) != c.code || !strings.Contains(res.Error.Message, c.part) {
			t.Fatalf("%v: %+v, want %s mentioning %q", c.input, res.Error, c.code, c.part)
		}
		if len(res.Files) != 0 {
			t.Fatalf("%v made files %+v", c.input, res.Files)
		}
	}
	if _, err := env.WS.Resolve(ctx, "x.xlsx"); err == nil {
		t.Fatal("a failed run left x.xlsx")
	}
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

// sameCell compares cell text, numbers as numbers (sums of doubles carry
// their rounding: 206.29000000000002).
func sameCell(got, want string) bool {
	g, err1 := strconv.ParseFloat(got, 64)
	w, err2 := strconv.ParseFloat(want, 64)
	if err1 == nil && err2 == nil {
		return near(g, w)
	}
	return got == want
}
