package natsstore

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/metaclaw/metaclaw/hostapi/store"
)

// The issue 15 benchmarks, each run on the local backend and on NATS (the
// embedded server in this process, on loopback) in the same run, so that
// the two compare under the same load.

// patternReader yields n bytes without holding them in memory (copies
// of one 64 KB block, so that the reader costs next to nothing).
type patternReader struct{ left int64 }

var patternBlock = func() []byte {
	p := make([]byte, 64<<10)
	for i := range p {
		p[i] = byte(i * 7)
	}
	return p
}()

func (r *patternReader) Read(p []byte) (int, error) {
	if r.left == 0 {
		return 0, io.EOF
	}
	n := copy(p, patternBlock[:min(int64(len(patternBlock)), r.left)])
	r.left -= int64(n)
	return n, nil
}

// procKB reads a field of /proc/self/status in KB.
func procKB(field string) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return n
		}
	}
	return 0
}

// cpuPerOp reports the process's CPU time (user + system, the server's
// included) per operation: on a loaded machine it says more than the
// wall time.
func cpuPerOp(b *testing.B) func() {
	cpu := func() time.Duration {
		var ru syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	start := cpu()
	return func() {
		b.ReportMetric(float64((cpu()-start).Milliseconds())/float64(b.N), "cpu-ms/op")
	}
}

type backend struct {
	name string
	open func(b *testing.B, cfg store.Config) *store.Store
}

var backends = []backend{
	{"local", func(b *testing.B, cfg store.Config) *store.Store {
		if cfg.Dir == "" {
			cfg.Dir = b.TempDir()
		}
		s, err := store.Open(cfg)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		return s
	}},
	{"nats", func(b *testing.B, cfg store.Config) *store.Store { return newDeployment().host(b, cfg, 0) }},
}

// BenchmarkUpload50MB: a 50 MB upload through the store, with the growth
// of the process's peak RSS (the embedded NATS server included) as
// rss-growth-MB.
func BenchmarkUpload50MB(b *testing.B) {
	for _, bk := range backends {
		b.Run(bk.name, func(b *testing.B) {
			s := bk.open(b, store.Config{MaxWorkspaceSize: 1 << 40})
			w := s.Workspace("default")
			const size = 50 << 20
			// One small upload first: the first write of a bucket creates
			// its files, which is not what this measures.
			if _, err := w.Create(bg, store.CreateOptions{Name: "warm-up.bin"}, &patternReader{left: 1 << 20}); err != nil {
				b.Fatal(err)
			}
			os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) // reset the peak
			base := procKB("VmRSS")
			b.SetBytes(size)
			defer cpuPerOp(b)()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := w.Create(bg, store.CreateOptions{Name: fmt.Sprintf("big%d.bin", i)}, &patternReader{left: size}); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(procKB("VmHWM")-base)/1024, "rss-growth-MB")
		})
	}
}

var (
	tenThousandOnce [2]sync.Once
	tenThousandWS   [2]*store.Workspace
)

// tenThousand is a workspace of 10,000 files on backend i, made once per
// test binary.
func tenThousand(b *testing.B, i int) *store.Workspace {
	tenThousandOnce[i].Do(func() {
		// On tmpfs where there is one: making 10,000 files locally is
		// 10,000 fsyncs, which is not what the list measures.
		dir, err := os.MkdirTemp("/dev/shm", "natsbench-")
		if err != nil {
			dir, _ = os.MkdirTemp("", "natsbench-")
		}
		benchDirs = append(benchDirs, dir)
		cfg := store.Config{Dir: dir}
		var s *store.Store
		if backends[i].name == "local" {
			s, err = store.Open(cfg)
		} else {
			d := newDeployment()
			var bk *store.Backend
			if bk, err = Open(bg, Config{URL: d.url, Prefix: d.prefix}); err == nil {
				cfg.Backend = bk
				s, err = store.Open(cfg)
			}
		}
		if err != nil {
			b.Fatal(err)
		}
		w := s.Workspace("default")
		var wg sync.WaitGroup
		for g := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := g; i < 10_000; i += 16 {
					if _, err := w.Create(bg, store.CreateOptions{Name: fmt.Sprintf("dir%02d/file%05d.csv", i%50, i)}, strings.NewReader("a,b\n1,2\n")); err != nil {
						panic(err)
					}
				}
			}()
		}
		wg.Wait()
		tenThousandWS[i] = w
	})
	return tenThousandWS[i]
}

// BenchmarkList10k: file_list of a workspace of 10,000 files.
func BenchmarkList10k(b *testing.B) {
	for i, bk := range backends {
		b.Run(bk.name, func(b *testing.B) {
			w := tenThousand(b, i)
			b.ResetTimer()
			for n := 0; n < b.N; n++ {
				fs, err := w.List(bg, "")
				if err != nil || len(fs) != 10_000 {
					b.Fatalf("%d files, %v", len(fs), err)
				}
			}
		})
	}
}

// BenchmarkLookupByName: metadata of one file by name among 10,000.
func BenchmarkLookupByName(b *testing.B) {
	for i, bk := range backends {
		b.Run(bk.name, func(b *testing.B) {
			w := tenThousand(b, i)
			b.ResetTimer()
			for n := 0; n < b.N; n++ {
				if f, err := w.Resolve(bg, "dir07/file04507.csv"); err != nil || f.Size != 8 {
					b.Fatal(f, err)
				}
			}
		})
	}
}

// BenchmarkWarmRead: the same operation (look a 1 MB file up by name and
// read it whole through View's path) on the local backend and on NATS
// with this host's body cache warm.
func BenchmarkWarmRead(b *testing.B) {
	body := strings.Repeat("0123456789abcdef", 1<<16)
	for _, bk := range backends {
		b.Run(bk.name, func(b *testing.B) {
			w := bk.open(b, store.Config{}).Workspace("default")
			if _, err := w.Create(bg, store.CreateOptions{Name: "sheet.csv"}, strings.NewReader(body)); err != nil {
				b.Fatal(err)
			}
			// Read the way format libraries do, through a buffer, so that
			// the garbage collector (whose work grows with the embedded
			// server's heap) does not decide the comparison.
			buf := make([]byte, 64<<10)
			b.SetBytes(int64(len(body)))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				err := w.View(bg, "sheet.csv", func(f *store.File, path string) error {
					fh, err := os.Open(path)
					if err != nil {
						return err
					}
					defer fh.Close()
					n, err := io.CopyBuffer(io.Discard, fh, buf)
					if err == nil && n != int64(len(body)) {
						err = fmt.Errorf("read %d bytes", n)
					}
					return err
				})
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
