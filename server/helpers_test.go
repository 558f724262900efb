package server

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/agenttools"
	"github.com/metaclaw/metaclaw/hostapi/files"
	"github.com/metaclaw/metaclaw/hostapi/store"
	jsrt "github.com/metaclaw/metaclaw/runtime/js"
)

// env is a real server on 127.0.0.1 with a real store in a temp dir. The
// host has the generic file operations and saved tools (the format areas
// are tested in their own packages; leaving them out keeps this test binary
// small).
type env struct {
	t     *testing.T
	h     *hostapi.Host
	srv   *Server
	ts    *httptest.Server
	url   string
	token string
	logs  *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type opts struct {
	hostCfg func(*hostapi.Config)
	cfg     func(*Config)
}

func newHost(t testing.TB, hc hostapi.Config) (*hostapi.Host, *agenttools.Tools) {
	t.Helper()
	if hc.DataDir == "" {
		hc.DataDir = t.TempDir()
	}
	h, err := hostapi.NewHost(hc)
	if err != nil {
		t.Fatal(err)
	}
	if err := files.Register(h); err != nil {
		t.Fatal(err)
	}
	tools, err := agenttools.Register(h)
	if err != nil {
		t.Fatal(err)
	}
	h.Runner = jsrt.New(h)
	return h, tools
}

func start(t *testing.T, o opts) *env {
	t.Helper()
	logs := &syncBuffer{}
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	hc := hostapi.Config{Log: log}
	if o.hostCfg != nil {
		o.hostCfg(&hc)
	}
	h, tools := newHost(t, hc)
	cfg := Config{Host: h, Tools: tools, Log: log}
	if o.cfg != nil {
		o.cfg(&cfg)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		srv.beginShutdown()
		ts.CloseClientConnections()
		ts.Close()
		h.Close()
	})
	e := &env{t: t, h: h, srv: srv, ts: ts, url: ts.URL, logs: logs}
	if len(cfg.Tokens) > 0 {
		e.token = cfg.Tokens[0].Secret
	}
	return e
}

// do sends a request with e's token (or tok when given) and returns the
// response with its body read.
func (e *env) do(method, path string, body io.Reader, hdr map[string]string) (*http.Response, []byte) {
	e.t.Helper()
	req, err := http.NewRequest(method, e.url+path, body)
	if err != nil {
		e.t.Fatal(err)
	}
	if e.token != "" {
		req.Header.Set("Authorization", "Bearer "+e.token)
	}
	for k, v := range hdr {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

func (e *env) json(method, path string, body any, wantStatus int) map[string]any {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	resp, b := e.do(method, path, rd, map[string]string{"Content-Type": "application/json"})
	if resp.StatusCode != wantStatus {
		e.t.Fatalf("%s %s: status %d, want %d: %s", method, path, resp.StatusCode, wantStatus, b)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		e.t.Fatalf("%s %s: not JSON: %s", method, path, b)
	}
	return out
}

// errCode asserts a coded JSON error with status.
func errCode(t *testing.T, resp *http.Response, body []byte, status int, code string) {
	t.Helper()
	if resp.StatusCode != status {
		t.Fatalf("status %d, want %d: %s", resp.StatusCode, status, body)
	}
	var e errorBody
	if err := json.Unmarshal(body, &e); err != nil || string(e.Error.Code) != code || e.Error.Message == "" {
		t.Fatalf("want error %s, got %s", code, body)
	}
}

// multipartBody builds an upload body with one file part.
func multipartBody(t testing.TB, fields map[string]string, filename string, content []byte) (io.Reader, string) {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for k, v := range fields {
		mw.WriteField(k, v)
	}
	if filename != "" {
		h := make(map[string][]string)
		h["Content-Disposition"] = []string{fmt.Sprintf(`form-data; name="file"; filename="%s"`, filename)}
		h["Content-Type"] = []string{"application/octet-stream"}
		w, err := mw.CreatePart(h)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(content)
	}
	mw.Close()
	return &buf, mw.FormDataContentType()
}

func (e *env) upload(name string, content []byte, query string) map[string]any {
	e.t.Helper()
	body, ct := multipartBody(e.t, nil, name, content)
	resp, b := e.do("POST", "/api/files/upload"+query, body, map[string]string{"Content-Type": ct})
	if resp.StatusCode != http.StatusCreated {
		e.t.Fatalf("upload %s: %d %s", name, resp.StatusCode, b)
	}
	var out map[string]any
	json.Unmarshal(b, &out)
	return out
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// sse is a connected event-stream client.
type sse struct {
	resp   *http.Response
	events chan sseEvent
	pings  chan struct{}
	cancel context.CancelFunc
}

type sseEvent struct {
	id, typ string
	data    map[string]any
	at      time.Time
}

func (e *env) events(lastID string, token string) *sse {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", e.url+"/api/events", nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		e.t.Fatal(err)
	}
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		cancel()
		e.t.Fatalf("events: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	s := &sse{resp: resp, events: make(chan sseEvent, 100), pings: make(chan struct{}, 100), cancel: cancel}
	connected := make(chan struct{})
	go func() {
		defer close(s.events)
		sc := bufio.NewScanner(resp.Body)
		var cur sseEvent
		once := sync.Once{}
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == ": connected":
				once.Do(func() { close(connected) })
			case line == ": ping":
				select {
				case s.pings <- struct{}{}:
				default:
				}
			case strings.HasPrefix(line, "id: "):
				cur.id = line[4:]
			case strings.HasPrefix(line, "event: "):
				cur.typ = line[7:]
			case strings.HasPrefix(line, "data: "):
				json.Unmarshal([]byte(line[6:]), &cur.data)
			case line == "" && cur.typ != "":
				cur.at = time.Now()
				s.events <- cur
				cur = sseEvent{}
			}
		}
	}()
	select {
	case <-connected:
	case <-time.After(5 * time.Second):
		e.t.Fatal("event stream did not start")
	}
	e.t.Cleanup(s.close)
	return s
}

func (s *sse) close() {
	s.cancel()
	s.resp.Body.Close()
}

func (s *sse) next(t *testing.T, within time.Duration) sseEvent {
	t.Helper()
	select {
	case ev, ok := <-s.events:
		if !ok {
			t.Fatal("event stream closed")
		}
		return ev
	case <-time.After(within):
		t.Fatalf("no event within %v", within)
	}
	return sseEvent{}
}

func (s *sse) none(t *testing.T, wait time.Duration) {
	t.Helper()
	select {
	case ev, ok := <-s.events:
		if ok {
			t.Fatalf("unexpected event %s %v", ev.typ, ev.data)
		}
	case <-time.After(wait):
	}
}

func execLookPath(name string) (string, error) { return exec.LookPath(name) }

func runPdftotext(t *testing.T, bin string, pdf []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "a.pdf")
	os.WriteFile(p, pdf, 0o644)
	out, err := exec.Command(bin, p, "-").CombinedOutput()
	if err != nil {
		t.Fatalf("pdftotext: %v %s", err, out)
	}
	return string(out)
}

func storeCreate(name string) store.CreateOptions {
	return store.CreateOptions{Name: name, Source: store.SourceUpload}
}

// tempFiles lists the regular files under the store's temp directories
// (files/.tmp/<process>/…): what an interrupted write would leave behind.
func tempFiles(t testing.TB, dataDir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(filepath.Join(dataDir, "files", ".tmp"), func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() && !strings.HasSuffix(p, ".lock") {
			out = append(out, p)
		}
		return nil
	})
	return out
}
