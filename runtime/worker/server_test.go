package worker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/host"
	"github.com/metaclaw/metaclaw/runtime/worker"
	"github.com/metaclaw/metaclaw/server"
)

// testServer is a real metaclaw server on 127.0.0.1 whose runner is a
// worker pool.
type testServer struct {
	url    string
	h      *hostapi.Host
	p      *worker.Pool
	client *http.Client
}

func newServer(t testing.TB, limits hostapi.RunLimits, opts worker.Options) *testServer {
	t.Helper()
	h, parts, err := host.Open(hostapi.Config{DataDir: t.TempDir(), Log: quiet, Limits: limits})
	if err != nil {
		t.Fatal(err)
	}
	if opts.Log == nil {
		opts.Log = quiet
	}
	if opts.IdleTimeout == 0 {
		opts.IdleTimeout = 100 * time.Millisecond
	}
	p, err := worker.NewPool(h, opts)
	if err != nil {
		h.Close()
		t.Fatal(err)
	}
	h.Runner = p
	srv, err := server.New(server.Config{Host: h, Tools: parts.Tools, Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, MaxConnsPerHost: 64}}
	t.Cleanup(func() {
		ts.Close()
		client.CloseIdleConnections()
		p.Close()
		h.Close()
	})
	return &testServer{url: ts.URL, h: h, p: p, client: client}
}

// post sends POST /api/run and decodes the run result.
func (s *testServer) post(ctx context.Context, code string, timeoutMs int) (int, *hostapi.RunResult, error) {
	body, _ := json.Marshal(map[string]any{"code": code, "timeout_ms": timeoutMs})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.url+"/api/run", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var res hostapi.RunResult
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
		return resp.StatusCode, nil, fmt.Errorf("decoding the run result: %w", err)
	}
	return resp.StatusCode, &res, nil
}

// hostRSS is this process's resident set in bytes.
func hostRSS() int64 {
	b, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// The bad inputs, each against a real server: every one ends with
// its coded error within its time limit + 100 ms, while a stream of
// trivial runs on the same server keeps succeeding; the host's memory
// stays put and the pool returns to its size.
func TestBadInputOverHTTP(t *testing.T) {
	const limitMs = 2000
	s := newServer(t, hostapi.RunLimits{Timeout: limitMs * time.Millisecond, MemoryBytes: 128 << 20},
		// Enough warm workers that the stream and the next case find one
		// while the workers the memory cases crash are being replaced.
		worker.Options{Size: 6, IdleTimeout: 200 * time.Millisecond})
	ctx := context.Background()
	// Warm up: every worker has served a run; the host's heap is settled.
	for i := 0; i < 20; i++ {
		if _, res, err := s.post(ctx, "return 1", 0); err != nil || !res.OK {
			t.Fatalf("warm-up: %v %+v", err, res)
		}
	}
	debug.FreeOSMemory()
	rss0 := hostRSS()

	// A concurrent stream of trivial runs, paced (a run every 10 ms per
	// client) so that it measures availability rather than saturating
	// the machine the timings are taken on.
	stop := make(chan struct{})
	var ok, failed atomic.Int64
	var firstFailure atomic.Value
	var stream sync.WaitGroup
	for c := 0; c < 2; c++ {
		stream.Add(1)
		go func() {
			defer stream.Done()
			tick := time.NewTicker(10 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				status, res, err := s.post(ctx, "return [1, 2].map(x => x * 2)", 5000)
				if err != nil || status != 200 || !res.OK || string(mustJSON(res.Result)) != "[2,4]" {
					failed.Add(1)
					firstFailure.CompareAndSwap(nil, fmt.Sprintf("%d %v %+v", status, err, res))
					continue
				}
				ok.Add(1)
			}
		}()
	}

	var peakGoroutines atomic.Int64
	sampling := make(chan struct{})
	go func() {
		defer close(sampling)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if n := int64(runtime.NumGoroutine()); n > peakGoroutines.Load() {
				peakGoroutines.Store(n)
			}
			time.Sleep(time.Millisecond)
		}
	}()

	mem, slow := apierr.ResourceExhausted, apierr.Timeout
	// A case that can only end one way (its memory or size limit) runs
	// with a long time limit: on a loaded machine its native work may
	// take longer than the short limit the time cases are tested with,
	// and it must still end with its own code.
	const longMs = 10000
	cases := []struct {
		name    string
		code    string
		codes   []apierr.Code
		limitMs int
	}{
		{"repeat 2^30", `return 'x'.repeat(2**30).length`, []apierr.Code{mem}, longMs},
		{"repeat 2^40", `return 'x'.repeat(2**40).length`, []apierr.Code{mem}, longMs},
		{"array 1e9 filled", `return new Array(1e9).fill(0).length`, []apierr.Code{mem, slow}, limitMs},
		{"ArrayBuffer 2^31", `return new ArrayBuffer(2**31).byteLength`, []apierr.Code{mem}, longMs},
		{"Uint8Array 2^32 filled", `return new Uint8Array(2**32).fill(1).length`, []apierr.Code{mem}, longMs},
		{"split of 2^27", `return 'x'.repeat(2**27).split('').length`, []apierr.Code{mem, slow}, limitMs},
		{"JSON.parse of 200 MB", `const chunk = '1,'.repeat(2**19); return JSON.parse('[' + chunk.repeat(200) + '1]').length`, []apierr.Code{mem}, longMs},
		{"catastrophic regex", `return /^(a+)+(?!x)$/.test('a'.repeat(34) + 'b')`, []apierr.Code{slow}, limitMs},
		{"loop in try/finally", `try { while (true) {} } finally { while (true) {} }`, []apierr.Code{slow}, limitMs},
		{"unbounded recursion", `function f(n) { return f(n + 1) + 1 } return f(0)`, []apierr.Code{mem}, longMs},
		{"recursion through a native built-in", `function f(a) { return [a].map(f) } return f(0)`, []apierr.Code{mem, slow}, limitMs},
		{"promise that never settles", `await new Promise(() => {})`, []apierr.Code{apierr.ValidationFailed}, limitMs},
		{"promise that never settles while calls run", `new Promise(() => {}); for (;;) await files.list()`, []apierr.Code{slow}, limitMs},
		{"console flood", `for (;;) console.log('x'.repeat(100))`, []apierr.Code{slow}, limitMs},
		{"100 MB return value", `const mb = 'x'.repeat(2**20); return Array.from({length: 100}, () => mb)`, []apierr.Code{mem}, longMs},
		{"100 MB return string", `const mb = 'x'.repeat(2**20); return mb.repeat(100)`, []apierr.Code{mem, slow}, limitMs},
		{"cyclic argument", `const a = {}; a.self = a; await files.create('x.txt', {content: a})`, []apierr.Code{apierr.ValidationFailed}, limitMs},
		{"10,000-deep argument", `let a = [], c = a; for (let i = 0; i < 10000; i++) { c[0] = []; c = c[0] } await files.create('x.txt', {content: a})`, []apierr.Code{apierr.ValidationFailed}, limitMs},
	}
	lag := startLagMeter(stop)
	for _, c := range cases {
		// Each case starts on a warm worker: the ones earlier cases
		// crashed are replaced in the background, and waiting for one is
		// the pool's capacity, not the run's limit.
		waitFor(t, func() bool { return s.p.Stats().Idle > 0 })
		lag.reset()
		start := time.Now()
		status, res, err := s.post(ctx, c.code, c.limitMs)
		took := time.Since(start)
		if err != nil || status != 200 {
			t.Errorf("%s: status %d, %v", c.name, status, err)
			continue
		}
		if res.OK || res.Error == nil || !hasCode(c.codes, res.Error.Code) {
			t.Errorf("%s: want %v, got ok=%v %+v", c.name, c.codes, res.OK, res.Error)
			continue
		}
		// The run ends within its limit + 100 ms (its duration as the host
		// measured it), plus however late this machine ran this process's
		// timers meanwhile (see lagMeter); the client has its answer soon
		// after (a console flood's megabyte of logs takes a moment to
		// travel).
		slack := 100*time.Millisecond + 4*lag.max()
		limit := time.Duration(c.limitMs) * time.Millisecond
		if res.DurationMs > float64((limit+slack).Milliseconds()) || took > limit+slack+400*time.Millisecond {
			t.Errorf("%s: ended after %.0f ms, answered after %v (limit %v, slack %v for a timer lag of %v)",
				c.name, res.DurationMs, took, limit, slack, lag.max())
		}
		t.Logf("%-45s %-20s %6.0f ms  (client: %v, limit %v, timer lag %v)", c.name, res.Error.Code, res.DurationMs,
			took.Round(time.Millisecond), limit, lag.max().Round(time.Millisecond))
	}

	// 10,000 host calls at once: the host runs at most 16 of them at a
	// time, so its goroutines stay few. (These two are about what the run
	// returns, not how fast: their limit is generous.)
	status, res, err := s.post(ctx, `const ps = []; for (let i = 0; i < 10000; i++) ps.push(files.lineCount("n.txt").catch(e => e.code)); const r = await Promise.all(ps); return r.filter(x => x === "NOT_FOUND").length`, 60000)
	if err != nil || status != 200 || !res.OK || string(mustJSON(res.Result)) != "10000" {
		t.Errorf("10,000 parallel calls: %d %v %+v", status, err, res)
	} else {
		t.Logf("10,000 parallel calls: %.0f ms", res.DurationMs)
	}
	// A console flood that stops: every entry counts.
	status, res, err = s.post(ctx, `for (let i = 0; i < 3000000; i++) console.log(''); return 'done'`, 60000)
	if err != nil || status != 200 || !res.OK || string(mustJSON(res.Result)) != `"done"` {
		t.Errorf("console flood: %d %v %+v", status, err, res)
	} else if b := mustJSON(res); len(b) > 1<<20+4096 {
		t.Errorf("console flood: the result is %d bytes", len(b))
	} else {
		t.Logf("3,000,000 console lines: %.0f ms, %d entries kept, %d bytes", res.DurationMs, len(res.Logs), len(b))
	}

	close(stop)
	stream.Wait()
	<-sampling
	if failed.Load() > 0 || ok.Load() < 10 {
		t.Errorf("trivial stream: %d ok, %d failed (first: %v)", ok.Load(), failed.Load(), firstFailure.Load())
	}
	if n := peakGoroutines.Load(); n > 300 {
		t.Errorf("the host ran %d goroutines at its peak", n)
	}
	debug.FreeOSMemory()
	if grew := hostRSS() - rss0; grew > 50<<20 {
		t.Errorf("the host's RSS grew by %d MB", grew>>20)
	}
	waitForWorkers(t, s.p, s.p.Size())
	t.Logf("trivial stream: %d runs; host goroutines at peak %d; stats %+v", ok.Load(), peakGoroutines.Load(), s.p.Stats())
}

// lagMeter measures how late this process's timers fire: a goroutine
// sleeps 1 ms at a time and records the largest overshoot. On a machine
// whose CPUs other work keeps busy, every timer of the pool (the deadline,
// the kill 100 ms later) and every wake-up of the worker and the server
// is late by about as much; that lateness is the machine's, not the
// sandbox's, so the time bounds allow for it instead of for a fixed sleep.
type lagMeter struct{ worst atomic.Int64 }

func startLagMeter(stop <-chan struct{}) *lagMeter {
	m := &lagMeter{}
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			t0 := time.Now()
			time.Sleep(time.Millisecond)
			if over := int64(time.Since(t0) - time.Millisecond); over > m.worst.Load() {
				m.worst.Store(over)
			}
		}
	}()
	return m
}

func (m *lagMeter) reset()             { m.worst.Store(0) }
func (m *lagMeter) max() time.Duration { return time.Duration(m.worst.Load()) }

func hasCode(codes []apierr.Code, c apierr.Code) bool {
	for _, x := range codes {
		if x == c {
			return true
		}
	}
	return false
}

// A script reaches nothing of the server: not its files, its environment
// or the network, whatever route to the global object it takes.
func TestEscapesFindNothingOverHTTP(t *testing.T) {
	s := newServer(t, hostapi.RunLimits{Timeout: 5 * time.Second}, worker.Options{Size: 2})
	os.Setenv("METACLAW_TEST_SECRET", "hunter2")
	defer os.Unsetenv("METACLAW_TEST_SECRET")
	_, res, err := s.post(context.Background(), `
		const g1 = Function('return this')(), g2 = (() => {}).constructor('return this')(), g3 = [].map.constructor('return this')();
		const g4 = Object.getPrototypeOf(async function() {}).constructor('return this');
		const probes = [];
		for (const g of [g1, g2, g3]) probes.push(Object.getOwnPropertyNames(g).filter(n => /process|require|env|secret|os|fs|net|http|go|host/i.test(n)));
		let stubEscape;
		try { stubEscape = files.list.constructor('return typeof process')() } catch (e) { stubEscape = e.name }
		let protoEscape;
		try { protoEscape = files.__proto__.constructor.constructor('return Object.keys(this).length')() } catch (e) { protoEscape = e.name }
		const text = JSON.stringify({g1: Object.keys(g1)});
		return {probes, stubEscape, sameGlobal: g1 === g2 && g2 === g3, asyncCtor: typeof g4, secret: text.includes("hunter2")};`, 0)
	if err != nil || !res.OK {
		t.Fatalf("%v %+v", err, res.Error)
	}
	var got struct {
		Probes     [][]string
		StubEscape string
		SameGlobal bool
		Secret     bool
	}
	json.Unmarshal(mustJSON(res.Result), &got)
	for _, p := range got.Probes {
		if len(p) != 0 {
			t.Errorf("globals: %v", p)
		}
	}
	if got.StubEscape != "undefined" || !got.SameGlobal || got.Secret {
		t.Fatalf("escape: %s", mustJSON(res.Result))
	}
	// Host files are not reachable through the file API either: names are
	// workspace paths, never host paths.
	_, res, _ = s.post(context.Background(), `
		const out = [];
		for (const ref of ["/etc/passwd", "../../etc/passwd", "file:///etc/passwd", "/proc/self/environ", "..\\..\\secret"]) {
			try { await files.readText(ref); out.push(ref + ": read!") } catch (e) { out.push(e.code) }
		}
		let dl; try { await files.download("http://127.0.0.1:1/x") } catch (e) { dl = e.code }
		return {out, dl};`, 0)
	if res == nil || !res.OK || strings.Contains(string(mustJSON(res.Result)), "read!") || !strings.Contains(string(mustJSON(res.Result)), `"dl":"SANDBOX_VIOLATION"`) {
		t.Fatalf("file escapes: %+v %s", res, mustJSON(res.Result))
	}
}

// When the client goes away, its run ends at once and frees its worker.
func TestClientGoneEndsTheRun(t *testing.T) {
	s := newServer(t, hostapi.RunLimits{Timeout: 30 * time.Second}, worker.Options{Size: 2})
	for _, code := range []string{`for (;;) {}`, `return /^(a+)+(?!x)$/.test('a'.repeat(40) + 'b')`} {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, _, err := s.post(ctx, code, 30000)
			done <- err
		}()
		waitFor(t, func() bool { return s.p.Stats().Busy == 1 })
		start := time.Now()
		cancel()
		<-done
		// The run ends soon after the client leaves (the server notices a
		// closed connection, the pool then needs at most 100 ms): its
		// worker is back in the pool, or killed and being replaced.
		waitFor(t, func() bool { return s.p.Stats().Busy == 0 })
		if took := time.Since(start); took > time.Second {
			t.Fatalf("%s: the run held its worker %v after the client left", code, took)
		}
		waitForWorkers(t, s.p, s.p.Size())
	}
	_, res, err := s.post(context.Background(), "return 'still serving'", 0)
	if err != nil || !res.OK {
		t.Fatalf("%v %+v", err, res)
	}
}
