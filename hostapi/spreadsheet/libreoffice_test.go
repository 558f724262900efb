package spreadsheet

import (
	"bytes"
	"encoding/csv"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xuri/excelize/v2"
)

// libreOffice converts src (a file in dir) with `libreoffice --headless
// --convert-to`, using a private profile so parallel runs do not clash.
func libreOffice(t *testing.T, dir, src, to string) string {
	t.Helper()
	return libreOfficeTo(t, dir, src, to, dir)
}

func libreOfficeTo(t *testing.T, dir, src, to, outDir string) string {
	t.Helper()
	bin, err := exec.LookPath("libreoffice")
	if err != nil {
		t.Skip("libreoffice is not installed (apt-get install libreoffice-calc-nogui); skipping the cross-check with a second implementation")
	}
	profile := filepath.Join(t.TempDir(), "profile")
	cmd := exec.Command(bin, "-env:UserInstallation=file://"+profile, "--headless", "--convert-to", to, "--outdir", outDir, filepath.Join(dir, src))
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("libreoffice: %v\n%s", err, out)
	}
	ext := to
	if i := strings.IndexByte(ext, ':'); i >= 0 {
		ext = ext[:i]
	}
	res := filepath.Join(outDir, strings.TrimSuffix(src, filepath.Ext(src))+"."+ext)
	if _, err := os.Stat(res); err != nil {
		t.Fatalf("libreoffice wrote no %s: %s", res, out)
	}
	return res
}

var loOnce sync.Mutex // LibreOffice runs one conversion at a time

func loCSV(t *testing.T, te *testEnv, name string) [][]string {
	t.Helper()
	loOnce.Lock()
	defer loOnce.Unlock()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "book.xlsx"), te.stored(name), 0o600)
	// UTF-8, comma-separated, text as shown.
	p := libreOffice(t, dir, "book.xlsx", `csv:Text - txt - csv (StarCalc):44,34,76,1`)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	r := csv.NewReader(bytes.NewReader(b))
	r.FieldsPerRecord = -1
	rows, err := r.ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// TestLibreOfficeReadsOurWorkbooks: what metaclaw writes (stream, rewrite
// and excelize paths, formulas without cached values) opens in LibreOffice
// and shows the values metaclaw reads back.
func TestLibreOfficeReadsOurWorkbooks(t *testing.T) {
	if _, err := exec.LookPath("libreoffice"); err != nil {
		t.Skip("libreoffice is not installed (apt-get install libreoffice-calc-nogui); skipping the cross-check with a second implementation")
	}
	te := newEnv(t)
	f := excelize.NewFile()
	te.upload("out.xlsx", xlsxBytes(t, f))
	te.mustTool("spreadsheet_write_range", map[string]any{"id": "out.xlsx", "sheet": "Sheet1", "start_cell": "A1", "data": []any{
		[]any{"item", "qty", "price", "when", "paid", "total"},
		[]any{"pen & ink", 3, 1.25, "2024-01-15", true, map[string]any{"formula": "B2*C2"}},
		[]any{"paper <A4>", 10, 0.5, "2024-02-29", false, map[string]any{"formula": "B3*C3"}},
	}})
	// A rewrite of the existing sheet and a format change.
	te.mustTool("spreadsheet_write_range", map[string]any{"id": "out.xlsx", "sheet": "Sheet1", "start_cell": "A4", "data": []any{
		[]any{"sum", map[string]any{"formula": "SUM(B2:B3)"}, nil, "2024-03-01T12:30:00", nil, map[string]any{"formula": "SUM(F2:F3)"}},
	}})
	te.mustTool("spreadsheet_set_format", map[string]any{"id": "out.xlsx", "sheet": "Sheet1", "range": "A1:F1", "bold": true, "fill_color": "#DDEBF7", "column_width": 14})
	te.mustTool("spreadsheet_write_cell", map[string]any{"id": "out.xlsx", "sheet": "Sheet1", "cell": "B3", "value": 12})
	ours := te.readRange("out.xlsx", "Sheet1", "A1:F4")
	wantGrid(t, ours, [][]any{
		{"item", "qty", "price", "when", "paid", "total"},
		{"pen & ink", 3.0, 1.25, "2024-01-15", true, 3.75},
		{"paper <A4>", 12.0, 0.5, "2024-02-29", false, 6.0},
		{"sum", 15.0, nil, "2024-03-01T12:30:00", nil, 9.75},
	})
	lo := loCSV(t, te, "out.xlsx")
	want := [][]string{
		{"item", "qty", "price", "when", "paid", "total"},
		{"pen & ink", "3", "1.25", "2024-01-15", "TRUE", "3.75"},
		{"paper <A4>", "12", "0.5", "2024-02-29", "FALSE", "6"},
		{"sum", "15", "", "2024-03-01 12:30:00", "", "9.75"},
	}
	for i := range want {
		if i >= len(lo) || strings.Join(lo[i], "|") != strings.Join(want[i], "|") {
			t.Fatalf("LibreOffice reads row %d as %q, want %q (all: %q)", i+1, lo[min(i, len(lo)-1)], want[i], lo)
		}
	}
	// LibreOffice understands the filter: it keeps it when it saves the
	// workbook again, and reads the header format.
	te.mustTool("spreadsheet_auto_filter", map[string]any{"id": "out.xlsx", "sheet": "Sheet1", "range": "A1:F4"})
	loOnce.Lock()
	dir, out := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(dir, "book.xlsx"), te.stored("out.xlsx"), 0o600)
	p := libreOfficeTo(t, dir, "book.xlsx", "xlsx", out)
	loOnce.Unlock()
	b, _ := os.ReadFile(p)
	te.upload("resaved.xlsx", b)
	if x := te.part("resaved.xlsx", "xl/worksheets/sheet1.xml"); !strings.Contains(x, `<autoFilter ref="A1:F4"`) {
		t.Fatalf("LibreOffice dropped the filter:\n%s", x)
	}
	if f := te.cell("resaved.xlsx", 1, "B1")["format"].(map[string]any); f["bold"] != true || f["fillColor"] != "#DDEBF7" {
		t.Fatalf("LibreOffice lost the header format: %v", f)
	}
	wantGrid(t, te.readRange("resaved.xlsx", 1, "A1:F4"), ours)
}

// TestLibreOfficeWrittenWorkbook reads and edits a workbook written by a
// different implementation (LibreOffice converting a CSV).
func TestLibreOfficeWrittenWorkbook(t *testing.T) {
	if _, err := exec.LookPath("libreoffice"); err != nil {
		t.Skip("libreoffice is not installed (apt-get install libreoffice-calc-nogui); skipping the cross-check with a second implementation")
	}
	dir := t.TempDir()
	csvText := "name,amount,date,share\nAlice,1.5,2024-01-15,0.12\nBob,-2,2024-02-01,0.5\n\"Smith, J\",1000000,1999-12-31,0.075\n"
	os.WriteFile(filepath.Join(dir, "in.csv"), []byte(csvText), 0o600)
	loOnce.Lock()
	start := time.Now()
	p := libreOffice(t, dir, "in.csv", "xlsx")
	loOnce.Unlock()
	t.Logf("libreoffice conversion: %v", time.Since(start))
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	te := newEnv(t)
	te.upload("lo.xlsx", b)
	wantGrid(t, te.readRange("lo.xlsx", 1, "A1:D4"), [][]any{
		{"name", "amount", "date", "share"},
		{"Alice", 1.5, "2024-01-15", 0.12},
		{"Bob", -2.0, "2024-02-01", 0.5},
		{"Smith, J", 1000000.0, "1999-12-31", 0.075},
	})
	s := te.mustTool("spreadsheet_get_sheet_summary", map[string]any{"id": "lo.xlsx", "sheet": 1}).(map[string]any)
	if strings.Join(toStrings(s["column_types"]), ",") != "string,number,date,number" || s["rows"] != 4.0 {
		t.Fatalf("summary %v", s)
	}
	if c := te.cell("lo.xlsx", 1, "C2"); c["type"] != "date" || c["value"] != "2024-01-15" || formatDateKind(c["format"].(map[string]any)["numberFormat"].(string)) != dateOnly {
		t.Fatalf("C2 %v", c)
	}
	// Edit it, and LibreOffice reads the edit.
	te.mustTool("spreadsheet_write_range", map[string]any{"id": "lo.xlsx", "sheet": 1, "start_cell": "B3", "data": []any{[]any{42, "2025-05-05"}}})
	te.mustTool("spreadsheet_set_format", map[string]any{"id": "lo.xlsx", "sheet": 1, "range": "A1:D1", "bold": true})
	lo := loCSV(t, te, "lo.xlsx")
	if len(lo) < 3 || strings.Join(lo[2], "|") != "Bob|42|2025-05-05|0.5" || strings.Join(lo[1], "|") != "Alice|1.5|2024-01-15|0.12" {
		t.Fatalf("LibreOffice reads %q", lo)
	}
	if f := te.cell("lo.xlsx", 1, "A1")["format"].(map[string]any); f["bold"] != true {
		t.Fatalf("A1 %v", f)
	}
	// The agreement check over the LibreOffice file.
	f, err := excelize.OpenReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	te.upload("lo-orig.xlsx", b)
	got := te.readRange("lo-orig.xlsx", 1, "A1:D4")
	for r := 1; r <= 4; r++ {
		for c := 1; c <= 4; c++ {
			if w := excelizeTyped(t, f, f.GetSheetList()[0], cellName(c, r), false); !sameValue(got[r-1][c-1], w) {
				t.Errorf("%s: reader %#v, excelize %#v", cellName(c, r), got[r-1][c-1], w)
			}
		}
	}
}

func toStrings(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}
