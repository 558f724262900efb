package spreadsheet

import (
	"bytes"
	"context"
	"encoding/csv"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xuri/excelize/v2"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/hosttest"
)

// TestBlankWorkbook: the workbook files.create makes for an .xlsx name has
// one empty sheet "Sheet1" that excelize and every spreadsheet op read,
// and the ops fill.
func TestBlankWorkbook(t *testing.T) {
	te := newEnv(t)
	maker := te.h.BlankFor("reports/Q3.XLSX")
	if maker == nil {
		t.Fatal("Register adds no blank maker for .xlsx")
	}
	if te.h.BlankFor("notes.txt") != nil || te.h.BlankFor("book.xls") != nil {
		t.Fatal("a blank maker for a name that is not .xlsx")
	}
	var buf bytes.Buffer
	if err := maker(&buf); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), blankBytes(t)) {
		t.Fatal("two blank workbooks differ")
	}
	f, err := excelize.OpenReader(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatalf("excelize cannot open the blank workbook: %v", err)
	}
	defer f.Close()
	if got := f.GetSheetList(); len(got) != 1 || got[0] != "Sheet1" {
		t.Fatalf("sheets %v", got)
	}
	if rows, err := f.GetRows("Sheet1"); err != nil || len(rows) != 0 {
		t.Fatalf("rows %v %v", rows, err)
	}

	te.upload("new.xlsx", buf.Bytes())
	wantJSON(t, te.mustTool("spreadsheet_list_sheets", map[string]any{"id": "new.xlsx"}), `[{"name":"Sheet1","rows":0,"columns":0}]`)
	wantJSON(t, te.mustTool("spreadsheet_get_sheet_summary", map[string]any{"id": "new.xlsx", "sheet": "Sheet1"}),
		`{"sheet":"Sheet1","rows":0,"columns":0,"headers":[],"top_rows":[],"bottom_rows":[]}`)
	wantJSON(t, te.mustTool("spreadsheet_read_range", map[string]any{"id": "new.xlsx", "sheet": 1, "range": "A1:C3"}), `[]`)
	wantJSON(t, te.mustTool("spreadsheet_read_cell", map[string]any{"id": "new.xlsx", "sheet": 1, "cell": "B2"}), `{"value":null,"type":"empty","formula":null}`)
	wantJSON(t, te.mustTool("spreadsheet_insert_rows", map[string]any{"id": "new.xlsx", "sheet": 1, "after_row": 0, "count": 3}), `{"rows":0}`)
	wantJSON(t, te.mustTool("spreadsheet_delete_rows", map[string]any{"id": "new.xlsx", "sheet": 1, "start_row": 1, "count": 3}), `{"rows":0}`)
	wantJSON(t, te.mustTool("spreadsheet_set_format", map[string]any{"id": "new.xlsx", "sheet": 1, "range": "A1:B1", "bold": true, "column_width": 20}), `{"ok":true}`)
	wantJSON(t, te.mustTool("spreadsheet_write_range", map[string]any{"id": "new.xlsx", "sheet": "Sheet1", "start_cell": "A1",
		"data": []any{[]any{"Name", "Qty", "When"}, []any{"Ana", 3, "2024-05-01"}, []any{"Bo", 4.5, nil}}}), `{"range":"A1:C3","cells":9}`)
	wantJSON(t, te.mustTool("spreadsheet_write_cell", map[string]any{"id": "new.xlsx", "sheet": 1, "cell": "B4", "formula": "SUM(B2:B3)"}), `{"ok":true}`)
	wantJSON(t, te.mustTool("spreadsheet_auto_filter", map[string]any{"id": "new.xlsx", "sheet": 1, "range": "A:C"}), `{"ok":true}`)
	wantJSON(t, te.mustTool("spreadsheet_add_sheet", map[string]any{"id": "new.xlsx", "name": "More"}), `{"sheets":["Sheet1","More"]}`)
	wantGrid(t, te.readRange("new.xlsx", 1, "A1:C4"), [][]any{{"Name", "Qty", "When"}, {"Ana", 3.0, "2024-05-01"}, {"Bo", 4.5, nil}, {nil, 7.5, nil}})
	// The header kept the format given before it had values.
	wantJSON(t, te.cell("new.xlsx", 1, "A1"), `{"value":"Name","format":{"bold":true,"columnWidth":20}}`)
	if x := te.part("new.xlsx", "xl/worksheets/sheet1.xml"); !strings.Contains(x, `<autoFilter ref="A1:C4"/>`) || !strings.Contains(x, `<dimension ref="A1:C4"`) {
		t.Fatalf("sheet XML\n%s", x)
	}
	wantJSON(t, te.mustTool("spreadsheet_delete_sheet", map[string]any{"id": "new.xlsx", "name": "More"}), `{"sheets":["Sheet1"]}`)
}

// TestLibreOfficeOpensBlankAndBigWrites: LibreOffice opens the blank
// workbook, and reads a big write streamed into it (numbers, text that
// needs escaping, dates, booleans, empty cells) as metaclaw reads it.
func TestLibreOfficeOpensBlankAndBigWrites(t *testing.T) {
	if _, err := exec.LookPath("libreoffice"); err != nil {
		t.Skip("libreoffice is not installed (apt-get install libreoffice-calc-nogui); skipping the cross-check with a second implementation")
	}
	te := newEnv(t)
	te.upload("blank.xlsx", blankBytes(t))
	const n = 2000
	data := scriptRows(n)
	data[0].([]any)[2] = "Ann <&> \"Q\" \t_x0041_ ünï€"
	data[1].([]any)[3] = "  spaced  "
	te.upload("big.xlsx", blankBytes(t))
	te.mustTool("spreadsheet_write_range", map[string]any{"id": "big.xlsx", "sheet": "Sheet1", "start_cell": "B2", "data": data})
	// One LibreOffice start converts both (starting it is most of the time).
	books := loCSVs(t, te, "blank.xlsx", "big.xlsx")
	if len(books[0]) != 0 {
		t.Fatalf("LibreOffice reads the blank workbook as %q", books[0])
	}
	lo := books[1]
	if len(lo) != n+1 {
		t.Fatalf("LibreOffice reads %d rows, want %d", len(lo), n+1)
	}
	ours := te.readRange("big.xlsx", 1, fmt.Sprintf("B2:K%d", n+1))
	for i, row := range ours {
		got := lo[i+1][1:]
		for j, v := range row {
			want := ""
			switch x := v.(type) {
			case nil:
			case bool:
				want = strings.ToUpper(strconv.FormatBool(x))
			case float64:
				want = strconv.FormatFloat(x, 'f', -1, 64)
			case string:
				want = x
			}
			if got[j] != want {
				t.Fatalf("row %d column %d: LibreOffice %q, metaclaw %q (%#v)", i+2, j+2, got[j], want, v)
			}
		}
	}
	if lo[1][3] != "Ann <&> \"Q\" \t_x0041_ ünï€" || lo[2][4] != "  spaced  " || lo[1][2] != "2020-02-07" {
		t.Fatalf("LibreOffice reads %q / %q", lo[1], lo[2])
	}
	// excelize, the third reader, agrees cell by cell.
	f := te.excel("big.xlsx")
	for r, row := range ours {
		for c, v := range row {
			if w := excelizeTyped(t, f, "Sheet1", cellName(c+2, r+2), false); !sameValue(v, w) {
				t.Fatalf("%s: metaclaw %#v, excelize %#v", cellName(c+2, r+2), v, w)
			}
		}
	}
}

// TestStreamedWriteLimits: a big write into a blank sheet that outgrows the
// file size limit, or the caller's time, ends with TOO_LARGE or TIMEOUT
// and leaves the workbook as it was.
func TestStreamedWriteLimits(t *testing.T) {
	h := hosttest.New(t, hostapi.Config{MaxFileSize: 256 << 10}, Register)
	te := &testEnv{t: t, h: h, env: h.Env("default", "limits"), ctx: context.Background()}
	te.upload("small.xlsx", blankBytes(t))
	before := te.info("small.xlsx").SHA256
	data := scriptRows(20000)
	_, err := te.tool("spreadsheet_write_range", map[string]any{"id": "small.xlsx", "sheet": 1, "start_cell": "A1", "data": data})
	wantCode(t, err, apierr.TooLarge)
	ctx, cancel := context.WithTimeout(te.ctx, 20*time.Millisecond)
	defer cancel()
	big := newEnv(t)
	big.upload("slow.xlsx", blankBytes(t))
	_, err = big.h.Registry.CallTool(ctx, big.env, "spreadsheet_write_range", map[string]any{"id": "slow.xlsx", "sheet": 1, "start_cell": "A1", "data": scriptRows(100000)})
	wantCode(t, err, apierr.Timeout)
	if te.info("small.xlsx").SHA256 != before {
		t.Fatal("the refused write changed the file")
	}
	wantJSON(t, big.mustTool("spreadsheet_list_sheets", map[string]any{"id": "slow.xlsx"}), `[{"name":"Sheet1","rows":0}]`)
	// Both hosts still write.
	te.mustTool("spreadsheet_write_range", map[string]any{"id": "small.xlsx", "sheet": 1, "start_cell": "A1", "data": scriptRows(10)})
	wantGrid(t, te.readRange("small.xlsx", 1, "A10"), [][]any{{10.0}})
}

// loCSVs converts workspace workbooks to CSV with one LibreOffice run and
// returns their rows, in the order of names.
func loCSVs(t *testing.T, te *testEnv, names ...string) [][][]string {
	t.Helper()
	bin, err := exec.LookPath("libreoffice")
	if err != nil {
		t.Skip("libreoffice is not installed")
	}
	loOnce.Lock()
	defer loOnce.Unlock()
	dir, out := t.TempDir(), t.TempDir()
	args := []string{"-env:UserInstallation=file://" + filepath.Join(t.TempDir(), "profile"), "--headless",
		"--convert-to", `csv:Text - txt - csv (StarCalc):44,34,76,1`, "--outdir", out}
	for i, name := range names {
		p := filepath.Join(dir, fmt.Sprintf("book%d.xlsx", i))
		if err := os.WriteFile(p, te.stored(name), 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, p)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("libreoffice: %v\n%s", err, msg)
	}
	res := make([][][]string, len(names))
	for i := range names {
		b, err := os.ReadFile(filepath.Join(out, fmt.Sprintf("book%d.csv", i)))
		if err != nil {
			t.Fatalf("libreoffice wrote no CSV for %s: %v", names[i], err)
		}
		r := csv.NewReader(bytes.NewReader(b))
		r.FieldsPerRecord = -1
		if res[i], err = r.ReadAll(); err != nil {
			t.Fatal(err)
		}
	}
	return res
}

// TestStreamIntoWorkbookWithFormulas: a big write into a new sheet of a
// workbook whose other sheet holds formulas streams its rows, and the
// formulas (one of them reading the new sheet) show fresh results.
func TestStreamIntoWorkbookWithFormulas(t *testing.T) {
	te := newEnv(t)
	te.upload("s.xlsx", readFixture(t, "sales.xlsx"))
	te.mustTool("spreadsheet_add_sheet", map[string]any{"id": "s.xlsx", "name": "Rates"})
	te.mustTool("spreadsheet_write_cell", map[string]any{"id": "s.xlsx", "sheet": "Sales", "cell": "H1", "formula": "SUM(Rates!A1:A3000)"})
	rows := make([]any, 3000)
	for i := range rows {
		rows[i] = []any{int64(i + 1), "2024-06-01", map[string]any{"formula": "A" + strconv.Itoa(i+1) + "*2"}}
	}
	wantJSON(t, te.mustTool("spreadsheet_write_range", map[string]any{"id": "s.xlsx", "sheet": "Rates", "start_cell": "A1", "data": rows}),
		`{"range":"A1:C3000","cells":9000}`)
	wantGrid(t, te.readRange("s.xlsx", "Rates", "A2999:C3000"), [][]any{{2999.0, "2024-06-01", 5998.0}, {3000.0, "2024-06-01", 6000.0}})
	wantJSON(t, te.mustTool("spreadsheet_read_cell", map[string]any{"id": "s.xlsx", "sheet": "Sales", "cell": "H1"}), `{"value":4501500,"formula":"SUM(Rates!A1:A3000)"}`)
	wantJSON(t, te.mustTool("spreadsheet_read_cell", map[string]any{"id": "s.xlsx", "sheet": "Sales", "cell": "F7"}), `{"value":230,"formula":"SUM(F2:F6)"}`)
	if x := te.part("s.xlsx", "xl/workbook.xml"); !strings.Contains(x, `fullCalcOnLoad="1"`) && !strings.Contains(x, `fullCalcOnLoad="true"`) {
		t.Fatal("the workbook does not ask for recalculation on open")
	}
	if x := te.part("s.xlsx", "xl/worksheets/sheet3.xml"); !strings.Contains(x, `<dimension ref="A1:C3000"`) || !strings.Contains(x, `<c r="C3000"><f>A3000*2</f></c>`) {
		t.Fatalf("the new sheet's XML: %.600s", x)
	}
	if c := te.cell("s.xlsx", "Rates", "B5"); c["type"] != "date" || c["format"].(map[string]any)["numberFormat"] != "yyyy-mm-dd" {
		t.Fatalf("B5 %v", c)
	}
}
