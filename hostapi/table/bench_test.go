package table

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/store"
)

// The benchmark input: 1,000,000 rows × 8 columns, ~80 MB of CSV.
const benchRows = 1_000_000

func writeBenchCSV(b *testing.B, path string) int64 {
	b.Helper()
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	r := rand.New(rand.NewSource(1))
	cats := []string{"alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"}
	fmt.Fprintln(w, "id,name,category,amount,qty,day,flag,note")
	for i := 0; i < benchRows; i++ {
		fmt.Fprintf(w, "%d,customer_%06d,%s,%.2f,%d,2024-%02d-%02d,%t,free text note number %07d\n",
			i+1, r.Intn(1000000), cats[r.Intn(len(cats))], r.Float64()*10000-5000, r.Intn(1000), 1+r.Intn(12), 1+r.Intn(28), r.Intn(2) == 0, r.Intn(10000000))
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	f.Close()
	st, _ := os.Stat(path)
	return st.Size()
}

// benchHost is a host holding the benchmark CSV as big.csv.
func benchHost(b *testing.B) (*testHost, *store.File, float64) {
	b.Helper()
	dir := b.TempDir()
	src := filepath.Join(dir, "big-source.csv")
	size := writeBenchCSV(b, src)
	cfg := hostapi.Config{DataDir: filepath.Join(dir, "data"), MaxFileSize: 1 << 30, MaxWorkspaceSize: 8 << 30}
	h, err := hostapi.NewHost(cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { h.Close() })
	e, err := register(h, defaultOptions())
	if err != nil {
		b.Fatal(err)
	}
	th := &testHost{h: h, e: e, env: h.Env("default", "bench")}
	in, _ := os.Open(src)
	defer in.Close()
	f, err := th.env.WS.Create(context.Background(), store.CreateOptions{Name: "big.csv"}, in)
	if err != nil {
		b.Fatal(err)
	}
	os.Remove(src)
	return th, f, float64(size) / 1e6
}

func benchCall(b *testing.B, th *testHost, tool string, args map[string]any) map[string]any {
	b.Helper()
	res, err := th.h.Registry.CallTool(context.Background(), th.env, tool, args)
	if err != nil {
		b.Fatal(err)
	}
	return res.(map[string]any)
}

// BenchmarkIngest: the first getMap (UTF-8 check, sniffing, load into
// DuckDB; it answers when the map is known) and the time until the
// on-disk database is written, against DuckDB alone running CREATE TABLE
// … AS SELECT * FROM read_csv_auto(…) on the same file, into memory and
// into an on-disk database.
func BenchmarkIngest(b *testing.B) {
	th, f, mb := benchHost(b)
	body := th.env.WS.BodyPath(f)
	path := th.e.dbPath("default", f.ID, f.SHA256, sheetSpec{})
	var ours, stored, disk, mem time.Duration
	baseline := func(dsn string) time.Duration {
		start := time.Now()
		db, err := sql.Open("duckdb", dsn)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := db.Exec("CREATE TABLE t AS SELECT * FROM read_csv_auto(" + sqlString(body) + ")"); err != nil {
			b.Fatal(err)
		}
		db.Close()
		return time.Since(start)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		th.e.forget(path)
		removeDB(path)
		b.StartTimer()
		start := time.Now()
		m := benchCall(b, th, "table_get_map", map[string]any{"path": "big.csv"})
		ours += time.Since(start)
		b.StopTimer()
		if m["row_count"] != float64(benchRows) {
			b.Fatalf("rows %v", m["row_count"])
		}
		if _, err := th.e.ensure(context.Background(), th.env.WS, "big.csv", sheetSpec{}); err != nil {
			b.Fatal(err)
		}
		stored += time.Since(start)
		tmp := filepath.Join(b.TempDir(), "baseline.duckdb")
		disk += baseline(tmp)
		os.Remove(tmp)
		mem += baseline("")
		b.StartTimer()
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(mb, "csv-MB")
	b.ReportMetric(ours.Seconds()/n, "getMap-s")
	b.ReportMetric(stored.Seconds()/n, "on-disk-s")
	b.ReportMetric(mem.Seconds()/n, "duckdb-mem-s")
	b.ReportMetric(disk.Seconds()/n, "duckdb-disk-s")
	b.ReportMetric(ours.Seconds()/mem.Seconds(), "getMap/duckdb-mem")
	b.ReportMetric(stored.Seconds()/disk.Seconds(), "on-disk/duckdb-disk")
}

// BenchmarkQueryGroupBy: a GROUP BY over all rows of a loaded table.
func BenchmarkQueryGroupBy(b *testing.B) {
	th, _, _ := benchHost(b)
	args := map[string]any{"path": "big.csv", "query": "SELECT category, count(*) AS n, sum(amount) AS total, avg(qty) AS avg_qty, max(day) AS last FROM data GROUP BY category ORDER BY category"}
	benchCall(b, th, "table_query", args)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res := benchCall(b, th, "table_query", args)
		if len(res["rows"].([]any)) != 8 {
			b.Fatal(res)
		}
	}
}

// BenchmarkReadRows: readRows(500000, 100) on a loaded table.
func BenchmarkReadRows(b *testing.B) {
	th, _, _ := benchHost(b)
	args := map[string]any{"path": "big.csv", "row_start": 500000, "row_count": 100}
	benchCall(b, th, "table_read_rows", args)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res := benchCall(b, th, "table_read_rows", args)
		rows := res["rows"].([]any)
		if len(rows) != 100 || rows[0].([]any)[0] != float64(500000) {
			b.Fatal(rows[0])
		}
	}
}

// BenchmarkExportXLSX: the whole table to xlsx, with the process's peak
// resident memory while exporting.
func BenchmarkExportXLSX(b *testing.B) {
	th, _, _ := benchHost(b)
	benchCall(b, th, "table_describe", map[string]any{"path": "big.csv"})
	runtime.GC()
	base := rssBytes()
	var peakRSS, peakHeap uint64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			var ms runtime.MemStats
			for {
				if r := rssBytes(); r > peakRSS {
					peakRSS = r
				}
				runtime.ReadMemStats(&ms)
				if ms.HeapInuse > peakHeap {
					peakHeap = ms.HeapInuse
				}
				select {
				case <-stop:
					return
				case <-time.After(20 * time.Millisecond):
				}
			}
		}()
		res := benchCall(b, th, "table_export", map[string]any{"path": "big.csv", "target_path": "big.xlsx", "format": "xlsx", "overwrite": true})
		close(stop)
		wg.Wait()
		if res["row_count"] != float64(benchRows) {
			b.Fatal(res)
		}
		b.ReportMetric(res["size"].(float64)/1e6, "xlsx-MB")
	}
	b.StopTimer()
	b.ReportMetric(float64(peakRSS)/1e6, "peak-rss-MB")
	b.ReportMetric(float64(peakRSS-min(base, peakRSS))/1e6, "rss-growth-MB")
	b.ReportMetric(float64(peakHeap)/1e6, "peak-goheap-MB")
}

// rssBytes reads the resident set size of this process (Linux).
func rssBytes() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			f := strings.Fields(line)
			if len(f) >= 2 {
				kb, _ := strconv.ParseUint(f[1], 10, 64)
				return kb << 10
			}
		}
	}
	return 0
}

// BenchmarkWorkerRoundTrip: one request to a warm SQL worker and its
// answer, with no SQL — the cost every table call pays for running DuckDB
// out of process.
func BenchmarkWorkerRoundTrip(b *testing.B) {
	h, err := hostapi.NewHost(hostapi.Config{DataDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { h.Close() })
	e, err := register(h, defaultOptions())
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := e.workers.call(ctx, "", opEvict, struct{}{}, nil, nil); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := e.workers.call(ctx, "", opEvict, struct{}{}, nil, nil); err != nil {
			b.Fatal(err)
		}
	}
}
