package spreadsheet

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
)

// Fuzz targets for the parsers that read workbook XML: the sheet scanner,
// the shared-strings reader and the sheet patcher. `go test` runs their
// seeds (parts of real workbooks written by LibreOffice, excelize and
// metaclaw itself, and hand-made edge cases); `go test -fuzz FuzzX` looks
// for more. Crashers land in testdata/fuzz and stay as regression seeds.

// realParts returns the inflated parts of the workbooks the tests use
// whose names match want ("worksheets/" or "sharedStrings").
func realParts(t testing.TB, want string) [][]byte {
	books := [][]byte{readFixture(t, "sales.xlsx"), blankBytes(t), decoratedBook(t, true), typedBook(t),
		handBook(t, "", false), handBook(t, "x:", true), bigBook(t, 40)}
	// And what metaclaw's own writes produce.
	te := newEnv(t)
	te.upload("w.xlsx", blankBytes(t))
	te.mustTool("spreadsheet_write_range", map[string]any{"id": "w.xlsx", "sheet": 1, "start_cell": "B2", "data": scriptRows(20)})
	te.mustTool("spreadsheet_set_format", map[string]any{"id": "w.xlsx", "sheet": 1, "range": "B2:C3", "bold": true, "column_width": 12})
	te.mustTool("spreadsheet_auto_filter", map[string]any{"id": "w.xlsx", "sheet": 1, "range": "B2:K21"})
	books = append(books, te.stored("w.xlsx"))
	var out [][]byte
	for _, b := range books {
		zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range zr.File {
			if strings.Contains(f.Name, want) {
				rc, err := f.Open()
				if err != nil {
					t.Fatal(err)
				}
				part, err := io.ReadAll(rc)
				rc.Close()
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, part)
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("no %s parts in the seed workbooks", want)
	}
	return out
}

// sheetEdgeCases are hand-made sheets for the scanner and the patcher.
var sheetEdgeCases = []string{
	`<worksheet><sheetData><row r="1"><c r="A1" t="s"><v>0</v></c><c><f>A1</f><v>2</v></c></row></sheetData></worksheet>`,
	`<x:worksheet><x:sheetData><x:row><x:c t="inlineStr"><x:is><x:t>a&amp;b</x:t><x:rPh><x:t>r</x:t></x:rPh></x:is></x:c></x:row></x:sheetData></x:worksheet>`,
	`<worksheet><sheetData><row r="1"><c r="A1"><v><![CDATA[1]]></v></c><!-- c --><?pi?></row></sheetData></worksheet>`,
	`<sheetData><row r="99999999999"><c r="ZZZZ1"/></row>`,
	`<worksheet><dimension ref="B2"/><cols><col min="2" max="3" width="9" style="4"/></cols><sheetData/><mergeCells count="1"><mergeCell ref="A1:B1"/></mergeCells></worksheet>`,
	`<worksheet><sheetData><row r="3" spans="1:2" s="5" customFormat="1"><c r="B3" s="2" t="str"><f>"a"&amp;"b"</f><v>ab</v></c></row><row r="2"/></sheetData></worksheet>`,
	`<worksheet><sheetData><row><c r="a1" t="b"><v>1</v></c><c r="$C$1" t="e"><v>#N/A</v></c><c t="d"><v>2024-01-01T00:00:00Z</v></c></row></sheetData><autoFilter ref="A1:C1"><filterColumn colId="0"/></autoFilter></worksheet>`,
	`<!DOCTYPE x [<!ENTITY a "aaaa">]><worksheet><sheetData><row r="1"><c r="A1" t="inlineStr"><is><t>&a;&#x1F600;&#0;</t></is></c></row></sheetData></worksheet>`,
	`<worksheet><sheetData><row r="1"><c r="A1" vm="1" cm="1"><v>1</v></c></row></sheetData></worksheet>`,
	`<worksheet><sheetData><row r="1"><c r="A1"><v>1</v>`,
	`<worksheet><sheetData></sheetData></worksheet>`,
}

// cellKey is a cell's place and what the scanner read of it.
type scannedCell struct {
	typ   byte
	style int
	v, f  string
	is    string
	hasF  bool
}

// scanAll reads every cell of a sheet, keyed by its reference.
func scanAll(b []byte) (map[string]scannedCell, error) {
	out := map[string]scannedCell{}
	err := scanSheet(context.Background(), bytes.NewReader(b), true, func(row int, cells []rawCell) (bool, error) {
		for _, c := range cells {
			out[cellName(c.col, row)] = scannedCell{typ: c.typ, style: c.style, v: string(c.v), f: string(c.f), is: string(c.is), hasF: c.hasF}
		}
		return false, nil
	})
	return out, err
}

func FuzzScanSheet(f *testing.F) {
	for _, s := range sheetEdgeCases {
		f.Add([]byte(s))
	}
	for _, p := range realParts(f, "worksheets/") {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		_ = scanSheet(context.Background(), bytes.NewReader(b), true, func(row int, cells []rawCell) (bool, error) {
			if row < 1 || row > maxRows {
				t.Fatalf("row %d", row)
			}
			for _, c := range cells {
				if c.col < 1 || c.col > maxCols {
					t.Fatalf("col %d", c.col)
				}
			}
			return false, nil
		})
		// Resolving the cells never panics either.
		rv := &resolver{sst: &sharedStrings{done: true}, styles: &styleTable{}}
		_ = scanSheet(context.Background(), bytes.NewReader(b), false, func(row int, cells []rawCell) (bool, error) {
			for i := range cells {
				if _, err := rv.resolve(&cells[i]); err != nil {
					return false, err
				}
			}
			return false, nil
		})
	})
}

// sstBook is a workbook holding only a shared-strings part with body.
func sstBook(t *testing.T, body []byte) *workbook {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, err := zw.CreateHeader(&zip.FileHeader{Name: "xl/sharedStrings.xml", Method: zip.Store})
	if err != nil {
		t.Fatal(err)
	}
	w.Write(body)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	zr, err := zip.NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	return &workbook{entries: map[string]*zip.File{"xl/sharedstrings.xml": zr.File[0]}, sstPath: "xl/sharedStrings.xml"}
}

// referenceStrings reads a shared-strings table with encoding/xml, the
// slow reader ours must agree with: the text of every <t> of each <si>
// outside phonetic runs (<rPh>). ok is false for input that encoding/xml
// refuses, or whose shape (nested items, text outside <sst>) the two
// readers need not agree on.
func referenceStrings(b []byte) (items []string, ok bool) {
	d := xml.NewDecoder(bytes.NewReader(b))
	var stack []string
	var cur strings.Builder
	inSI := false
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			return items, len(stack) == 0 && !inSI
		}
		if err != nil {
			return nil, false
		}
		switch x := tok.(type) {
		case xml.StartElement:
			switch x.Name.Local {
			case "si":
				if inSI || len(stack) != 1 || stack[0] != "sst" {
					return nil, false
				}
				inSI = true
				cur.Reset()
			case "sst":
				if len(stack) != 0 {
					return nil, false
				}
			case "t", "rPh", "r":
				if !inSI {
					return nil, false
				}
			}
			stack = append(stack, x.Name.Local)
		case xml.EndElement:
			stack = stack[:len(stack)-1]
			if x.Name.Local == "si" {
				items = append(items, decodeEscapes(cur.String()))
				inSI = false
			}
		case xml.CharData:
			if len(stack) > 0 && stack[len(stack)-1] == "t" && inSI && !contains(stack, "rPh") {
				if contains(stack[:len(stack)-1], "t") {
					return nil, false // <t> inside <t>
				}
				cur.Write(x)
			}
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func FuzzSharedStrings(f *testing.F) {
	for _, p := range realParts(f, "sharedStrings") {
		f.Add(p)
	}
	for _, s := range []string{
		`<sst><si><t>a</t></si><si/><si><r><t>b</t></r><r><t xml:space="preserve"> c </t></r><rPh><t>x</t></rPh></si></sst>`,
		`<x:sst xmlns:x="s"><x:si><x:t>_x0041__x005F_x0041_</x:t></x:si></x:sst>`,
		`<sst><si><t><![CDATA[<&>]]>&lt;&#65;&unknown;</t></si><si><t>line&#13;&#10;two` + "\r\n" + `three</t></si></sst>`,
		`<sst><si><t>truncated`,
		`<sst><si><si><t>nested</t></si></si></sst>`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ss := newSharedStrings(sstBook(t, b))
		var got []string
		for i := 0; ; i++ {
			s, ok, err := ss.get(i)
			if err != nil || !ok {
				break
			}
			got = append(got, s)
			if len(got) > len(b)/5+1 {
				t.Fatalf("%d strings from %d bytes", len(got), len(b))
			}
		}
		// Asking again, in any order, gives the same strings.
		for i := len(got) - 1; i >= 0; i-- {
			if s, ok, _ := ss.get(i); !ok || s != got[i] {
				t.Fatalf("string %d read again is %q, was %q", i, s, got[i])
			}
		}
		if want, ok := referenceStrings(b); ok && len(want) > 0 && !reflect.DeepEqual(got, want) {
			t.Fatalf("strings %q, encoding/xml reads %q", got, want)
		}
	})
}

// FuzzPatchSheet rewrites fuzzed sheet XML with a value at (row, col), a
// style over an area and a column width. Whatever the input, the patcher
// answers or fails without panicking; when it answers for a sheet the
// scanner reads, the result reads back with the new value in its place and
// every other cell as it was.
func FuzzPatchSheet(f *testing.F) {
	seeds := append([][]byte{}, realParts(f, "worksheets/")...)
	for _, s := range sheetEdgeCases {
		seeds = append(seeds, []byte(s))
	}
	for i, s := range seeds {
		f.Add(s, uint16(1+i%4), uint16(1+i%3), uint8(i%6))
	}
	values := []any{"x <&> y", 42.5, true, "2024-02-29", map[string]any{"formula": "A1+1"}, ""}
	f.Fuzz(func(t *testing.T, b []byte, row, col uint16, kind uint8) {
		r, c := int(row%2000)+1, int(col%40)+1
		v := values[int(kind)%len(values)]
		p := &patchSpec{vals: &cellBlock{rows: [][]any{{v}}, width: 1, cells: 1}, vr: r, vc: c,
			styleArea: &area{r1: 1, c1: 1, r2: 2, c2: 2}, styleFn: func(old int) (int, error) { return old + 1, nil },
			width:  &widthEdit{c1: 2, c2: 3, w: 15},
			isDate: func(s int) bool { return s == 7 }, dateStyle: func(s int, _ dateKind) (int, error) { return 7, nil }}
		out, err := patchSheet(context.Background(), bytes.NewReader(b), int64(len(b)), p)
		before, scanErr := scanAll(b)
		if err != nil || scanErr != nil {
			return
		}
		after, err := scanAll(out)
		if err != nil {
			t.Fatalf("the patched sheet does not scan: %v\n%s", err, out)
		}
		ref := cellName(c, r)
		want := p.vals.at(0, 0)
		got, ok := after[ref]
		switch {
		case want.k == kEmpty:
			if ok && (got.v != "" || got.is != "" || got.hasF) {
				t.Fatalf("%s was cleared but holds %+v", ref, got)
			}
		case !ok:
			t.Fatalf("%s is missing from\n%s", ref, out)
		case want.k == kString && (got.typ != 'i' || decodeEscapes(got.is) != want.s):
			t.Fatalf("%s = %+v, want %q", ref, got, want.s)
		case (want.k == kNumber || want.k == kDate) && got.v != string(appendNumber(nil, want.n)):
			t.Fatalf("%s = %+v, want %v", ref, got, want.n)
		case want.k == kPending && got.f != want.s:
			t.Fatalf("%s = %+v, want formula %q", ref, got, want.s)
		}
		for k, cell := range before {
			if k == ref {
				continue
			}
			now, ok := after[k]
			if !ok {
				t.Fatalf("cell %s was lost", k)
			}
			if k == "A1" || k == "B1" || k == "A2" || k == "B2" {
				cell.style++ // styled
			}
			if now != cell {
				t.Fatalf("cell %s changed: %+v → %+v", k, cell, now)
			}
		}
		// The same block deferred into a blank sheet writes the same row.
		if len(before) > 0 || bytes.Contains(b, []byte("<row")) {
			return
		}
		d, err := patchBlankSheet(context.Background(), bytes.NewReader(b), int64(len(b)), &patchSpec{vals: p.vals, vr: r, vc: c,
			isDate: p.isDate, dateStyle: p.dateStyle})
		if err != nil {
			return
		}
		var streamed bytes.Buffer
		if err := d.writeTo(&streamed); err != nil {
			t.Fatal(err)
		}
		again, err := scanAll(streamed.Bytes())
		if err != nil {
			t.Fatalf("the streamed sheet does not scan: %v", err)
		}
		x, y := again[ref], after[ref]
		x.style, y.style = 0, 0 // the patch also styled A1:B2
		if x != y {
			t.Fatalf("streamed %s = %+v, patched %+v", ref, again[ref], after[ref])
		}
	})
}
