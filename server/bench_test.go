package server

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/store"
)

// The load benchmarks measure once per process (the Go benchmark driver
// calls a benchmark several times) for a fixed wall-clock time, loopback
// only, and report their own units. METACLAW_BENCH_SECONDS shortens or
// lengthens the run test (default 10 s).

func benchSeconds() time.Duration {
	if s, err := strconv.Atoi(os.Getenv("METACLAW_BENCH_SECONDS")); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	return 10 * time.Second
}

func benchServer(b *testing.B, hc hostapi.Config) (*httptest.Server, *hostapi.Host) {
	hc.DataDir = b.TempDir()
	hc.Log = slog.New(slog.NewJSONHandler(io.Discard, nil))
	h, tools := newHost(b, hc)
	srv, err := New(Config{Host: h, Tools: tools, Log: hc.Log, MaxConcurrentRuns: 64})
	if err != nil {
		b.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	b.Cleanup(func() { ts.Close(); h.Close() })
	return ts, h
}

var (
	runLoadOnce   sync.Once
	runLoadResult struct {
		runs     int
		errors   int
		perSec   float64
		p50, p99 time.Duration
	}
)

// BenchmarkRunLoad: 16 concurrent clients run a trivial script through
// POST /api/run for 10 s. Targets: ≥ 2,000 runs/s on 2 cores, p99 ≤ 20 ms.
func BenchmarkRunLoad(b *testing.B) {
	runLoadOnce.Do(func() {
		ts, _ := benchServer(b, hostapi.Config{})
		const clients = 16
		tr := &http.Transport{MaxIdleConnsPerHost: clients, MaxConnsPerHost: clients}
		defer tr.CloseIdleConnections()
		hc := &http.Client{Transport: tr}
		body := []byte(`{"code":"return 1 + 1"}`)
		deadline := time.Now().Add(benchSeconds())
		lat := make([][]time.Duration, clients)
		errs := make([]int, clients)
		var wg sync.WaitGroup
		start := time.Now()
		for c := 0; c < clients; c++ {
			wg.Add(1)
			go func(c int) {
				defer wg.Done()
				for time.Now().Before(deadline) {
					t0 := time.Now()
					resp, err := hc.Post(ts.URL+"/api/run", "application/json", bytes.NewReader(body))
					if err != nil {
						errs[c]++
						continue
					}
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 || !bytes.Contains(b, []byte(`"result":2`)) {
						errs[c]++
						continue
					}
					lat[c] = append(lat[c], time.Since(t0))
				}
			}(c)
		}
		wg.Wait()
		elapsed := time.Since(start)
		var all []time.Duration
		for c := range lat {
			all = append(all, lat[c]...)
			runLoadResult.errors += errs[c]
		}
		sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
		r := &runLoadResult
		r.runs = len(all)
		r.perSec = float64(len(all)) / elapsed.Seconds()
		if len(all) > 0 {
			r.p50 = all[len(all)/2]
			r.p99 = all[len(all)*99/100]
		}
		b.Logf("run load: %d clients, %v: %d runs (%d errors), %.0f runs/s, p50 %v, p99 %v",
			clients, elapsed.Round(time.Millisecond), r.runs, r.errors, r.perSec, r.p50, r.p99)
	})
	r := runLoadResult
	if r.errors > 0 {
		b.Errorf("%d failed runs", r.errors)
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(r.perSec, "runs/s")
	b.ReportMetric(float64(r.p50.Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(r.p99.Microseconds())/1000, "p99-ms")
}

var (
	uploadLoadOnce   sync.Once
	uploadLoadResult struct {
		mbPerSec  float64
		rssGrowth int64
		failed    int
	}
)

// patternReader yields n bytes of a cheap, non-repeating-looking pattern
// without holding them in memory.
type patternReader struct {
	n, off int64
	seed   byte
}

func (p *patternReader) Read(b []byte) (int, error) {
	if p.off >= p.n {
		return 0, io.EOF
	}
	k := int64(len(b))
	if rem := p.n - p.off; k > rem {
		k = rem
	}
	for i := int64(0); i < k; i++ {
		x := p.off + i
		b[i] = byte(x*2654435761>>13) ^ p.seed
	}
	p.off += k
	return int(k), nil
}

func rssBytes() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// BenchmarkUploadLoad: 4 concurrent 50 MB multipart uploads, 3 rounds.
// Targets: ≥ 200 MB/s in total; process RSS growth ≤ 64 MB (client and
// server share the process, so this bounds both).
func BenchmarkUploadLoad(b *testing.B) {
	uploadLoadOnce.Do(func() {
		ts, _ := benchServer(b, hostapi.Config{})
		const clients, rounds, size = 4, 3, 50 << 20
		tr := &http.Transport{MaxIdleConnsPerHost: clients}
		defer tr.CloseIdleConnections()
		hc := &http.Client{Transport: tr}
		upload := func(name string, seed byte) error {
			pr, pw := io.Pipe()
			mw := multipart.NewWriter(pw)
			go func() {
				w, err := mw.CreateFormFile("file", name)
				if err == nil {
					_, err = io.CopyBuffer(w, &patternReader{n: size, seed: seed}, make([]byte, 256<<10))
				}
				if err == nil {
					err = mw.Close()
				}
				pw.CloseWithError(err)
			}()
			resp, err := hc.Post(ts.URL+"/api/files/upload?overwrite=true", mw.FormDataContentType(), pr)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != 201 || !bytes.Contains(body, []byte(fmt.Sprintf(`"size":%d`, size))) {
				return fmt.Errorf("%d %s", resp.StatusCode, body)
			}
			return nil
		}
		// Warm up (connections, first file) before taking the RSS baseline.
		if err := upload("warm.bin", 0); err != nil {
			b.Fatal(err)
		}
		base := rssBytes()
		peak := base
		stop := make(chan struct{})
		sampled := make(chan struct{})
		go func() {
			defer close(sampled)
			t := time.NewTicker(5 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
					if r := rssBytes(); r > peak {
						peak = r
					}
				}
			}
		}()
		start := time.Now()
		var wg sync.WaitGroup
		var mu sync.Mutex
		for c := 0; c < clients; c++ {
			wg.Add(1)
			go func(c int) {
				defer wg.Done()
				for r := 0; r < rounds; r++ {
					if err := upload(fmt.Sprintf("load-%d.bin", c), byte(c+r)); err != nil {
						mu.Lock()
						uploadLoadResult.failed++
						mu.Unlock()
						b.Logf("upload: %v", err)
					}
				}
			}(c)
		}
		wg.Wait()
		elapsed := time.Since(start)
		close(stop)
		<-sampled
		total := float64(clients*rounds*size) / (1 << 20)
		uploadLoadResult.mbPerSec = total / elapsed.Seconds()
		uploadLoadResult.rssGrowth = peak - base
		b.Logf("upload load: %d clients × %d rounds × 50 MB in %v: %.0f MB/s, RSS %d MB → peak %d MB (+%d MB)",
			clients, rounds, elapsed.Round(time.Millisecond), uploadLoadResult.mbPerSec, base>>20, peak>>20, (peak-base)>>20)
	})
	r := uploadLoadResult
	if r.failed > 0 {
		b.Errorf("%d uploads failed", r.failed)
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(r.mbPerSec, "MB/s")
	b.ReportMetric(float64(r.rssGrowth)/(1<<20), "RSS-growth-MB")
}

// BenchmarkToolCall: one meta-tool call (file_read_text of a small file)
// through POST /api/tools/{name}, sequentially: the door's own overhead
// (decoding, strict-argument mapping, the call deadline, the run gate).
func BenchmarkToolCall(b *testing.B) {
	ts, h := benchServer(b, hostapi.Config{})
	if _, err := h.Store.Workspace("default").Create(context.Background(), store.CreateOptions{Name: "a.txt"}, strings.NewReader("one\ntwo\nthree\n")); err != nil {
		b.Fatal(err)
	}
	tr := &http.Transport{MaxIdleConnsPerHost: 1}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	body := []byte(`{"id":"a.txt","start_line":2,"end_line":3}`)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		resp, err := hc.Post(ts.URL+"/api/tools/file_read_text", "application/json", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !bytes.Contains(out, []byte(`"total_lines":3`)) {
			b.Fatalf("%d %s", resp.StatusCode, out)
		}
	}
}
