package table

import (
	"archive/zip"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/store"
)

// procStat is one process's resident memory and CPU time, from
// /proc/<pid>/status and /proc/<pid>/stat.
type procStat struct {
	rss int64
	cpu time.Duration
	ok  bool // the process exists
}

func statOf(pid string) procStat {
	var s procStat
	st, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return s
	}
	// Fields after the command name (which may hold spaces): state is
	// field 3, utime 14, stime 15.
	f := strings.Fields(string(st[strings.LastIndexByte(string(st), ')')+1:]))
	if len(f) < 13 || f[0] == "Z" {
		return s
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	stm, _ := strconv.ParseInt(f[12], 10, 64)
	s.cpu = time.Duration(ut+stm) * (time.Second / 100) // USER_HZ
	s.rss = usageOf("/proc/" + pid + "/status").RSS
	s.ok = true
	return s
}

// engineUsage is the host process and its SQL workers together.
type engineUsage struct {
	hostRSS, workerRSS int64
	cpu                time.Duration
	workers            int
}

func (th *testHost) usage() engineUsage {
	self := statOf("self")
	u := engineUsage{hostRSS: self.rss, cpu: self.cpu}
	for _, pid := range th.e.workers.pids() {
		if s := statOf(strconv.Itoa(pid)); s.ok {
			u.workerRSS += s.rss
			u.cpu += s.cpu
			u.workers++
		}
	}
	return u
}

// settle waits until the host and its workers are back to idle: host RSS
// within 64 MB of base, every worker within RecycleAbove of its start,
// and no CPU used (host and workers) over a 300 ms window. It fails the
// test if that takes more than 5 s.
func (th *testHost) settle(t *testing.T, base engineUsage) engineUsage {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		a := th.usage()
		time.Sleep(300 * time.Millisecond)
		b := th.usage()
		workersOK := true
		th.e.workers.mu.Lock()
		for w := range th.e.workers.all {
			if s := statOf(strconv.Itoa(w.cmd.Process.Pid)); s.ok && s.rss > w.ready.Usage.RSS+th.e.opts.RecycleAbove {
				workersOK = false
			}
		}
		th.e.workers.mu.Unlock()
		busy := b.cpu - a.cpu
		if b.hostRSS < base.hostRSS+64<<20 && workersOK && busy < 60*time.Millisecond && a.workers == b.workers {
			return b
		}
		if time.Now().After(deadline) {
			t.Fatalf("not idle 5 s after the call: host RSS %d MB (base %d MB), workers %d holding %d MB, %v CPU in 300 ms",
				b.hostRSS>>20, base.hostRSS>>20, b.workers, b.workerRSS>>20, busy)
		}
	}
}

// The queries DuckDB's memory_limit does not cover, or that ignore an
// interrupt, end with a coded error within the call's limit; the host and
// its workers are back to idle within 5 s, and the engine still answers.
func TestHostileQueries(t *testing.T) {
	th := newTestHost(t)
	th.upload("h.csv", []byte("a,b\n1,x\n2,y\n"))
	th.call("table_query", map[string]any{"path": "h.csv", "query": "SELECT 1"})
	base := th.usage()
	const limit = 2 * time.Second
	cases := []struct {
		sql  string
		want []apierr.Code
	}{
		// 2 GB strings and 3.2 GB lists: past the worker's memory.
		{"SELECT length(repeat('x', 2000000000))", exhausted},
		{"SELECT len(range(0, 400000000))", exhausted},
		{"SELECT length(printf('%2000000000d', 1))", exhausted},
		// Within memory for a while, slow and deaf to interrupts: killed.
		{"SELECT length(lpad('x', 2000000000, 'y'))", exhaustedOrTimeout},
		// Buffer-managed, or interruptible: DuckDB's own limits.
		{"SELECT length(string_agg('xxxxxxxxxx', ',')) FROM range(0, 300000000)", exhaustedOrTimeout},
		{"WITH RECURSIVE t(n, s) AS (SELECT 1, 'x' UNION ALL SELECT n+1, s||s FROM t WHERE n < 31) SELECT max(length(s)) FROM t", exhaustedOrTimeout},
		{"SELECT count(*) FROM range(0, 1000000000000)", timeout},
	}
	for _, c := range cases {
		t.Run(c.sql[:min(len(c.sql), 48)], func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), limit)
			defer cancel()
			start := time.Now()
			_, err := th.h.Registry.CallTool(ctx, th.env, "table_query", map[string]any{"path": "h.csv", "query": c.sql})
			took := time.Since(start)
			if !codeIn(err, c.want) {
				t.Fatalf("got %v after %v, want one of %v", err, took, c.want)
			}
			// The limit, then KillAfter, then slack for a loaded 2-core CI
			// machine (process kill and reaping wait for the scheduler).
			if took > limit+2*time.Second {
				t.Fatalf("answered after %v, limit %v", took, limit)
			}
			th.settle(t, base)
			q := th.call("table_query", map[string]any{"path": "h.csv", "query": "SELECT sum(a) FROM data"})
			if num(t, rowsOf(q["rows"])[0][0]) != 3 {
				t.Fatalf("the engine answers wrongly afterwards: %v", q)
			}
		})
	}
}

var (
	exhausted          = []apierr.Code{apierr.ResourceExhausted}
	timeout            = []apierr.Code{apierr.Timeout}
	exhaustedOrTimeout = []apierr.Code{apierr.ResourceExhausted, apierr.Timeout}
)

func codeIn(err error, codes []apierr.Code) bool {
	for _, c := range codes {
		if apierr.CodeOf(err) == c {
			return true
		}
	}
	return false
}

// Three hostile queries at once stay within the engine's budget: every
// worker within its RLIMIT_DATA, the host's own memory flat, and no more
// workers than MaxWorkers.
func TestParallelHostileQueries(t *testing.T) {
	th := newTestHost(t)
	th.upload("p.csv", []byte("a\n1\n"))
	th.call("table_query", map[string]any{"path": "p.csv", "query": "SELECT 1"})
	base := th.usage()
	queries := []string{
		"SELECT length(repeat('x', 2000000000))",
		"SELECT length(string_agg('xxxxxxxxxx', ',')) FROM range(0, 300000000)",
		"SELECT length(lpad('x', 1500000000, 'y'))",
	}
	stop := make(chan struct{})
	var peak engineUsage
	var limits int64
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			u := th.usage()
			peak.hostRSS = max(peak.hostRSS, u.hostRSS)
			peak.workerRSS = max(peak.workerRSS, u.workerRSS)
			peak.workers = max(peak.workers, u.workers)
			th.e.workers.mu.Lock()
			for w := range th.e.workers.all {
				limits = max(limits, w.ready.DataLimit)
			}
			th.e.workers.mu.Unlock()
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	var wg sync.WaitGroup
	errs := make([]error, len(queries))
	took := make([]time.Duration, len(queries))
	for i, q := range queries {
		wg.Add(1)
		go func(i int, q string) {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
			defer cancel()
			start := time.Now()
			_, errs[i] = th.h.Registry.CallTool(ctx, th.env, "table_query", map[string]any{"path": "p.csv", "query": q})
			took[i] = time.Since(start)
		}(i, q)
	}
	wg.Wait()
	close(stop)
	<-sampled
	for i, err := range errs {
		// The 4 s deadline, KillAfter, and slack for a loaded CI machine.
		if !codeIn(err, append(exhaustedOrTimeout, apierr.Busy)) || took[i] > 4*time.Second+th.e.opts.KillAfter+2*time.Second {
			t.Errorf("%s: %v after %v", queries[i], err, took[i])
		}
	}
	// Each worker's resident memory is bounded by its RLIMIT_DATA plus the
	// binary's text pages; the host holds no DuckDB memory at all.
	budget := int64(th.e.opts.MaxWorkers) * (limits + 160<<20)
	t.Logf("peak: host RSS %d MB (base %d MB), workers %d holding %d MB; budget %d MB (%d workers × %d MB RLIMIT_DATA + text)",
		peak.hostRSS>>20, base.hostRSS>>20, peak.workers, peak.workerRSS>>20, budget>>20, th.e.opts.MaxWorkers, limits>>20)
	if peak.workers > th.e.opts.MaxWorkers || peak.workerRSS > budget || peak.hostRSS > base.hostRSS+128<<20 {
		t.Fatal("over the budget")
	}
	th.settle(t, base)
	th.call("table_query", map[string]any{"path": "p.csv", "query": "SELECT 1"})
}

// xlsxA1XFD writes the 1.8 KB workbook: cells A1 and XFD1048576,
// the sheet's declared dimension the whole grid. (Written part by part:
// excelize would build a million empty rows in memory first.)
func xlsxA1XFD(t testing.TB) []byte {
	t.Helper()
	parts := []struct{ name, body string }{
		{"[Content_Types].xml", `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Override PartName="/xl/workbook.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/><Override PartName="/xl/worksheets/sheet1.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"/></Types>`},
		{"_rels/.rels", `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="xl/workbook.xml"/></Relationships>`},
		{"xl/workbook.xml", `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<workbook xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"><sheets><sheet name="Sheet1" sheetId="1" r:id="rId1"/></sheets></workbook>`},
		{"xl/_rels/workbook.xml.rels", `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet" Target="worksheets/sheet1.xml"/></Relationships>`},
		{"xl/worksheets/sheet1.xml", `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><dimension ref="A1:XFD1048576"/><sheetData><row r="1"><c r="A1" t="inlineStr"><is><t>name</t></is></c></row><row r="1048576"><c r="XFD1048576" t="inlineStr"><is><t>far away</t></is></c></row></sheetData></worksheet>`},
	}
	var buf bytes.Buffer
	z := zip.NewWriter(&buf)
	for _, p := range parts {
		w, err := z.Create(p.name)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(p.body))
	}
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// A sheet whose used range is the whole grid loads its two real columns
// in a moment; the cell and column bounds refuse what is beyond them.
func TestXlsxFarCorners(t *testing.T) {
	th := newTestHost(t)
	body := xlsxA1XFD(t)
	if len(body) > 4<<10 {
		t.Fatalf("fixture is %d bytes", len(body))
	}
	th.upload("far.xlsx", body)
	start := time.Now()
	m := th.call("table_get_map", map[string]any{"path": "far.xlsx"})
	if d := time.Since(start); d > 20*time.Second {
		t.Fatalf("took %v", d)
	}
	cols := m["columns"].([]any)
	if num(t, m["row_count"]) != 1 || len(cols) != 2 || cols[0].(map[string]any)["name"] != "name" || cols[1].(map[string]any)["name"] != "XFD" {
		t.Fatalf("map: %v", m)
	}
	if w := strs(m["warnings"]); len(w) != 1 || !strings.Contains(w[0], "16382 empty columns") {
		t.Fatalf("warnings: %v", w)
	}
	rr := th.call("table_read_rows", map[string]any{"path": "far.xlsx", "row_start": 1, "row_count": 1})
	if fmt.Sprint(rowsOf(rr["rows"])) != "[[<nil> far away]]" {
		t.Fatalf("rows: %v", rr["rows"])
	}

	tight := newTestHost(t, func(_ *hostapi.Config, o *options) { o.MaxCells = 1 })
	tight.upload("far.xlsx", body)
	err := tight.callErr("table_get_map", map[string]any{"path": "far.xlsx"}, apierr.TooLarge)
	if !strings.Contains(err.Error(), "non-empty cells") {
		t.Fatal(err)
	}
	narrow := newTestHost(t, func(_ *hostapi.Config, o *options) { o.MaxColumns = 1 })
	narrow.upload("far.xlsx", body)
	narrow.upload("wide.csv", []byte("a,b,c\n1,2,3\n"))
	narrow.callErr("table_get_map", map[string]any{"path": "far.xlsx"}, apierr.TooLarge)
	err = narrow.callErr("table_get_map", map[string]any{"path": "wide.csv"}, apierr.TooLarge)
	if !strings.Contains(err.Error(), "3 columns") {
		t.Fatal(err)
	}
}

var bigCSVOnce = sync.OnceValue(func() []byte {
	var b strings.Builder
	b.WriteString("id,name,amount,note\n")
	for i := 0; b.Len() < 20<<20; i++ {
		fmt.Fprintf(&b, "%d,name %d,%d.%02d,some free text for row %d\n", i, i%977, i%10000, i%100, i)
	}
	return []byte(b.String())
})

// bigCSV is a CSV that takes DuckDB a while to load (20 MB), made once
// per test binary.
func bigCSV() []byte { return bigCSVOnce() }

// ingestAnswerBound is how soon a call with a 100 ms deadline on an
// ingestion answers: the deadline, KillAfter (500 ms), and slack for a
// loaded 2-core CI machine.
const ingestAnswerBound = 2 * time.Second

// An ingestion stops at its caller's deadline and at IngestTimeout,
// leaves no work running and no database behind, and a later call builds
// the table anew.
func TestIngestionBounded(t *testing.T) {
	th := newTestHost(t)
	body := bigCSV()
	th.upload("big.csv", body)
	th.upload("small.csv", []byte("a\n1\n"))
	th.call("table_get_map", map[string]any{"path": "small.csv"})
	base := th.usage()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := th.h.Registry.CallTool(ctx, th.env, "table_get_map", map[string]any{"path": "big.csv"})
	if apierr.CodeOf(err) != apierr.Timeout || time.Since(start) > ingestAnswerBound {
		t.Fatalf("got %v after %v", err, time.Since(start))
	}
	th.settle(t, base)
	db := th.dbOf("big.csv")
	if exists(db) {
		t.Fatal("a stopped ingestion left its database")
	}
	if left, _ := filepath.Glob(db + ".tmp-*"); len(left) != 0 {
		t.Fatalf("a stopped ingestion left %v", left)
	}
	m := th.call("table_get_map", map[string]any{"path": "big.csv"})
	if got := num(t, m["row_count"]); got != float64(strings.Count(string(body), "\n")-1) {
		t.Fatalf("rows %v", got)
	}

	short := newTestHost(t, func(_ *hostapi.Config, o *options) { o.IngestTimeout = 100 * time.Millisecond })
	short.upload("big.csv", body)
	start = time.Now()
	err = short.callErr("table_get_map", map[string]any{"path": "big.csv"}, apierr.Timeout)
	if !strings.Contains(err.Error(), "took longer than") || time.Since(start) > ingestAnswerBound {
		t.Fatalf("got %v after %v", err, time.Since(start))
	}
}

// Closing the host stops what the engine runs (a query deaf to
// interrupts, an ingestion) within a second, and leaves no worker behind.
func TestCloseInterrupts(t *testing.T) {
	th := newTestHost(t)
	th.upload("c.csv", []byte("a\n1\n"))
	th.upload("big.csv", bigCSV())
	th.call("table_query", map[string]any{"path": "c.csv", "query": "SELECT 1"})
	errs := make(chan error, 2)
	go func() {
		// lpad builds its string a character at a time (~16 s for this
		// one) and never looks at the interrupt.
		_, err := th.h.Registry.CallTool(context.Background(), th.env, "table_query", map[string]any{"path": "c.csv",
			"query": "SELECT length(lpad('x', 600000000, 'y'))"})
		errs <- err
	}()
	go func() {
		_, err := th.h.Registry.CallTool(context.Background(), th.env, "table_describe", map[string]any{"path": "big.csv"})
		errs <- err
	}()
	// Wait until both calls hold a worker.
	deadline := time.Now().Add(20 * time.Second)
	for {
		th.e.workers.mu.Lock()
		busy := len(th.e.workers.all) - len(th.e.workers.idle)
		th.e.workers.mu.Unlock()
		if busy >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the calls never started")
		}
		time.Sleep(5 * time.Millisecond)
	}
	pids := th.e.workers.pids()
	start := time.Now()
	if err := th.h.Close(); err != nil {
		t.Fatal(err)
	}
	// KillAfter, then slack for a loaded CI machine.
	if d := time.Since(start); d > 2500*time.Millisecond {
		t.Fatalf("Close took %v", d)
	}
	for i := 0; i < 2; i++ {
		if err := <-errs; apierr.CodeOf(err) != apierr.ToolWorkerUnavailable {
			t.Fatalf("a call running at Close: %v", err)
		}
	}
	for _, pid := range pids {
		if statOf(strconv.Itoa(pid)).ok || syscall.Kill(pid, 0) == nil {
			t.Fatalf("worker %d still runs", pid)
		}
	}
}

// Registering the table operations starts nothing: no worker process, no
// DuckDB, no background goroutine; the first call starts one worker.
func TestRegisterStartsNothing(t *testing.T) {
	h, err := hostapi.NewHost(hostapi.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	e, err := register(h, defaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if e.started || len(e.workers.pids()) != 0 {
		t.Fatalf("started %v, workers %v", e.started, e.workers.pids())
	}
	env := h.Env("default", "s")
	env.WS.Create(context.Background(), store.CreateOptions{Name: "r.csv"}, strings.NewReader("a\n1\n"))
	if _, err := h.Registry.CallTool(context.Background(), env, "table_get_map", map[string]any{"path": "r.csv"}); err != nil {
		t.Fatal(err)
	}
	if !e.started || len(e.workers.pids()) != 1 {
		t.Fatalf("after the first call: started %v, workers %v", e.started, e.workers.pids())
	}
}

// Integers outside their range are VALIDATION_FAILED from the JSON doors,
// never wrapped, clamped or zeroed.
func TestIntegerBounds(t *testing.T) {
	th := newTestHost(t)
	uploadRecords(th, "i.csv", genRecords(20))
	for _, raw := range []string{
		`{"path":"i.csv","row_start":10000000000000000000,"row_count":1}`,
		`{"path":"i.csv","row_start":1,"row_count":18446744073709551616}`,
		`{"path":"i.csv","row_start":9223372036854775807,"row_count":9223372036854775807}`,
		`{"path":"i.csv","row_start":9007199254740992,"row_count":1}`,
		`{"path":"i.csv","row_start":1,"row_count":0}`,
		`{"path":"i.csv","row_start":-1,"row_count":1}`,
		`{"path":"i.csv","row_start":1.5,"row_count":1}`,
		`{"path":"i.csv","row_start":1,"row_count":1,"sheet":4294967297}`,
	} {
		_, err := th.h.Registry.CallToolJSON(context.Background(), th.env, "table_read_rows", []byte(raw))
		if apierr.CodeOf(err) != apierr.ValidationFailed {
			t.Errorf("%s: %v", raw, err)
		}
	}
	for _, raw := range []string{
		`{"path":"i.csv","query":"SELECT 1","window_offset":-1}`,
		`{"path":"i.csv","query":"SELECT 1","window_offset":1e19}`,
		`{"path":"i.csv","query":"SELECT 1","window_rows":9223372036854775807}`,
		`{"path":"i.csv","query":"SELECT 1","window_rows":0}`,
	} {
		_, err := th.h.Registry.CallToolJSON(context.Background(), th.env, "table_query", []byte(raw))
		if apierr.CodeOf(err) != apierr.ValidationFailed {
			t.Errorf("%s: %v", raw, err)
		}
	}
	// The largest allowed values work: everything from row 20, a window
	// as large as a JS number holds, an offset past the end.
	rr := th.call("table_read_rows", map[string]any{"path": "i.csv", "row_start": 20, "row_count": int64(maxPosition)})
	if len(rowsOf(rr["rows"])) != 1 || rr["has_more"] != false {
		t.Fatalf("rows: %v", rr)
	}
	q := th.call("table_query", map[string]any{"path": "i.csv", "query": "SELECT id FROM data ORDER BY id", "window_rows": int64(maxPosition), "window_offset": int64(maxPosition)})
	if len(rowsOf(q["rows"])) != 0 || num(t, q["total_row_count"]) != 20 {
		t.Fatalf("query: %v", q)
	}
}
