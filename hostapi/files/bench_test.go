package files

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/store"
)

// BenchmarkReadTextNearEnd reads 50 lines near the end of a 50 MB,
// 1M-line file once its line index is built, and reports the index build
// time against a plain sequential read of the same file.
func BenchmarkReadTextNearEnd(b *testing.B) {
	dir := b.TempDir()
	h, err := hostapi.NewHost(hostapi.Config{DataDir: dir, MaxFileSize: 64 << 20})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	Register(h)
	env := h.Env("default", "bench")
	src := filepath.Join(dir, "src.txt")
	fh, _ := os.Create(src)
	w := bufio.NewWriter(fh)
	for i := 1; i <= 1_000_000; i++ {
		fmt.Fprintf(w, "%07d,some text that pads the line out to fifty bytes,\n", i)
	}
	w.Flush()
	fh.Seek(0, 0)
	if _, err := env.WS.Create(context.Background(), store.CreateOptions{Name: "big.csv"}, fh); err != nil {
		b.Fatal(err)
	}
	fh.Close()
	f, _ := env.WS.Resolve(context.Background(), "big.csv")
	path := env.WS.BodyPath(f)

	t0 := time.Now()
	rf, _ := os.Open(path)
	io.Copy(io.Discard, rf)
	rf.Close()
	plain := time.Since(t0)
	t1 := time.Now()
	rf, _ = os.Open(path)
	if _, err := buildLineIndex(rf); err != nil {
		b.Fatal(err)
	}
	rf.Close()
	build := time.Since(t1)

	op := h.Registry.ByName("files.readText")
	args := map[string]any{"id": "big.csv", "start_line": 999_900, "end_line": 999_949}
	h.Registry.Invoke(context.Background(), env, op, args) // builds the index
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		v, err := h.Registry.Invoke(context.Background(), env, op, args)
		if err != nil {
			b.Fatal(err)
		}
		if r := v.(ReadTextResult); r.TotalLines != 1_000_000 || len(r.Content) != 50*57 {
			b.Fatalf("got %d lines, %d bytes", r.TotalLines, len(r.Content))
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(f.Size)/(1<<20), "file-MB")
	b.ReportMetric(float64(build.Microseconds())/1000, "index-build-ms")
	b.ReportMetric(float64(plain.Microseconds())/1000, "plain-read-ms")
}
