package table

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/store"
)

func TestRaggedRows(t *testing.T) {
	th := newTestHost(t)
	th.upload("ragged.csv", []byte("a,b,c\n1,2,3\n4,5\n6,7,8,9\n10,11,12\n"))
	m := th.call("table_get_map", map[string]any{"path": "ragged.csv"})
	if num(t, m["row_count"]) != 4 || len(strs(m["warnings"])) != 1 || m["delimiter"] != "," {
		t.Fatalf("map: %v", m)
	}
	rr := th.call("table_read_rows", map[string]any{"path": "ragged.csv", "row_start": 1, "row_count": 4})
	if got := fmt.Sprint(rowsOf(rr["rows"])); got != "[[1 2 3 <nil>] [4 5 <nil> <nil>] [6 7 8 9] [10 11 12 <nil>]]" {
		t.Fatalf("rows: %s (columns %v)", got, rr["columns"])
	}
}

func TestUnclosedQuote(t *testing.T) {
	th := newTestHost(t)
	th.upload("quote.csv", []byte("a,b\n1,\"x\n2,y\n3,z\n"))
	m := th.call("table_get_map", map[string]any{"path": "quote.csv"})
	if num(t, m["row_count"]) != 3 || m["quote_char"] != "" || len(strs(m["warnings"])) != 1 {
		t.Fatalf("map: %v", m)
	}
	rr := th.call("table_read_rows", map[string]any{"path": "quote.csv", "row_start": 1, "row_count": 3})
	if got := fmt.Sprint(rowsOf(rr["rows"])); got != `[[1 "x] [2 y] [3 z]]` {
		t.Fatalf("rows: %s", got)
	}
}

func TestHeaderOnlyAndTinyFiles(t *testing.T) {
	th := newTestHost(t)
	th.upload("header.csv", []byte("alpha,beta,gamma\n"))
	m := th.call("table_get_map", map[string]any{"path": "header.csv"})
	if num(t, m["row_count"]) != 0 || num(t, m["column_count"]) != 3 || len(m["chunks"].([]any)) != 0 || m["has_header"] != true {
		t.Fatalf("map: %v", m)
	}
	if c := m["columns"].([]any)[1].(map[string]any); c["name"] != "beta" {
		t.Fatalf("columns: %v", m["columns"])
	}
	rr := th.call("table_read_rows", map[string]any{"path": "header.csv", "row_start": 1, "row_count": 10})
	if len(rowsOf(rr["rows"])) != 0 || rr["has_more"] != false || fmt.Sprint(strs(rr["columns"])) != "[alpha beta gamma]" {
		t.Fatalf("rows: %v", rr)
	}
	d := th.call("table_describe", map[string]any{"path": "header.csv"})
	if num(t, d["row_count"]) != 0 {
		t.Fatal(d)
	}
	st := th.call("table_stats", map[string]any{"path": "header.csv"})
	if len(st["columns"].([]any)) != 3 {
		t.Fatal(st)
	}
	q := th.call("table_query", map[string]any{"path": "header.csv", "query": "SELECT count(*) FROM data"})
	if num(t, rowsOf(q["rows"])[0][0]) != 0 {
		t.Fatal(q)
	}

	th.upload("one.csv", []byte("name\nx\ny\n"))
	m = th.call("table_get_map", map[string]any{"path": "one.csv"})
	if num(t, m["row_count"]) != 2 || num(t, m["column_count"]) != 1 {
		t.Fatalf("one column: %v", m)
	}
}

// Bad files get coded errors, and the files stay as they were.
func TestBadFiles(t *testing.T) {
	th := newTestHost(t)
	png := append([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"), make([]byte, 200)...)
	rnd := make([]byte, 4096)
	rand.New(rand.NewSource(7)).Read(rnd)
	zipLike := append([]byte("PK\x03\x04"), rnd[:500]...)
	cases := []struct {
		name string
		body []byte
		want apierr.Code
	}{
		{"empty.csv", nil, apierr.FileReadFailed},
		{"blank.csv", []byte("\n\n  \n"), apierr.FileReadFailed},
		{"image.csv", png, apierr.UnsupportedFormat},
		{"random.csv", rnd, apierr.UnsupportedFormat},
		{"archive.csv", zipLike, apierr.UnsupportedFormat},
		{"photo.png", png, apierr.UnsupportedFormat},
		{"prose.txt", []byte("Just some words\nwith no delimiters at all\n"), apierr.UnsupportedFormat},
		{"broken.xlsx", zipLike, apierr.UnsupportedFormat},
		{"notzip.xlsx", []byte("id,name\n1,x\n"), apierr.UnsupportedFormat},
	}
	for _, c := range cases {
		f := th.upload(c.name, c.body)
		for _, tool := range []string{"table_get_map", "table_describe"} {
			err := th.callErr(tool, map[string]any{"path": c.name}, c.want)
			if strings.Contains(err.Error(), "panic") {
				t.Fatalf("%s: %v", c.name, err)
			}
		}
		if th.sha(c.name) != f.SHA256 {
			t.Fatalf("%s changed", c.name)
		}
	}
	th.upload("plain.csv", []byte("a,b\n1,2\n"))
	th.callErr("table_get_map", map[string]any{"path": "plain.csv", "sheet": "Sheet1"}, apierr.ValidationFailed)
	th.callErr("table_get_map", map[string]any{"path": "nope.csv"}, apierr.NotFound)
	th.callErr("table_get_map", map[string]any{"path": ""}, apierr.ValidationFailed)
	th.callErr("table_get_map", map[string]any{}, apierr.ValidationFailed)
	th.callErr("table_get_map", map[string]any{"path": "plain.csv", "bogus": 1}, apierr.ValidationFailed)
}

// Types sniffed from the first rows that later rows contradict: the load
// falls back to types inferred from the whole file instead of failing.
func TestTypeDriftBeyondSample(t *testing.T) {
	th := newTestHost(t)
	var b strings.Builder
	b.WriteString("id,code\n")
	for i := 1; i <= 30000; i++ {
		fmt.Fprintf(&b, "%d,%d\n", i, i%100)
	}
	b.WriteString("30001,n/a\n")
	th.upload("drift.csv", []byte(b.String()))
	m := th.call("table_get_map", map[string]any{"path": "drift.csv"})
	cols := m["columns"].([]any)
	if num(t, m["row_count"]) != 30001 || cols[0].(map[string]any)["inferred_type"] != "integer" || cols[1].(map[string]any)["inferred_type"] != "string" {
		t.Fatalf("map: %v", m)
	}
}

// A file over the size limit never gets in (the store refuses it), and a
// file that is over a limit lowered later is refused by the table engine
// before it reads a byte.
func TestSizeLimit(t *testing.T) {
	dir := t.TempDir()
	body := []byte(genCSV(genRecords(100), csvStyle{delim: ","}))
	small := func(c *hostapi.Config, _ *options) { c.MaxFileSize = 1024 }

	th := openTestHost(t, dir, small)
	_, err := th.env.WS.Create(context.Background(), store.CreateOptions{Name: "big.csv"}, bytes.NewReader(body))
	if apierr.CodeOf(err) != apierr.TooLarge {
		t.Fatalf("store: %v", err)
	}
	th.h.Close()

	th = openTestHost(t, dir)
	th.upload("big.csv", body)
	th.h.Close()

	th = openTestHost(t, dir, small)
	th.callErr("table_get_map", map[string]any{"path": "big.csv"}, apierr.TooLarge)
	th.callErr("table_query", map[string]any{"path": "big.csv", "query": "SELECT 1"}, apierr.TooLarge)
}
