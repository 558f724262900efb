// Package e2e tests the workspace page in a real browser: a real server on
// 127.0.0.1 (every operation area, the JS runner) and Debian's Chromium
// driven by Playwright (npm playwright-core, no browser download) through
// browser.mjs. The tests are skipped only when node or chromium is absent;
// `make test` installs both (apt chromium, npm ci here).
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/host"
	"github.com/metaclaw/metaclaw/hostapi/store"
	jsrt "github.com/metaclaw/metaclaw/runtime/js"
	"github.com/metaclaw/metaclaw/server"
)

// browserTools finds node, chromium and the installed playwright-core, or
// skips (node, chromium) or fails (npm ci not run) with what to do.
func browserTools(t testing.TB) (node, chromium string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("browser tests skipped: node is not installed (make test installs it with apt: nodejs, npm)")
	}
	chromium = os.Getenv("METACLAW_CHROMIUM")
	if chromium == "" {
		for _, c := range []string{"/usr/bin/chromium", "/usr/bin/chromium-browser"} {
			if _, err := os.Stat(c); err == nil {
				chromium = c
				break
			}
		}
	}
	if chromium == "" {
		t.Skip("browser tests skipped: chromium is not installed (make test installs Debian's chromium with apt)")
	}
	if _, err := os.Stat(filepath.Join("node_modules", "playwright-core", "package.json")); err != nil {
		t.Fatal("playwright-core is not installed: run `npm ci` in server/web/e2e (make test does)")
	}
	return node, chromium
}

// site is a real server with every operation area on a temp data dir.
type site struct {
	h   *hostapi.Host
	url string
}

func startSite(t testing.TB, tokens []server.Token) *site {
	t.Helper()
	h, parts, err := host.Open(hostapi.Config{DataDir: t.TempDir(), Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	h.Runner = jsrt.New(h)
	srv, err := server.New(server.Config{Host: h, Tools: parts.Tools, Tokens: tokens, Heartbeat: 2 * time.Second})
	if err != nil {
		h.Close()
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
		h.Close()
	})
	return &site{h: h, url: ts.URL}
}

func (s *site) put(t testing.TB, name string, body []byte) *store.File {
	t.Helper()
	f, err := s.h.Store.Workspace("default").Create(context.Background(), store.CreateOptions{Name: name, Source: store.SourceUpload, Overwrite: true}, bytes.NewReader(body))
	if err != nil {
		t.Fatalf("put %s: %v", name, err)
	}
	return f
}

func (s *site) tool(t testing.TB, name string, args map[string]any) any {
	t.Helper()
	res, err := s.h.Registry.CallTool(context.Background(), s.h.Env("default", "fixtures"), name, args)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res
}

func (s *site) body(t testing.TB, name string) []byte {
	t.Helper()
	rd, err := s.h.Store.Workspace("default").Open(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	var b bytes.Buffer
	b.ReadFrom(rd)
	return b.Bytes()
}

func pngOf(w, h int) []byte {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			img.Set(x, y, color.RGBA{uint8(x * 255 / w), uint8(y * 255 / h), 128, 255})
		}
	}
	var b bytes.Buffer
	png.Encode(&b, img)
	return b.Bytes()
}

func shaHex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// fixtures puts one file of every kind the viewer shows and returns what
// the browser script checks them against.
func fixtures(t testing.TB, s *site) map[string]any {
	t.Helper()
	s.put(t, "notes.md", []byte("# Quarterly report\n\nSales went **up**.\n\n<script>window.__xss = 1</script>\n\n| region | units |\n|---|---|\n| North | 12 |\n"))
	var csv strings.Builder
	csv.WriteString("id,name,score\n")
	for i := 1; i <= 250; i++ {
		fmt.Fprintf(&csv, "%d,person %d,%d\n", i, i, i*3)
	}
	s.put(t, "people.csv", []byte(csv.String()))
	var log strings.Builder
	for i := 1; i <= 1200; i++ {
		fmt.Fprintf(&log, "line %d of the log\n", i)
	}
	s.put(t, "server.log", []byte(log.String()))
	s.put(t, "data.json", []byte(`{"name":"metaclaw","tags":["a","b"],"nested":{"n":1}}`))
	pic := pngOf(37, 23)
	s.put(t, "pixel.png", pic)
	// A workbook with two sheets, written through the spreadsheet area.
	s.tool(t, "file_create", map[string]any{"name": "book.xlsx"})
	s.tool(t, "spreadsheet_write_range", map[string]any{"id": "book.xlsx", "sheet": "Sheet1", "start_cell": "A1",
		"data": []any{[]any{"Region", "Units", "Price"}, []any{"North", 12, 2.5}, []any{"South", 7, 3.25}}})
	s.tool(t, "spreadsheet_add_sheet", map[string]any{"id": "book.xlsx", "name": "Notes"})
	s.tool(t, "spreadsheet_write_range", map[string]any{"id": "book.xlsx", "sheet": "Notes", "start_cell": "A1",
		"data": []any{[]any{"Note"}, []any{"second sheet cell"}}})
	// A two-page PDF with text, through the PDF area.
	s.tool(t, "file_create", map[string]any{"name": "doc.pdf"})
	s.tool(t, "pdf_add_text", map[string]any{"id": "doc.pdf", "page": 1, "text": "Hello from page one", "x": 72, "y": 72, "size": 28})
	s.tool(t, "pdf_add_page", map[string]any{"id": "doc.pdf"})
	s.tool(t, "pdf_add_text", map[string]any{"id": "doc.pdf", "page": 2, "text": "Page two", "x": 72, "y": 72, "size": 28})
	// A long name with a long MIME type, for the layout checks.
	long := "quarterly-financial-statements-consolidated-with-subsidiaries-and-regional-breakdowns-final-v12.xlsx"
	s.tool(t, "file_copy", map[string]any{"id": "book.xlsx", "new_name": long})
	// A name that is markup: the list shows it as text.
	hostile := "<img src=x onerror=window.__xss_name=1>.txt"
	s.put(t, hostile, []byte("hostile name\n"))
	return map[string]any{
		"hostile_name": hostile,
		"pixel":        map[string]any{"sha256": shaHex(pic), "width": 37, "height": 23},
		"book":         map[string]any{"sha256": shaHex(s.body(t, "book.xlsx"))},
		"notes":        map[string]any{"sha256": shaHex(s.body(t, "notes.md"))},
		"long_name":    long,
	}
}

// runNode runs a browser script and streams its output into the test log;
// the script prints "ok STEP" lines and exits non-zero on a failure.
func runNode(t testing.TB, node, chromium, script string, env map[string]string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Env = append(os.Environ(), "CHROMIUM="+chromium)
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var lines []string
	var mu sync.Mutex
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		mu.Lock()
		lines = append(lines, sc.Text())
		mu.Unlock()
		t.Log(sc.Text())
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%s failed: %v\n%s", script, err, stderr.String())
	}
	return lines
}

func TestBrowser(t *testing.T) {
	node, chromium := browserTools(t)
	s := startSite(t, nil)
	fx := fixtures(t, s)
	fxJSON, _ := json.Marshal(fx)
	artifacts, err := os.MkdirTemp("", "metaclaw-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("browser test screenshots: %s\n", artifacts)
	t.Logf("screenshots and downloads are kept in %s", artifacts)
	runNode(t, node, chromium, "browser.mjs", map[string]string{"BASE_URL": s.url, "ARTIFACTS": artifacts, "FIXTURES": string(fxJSON)})
	// What the browser changed, read back from the store.
	if got := string(s.body(t, "dropped.txt")); got != "first drop\n" {
		t.Fatalf("dropped.txt after replace and revert: %q", got)
	}
	if got := string(s.body(t, "dropped (1).txt")); got != "second drop\n" {
		t.Fatalf("kept both: %q", got)
	}
	if _, err := s.h.Store.Workspace("default").Resolve(context.Background(), "delete-me.txt"); err == nil {
		t.Fatal("delete-me.txt survived its confirmed delete")
	}
}

// With tokens the page asks for one, keeps it in the browser and then works.
func TestBrowserToken(t *testing.T) {
	node, chromium := browserTools(t)
	s := startSite(t, []server.Token{{Secret: "e2e-secret-token", Workspace: "team"}})
	s.h.Store.Workspace("team").Create(context.Background(), store.CreateOptions{Name: "team-notes.md", Source: store.SourceUpload}, strings.NewReader("# Team\n"))
	runNode(t, node, chromium, "token.mjs", map[string]string{"BASE_URL": s.url, "TOKEN": "e2e-secret-token"})
}
