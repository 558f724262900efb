package table

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/store"
)

// textSeeds are real delimited texts: the example fixtures and the
// shapes the format tests generate (encodings, delimiters, quoting).
func textSeeds(t testing.TB) [][]byte {
	recs := genRecords(30)
	out := [][]byte{
		[]byte(genCSV(recs, csvStyle{delim: ","})),
		[]byte(genCSV(recs, csvStyle{delim: ";", crlf: true, decimalComma: true})),
		[]byte(genCSV(recs, csvStyle{delim: "\t"})),
		[]byte(genCSV(recs, csvStyle{delim: "|", crlf: true})),
		[]byte("a,b,c\n1,2,3\n4,5\n6,7,8,9\n"),
		[]byte("a,b\n1,\"x\n2,y\n"),
		[]byte("\xef\xbb\xbfid,item\n1,Café\n"),
		[]byte("x\n"),
		[]byte("\"a\"\"b\",c\n\"1\n2\",3\n"),
	}
	files, _ := filepath.Glob(filepath.Join("..", "..", "testdata", "examples", "*"))
	for _, p := range files {
		switch strings.ToLower(filepath.Ext(p)) {
		case ".csv", ".tsv", ".txt", ".psv":
			if b, err := os.ReadFile(p); err == nil && len(b) < 64<<10 {
				out = append(out, b)
			}
		}
	}
	return out
}

// FuzzSniffDelimiter: the delimiter sniffer and the record splitter
// accept any bytes, pick one of the four delimiters, and split without
// losing or inventing bytes outside quotes.
func FuzzSniffDelimiter(f *testing.F) {
	for _, s := range textSeeds(f) {
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, b []byte, truncated bool) {
		d, ok := sniffDelimiter(b, truncated)
		if ok != (d != 0) || (ok && !strings.ContainsRune(",;\t|", rune(d))) {
			t.Fatalf("delimiter %q, %v", d, ok)
		}
		recs := splitRecords(b, 200)
		if len(recs) > 200 {
			t.Fatalf("%d records", len(recs))
		}
		total := 0
		for _, r := range recs {
			total += len(r)
		}
		if total > len(b) {
			t.Fatalf("records hold %d bytes of %d", total, len(b))
		}
	})
}

// FuzzCheckSQL: the statement splitter accepts any text, admits at most
// one statement starting with a read-only keyword, and what it admits is
// admitted again unchanged.
func FuzzCheckSQL(f *testing.F) {
	for _, s := range []string{
		"SELECT 1", "select * from data order by 1 ;;", "WITH t AS (SELECT 1) SELECT * FROM t",
		"SELECT $q$; DROP$q$, $$;$$", "SELECT E'it\\'s; fine'", "SELECT 1 -- ; DROP TABLE data",
		"SELECT 1 /* ; DROP */", "(SELECT 1) UNION ALL (SELECT 2) ORDER BY 1", "FROM data", "VALUES (1)",
		"SELECT 1; SELECT 2", "COPY data TO 'x.csv'", "SELECT 'unterminated", "PRAGMA version",
		"SELECT \"a;b\" FROM data ORDER\n BY 1", "SELECT 'é;ü' AS s",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, q string) {
		s, err := checkSQL(q)
		if err != nil {
			if apierr.CodeOf(err) != apierr.ValidationFailed {
				t.Fatalf("%q: %v", q, err)
			}
			return
		}
		switch strings.ToUpper(firstWord(s.Text)) {
		case "SELECT", "WITH", "FROM", "VALUES":
		default:
			t.Fatalf("%q admitted as %q", q, s.Text)
		}
		again, err := checkSQL(s.Text)
		if err != nil || again.Text != s.Text || again.HasOrderBy != s.HasOrderBy {
			t.Fatalf("%q: admitted text %q does not check again: %v %v", q, s.Text, again, err)
		}
	})
}

// FuzzIngestText: any bytes given as a CSV load into a table or fail
// with a coded error that names the problem; names are valid UTF-8 and
// the row count matches the table. It runs the worker's ingestion on an
// in-process DuckDB, as a worker would.
func FuzzIngestText(f *testing.F) {
	for _, s := range textSeeds(f) {
		f.Add(s)
	}
	dir := f.TempDir()
	// One DuckDB for every input: opening one per input would be most of
	// the work.
	db, err := sql.Open("duckdb", "?threads=1&memory_limit=256MB&autoinstall_known_extensions=false&autoload_known_extensions=false")
	if err != nil {
		f.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	f.Fuzz(func(t *testing.T, body []byte) {
		src := filepath.Join(dir, "body")
		if err := os.WriteFile(src, body, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec("DROP TABLE IF EXISTS data"); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		f := &store.File{Name: "fuzz.csv", Size: int64(len(body))}
		meta, err := ingestText(ctx, db, f, src, filepath.Join(dir, "scratch"), bounds{MaxColumns: 4096, MaxCells: 1 << 30})
		if err != nil {
			switch apierr.CodeOf(err) {
			case apierr.UnsupportedFormat, apierr.FileReadFailed, apierr.TooLarge:
			default:
				t.Fatalf("%q: %v", body, err)
			}
			return
		}
		if len(meta.Columns) == 0 {
			t.Fatalf("%q: a table without columns", body)
		}
		for _, c := range meta.Columns {
			if !utf8.ValidString(c.Name) {
				t.Fatalf("%q: column name %q is not UTF-8", body, c.Name)
			}
		}
		var n int64
		if err := db.QueryRowContext(ctx, "SELECT count(*) FROM data").Scan(&n); err != nil || n != meta.RowCount {
			t.Fatalf("%q: %d rows, map says %d (%v)", body, n, meta.RowCount, err)
		}
	})
}

// FuzzIngestWorkbook: any bytes given as an xlsx load into a table or
// fail with a coded error that names the problem (never a panic, never an
// uncoded or internal error), within the cell bound. Seeded with a
// workbook LibreOffice wrote and the A1/XFD1048576 workbook.
func FuzzIngestWorkbook(f *testing.F) {
	if b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "examples", "sales.xlsx")); err == nil {
		f.Add(b)
	}
	// (The A1/XFD1048576 workbook is TestXlsxFarCorners's: as a seed it
	// makes each fuzz input take seconds under coverage instrumentation.)
	dir := f.TempDir()
	db, err := sql.Open("duckdb", "?threads=1&memory_limit=256MB&autoinstall_known_extensions=false&autoload_known_extensions=false")
	if err != nil {
		f.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	f.Fuzz(func(t *testing.T, body []byte) {
		src := filepath.Join(dir, "body.xlsx")
		if err := os.WriteFile(src, body, 0o600); err != nil {
			t.Fatal(err)
		}
		for _, q := range []string{"DROP TABLE IF EXISTS data", "DROP TABLE IF EXISTS temp.staging"} {
			if _, err := db.Exec(q); err != nil {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		// An ingestion that outlives its deadline by far is a hang: crash
		// the fuzz worker, so that the fuzzer keeps the input.
		hang := time.AfterFunc(40*time.Second, func() { panic(fmt.Sprintf("ingestion of a %d-byte workbook ignored its deadline", len(body))) })
		defer hang.Stop()
		f := &store.File{Name: "fuzz.xlsx", Size: int64(len(body))}
		meta, err := ingestWorkbook(ctx, db, f, src, sheetSpec{}, bounds{MaxColumns: 256, MaxCells: 100_000})
		if err != nil {
			switch apierr.CodeOf(err) {
			case apierr.UnsupportedFormat, apierr.FileReadFailed, apierr.TooLarge:
			default:
				t.Fatalf("%q: %v", body, err)
			}
			return
		}
		if len(meta.Columns) == 0 || len(meta.Columns) > 256 {
			t.Fatalf("%d columns", len(meta.Columns))
		}
		for _, c := range meta.Columns {
			if !utf8.ValidString(c.Name) {
				t.Fatalf("column name %q is not UTF-8", c.Name)
			}
		}
		var n int64
		if err := db.QueryRowContext(ctx, "SELECT count(*) FROM data").Scan(&n); err != nil || n != meta.RowCount {
			t.Fatalf("%d rows, map says %d (%v)", n, meta.RowCount, err)
		}
	})
}
