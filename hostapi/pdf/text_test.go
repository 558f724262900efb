package pdf

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

func TestExtractTextReadingOrder(t *testing.T) {
	e := newTestEnv(t)
	pages := [][]string{
		{"Invoice 2024-117", "Customer: Jane Doe, Main Street 5", "Total due: 1,234.50 EUR"},
		{"Terms and conditions apply.", "Payment within 30 days."},
		{"Thank you!"},
	}
	e.upload("inv.pdf", textPDF(t, pages))

	r := e.mustTool("pdf_extract_text", map[string]any{"id": "inv.pdf"})
	if r["total_pages"] != 3.0 {
		t.Fatalf("total_pages = %v", r["total_pages"])
	}
	for i, got := range pageTexts(t, r) {
		if want := strings.Join(pages[i], "\n"); got != want {
			t.Errorf("page %d = %q, want %q", i+1, got, want)
		}
	}

	// Only the pages asked for, in the order asked.
	r = e.mustTool("pdf_extract_text", map[string]any{"id": "inv.pdf", "pages": []any{3, 1}})
	list := r["pages"].([]any)
	if len(list) != 2 || list[0].(map[string]any)["page"] != 3.0 || list[1].(map[string]any)["page"] != 1.0 {
		t.Fatalf("pages [3,1] = %v", list)
	}
	if got := list[0].(map[string]any)["text"]; got != "Thank you!" {
		t.Fatalf("page 3 = %q", got)
	}

	_, err := e.tool("pdf_extract_text", map[string]any{"id": "inv.pdf", "pages": []any{4}})
	wantCode(t, err, apierr.ValidationFailed)
	if !strings.Contains(err.Error(), "has 3 pages") {
		t.Fatalf("error should name the page count: %v", err)
	}
	_, err = e.tool("pdf_extract_text", map[string]any{"id": "inv.pdf", "pages": []any{0}})
	wantCode(t, err, apierr.ValidationFailed)
	_, err = e.tool("pdf_extract_text", map[string]any{"id": "nope.pdf"})
	wantCode(t, err, apierr.NotFound)
}

func TestExtractTextTwentyPages(t *testing.T) {
	e := newTestEnv(t)
	pages := twentyPages()
	e.upload("long.pdf", textPDF(t, pages))
	v, err := e.js("files.pdf.extractText", map[string]any{"id": "long.pdf"})
	if err != nil {
		t.Fatal(err)
	}
	res := v.(ExtractTextResult)
	if res.TotalPages != 20 || len(res.Pages) != 20 {
		t.Fatalf("got %d of %d pages", len(res.Pages), res.TotalPages)
	}
	for i, p := range res.Pages {
		if want := strings.Join(pages[i], "\n"); p.Text != want || p.Page != i+1 {
			t.Fatalf("page %d = %q, want %q", p.Page, p.Text, want)
		}
	}
}

func twentyPages() [][]string {
	var pages [][]string
	for p := 1; p <= 20; p++ {
		var lines []string
		for l := 1; l <= 40; l++ {
			lines = append(lines, fmt.Sprintf("Page %d line %d: the quick brown fox jumps over the lazy dog", p, l))
		}
		pages = append(pages, lines)
	}
	return pages
}

// libreOfficeLines are the lines of testdata/libreoffice-report.pdf, a
// text file converted by LibreOffice 7.4 (soffice --headless --convert-to
// pdf), kept as a file because starting LibreOffice takes ~20 s.
var libreOfficeLines = []string{
	"Quarterly report for ACME Corporation",
	"Revenue grew by 12 percent this quarter.",
	"Costs fell in every region, numbers like 3.14 and 1,000 stay intact.",
	"Ümlauts, accents (café) and the € sign survive too.",
}

// TestExtractTextLibreOffice reads a PDF made by a different producer
// (embedded TrueType subsets, a different content-stream style).
func TestExtractTextLibreOffice(t *testing.T) {
	lines := libreOfficeLines
	data, err := os.ReadFile(filepath.Join("testdata", "libreoffice-report.pdf"))
	if err != nil {
		t.Fatal(err)
	}
	e := newTestEnv(t)
	e.upload("report.pdf", data)
	r := e.mustTool("pdf_extract_text", map[string]any{"id": "report.pdf"})
	if got, want := pageTexts(t, r), []string{strings.Join(lines, "\n")}; !reflect.DeepEqual(got, want) {
		t.Fatalf("text = %q\nwant %q", got, want)
	}
	info := e.mustTool("pdf_info", map[string]any{"id": "report.pdf"})
	if info["pages"] != 1.0 {
		t.Fatalf("info = %v", info)
	}
	// Stamped text on a foreign file is extractable too.
	e.mustTool("pdf_add_text", map[string]any{"id": "report.pdf", "page": 1, "text": "APPROVED", "x": 72, "y": 600})
	r = e.mustTool("pdf_extract_text", map[string]any{"id": "report.pdf"})
	if got := pageTexts(t, r)[0]; got != strings.Join(append(lines, "APPROVED"), "\n") {
		t.Fatalf("after stamping: %q", got)
	}
}

// TestExtractTextAfterRestart checks that pdfium's compiled code is cached
// in the cache directory and reused by the next host.
func TestExtractTextAfterRestart(t *testing.T) {
	dir := t.TempDir()
	data := textPDF(t, [][]string{{"persisted"}})
	func() {
		e := newTestEnvAt(t, dir)
		e.upload("a.pdf", data)
		e.mustTool("pdf_extract_text", map[string]any{"id": "a.pdf"})
		e.h.Close()
	}()
	entries, err := os.ReadDir(testCacheDir())
	if err != nil || len(entries) == 0 {
		t.Fatalf("compilation cache is empty: %v", err)
	}
	e := newTestEnvAt(t, dir)
	start := time.Now()
	r := e.mustTool("pdf_extract_text", map[string]any{"id": "a.pdf"})
	if got := pageTexts(t, r); !reflect.DeepEqual(got, []string{"persisted"}) {
		t.Fatalf("text = %q", got)
	}
	t.Logf("first extraction after restart: %v", time.Since(start))
}

func TestExtractTextTimeLimit(t *testing.T) {
	e := newTestEnv(t)
	e.upload("big.pdf", manyPagesPDF(10000))
	// Warm the engine so that the deadline falls inside the extraction.
	e.mustTool("pdf_extract_text", map[string]any{"id": "big.pdf", "pages": []any{1}})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := e.h.Registry.CallTool(ctx, e.env, "pdf_extract_text", map[string]any{"id": "big.pdf"})
	wantCode(t, err, apierr.Timeout)
	if d := time.Since(start); d > 5*time.Second { // ~50 ms; generous for a busy machine
		t.Fatalf("timeout took %v", d)
	}
	// The engine recovers: the next call works.
	r := e.mustTool("pdf_extract_text", map[string]any{"id": "big.pdf", "pages": []any{10000}})
	if got := pageTexts(t, r); !reflect.DeepEqual(got, []string{"Page text"}) {
		t.Fatalf("text = %q", got)
	}
}

func TestCleanText(t *testing.T) {
	for in, want := range map[string]string{
		"Hello  \r\nworld \r\n\r\n": "Hello\nworld",
		"hy\x02\r\nphen":            "hy-\nphen",
		"a\x00b\ufffec":             "abc",
		"tab\there\rnext":           "tab\there\nnext",
		"":                          "",
		"   \r\n  ":                 "",
		"line one\r\nline two\r\n ": "line one\nline two",
	} {
		if got := cleanText(in); got != want {
			t.Errorf("cleanText(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestExtractTextConcurrently(t *testing.T) {
	e := newTestEnv(t)
	for i := 0; i < 4; i++ {
		e.upload(fmt.Sprintf("%d.pdf", i), textPDF(t, [][]string{{fmt.Sprintf("document %d", i)}}))
	}
	errs := make(chan error, 8)
	for i := 0; i < 8; i++ {
		go func(i int) {
			r, err := e.tool("pdf_extract_text", map[string]any{"id": fmt.Sprintf("%d.pdf", i%4)})
			if err == nil {
				if got := pageTexts(t, r.(map[string]any)); len(got) != 1 || got[0] != fmt.Sprintf("document %d", i%4) {
					err = fmt.Errorf("call %d read %q", i, got)
				}
			}
			errs <- err
		}(i)
	}
	for i := 0; i < 8; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}
