package table

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"testing"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

func uploadRecords(th *testHost, name string, recs []record) {
	th.upload(name, []byte(genCSV(recs, csvStyle{delim: ","})))
}

func TestDescribe(t *testing.T) {
	th := newTestHost(t)
	recs := genRecords(700)
	uploadRecords(th, "d.csv", recs)
	d := th.call("table_describe", map[string]any{"path": "d.csv"})
	if num(t, d["row_count"]) != 700 || num(t, d["column_count"]) != 7 {
		t.Fatalf("describe: %v", d)
	}
	notes := 0
	for _, r := range recs {
		if r.Note != "" {
			notes++
		}
	}
	cols := d["columns"].([]any)
	id := cols[0].(map[string]any)
	if id["nullable"] != false || num(t, id["non_null_count"]) != 700 || id["sql_type"] != "BIGINT" || id["inferred_type"] != "integer" {
		t.Fatalf("id: %v", id)
	}
	// approx_count_distinct is an estimate (HyperLogLog): within a few %.
	if de := num(t, id["distinct_estimate"]); de < 650 || de > 700 {
		t.Fatalf("id distinct estimate %v", de)
	}
	name := cols[1].(map[string]any)
	if num(t, name["distinct_estimate"]) != float64(len(testNames)) {
		t.Fatalf("nombre distinct estimate %v", name["distinct_estimate"])
	}
	note := cols[6].(map[string]any)
	if note["nullable"] != true || num(t, note["non_null_count"]) != float64(notes) || num(t, note["null_count"]) != float64(700-notes) {
		t.Fatalf("nota: %v (want %d non-null)", note, notes)
	}
}

func TestStatsPerType(t *testing.T) {
	th := newTestHost(t)
	recs := genRecords(900)
	uploadRecords(th, "s.csv", recs)
	st := th.call("table_stats", map[string]any{"path": "s.csv"})
	if num(t, st["row_count"]) != 900 {
		t.Fatalf("row_count %v", st["row_count"])
	}
	by := map[string]map[string]any{}
	for _, c := range st["columns"].([]any) {
		m := c.(map[string]any)
		by[m["name"].(string)] = m
	}
	// Numeric: computed again in Go from the same data.
	var sum, minA, maxA float64 = 0, math.Inf(1), math.Inf(-1)
	for _, r := range recs {
		sum += r.Amount
		minA, maxA = math.Min(minA, r.Amount), math.Max(maxA, r.Amount)
	}
	mean := sum / float64(len(recs))
	ss := 0.0
	for _, r := range recs {
		ss += (r.Amount - mean) * (r.Amount - mean)
	}
	sd := math.Sqrt(ss / float64(len(recs)-1))
	imp := by["importe"]
	if imp["type"] != "float" || !near(num(t, imp["sum"]), sum, 1e-6) || num(t, imp["min"]) != minA || num(t, imp["max"]) != maxA ||
		!near(num(t, imp["mean"]), mean, 1e-9) || !near(num(t, imp["stddev"]), sd, 1e-9) {
		t.Fatalf("importe: %v; want sum %v min %v max %v mean %v sd %v", imp, sum, minA, maxA, mean, sd)
	}
	if _, ok := imp["most_common"]; ok {
		t.Fatalf("numeric columns have no most_common: %v", imp)
	}
	// String: lengths in characters and the most common values.
	counts := map[string]int{}
	for _, r := range recs {
		counts[r.Name]++
	}
	type vc struct {
		v string
		n int
	}
	var top []vc
	for v, n := range counts {
		top = append(top, vc{v, n})
	}
	sort.Slice(top, func(i, j int) bool {
		if top[i].n != top[j].n {
			return top[i].n > top[j].n
		}
		return top[i].v < top[j].v
	})
	nm := by["nombre"]
	if nm["type"] != "string" || num(t, nm["min_length"]) != 3 || num(t, nm["max_length"]) != 9 {
		t.Fatalf("nombre lengths: %v", nm)
	}
	mc := nm["most_common"].([]any)
	if len(mc) != mostCommonN {
		t.Fatalf("most_common: %v", mc)
	}
	for i, x := range mc {
		m := x.(map[string]any)
		if m["value"] != top[i].v || num(t, m["count"]) != float64(top[i].n) {
			t.Fatalf("most_common[%d] = %v, want %v", i, m, top[i])
		}
	}
	// Date: min and max as ISO dates.
	dia := by["día"]
	if dia["type"] != "date" || dia["min"] != "2024-01-01" || dia["max"] != "2024-12-30" {
		t.Fatalf("día: %v", dia)
	}
	// Boolean: true and false counts.
	trues := 0
	for _, r := range recs {
		if r.Active {
			trues++
		}
	}
	act := by["activo"]
	if act["type"] != "boolean" || num(t, act["true_count"]) != float64(trues) || num(t, act["false_count"]) != float64(900-trues) {
		t.Fatalf("activo: %v", act)
	}

	// columns limits the answer, in the order asked; unknown names fail.
	st = th.call("table_stats", map[string]any{"path": "s.csv", "columns": []any{"ACTIVO", "id"}})
	cols := st["columns"].([]any)
	if len(cols) != 2 || cols[0].(map[string]any)["name"] != "activo" || cols[1].(map[string]any)["name"] != "id" {
		t.Fatalf("columns filter: %v", cols)
	}
	err := th.callErr("table_stats", map[string]any{"path": "s.csv", "columns": []any{"nope"}}, apierr.ValidationFailed)
	if !strings.Contains(err.Error(), "importe") {
		t.Fatalf("the error should list the columns: %v", err)
	}
}

func TestReadRows(t *testing.T) {
	th := newTestHost(t)
	recs := genRecords(1234)
	uploadRecords(th, "r.csv", recs)
	rr := th.call("table_read_rows", map[string]any{"path": "r.csv", "row_start": 1, "row_count": 2})
	if got := strs(rr["columns"]); fmt.Sprint(got) != fmt.Sprint(testHeader) {
		t.Fatalf("columns %v", got)
	}
	if got := strs(rr["column_types"]); fmt.Sprint(got) != "[integer string float integer date boolean string]" {
		t.Fatalf("column_types %v", got)
	}
	for k, row := range rowsOf(rr["rows"]) {
		checkRecord(t, row, recs[k])
	}
	if rr["has_more"] != true || num(t, rr["total_rows"]) != 1234 || num(t, rr["total_row_count"]) != 1234 || num(t, rr["row_start"]) != 1 || num(t, rr["row_count"]) != 2 {
		t.Fatalf("read_rows meta: %v", rr)
	}
	if _, ok := rr["query_elapsed_ms"].(float64); !ok {
		t.Fatalf("query_elapsed_ms missing: %v", rr)
	}
	// Every chunk boundary reads the right record.
	for _, start := range []int{500, 501, 1000, 1001, 1233} {
		rr := th.call("table_read_rows", map[string]any{"path": "r.csv", "row_start": start, "row_count": 5})
		rows := rowsOf(rr["rows"])
		want := min(5, 1234-start+1)
		if len(rows) != want {
			t.Fatalf("start %d: %d rows", start, len(rows))
		}
		for k, row := range rows {
			checkRecord(t, row, recs[start-1+k])
		}
		if rr["has_more"] != (start-1+want < 1234) {
			t.Fatalf("start %d: has_more %v", start, rr["has_more"])
		}
	}
	// columns, in the order asked.
	rr = th.call("table_read_rows", map[string]any{"path": "r.csv", "row_start": 10, "row_count": 1, "columns": []any{"nota", "id"}})
	if fmt.Sprint(strs(rr["columns"])) != "[nota id]" || fmt.Sprint(rowsOf(rr["rows"])[0]) != fmt.Sprintf("[%s %d]", recs[9].Note, 10) {
		t.Fatalf("columns: %v", rr)
	}
	th.callErr("table_read_rows", map[string]any{"path": "r.csv", "row_start": 1235, "row_count": 1}, apierr.ValidationFailed)
	th.callErr("table_read_rows", map[string]any{"path": "r.csv", "row_start": 0, "row_count": 1}, apierr.ValidationFailed)
	th.callErr("table_read_rows", map[string]any{"path": "r.csv", "row_start": 1, "row_count": 1, "columns": []any{"zz"}}, apierr.ValidationFailed)
	th.callErr("table_read_rows", map[string]any{"path": "missing.csv", "row_start": 1, "row_count": 1}, apierr.NotFound)
}

func TestQuery(t *testing.T) {
	th := newTestHost(t)
	recs := genRecords(1500)
	uploadRecords(th, "q.csv", recs)

	// GROUP BY, checked against Go.
	want := map[string]float64{}
	cnt := map[string]int{}
	for _, r := range recs {
		want[r.Name] += r.Amount
		cnt[r.Name]++
	}
	q := th.call("table_query", map[string]any{"path": "q.csv", "query": "SELECT nombre, sum(importe) AS total, count(*) AS n FROM data GROUP BY nombre ORDER BY nombre"})
	if fmt.Sprint(strs(q["columns"])) != "[nombre total n]" || fmt.Sprint(strs(q["column_types"])) != "[string float integer]" {
		t.Fatalf("columns %v %v", q["columns"], q["column_types"])
	}
	rows := rowsOf(q["rows"])
	if len(rows) != len(want) || num(t, q["total_row_count"]) != float64(len(want)) || q["has_more"] != false || num(t, q["row_count"]) != float64(len(want)) {
		t.Fatalf("query: %v", q)
	}
	for _, row := range rows {
		n := row[0].(string)
		if !near(num(t, row[1]), want[n], 1e-6) || num(t, row[2]) != float64(cnt[n]) {
			t.Fatalf("group %s: %v, want %v %d", n, row, want[n], cnt[n])
		}
	}
	if _, ok := q["warnings"]; ok {
		t.Fatalf("a complete result needs no order warning: %v", q["warnings"])
	}
	if q["query_elapsed_ms"].(float64) < 0 {
		t.Fatal("query_elapsed_ms")
	}

	// Windows page through the whole result without a row cap; the total
	// comes with the first window.
	var ids []float64
	for off := 0; ; off += 400 {
		w := th.call("table_query", map[string]any{"path": "q.csv", "query": "SELECT id FROM data WHERE importe > 0 ORDER BY id", "window_rows": 400, "window_offset": off})
		if num(t, w["window_rows"]) != 400 || num(t, w["window_offset"]) != float64(off) {
			t.Fatalf("window echo: %v", w)
		}
		for _, r := range rowsOf(w["rows"]) {
			ids = append(ids, num(t, r[0]))
		}
		if w["has_more"] != true {
			break
		}
	}
	var wantIDs []float64
	for _, r := range recs {
		if r.Amount > 0 {
			wantIDs = append(wantIDs, float64(r.ID))
		}
	}
	if fmt.Sprint(ids) != fmt.Sprint(wantIDs) {
		t.Fatalf("paged ids differ: got %d ids, want %d", len(ids), len(wantIDs))
	}
	w := th.call("table_query", map[string]any{"path": "q.csv", "query": "SELECT * FROM data", "window_rows": 5000})
	if len(rowsOf(w["rows"])) != 1500 || w["has_more"] != false {
		t.Fatalf("a large window returns everything")
	}
	// Default window and the determinism warning without ORDER BY.
	w = th.call("table_query", map[string]any{"path": "q.csv", "query": "select id from data -- all of it\n;"})
	if len(rowsOf(w["rows"])) != int(defaultOptions().DefaultWindow) || num(t, w["total_row_count"]) != 1500 || w["has_more"] != true {
		t.Fatalf("default window: %d rows, %v", len(rowsOf(w["rows"])), w["total_row_count"])
	}
	if len(strs(w["warnings"])) != 1 {
		t.Fatalf("want the ORDER BY warning: %v", w["warnings"])
	}
	// Past the end: no rows, the total still known.
	w = th.call("table_query", map[string]any{"path": "q.csv", "query": "SELECT id FROM data ORDER BY id", "window_offset": 99999})
	if len(rowsOf(w["rows"])) != 0 || num(t, w["total_row_count"]) != 1500 || w["has_more"] != false {
		t.Fatalf("past the end: %v", w)
	}
	// DuckDB errors become coded errors naming the problem.
	err := th.callErr("table_query", map[string]any{"path": "q.csv", "query": "SELECT nope FROM data"}, apierr.ValidationFailed)
	if !strings.Contains(err.Error(), "nope") {
		t.Fatalf("binder error should name the column: %v", err)
	}
	th.callErr("table_query", map[string]any{"path": "q.csv", "query": "SELEC 1"}, apierr.ValidationFailed)
	th.callErr("table_query", map[string]any{"path": "q.csv", "query": "   "}, apierr.ValidationFailed)
}

func TestQueryJoinTables(t *testing.T) {
	th := newTestHost(t)
	uploadRecords(th, "people.csv", genRecords(50))
	th.upload("orders.csv", []byte("order_id;person;total\n1;3;10,50\n2;3;4,25\n3;7;100,00\n4;99;1,00\n"))
	th.upload("sub/regions.tsv", []byte("person\tregion\n3\tnorth\n7\tsouth\n"))
	q := th.call("table_query", map[string]any{
		"path":   "people.csv",
		"query":  "SELECT d.id, d.nombre, r.region, sum(o.total) AS spent FROM data d JOIN orders o ON o.person = d.id JOIN Regions r USING (person) GROUP BY ALL ORDER BY d.id",
		"tables": map[string]any{"orders": "orders.csv", "Regions": "/sub/regions.tsv"},
	})
	got := fmt.Sprint(rowsOf(q["rows"]))
	if got != "[[3 Ana María north 14.75] [7 Çelik south 100]]" {
		t.Fatalf("join: %s", got)
	}
	th.callErr("table_query", map[string]any{"path": "people.csv", "query": "SELECT 1", "tables": map[string]any{"data": "orders.csv"}}, apierr.ValidationFailed)
	th.callErr("table_query", map[string]any{"path": "people.csv", "query": "SELECT 1", "tables": map[string]any{"a": "orders.csv", "A": "orders.csv"}}, apierr.ValidationFailed)
	th.callErr("table_query", map[string]any{"path": "people.csv", "query": "SELECT 1", "tables": map[string]any{"bad name": "orders.csv"}}, apierr.ValidationFailed)
	err := th.callErr("table_query", map[string]any{"path": "people.csv", "query": "SELECT 1", "tables": map[string]any{"x": "nope.csv"}}, apierr.NotFound)
	if !strings.Contains(err.Error(), "tables.x") {
		t.Fatalf("error should name the table: %v", err)
	}
}

// The JS door: positional arguments plus an options object, camelCase out.
func TestJSShapes(t *testing.T) {
	th := newTestHost(t)
	uploadRecords(th, "js.csv", genRecords(20))
	ctx := context.Background()
	op := th.h.Registry.ByName("files.table.query")
	v, err := th.h.Registry.Invoke(ctx, th.env, op, map[string]any{"path": "js.csv", "query": "SELECT id FROM data ORDER BY id", "window_rows": 5, "window_offset": 5})
	if err != nil {
		t.Fatal(err)
	}
	res := v.(QueryResult)
	if res.TotalRowCount != 20 || len(res.Rows) != 5 || res.Rows[0][0] != int64(6) || !res.HasMore {
		t.Fatalf("query: %+v", res)
	}
	m := th.h.Registry.ByName("files.table.getMap")
	v, err = th.h.Registry.Invoke(ctx, th.env, m, map[string]any{"path": "js.csv"})
	if err != nil {
		t.Fatal(err)
	}
	if v.(MapResult).EncodingDetected != "utf-8" {
		t.Fatalf("map: %+v", v)
	}
	// Every operation exists under both names with the seed's parameters.
	for js, tool := range map[string]string{
		"files.table.getMap": "table_get_map", "files.table.describe": "table_describe", "files.table.stats": "table_stats",
		"files.table.readRows": "table_read_rows", "files.table.query": "table_query", "files.table.export": "table_export",
	} {
		a, b := th.h.Registry.ByName(js), th.h.Registry.ByTool(tool)
		if a == nil || a != b || a.Params[0].Name != "path" {
			t.Fatalf("%s / %s not registered as one op", js, tool)
		}
	}
}
