package worker_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/store"
	"github.com/metaclaw/metaclaw/runtime/worker"
)

// bigRowsScript builds 100,000 rows of 10 cells in JS and writes them with
// one writeRange call.
const bigRowsScript = `
	const rows = [];
	for (let r = 0; r < 100000; r++) {
		const row = ["item " + r];
		for (let c = 1; c < 10; c++) row.push(r * 10 + c);
		rows.push(row);
	}
	await files.create(input.name, {overwrite: true});
	return await files.spreadsheet.writeRange(input.name, "Sheet1", "A1", rows);`

// The default limits fit real agent work: host-side work is no longer
// charged to the script, only what the script itself holds.
func TestDefaultLimitsFitRealWork(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a 100k-row workbook, a 20-page PDF and a 1M-row CSV")
	}
	h, _ := newPool(t, worker.Options{Size: 2})
	env := h.Env("default", "work")
	runOK := func(name, code string, input any) string {
		t.Helper()
		start := time.Now()
		res := h.Runner.Run(context.Background(), env, hostapi.RunRequest{Code: code, Input: input})
		if !res.OK {
			t.Fatalf("%s: %+v", name, res.Error)
		}
		t.Logf("%s: %v", name, time.Since(start).Round(time.Millisecond))
		return string(mustJSON(res.Result))
	}

	// 100,000 × 10 cells built in JS and written at once.
	if got := runOK("write 100k×10 from JS", bigRowsScript, map[string]any{"name": "big.xlsx"}); !strings.Contains(got, `"range":"A1:J100000"`) {
		t.Fatalf("writeRange: %s", got)
	}
	// The documented spreadsheet workflow on the 100k-row workbook.
	got := runOK("spreadsheet workflow", `
		const sheets = await files.spreadsheet.listSheets("big.xlsx");
		const summary = await files.spreadsheet.getSheetSummary("big.xlsx", sheets[0].name);
		const head = await files.spreadsheet.readRange("big.xlsx", "Sheet1", "A1:J50");
		const patch = Array.from({length: 7}, (_, r) => Array.from({length: 7}, (_, c) => r * 7 + c));
		const w = await files.spreadsheet.writeRange("big.xlsx", "Sheet1", "L2", patch);
		await files.spreadsheet.setFormat("big.xlsx", "Sheet1", "L2:R8", {bold: true, numberFormat: "0.00"});
		const cell = await files.spreadsheet.readCell("big.xlsx", "Sheet1", "R8");
		return {rows: sheets[0].rows, summaryRows: summary.rows, head: head.length, first: head[0][0], w, cell: cell.value, bold: cell.format.bold};`, nil)
	if !strings.Contains(got, `"rows":100000`) || !strings.Contains(got, `"head":50`) || !strings.Contains(got, `"first":"item 0"`) ||
		!strings.Contains(got, `"cells":49`) || !strings.Contains(got, `"cell":48`) || !strings.Contains(got, `"bold":true`) {
		t.Fatalf("spreadsheet workflow: %s", got)
	}

	// A 20-page PDF: made, split, and a part's text extracted.
	got = runOK("pdf workflow", `
		await files.create("doc.pdf", {overwrite: true});
		for (let p = 2; p <= 20; p++) await files.pdf.addPage("doc.pdf");
		for (let p = 1; p <= 20; p++) await files.pdf.addText("doc.pdf", p, "Page " + p + " of the report", {x: 72, y: 72});
		const parts = await files.pdf.splitPages("doc.pdf", ["1-10", "11-"]);
		const text = await files.pdf.extractText(parts[1].name, {pages: [1, 10]});
		return {pages: (await files.pdf.info("doc.pdf")).pages, parts: parts.map(p => p.pages), text: text.pages.map(p => p.text.trim())};`, nil)
	if !strings.Contains(got, `"pages":20`) || !strings.Contains(got, `"parts":[10,10]`) || !strings.Contains(got, `Page 11 of the report`) || !strings.Contains(got, `Page 20 of the report`) {
		t.Fatalf("pdf workflow: %s", got)
	}

	// A 1M-row CSV, queried.
	ws := h.Store.Workspace("default")
	pr, pw := io.Pipe()
	go func() {
		bw := bufio.NewWriterSize(pw, 1<<20)
		bw.WriteString("id,region,amount\n")
		for i := 0; i < 1_000_000; i++ {
			fmt.Fprintf(bw, "%d,%s,%d.%02d\n", i, [4]string{"north", "south", "east", "west"}[i%4], i%1000, i%100)
		}
		bw.Flush()
		pw.Close()
	}()
	if _, err := ws.Create(context.Background(), store.CreateOptions{Name: "sales.csv"}, pr); err != nil {
		t.Fatal(err)
	}
	got = runOK("csv workflow", `
		const map = await files.table.getMap("sales.csv");
		const q = await files.table.query("sales.csv", "SELECT region, count(*) AS n, round(sum(amount), 2) AS total FROM data GROUP BY region ORDER BY region");
		const page = await files.table.readRows("sales.csv", 500000, 3);
		return {q, page};`, nil)
	if !strings.Contains(got, `"north"`) || !strings.Contains(got, `250000`) || !strings.Contains(got, `500000`) {
		t.Fatalf("csv workflow: %s", got)
	}
}
