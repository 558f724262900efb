package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pdfcpu/pdfcpu/pkg/api"
	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/model"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/host"
)

// BenchmarkServeFirstExtract (issue 14) measures a server start as a user
// sees it: the real binary (`metaclaw serve` on a random port, a new data
// directory, the user's compilation cache warm — the untimed first run
// fills it when it is cold), until its port is open (listen-ms: the line
// it prints once listening), and until the text of a 20-page PDF uploaded
// right after /healthz answers has come back (text-ms). Target: text-ms
// ≤ 500. Reported as medians of the iterations, and the best.
// METACLAW_BENCH_BINARY=path measures another build (A/B comparisons).
func BenchmarkServeFirstExtract(b *testing.B) {
	bin := os.Getenv("METACLAW_BENCH_BINARY")
	if bin == "" {
		bin = metaclawBinary(b)
	}
	doc := twentyPagePDF(b)
	serveAndExtract(b, bin, doc) // the user's cache: warm from here on
	var listen, text []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		l, t := serveAndExtract(b, bin, doc)
		listen, text = append(listen, l), append(text, t)
	}
	b.StopTimer()
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	slices.Sort(listen)
	slices.Sort(text)
	b.ReportMetric(ms(listen[len(listen)/2]), "listen-ms")
	b.ReportMetric(ms(text[len(text)/2]), "text-ms")
	b.ReportMetric(ms(text[0]), "best-text-ms")
}

// serveAndExtract starts `bin serve` on a new data directory, waits for
// its listening line, checks /healthz, uploads doc and extracts its text;
// it returns the times from the start to listening and to the text.
func serveAndExtract(b *testing.B, bin string, doc []byte) (listen, text time.Duration) {
	b.Helper()
	data := filepath.Join(b.TempDir(), "data")
	cmd := exec.Command(bin, "serve", "--data", data, "--addr", "127.0.0.1:0")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	}()
	var logs strings.Builder
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			logs.WriteString(sc.Text() + "\n")
			if m := servingLine.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case urls <- m[1]:
				default:
				}
			}
		}
		close(urls)
	}()
	url, ok := <-urls
	if !ok {
		b.Fatalf("serve exited before listening: %s", logs.String()) // the reader is done
	}
	listen = time.Since(start)
	if resp, err := http.Get(url + "/healthz"); err != nil || resp.StatusCode != 200 {
		b.Fatalf("healthz: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	var form bytes.Buffer
	mw := multipart.NewWriter(&form)
	fw, _ := mw.CreateFormFile("file", "twenty.pdf")
	fw.Write(doc)
	mw.Close()
	resp, err := http.Post(url+"/api/files/upload", mw.FormDataContentType(), &form)
	if err != nil {
		b.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		b.Fatalf("upload: %s", resp.Status)
	}
	resp, err = http.Post(url+"/api/tools/pdf_extract_text", "application/json", strings.NewReader(`{"id": "twenty.pdf"}`))
	if err != nil {
		b.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	text = time.Since(start)
	var out struct {
		Pages []struct {
			Page int
			Text string
		}
	}
	if err := json.Unmarshal(body, &out); err != nil || len(out.Pages) != 20 || !strings.Contains(out.Pages[19].Text, "Page 20, line 40") {
		b.Fatalf("pdf_extract_text: %d %.300s", resp.StatusCode, body)
	}
	return listen, text
}

// twentyPagePDF is a 20-page PDF of 40 lines of text each.
func twentyPagePDF(b *testing.B) []byte {
	b.Helper()
	type text struct {
		Value string         `json:"value"`
		Pos   [2]float64     `json:"pos"`
		Font  map[string]any `json:"font"`
	}
	pages := map[string]any{}
	for p := 1; p <= 20; p++ {
		var tt []text
		for l := 1; l <= 40; l++ {
			tt = append(tt, text{Value: fmt.Sprintf("Page %d, line %d: ordinary words to extract.", p, l),
				Pos: [2]float64{72, 60 + float64(l)*17}, Font: map[string]any{"name": "Helvetica", "size": 11}})
		}
		pages[fmt.Sprint(p)] = map[string]any{"content": map[string]any{"text": tt}}
	}
	js, _ := json.Marshal(map[string]any{"paper": "A4P", "origin": "UpperLeft", "pages": pages})
	var out bytes.Buffer
	if err := api.Create(nil, bytes.NewReader(js), &out, model.NewDefaultConfiguration()); err != nil {
		b.Fatal(err)
	}
	return out.Bytes()
}

// TestServePoolStartsOnDemand: serve's sandbox pool, waiting for the PDF
// engine, starts at once for a script that comes first, and a host closed
// before the pool started closes without starting it.
func TestServePoolStartsOnDemand(t *testing.T) {
	never := make(chan struct{}) // the PDF engine is never ready here
	h, _, err := host.Open(hostapi.Config{DataDir: filepath.Join(t.TempDir(), "a"), Log: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	startPoolInBackground(h, 1, 0, never)
	res := h.Runner.Run(context.Background(), h.Env("default", "test"), hostapi.RunRequest{Code: "return 6 * 7"})
	if out, _ := json.Marshal(res.Result); !res.OK || string(out) != "42" {
		t.Fatalf("first script: %+v %+v", res.Result, res.Error)
	}

	h2, _, err := host.Open(hostapi.Config{DataDir: filepath.Join(t.TempDir(), "b"), Log: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	startPoolInBackground(h2, 1, 0, never)
	if err := h2.Close(); err != nil {
		t.Fatal(err)
	}
	res = h2.Runner.Run(context.Background(), h2.Env("default", "test"), hostapi.RunRequest{Code: "return 1"})
	if res.OK || res.Error == nil || res.Error.Code != apierr.ToolWorkerUnavailable {
		t.Fatalf("a script on a closed host: %+v %+v", res.Result, res.Error)
	}
}
