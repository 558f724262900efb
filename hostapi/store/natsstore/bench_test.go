package natsstore

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/metaclaw/metaclaw/hostapi/store"
)

// patternReader yields n bytes without holding them in memory.
type patternReader struct{ left int64 }

func (r *patternReader) Read(p []byte) (int, error) {
	if r.left == 0 {
		return 0, io.EOF
	}
	n := min(int64(len(p)), r.left)
	for i := range p[:n] {
		p[i] = byte(i * 7)
	}
	r.left -= n
	return int(n), nil
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

// BenchmarkUpload50MB: a 50 MB upload through the store into NATS (the
// embedded server in this process, on loopback), with the growth of the
// process's peak RSS (server included) as rss-growth-MB.
func BenchmarkUpload50MB(b *testing.B) {
	s := newDeployment().host(b, store.Config{MaxWorkspaceSize: 1 << 40}, 0)
	w := s.Workspace("default")
	const size = 50 << 20
	os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) // reset the peak
	base := procKB("VmRSS")
	b.SetBytes(size)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := w.Create(bg, store.CreateOptions{Name: fmt.Sprintf("big%d.bin", i)}, &patternReader{left: size}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(procKB("VmHWM")-base)/1024, "rss-growth-MB")
}

var (
	listOnce  sync.Once
	listStore *store.Store
)

// tenThousand is a deployment holding 10,000 files, made once per binary.
func tenThousand(b *testing.B) *store.Store {
	listOnce.Do(func() {
		d := newDeployment()
		bk, err := Open(bg, Config{URL: d.url, Prefix: d.prefix})
		if err != nil {
			b.Fatal(err)
		}
		dir, _ := os.MkdirTemp("", "natsbench-")
		s, err := store.Open(store.Config{Dir: dir, Backend: bk})
		if err != nil {
			b.Fatal(err)
		}
		var wg sync.WaitGroup
		for g := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := g; i < 10_000; i += 16 {
					if _, err := s.Workspace("default").Create(bg, store.CreateOptions{Name: fmt.Sprintf("dir%02d/file%05d.csv", i%50, i)}, strings.NewReader("a,b\n1,2\n")); err != nil {
						panic(err)
					}
				}
			}()
		}
		wg.Wait()
		listStore = s
	})
	return listStore
}

// BenchmarkList10k: file_list of a workspace of 10,000 files.
func BenchmarkList10k(b *testing.B) {
	w := tenThousand(b).Workspace("default")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		fs, err := w.List(bg, "")
		if err != nil || len(fs) != 10_000 {
			b.Fatalf("%d files, %v", len(fs), err)
		}
	}
}

// BenchmarkLookupByName: metadata of one file by name among 10,000.
func BenchmarkLookupByName(b *testing.B) {
	w := tenThousand(b).Workspace("default")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := w.Resolve(bg, "dir07/file04507.csv"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWarmRead compares the same operation (look a 1 MB file up by
// name and read it whole through View's path) on the local backend and on
// NATS with this host's body cache warm.
func BenchmarkWarmRead(b *testing.B) {
	body := strings.Repeat("0123456789abcdef", 1<<16)
	local, err := store.Open(store.Config{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer local.Close()
	for _, bc := range []struct {
		name string
		s    *store.Store
	}{{"local", local}, {"nats", newDeployment().host(b, store.Config{}, 0)}} {
		w := bc.s.Workspace("default")
		if _, err := w.Create(bg, store.CreateOptions{Name: "sheet.csv"}, strings.NewReader(body)); err != nil {
			b.Fatal(err)
		}
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			for i := 0; i < b.N; i++ {
				err := w.View(bg, "sheet.csv", func(f *store.File, path string) error {
					data, err := os.ReadFile(path)
					if err == nil && len(data) != len(body) {
						err = fmt.Errorf("read %d bytes", len(data))
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
