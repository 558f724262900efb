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
	"unicode/utf16"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/store"
)

// BenchmarkReadTextNearEnd reads 50 lines near the end of a 50 MB,
// 1M-line UTF-8 file once its line index is built, and reports the index
// build time (encoding detection included) against a plain sequential
// read of the same file.
func BenchmarkReadTextNearEnd(b *testing.B) {
	benchReadNearEnd(b, "big.csv", 1_000_000, func(w io.Writer, line string) { io.WriteString(w, line) }, 57)
}

// BenchmarkReadTextNearEndUTF16 is the same read on a 54 MB UTF-16LE file
// of 500k lines: the index must find two-byte newlines without decoding.
func BenchmarkReadTextNearEndUTF16(b *testing.B) {
	bom := true
	benchReadNearEnd(b, "big16.txt", 500_000, func(w io.Writer, line string) {
		if bom {
			w.Write([]byte{0xFF, 0xFE})
			bom = false
		}
		units := utf16.Encode([]rune(line))
		buf := make([]byte, 2*len(units))
		for i, u := range units {
			buf[2*i], buf[2*i+1] = byte(u), byte(u>>8)
		}
		w.Write(buf)
	}, 57)
}

func benchReadNearEnd(b *testing.B, name string, lines int, write func(io.Writer, string), lineLen int) {
	dir := b.TempDir()
	h, err := hostapi.NewHost(hostapi.Config{DataDir: dir, MaxFileSize: 64 << 20})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	Register(h)
	env := h.Env("default", "bench")
	src := filepath.Join(dir, "src")
	fh, _ := os.Create(src)
	w := bufio.NewWriter(fh)
	for i := 1; i <= lines; i++ {
		write(w, fmt.Sprintf("%07d,some text that pads the line out to fifty bytes,\n", i))
	}
	w.Flush()
	fh.Seek(0, 0)
	if _, err := env.WS.Create(context.Background(), store.CreateOptions{Name: name}, fh); err != nil {
		b.Fatal(err)
	}
	fh.Close()
	f, _ := env.WS.Resolve(context.Background(), name)
	path := env.WS.BodyPath(f)

	t0 := time.Now()
	rf, _ := os.Open(path)
	io.Copy(io.Discard, rf)
	rf.Close()
	plain := time.Since(t0)
	t1 := time.Now()
	if _, err := indexFile(context.Background(), path); err != nil {
		b.Fatal(err)
	}
	build := time.Since(t1)

	op := h.Registry.ByName("files.readText")
	args := map[string]any{"id": name, "start_line": lines - 100, "end_line": lines - 51}
	if _, err := h.Registry.Invoke(context.Background(), env, op, args); err != nil { // builds the index
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		v, err := h.Registry.Invoke(context.Background(), env, op, args)
		if err != nil {
			b.Fatal(err)
		}
		if r := v.(ReadTextResult); r.TotalLines != lines || len(r.Content) != 50*lineLen {
			b.Fatalf("got %d lines, %d bytes", r.TotalLines, len(r.Content))
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(f.Size)/(1<<20), "file-MB")
	b.ReportMetric(float64(build.Microseconds())/1000, "index-build-ms")
	b.ReportMetric(float64(plain.Microseconds())/1000, "plain-read-ms")
}
