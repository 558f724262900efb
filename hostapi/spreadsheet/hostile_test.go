package spreadsheet

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"context"
	"fmt"
	"math/rand"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xuri/excelize/v2"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// readOps and writeOps are one call of every operation on file name.
func readOps(name string) map[string]map[string]any {
	return map[string]map[string]any{
		"spreadsheet_list_sheets":        {"id": name},
		"spreadsheet_get_sheet_summary":  {"id": name, "sheet": 1},
		"spreadsheet_read_range":         {"id": name, "sheet": 1, "range": "A1:C3"},
		"spreadsheet_read_cell":          {"id": name, "sheet": 1, "cell": "A1"},
		"spreadsheet_read_range#deep":    {"id": name, "sheet": 1, "range": "A20000:C20001"},
		"spreadsheet_read_range#columns": {"id": name, "sheet": 1, "range": "A:B"},
	}
}

func writeOps(name string) map[string]map[string]any {
	return map[string]map[string]any{
		"spreadsheet_write_range":  {"id": name, "sheet": 1, "start_cell": "A1", "data": []any{[]any{1, "x"}}},
		"spreadsheet_write_cell":   {"id": name, "sheet": 1, "cell": "B2", "value": "y"},
		"spreadsheet_add_sheet":    {"id": name, "name": "New"},
		"spreadsheet_delete_sheet": {"id": name, "name": 1},
		"spreadsheet_insert_rows":  {"id": name, "sheet": 1, "after_row": 1, "count": 2},
		"spreadsheet_delete_rows":  {"id": name, "sheet": 1, "start_row": 1, "count": 1},
		"spreadsheet_set_format":   {"id": name, "sheet": 1, "range": "A1:B2", "bold": true},
		"spreadsheet_auto_filter":  {"id": name, "sheet": 1, "range": "A1:B2"},
	}
}

// expectAll runs every op on name and requires one of codes from each, the
// file unchanged and the whole thing within limit.
func expectAll(t *testing.T, te *testEnv, name string, limit time.Duration, codes ...apierr.Code) {
	t.Helper()
	before := te.info(name).SHA256
	start := time.Now()
	ops := readOps(name)
	for k, v := range writeOps(name) {
		ops[k] = v
	}
	for op, args := range ops {
		_, err := te.tool(strings.SplitN(op, "#", 2)[0], args)
		ok := false
		for _, c := range codes {
			ok = ok || apierr.CodeOf(err) == c
		}
		if !ok {
			t.Errorf("%s on %s: want one of %v, got %v", op, name, codes, err)
		}
	}
	if d := time.Since(start); d > slowdown*limit {
		t.Errorf("%s: %d calls took %v, over %v", name, len(ops), d, limit)
	}
	if te.info(name).SHA256 != before {
		t.Errorf("%s changed", name)
	}
}

func TestBadFilesGiveCodedErrors(t *testing.T) {
	te := newEnv(t)
	good := typedBook(t)
	te.upload("truncated.xlsx", good[:len(good)/2])
	expectAll(t, te, "truncated.xlsx", 10*time.Second, apierr.FileReadFailed)

	var z bytes.Buffer
	zw := zip.NewWriter(&z)
	w, _ := zw.Create("hello.txt")
	w.Write([]byte("not a workbook"))
	zw.Close()
	te.upload("notabook.xlsx", z.Bytes())
	expectAll(t, te, "notabook.xlsx", 10*time.Second, apierr.UnsupportedFormat)

	f := excelize.NewFile()
	f.SetCellValue("Sheet1", "A1", "secret")
	var enc bytes.Buffer
	if err := f.Write(&enc, excelize.Options{Password: "pw"}); err != nil {
		t.Fatal(err)
	}
	te.upload("locked.xlsx", enc.Bytes())
	expectAll(t, te, "locked.xlsx", 10*time.Second, apierr.UnsupportedFormat)
	_, err := te.tool("spreadsheet_read_range", map[string]any{"id": "locked.xlsx", "sheet": 1, "range": "A1"})
	wantCode(t, err, apierr.UnsupportedFormat, "password")

	te.upload("text.xlsx", []byte("just text, not a zip"))
	expectAll(t, te, "text.xlsx", 10*time.Second, apierr.FileReadFailed)
	te.upload("empty.xlsx", nil)
	expectAll(t, te, "empty.xlsx", 10*time.Second, apierr.UnsupportedFormat)
	te.upload("image.png", []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"))
	expectAll(t, te, "image.png", 10*time.Second, apierr.UnsupportedFormat)

	// Sheet XML that ends mid-tag, rows past the grid, an entity bomb.
	for name, data := range map[string]string{
		"cut.xlsx":   `<row r="1"><c r="A1"><v>1</v></c></row><row r="2"><c r="A2"><v`,
		"huge.xlsx":  `<row r="1048577"><c r="A1048577"><v>1</v></c></row>`,
		"wide.xlsx":  `<row r="1"><c r="XFE1"><v>1</v></c></row>`,
		"order.xlsx": `<row r="5"><c r="A5"><v>1</v></c></row><row r="2"><c r="A2"><v>1</v></c></row>`,
	} {
		b := rawBook{sheets: []rawSheet{{name: "S", data: data}}}.bytes(t)
		if name == "cut.xlsx" {
			b = replaceEntry(t, b, "xl/worksheets/sheet1.xml", []byte(`<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData>`+data))
		}
		te.upload(name, b)
		_, err := te.tool("spreadsheet_list_sheets", map[string]any{"id": name})
		wantCode(t, err, apierr.FileReadFailed)
		_, err = te.tool("spreadsheet_set_format", map[string]any{"id": name, "sheet": 1, "range": "A1", "bold": true})
		wantCode(t, err, apierr.FileReadFailed)
	}
	laughs := `<!DOCTYPE lol [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">]>`
	b := rawBook{sheets: []rawSheet{{name: "S", data: `<row r="1"><c r="A1" t="inlineStr"><is><t>&lol2;&amp;</t></is></c></row>`}}}.bytes(t)
	b = replaceEntry(t, b, "xl/worksheets/sheet1.xml", []byte(`<?xml version="1.0"?>`+laughs+`<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData><row r="1"><c r="A1" t="inlineStr"><is><t>&lol2;&amp;</t></is></c></row></sheetData></worksheet>`))
	te.upload("laughs.xlsx", b)
	wantGrid(t, te.readRange("laughs.xlsx", 1, "A1"), [][]any{{"&lol2;&"}})
}

// zeroDeflate is a raw deflate stream of mib MiB of zeros, built from one
// compressed MiB repeated, so a multi-gigabyte bomb costs nothing to make.
func zeroDeflate(t testing.TB, mib int) []byte {
	var buf bytes.Buffer
	w, _ := flate.NewWriter(&buf, flate.BestCompression)
	zero := make([]byte, 1<<20)
	w.Write(zero)
	w.Flush()
	first := buf.Len()
	w.Write(zero)
	w.Flush()
	chunk := bytes.Clone(buf.Bytes()[first:])
	out := bytes.Clone(buf.Bytes()[:first])
	for i := 1; i < mib; i++ {
		out = append(out, chunk...)
	}
	return append(out, 0x03, 0x00) // final empty block
}

// bombBook is a workbook whose sheet inflates to mib MiB of zeros, with
// the given declared size.
func bombBook(t testing.TB, mib int, declared uint64) []byte {
	b := rawBook{sheets: []rawSheet{{name: "S", data: `<row r="1"><c r="A1"><v>1</v></c></row>`}}}.bytes(t)
	zr, _ := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	var out bytes.Buffer
	zw := zip.NewWriter(&out)
	raw := zeroDeflate(t, mib)
	for _, f := range zr.File {
		if f.Name == "xl/worksheets/sheet1.xml" {
			w, err := zw.CreateRaw(&zip.FileHeader{Name: f.Name, Method: zip.Deflate, CompressedSize64: uint64(len(raw)), UncompressedSize64: declared, CRC32: 0})
			if err != nil {
				t.Fatal(err)
			}
			w.Write(raw)
			continue
		}
		w, _ := zw.Create(f.Name)
		copyEntry(w, f)
	}
	zw.Close()
	return out.Bytes()
}

func TestZipBombs(t *testing.T) {
	te := newEnv(t)
	honest := bombBook(t, 3072, 3<<30) // 3 GiB, and says so
	if len(honest) > 8<<20 {
		t.Fatalf("bomb is %d bytes", len(honest))
	}
	te.upload("honest.xlsx", honest)
	expectAll(t, te, "honest.xlsx", 10*time.Second, apierr.TooLarge)
	_, err := te.tool("spreadsheet_read_range", map[string]any{"id": "honest.xlsx", "sheet": 1, "range": "A1"})
	wantCode(t, err, apierr.TooLarge, "zip bomb")

	lying := bombBook(t, 3072, 1<<20) // 3 GiB that claims 1 MiB
	te.upload("lying.xlsx", lying)
	var ms runtime.MemStats
	expectAll(t, te, "lying.xlsx", 20*time.Second, apierr.FileReadFailed)
	runtime.ReadMemStats(&ms)
	if ms.HeapInuse > 1<<30 {
		t.Fatalf("heap in use %d MB after the bomb", ms.HeapInuse>>20)
	}
	// 1.5 GiB, honest, under the read limit: parsing gives up at its token
	// limit instead of inflating it all.
	te.upload("zeros.xlsx", bombBook(t, 1536, 1536<<20))
	expectAll(t, te, "zeros.xlsx", 30*time.Second, apierr.FileReadFailed, apierr.TooLarge)
}

// TestMillionRows: a sheet using every one of Excel's 1,048,576 rows gives
// bounded answers within the time limit.
func TestMillionRows(t *testing.T) {
	te := newEnv(t)
	var sb strings.Builder
	sb.Grow(56 << 20)
	for r := 1; r <= maxRows; r++ {
		rs := strconv.Itoa(r)
		sb.WriteString(`<row r="` + rs + `"><c r="A` + rs + `"><v>` + rs + `</v></c></row>`)
	}
	te.upload("million.xlsx", rawBook{sheets: []rawSheet{{name: "S", data: sb.String()}}}.bytes(t))
	sb = strings.Builder{}
	ctx, cancel := context.WithTimeout(te.ctx, slowdown*30*time.Second)
	defer cancel()
	te.ctx = ctx
	start := time.Now()
	ls := te.mustTool("spreadsheet_list_sheets", map[string]any{"id": "million.xlsx"}).([]any)
	if ls[0].(map[string]any)["rows"] != float64(maxRows) {
		t.Fatalf("list %v", ls)
	}
	wantGrid(t, te.readRange("million.xlsx", "S", "A1048575:B1048576"), [][]any{{1048575.0, nil}, {1048576.0, nil}})
	s := te.mustTool("spreadsheet_get_sheet_summary", map[string]any{"id": "million.xlsx", "sheet": "S"}).(map[string]any)
	if s["rows"] != float64(maxRows) || s["column_types"].([]any)[0] != "number" {
		t.Fatalf("summary %v", s)
	}
	_, err := te.tool("spreadsheet_read_range", map[string]any{"id": "million.xlsx", "sheet": "S", "range": "A:A"})
	wantCode(t, err, apierr.TooLarge, "pages")
	_, err = te.tool("spreadsheet_insert_rows", map[string]any{"id": "million.xlsx", "sheet": "S", "after_row": 1, "count": 1})
	wantCode(t, err, apierr.ValidationFailed, "past")
	_, err = te.tool("spreadsheet_delete_rows", map[string]any{"id": "million.xlsx", "sheet": "S", "start_row": 1, "count": 1})
	wantCode(t, err, apierr.TooLarge, "new sheet")
	// Value and format edits stream the sheet and stay cheap.
	te.mustTool("spreadsheet_write_cell", map[string]any{"id": "million.xlsx", "sheet": "S", "cell": "B1048576", "value": "last"})
	wantGrid(t, te.readRange("million.xlsx", "S", "A1048576:B1048576"), [][]any{{1048576.0, "last"}})
	if d := time.Since(start); d > slowdown*25*time.Second {
		t.Fatalf("took %v", d)
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	t.Logf("million rows: %v, heap in use %d MB", time.Since(start), ms.HeapInuse>>20)
}

// TestDeadline: a call that cannot finish in time ends with TIMEOUT.
func TestDeadline(t *testing.T) {
	te := newEnv(t)
	te.upload("big.xlsx", bigBook(t, 30000))
	ctx, cancel := context.WithTimeout(te.ctx, 15*time.Millisecond)
	defer cancel()
	_, err := te.h.Registry.CallTool(ctx, te.env, "spreadsheet_get_sheet_summary", map[string]any{"id": "big.xlsx", "sheet": 1})
	wantCode(t, err, apierr.Timeout)
	// The next call (with time) is not hurt by the interrupted build.
	s := te.mustTool("spreadsheet_get_sheet_summary", map[string]any{"id": "big.xlsx", "sheet": 1}).(map[string]any)
	if s["rows"] != 30000.0 {
		t.Fatalf("summary %v", s)
	}
}

// TestMangledWorkbooks flips bytes of a real workbook: every call answers
// with a value or a coded error, never a panic or INTERNAL.
func TestMangledWorkbooks(t *testing.T) {
	te := newEnv(t)
	var stored bytes.Buffer
	zw := zip.NewWriter(&stored)
	zr, _ := zip.NewReader(bytes.NewReader(handBook(t, "", false)), 0)
	_ = zr
	good := handBook(t, "", false)
	// Store the parts uncompressed so that flipped bytes hit the XML.
	r, _ := zip.NewReader(bytes.NewReader(good), int64(len(good)))
	for _, f := range r.File {
		w, _ := zw.CreateHeader(&zip.FileHeader{Name: f.Name, Method: zip.Store})
		copyEntry(w, f)
	}
	zw.Close()
	base := stored.Bytes()
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 150; i++ {
		b := bytes.Clone(base)
		for j := 0; j < 1+rng.Intn(8); j++ {
			b[rng.Intn(len(b))] = byte(rng.Intn(256))
		}
		name := fmt.Sprintf("m%d.xlsx", i)
		te.upload(name, b)
		ops := readOps(name)
		for k, v := range writeOps(name) {
			ops[k] = v
		}
		for op, args := range ops {
			_, err := te.tool(strings.SplitN(op, "#", 2)[0], args)
			if err != nil && apierr.CodeOf(err) == apierr.Internal {
				t.Fatalf("%s on mutation %d: %v", op, i, err)
			}
		}
	}
}

// TestCornerCells: a tiny workbook whose cells are A1 and XFD1048576 (the
// file that sent table ingestion into an endless loop, issue 11) answers
// every operation quickly, with a value or a coded error.
func TestCornerCells(t *testing.T) {
	te := newEnv(t)
	book := rawBook{sheets: []rawSheet{{name: "S",
		data: `<row r="1"><c r="A1"><v>1</v></c></row><row r="1048576"><c r="XFD1048576"><v>2</v></c></row>`}}}.bytes(t)
	if len(book) > 4096 {
		t.Fatalf("the workbook has %d bytes; it should be tiny", len(book))
	}
	ctx, cancel := context.WithTimeout(te.ctx, slowdown*20*time.Second)
	defer cancel()
	te.ctx = ctx
	te.upload("corners.xlsx", book)
	wantJSON(t, te.mustTool("spreadsheet_list_sheets", map[string]any{"id": "corners.xlsx"}), `[{"name":"S","rows":1048576,"columns":16384}]`)
	wantGrid(t, te.readRange("corners.xlsx", 1, "XFC1048575:XFD1048576"), [][]any{{nil, nil}, {nil, 2.0}})
	s := te.mustTool("spreadsheet_get_sheet_summary", map[string]any{"id": "corners.xlsx", "sheet": 1}).(map[string]any)
	if s["rows"] != float64(maxRows) || s["columns"] != float64(maxCols) || len(s["column_types"].([]any)) != summaryCols {
		t.Fatalf("summary %v", s)
	}
	if row := te.readRange("corners.xlsx", 1, "1:1"); len(row) != 1 || len(row[0]) != maxCols || row[0][0] != 1.0 || row[0][maxCols-1] != nil {
		t.Fatalf("row 1 has %d rows", len(row))
	}
	_, err := te.tool("spreadsheet_read_range", map[string]any{"id": "corners.xlsx", "sheet": 1, "range": "A:XFD"})
	wantCode(t, err, apierr.TooLarge, "pages")
	_, err = te.tool("spreadsheet_set_format", map[string]any{"id": "corners.xlsx", "sheet": 1, "range": "A:XFD", "bold": true})
	wantCode(t, err, apierr.TooLarge, "in parts")
	ops := readOps("corners.xlsx")
	for k, v := range writeOps("corners.xlsx") {
		ops[k] = v
	}
	for op, args := range ops {
		if _, err := te.tool(strings.SplitN(op, "#", 2)[0], args); err != nil && (apierr.CodeOf(err) == apierr.Internal || apierr.CodeOf(err) == apierr.Timeout) {
			t.Fatalf("%s: %v", op, err)
		}
	}
}
