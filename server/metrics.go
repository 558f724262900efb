package server

import (
	"bufio"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// metrics are the server's counters, exposed in the Prometheus text format
// (no client library: the format is a few lines of text). A caller sees
// the server-wide series, which name no workspace and no file (requests by
// route, runs in flight, built-in operation calls), and the series of its
// own workspace only: stored bytes, uploads, downloads, runs, event
// streams and its saved tools' calls.
type metrics struct {
	mu          sync.Mutex
	requests    map[[3]string]uint64 // method, route, status
	reqDuration map[string]*histogram
	toolCalls   map[[2]string]uint64 // built-in tool, outcome
	workspaces  map[string]*wsMetrics

	runsInFlight atomic.Int64
	streams      atomic.Int64
	started      time.Time
}

// wsMetrics are one workspace's series.
type wsMetrics struct {
	runs        map[string]uint64 // outcome; guarded by metrics.mu
	runDuration *histogram
	toolCalls   map[[2]string]uint64 // saved tool, outcome

	uploadBytes   atomic.Int64
	downloadBytes atomic.Int64
	sseClients    atomic.Int64
}

// ws returns workspace's series, creating them on first use.
func (m *metrics) ws(workspace string) *wsMetrics {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.wsLocked(workspace)
}

func (m *metrics) wsLocked(workspace string) *wsMetrics {
	w := m.workspaces[workspace]
	if w == nil {
		w = &wsMetrics{runs: map[string]uint64{}, runDuration: newHistogram(), toolCalls: map[[2]string]uint64{}}
		m.workspaces[workspace] = w
	}
	return w
}

var durationBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

type histogram struct {
	counts []uint64 // per bucket (not cumulative), len(buckets)+1
	sum    float64
	n      uint64
}

func newHistogram() *histogram { return &histogram{counts: make([]uint64, len(durationBuckets)+1)} }

func (h *histogram) observe(v float64) {
	i := sort.SearchFloat64s(durationBuckets, v)
	h.counts[i]++
	h.sum += v
	h.n++
}

func newMetrics() *metrics {
	return &metrics{
		requests: map[[3]string]uint64{}, reqDuration: map[string]*histogram{},
		toolCalls: map[[2]string]uint64{}, workspaces: map[string]*wsMetrics{}, started: time.Now(),
	}
}

func (m *metrics) observeRequest(method, route string, status int, d time.Duration) {
	m.mu.Lock()
	m.requests[[3]string{method, route, strconv.Itoa(status)}]++
	h := m.reqDuration[route]
	if h == nil {
		h = newHistogram()
		m.reqDuration[route] = h
	}
	h.observe(d.Seconds())
	m.mu.Unlock()
}

func (m *metrics) observeRun(workspace, outcome string, d time.Duration) {
	m.mu.Lock()
	w := m.wsLocked(workspace)
	w.runs[outcome]++
	if outcome != "busy" {
		w.runDuration.observe(d.Seconds())
	}
	m.mu.Unlock()
}

func outcomeOf(err error) string {
	if err == nil {
		return "ok"
	}
	return string(apierr.CodeOf(err))
}

func (m *metrics) observeTool(name string, err error) {
	m.mu.Lock()
	m.toolCalls[[2]string{name, outcomeOf(err)}]++
	m.mu.Unlock()
}

// observeDynamicTool counts a call of a saved tool of workspace (the
// registry observes only compiled-in operations, whose names are public).
func (m *metrics) observeDynamicTool(workspace, name string, err error) {
	m.mu.Lock()
	m.wsLocked(workspace).toolCalls[[2]string{name, outcomeOf(err)}]++
	m.mu.Unlock()
}

func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request) {
	p, err := s.authenticate(r)
	if err != nil {
		w.Header().Set("WWW-Authenticate", `Bearer realm="metaclaw"`)
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	bw := bufio.NewWriter(w)
	s.metrics.write(bw, s, p.Workspace)
	bw.Flush()
}

func (m *metrics) write(w *bufio.Writer, s *Server, workspace string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ws := m.wsLocked(workspace)

	header(w, "metaclaw_http_requests_total", "counter", "HTTP requests by method, route and status.")
	for _, k := range sortedKeys3(m.requests) {
		fmt.Fprintf(w, "metaclaw_http_requests_total{method=%q,route=%q,status=%q} %d\n", k[0], k[1], k[2], m.requests[k])
	}
	header(w, "metaclaw_http_request_duration_seconds", "histogram", "HTTP request durations by route.")
	routes := make([]string, 0, len(m.reqDuration))
	for r := range m.reqDuration {
		routes = append(routes, r)
	}
	sort.Strings(routes)
	for _, r := range routes {
		writeHistogram(w, "metaclaw_http_request_duration_seconds", fmt.Sprintf("route=%q", r), m.reqDuration[r])
	}

	header(w, "metaclaw_runs_in_flight", "gauge", "Script runs, tool calls and conversions in progress, server-wide.")
	fmt.Fprintf(w, "metaclaw_runs_in_flight %d\n", m.runsInFlight.Load())
	header(w, "metaclaw_event_streams", "gauge", "Open event streams (SSE and MCP), server-wide.")
	fmt.Fprintf(w, "metaclaw_event_streams %d\n", m.streams.Load())
	header(w, "metaclaw_tool_calls_total", "counter", "Calls of built-in operations by name and outcome (ok or an error code), from every door, server-wide.")
	writeToolCalls(w, m.toolCalls, "")

	// The caller's workspace only.
	wl := fmt.Sprintf("workspace=%q", workspace)
	header(w, "metaclaw_runs_total", "counter", "Script runs of this workspace by outcome (ok, an error code, or busy when refused).")
	outcomes := make([]string, 0, len(ws.runs))
	for o := range ws.runs {
		outcomes = append(outcomes, o)
	}
	sort.Strings(outcomes)
	for _, o := range outcomes {
		fmt.Fprintf(w, "metaclaw_runs_total{%s,outcome=%q} %d\n", wl, o, ws.runs[o])
	}
	header(w, "metaclaw_run_duration_seconds", "histogram", "Script run durations of this workspace.")
	writeHistogram(w, "metaclaw_run_duration_seconds", wl, ws.runDuration)
	header(w, "metaclaw_saved_tool_calls_total", "counter", "Calls of this workspace's saved tools by name and outcome.")
	writeToolCalls(w, ws.toolCalls, wl+",")
	used, limit, err := s.h.Store.Workspace(workspace).Usage()
	if err == nil {
		header(w, "metaclaw_stored_bytes", "gauge", "Bytes this workspace stores (bodies, backups, saved tools).")
		fmt.Fprintf(w, "metaclaw_stored_bytes{%s} %d\n", wl, used)
		header(w, "metaclaw_quota_bytes", "gauge", "This workspace's quota.")
		fmt.Fprintf(w, "metaclaw_quota_bytes{%s} %d\n", wl, limit)
	}
	header(w, "metaclaw_upload_bytes_total", "counter", "Bytes received by uploads to this workspace.")
	fmt.Fprintf(w, "metaclaw_upload_bytes_total{%s} %d\n", wl, ws.uploadBytes.Load())
	header(w, "metaclaw_download_bytes_total", "counter", "Bytes sent by downloads from this workspace.")
	fmt.Fprintf(w, "metaclaw_download_bytes_total{%s} %d\n", wl, ws.downloadBytes.Load())
	header(w, "metaclaw_sse_clients", "gauge", "Connected event-stream clients of this workspace.")
	fmt.Fprintf(w, "metaclaw_sse_clients{%s} %d\n", wl, ws.sseClients.Load())
	header(w, "metaclaw_uptime_seconds", "gauge", "Seconds since the server started.")
	fmt.Fprintf(w, "metaclaw_uptime_seconds %.0f\n", time.Since(m.started).Seconds())
}

func writeToolCalls(w *bufio.Writer, calls map[[2]string]uint64, labels string) {
	keys := make([][2]string, 0, len(calls))
	for k := range calls {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i][0]+"\x00"+keys[i][1] < keys[j][0]+"\x00"+keys[j][1] })
	name := "metaclaw_tool_calls_total"
	if labels != "" {
		name = "metaclaw_saved_tool_calls_total"
	}
	for _, k := range keys {
		fmt.Fprintf(w, "%s{%stool=%q,outcome=%q} %d\n", name, labels, k[0], k[1], calls[k])
	}
}

func header(w *bufio.Writer, name, kind, help string) {
	fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, kind)
}

func writeHistogram(w *bufio.Writer, name, labels string, h *histogram) {
	sep := ""
	if labels != "" {
		sep = ","
	}
	var cum uint64
	for i, b := range durationBuckets {
		cum += h.counts[i]
		fmt.Fprintf(w, "%s_bucket{%s%sle=\"%s\"} %d\n", name, labels, sep, strconv.FormatFloat(b, 'g', -1, 64), cum)
	}
	cum += h.counts[len(durationBuckets)]
	fmt.Fprintf(w, "%s_bucket{%s%sle=\"+Inf\"} %d\n", name, labels, sep, cum)
	lb := ""
	if labels != "" {
		lb = "{" + labels + "}"
	}
	fmt.Fprintf(w, "%s_sum%s %s\n%s_count%s %d\n", name, lb, strconv.FormatFloat(h.sum, 'g', -1, 64), name, lb, h.n)
}

func sortedKeys3(m map[[3]string]uint64) [][3]string {
	out := make([][3]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return strings.Join(out[i][:], "\x00") < strings.Join(out[j][:], "\x00") })
	return out
}
