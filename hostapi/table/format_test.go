package table

import (
	"fmt"
	"strings"
	"testing"

	"golang.org/x/text/encoding"
)

// Every encoding and delimiter the issue names, generated here, loaded,
// and checked value by value against the data they were written from.
func TestEncodingsAndDelimiters(t *testing.T) {
	th := newTestHost(t)
	recs := genRecords(1200)
	cases := []struct {
		file     string
		style    csvStyle
		enc      encoding.Encoding
		bom      []byte
		format   string
		encoding string
		decimal  string
		inferred bool
	}{
		{"utf8.csv", csvStyle{delim: ","}, nil, nil, "csv", "utf-8", ".", false},
		{"bom.csv", csvStyle{delim: ";", crlf: true}, nil, []byte("\xef\xbb\xbf"), "csv", "utf-8-bom", ".", false},
		{"utf16le.tsv", csvStyle{delim: "\t"}, utf16LEBOM, nil, "tsv", "utf-16le", ".", false},
		{"utf16be.psv", csvStyle{delim: "|"}, utf16BEBOM, nil, "psv", "utf-16be", ".", false},
		{"win1252.csv", csvStyle{delim: ";", crlf: true, decimalComma: true}, win1252, nil, "csv", "windows-1252", ",", false},
		{"latin.csv", csvStyle{delim: ","}, win1252, nil, "csv", "windows-1252", ".", false},
		{"export.txt", csvStyle{delim: ";"}, nil, nil, "text", "utf-8", ".", true},
		{"pipes.dat", csvStyle{delim: "|", crlf: true}, nil, nil, "text", "utf-8", ".", true},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			body := append(append([]byte{}, tc.bom...), encodeText(t, genCSV(recs, tc.style), tc.enc)...)
			th.upload(tc.file, body)
			m := th.call("table_get_map", map[string]any{"path": tc.file})
			if m["format"] != tc.format || m["delimiter"] != tc.style.delim || m["encoding_detected"] != tc.encoding {
				t.Fatalf("format/delimiter/encoding: got %v %q %v", m["format"], m["delimiter"], m["encoding_detected"])
			}
			if m["format_inferred"] != tc.inferred || (tc.inferred && len(strs(m["warnings"])) == 0) {
				t.Fatalf("format_inferred %v warnings %v", m["format_inferred"], m["warnings"])
			}
			if c := num(t, m["encoding_confidence"]); c < 0.5 || c > 1 {
				t.Fatalf("confidence %v", c)
			}
			if m["decimal_separator"] != tc.decimal || m["has_header"] != true || m["quote_char"] != `"` {
				t.Fatalf("decimal %v header %v quote %q", m["decimal_separator"], m["has_header"], m["quote_char"])
			}
			wantNL := "\n"
			if tc.style.crlf {
				wantNL = "\r\n"
			}
			if m["newline"] != wantNL {
				t.Fatalf("newline %q", m["newline"])
			}
			if num(t, m["row_count"]) != 1200 || num(t, m["column_count"]) != 7 {
				t.Fatalf("rows %v cols %v", m["row_count"], m["column_count"])
			}
			wantTypes := []string{"integer", "string", "float", "integer", "date", "boolean", "string"}
			for i, c := range m["columns"].([]any) {
				col := c.(map[string]any)
				if col["name"] != testHeader[i] || col["inferred_type"] != wantTypes[i] || num(t, col["index"]) != float64(i) {
					t.Fatalf("column %d: %v", i, col)
				}
			}
			chunks := m["chunks"].([]any)
			if len(chunks) != 3 || chunks[0].(map[string]any)["rows"] != "1-500" || chunks[2].(map[string]any)["rows"] != "1001-1200" {
				t.Fatalf("chunks %v", chunks)
			}

			st := th.call("table_stats", map[string]any{"path": tc.file, "columns": []any{"importe", "cantidad"}})
			cols := st["columns"].([]any)
			imp := cols[0].(map[string]any)
			if want := sumAmounts(recs); !near(num(t, imp["sum"]), want, 1e-6) {
				t.Fatalf("sum of importe %v, want %v", imp["sum"], want)
			}
			qty := 0
			for _, r := range recs {
				qty += r.Qty
			}
			if num(t, cols[1].(map[string]any)["sum"]) != float64(qty) {
				t.Fatalf("sum of cantidad %v, want %d", cols[1].(map[string]any)["sum"], qty)
			}

			rr := th.call("table_read_rows", map[string]any{"path": tc.file, "row_start": 1000, "row_count": 3})
			for k, row := range rowsOf(rr["rows"]) {
				checkRecord(t, row, recs[999+k])
			}

			notes, activeSum, active := 0, 0.0, 0
			for _, r := range recs {
				if r.Note != "" {
					notes++
				}
				if r.Active {
					activeSum += r.Amount
					active++
				}
			}
			d := th.call("table_describe", map[string]any{"path": tc.file})
			if nota := d["columns"].([]any)[6].(map[string]any); num(t, nota["non_null_count"]) != float64(notes) || nota["name"] != "nota" {
				t.Fatalf("describe nota: %v", nota)
			}
			q := th.call("table_query", map[string]any{"path": tc.file, "query": `SELECT sum(importe), count(*), min("día") FROM data WHERE activo`})
			row := rowsOf(q["rows"])[0]
			if !near(num(t, row[0]), activeSum, 1e-6) || num(t, row[1]) != float64(active) || row[2] != "2024-01-01" {
				t.Fatalf("query: %v, want %v %d", row, activeSum, active)
			}
			target := "exported-" + strings.ReplaceAll(tc.file, ".", "-") + ".csv"
			th.call("table_export", map[string]any{"path": tc.file, "target_path": target, "format": "csv"})
			rr = th.call("table_read_rows", map[string]any{"path": target, "row_start": 1199, "row_count": 2})
			for k, row := range rowsOf(rr["rows"]) {
				checkRecord(t, row, recs[1198+k])
			}
		})
	}
}

// checkRecord compares a row read back with the record it was written from.
func checkRecord(t *testing.T, row []any, r record) {
	t.Helper()
	if len(row) != 7 {
		t.Fatalf("row %v has %d values", row, len(row))
	}
	var note any
	if r.Note != "" {
		note = r.Note
	}
	want := []any{float64(r.ID), r.Name, r.Amount, float64(r.Qty), r.Day.Format("2006-01-02"), r.Active, note}
	for i := range want {
		got := row[i]
		if g, ok := got.(int64); ok {
			got = float64(g)
		}
		if fmt.Sprint(got) != fmt.Sprint(want[i]) {
			t.Fatalf("row of id %d, column %s: got %#v, want %#v", r.ID, testHeader[i], row[i], want[i])
		}
	}
}

// The Windows-1252 bank statement of the issue: ; delimiters, CRLF,
// decimal commas with dot thousands, accented column names, € and curly
// quotes (bytes 0x80–0x9F that DuckDB's latin-1 reader rejects).
func TestWindows1252BankStatement(t *testing.T) {
	th := newTestHost(t)
	lines := []string{
		"FECHA OPERACIÓN;FECHA VALOR;CONCEPTO;IMPORTE EUR;SALDO",
		"01/10/2024;01/10/2024;BIZUM RECIBIDO “cena”;-25,00;31.768,85",
		"02/10/2024;02/10/2024;TRANSFERENCIA – alquiler;-1.150,00;30.618,85",
		"03/10/2024;03/10/2024;NÓMINA OCTUBRE;2.345,67;32.964,52",
		"04/10/2024;05/10/2024;COMPRA € TIENDA ÑANDÚ;-12,30;32.952,22",
	}
	th.upload("extracto.csv", encodeText(t, strings.Join(lines, "\r\n")+"\r\n", win1252))
	m := th.call("table_get_map", map[string]any{"path": "extracto.csv"})
	if m["encoding_detected"] != "windows-1252" || m["delimiter"] != ";" || m["decimal_separator"] != "," || m["newline"] != "\r\n" {
		t.Fatalf("map: %v", m)
	}
	wantCols := []string{"FECHA OPERACIÓN", "FECHA VALOR", "CONCEPTO", "IMPORTE EUR", "SALDO"}
	wantTypes := []string{"date", "date", "string", "float", "float"}
	for i, c := range m["columns"].([]any) {
		col := c.(map[string]any)
		if col["name"] != wantCols[i] || col["inferred_type"] != wantTypes[i] {
			t.Fatalf("column %d: %v", i, col)
		}
	}
	rr := th.call("table_read_rows", map[string]any{"path": "extracto.csv", "row_start": 1, "row_count": 10})
	rows := rowsOf(rr["rows"])
	if len(rows) != 4 || rr["has_more"] != false {
		t.Fatalf("rows %v", rr)
	}
	if rows[0][0] != "2024-10-01" || rows[0][2] != "BIZUM RECIBIDO “cena”" || rows[0][3] != -25.0 || rows[0][4] != 31768.85 {
		t.Fatalf("row 1: %#v", rows[0])
	}
	if rows[3][1] != "2024-10-05" || rows[3][2] != "COMPRA € TIENDA ÑANDÚ" || rows[1][3] != -1150.0 {
		t.Fatalf("rows: %#v", rows)
	}
	q := th.call("table_query", map[string]any{"path": "extracto.csv", "query": `SELECT round(sum("IMPORTE EUR"), 2) AS total FROM data WHERE "CONCEPTO" LIKE '%€%' OR "IMPORTE EUR" > 0`})
	if got := rowsOf(q["rows"])[0][0]; got != 2333.37 {
		t.Fatalf("sum: %v", got)
	}
}

// US-style numbers with thousands commas in quoted fields become numbers;
// a column of ambiguous 1,234-only values is left as text.
func TestThousandsCommas(t *testing.T) {
	th := newTestHost(t)
	th.upload("us.csv", []byte("item,price,code\nA,\"1,234.50\",\"1,234\"\nB,\"12.00\",\"2,345\"\nC,\"1,000,000.25\",\"3,456\"\n"))
	m := th.call("table_get_map", map[string]any{"path": "us.csv"})
	types := []string{}
	for _, c := range m["columns"].([]any) {
		types = append(types, c.(map[string]any)["inferred_type"].(string))
	}
	if strings.Join(types, ",") != "string,float,string" || m["decimal_separator"] != "." {
		t.Fatalf("types %v decimal %v", types, m["decimal_separator"])
	}
	st := th.call("table_stats", map[string]any{"path": "us.csv", "columns": []any{"price"}})
	if s := st["columns"].([]any)[0].(map[string]any)["sum"]; !near(num(t, s), 1001246.75, 1e-6) {
		t.Fatalf("sum %v", s)
	}
}
