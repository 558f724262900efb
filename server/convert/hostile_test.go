package convert

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

func codeOf(err error) apierr.Code { return apierr.CodeOf(err) }

// TestWideTable is issue 11's hang: a 244-byte table of 31 one-letter
// columns made a column narrower than one glyph, and a one-rune word never
// shrank. Now wide tables get a smaller type size and then column groups
// that repeat the first column, and every value is in the PDF.
func TestWideTable(t *testing.T) {
	md, err := os.ReadFile("testdata/wide-table.md")
	if err != nil || len(md) != 244 {
		t.Fatalf("fixture: %d bytes, %v", len(md), err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	pdf, err := MarkdownToPDF(ctx, md, Options{})
	if err != nil {
		t.Fatal(err)
	}
	text := pdftotext(t, pdf)
	// Column groups are announced, and the last column's header and value
	// made it (the first column repeats in every group).
	if !strings.Contains(text, "Columns") || !strings.Contains(text, "of 31") {
		t.Fatalf("no column-group captions:\n%s", text)
	}
	for _, want := range []string{" e ", " 0 "} {
		if !strings.Contains(" "+strings.Join(strings.Fields(text), " ")+" ", want) {
			t.Errorf("text lacks %q:\n%s", want, text)
		}
	}
	docx, err := MarkdownToDOCX(ctx, md, Options{})
	if err != nil {
		t.Fatal(err)
	}
	dt, parts := docxText(t, docx)
	if n := strings.Count(string(parts["word/document.xml"]), "<w:tbl>"); n != 3 {
		t.Fatalf("31 columns in %d Word tables, want 3 of ≤ %d columns", n, maxDocxCols)
	}
	if !strings.Contains(dt, "Columns 24–31 of 31, with column 1") {
		t.Fatalf("docx captions: %s", dt)
	}

	// Hundreds of columns and a cell word wider than any column still end,
	// in bounded time and pages.
	var b strings.Builder
	for r := 0; r < 3; r++ {
		b.WriteString("|")
		for c := 0; c < 400; c++ {
			if r == 1 {
				b.WriteString("-|")
				continue
			}
			b.WriteString("W" + strings.Repeat("m", c%7) + "|")
		}
		b.WriteString("\n")
	}
	b.WriteString("| " + strings.Repeat("Ｗ", 5000) + " |\n")
	start := time.Now()
	pdf, err = MarkdownToPDF(ctx, []byte(b.String()), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(pdf, []byte("%PDF-")) || time.Since(start) > 15*time.Second {
		t.Fatalf("400 columns: %v", time.Since(start))
	}
}

// TestWrapNarrow: wrap places at least one character per line, however
// narrow the width, and keeps every character.
func TestWrapNarrow(t *testing.T) {
	for _, w := range []float64{-5, 0, 0.1, 1, 3, 50} {
		lines := wrapWith(t, "m W ÆØ word averyveryverylongword", w)
		joined := strings.Join(lines, "")
		if strings.ReplaceAll(joined, " ", "") != "mWÆØwordaveryveryverylongword" {
			t.Fatalf("width %v: lines %q lose text", w, lines)
		}
		for _, l := range lines {
			if l == "" {
				t.Fatalf("width %v: empty line in %q", w, lines)
			}
		}
	}
	// Linear: a 200k-rune word at a one-glyph width.
	start := time.Now()
	lines := wrapWith(t, strings.Repeat("x", 200_000), 0.5)
	if len(lines) != 200_000 || time.Since(start) > 10*time.Second {
		t.Fatalf("%d lines in %v", len(lines), time.Since(start))
	}
}

func wrapWith(t *testing.T, text string, w float64) []string {
	t.Helper()
	d := newTestDoc()
	return d.wrap(text, w)
}

// TestBudgets: a document over its page budget, a deadline and a caller
// that left each end the conversion with a coded error, promptly.
func TestBudgets(t *testing.T) {
	long := []byte(strings.Repeat("A paragraph of text that fills a line or two of the page when it is laid out.\n\n", 3000))
	_, err := MarkdownToPDF(context.Background(), long, Options{MaxPages: 5})
	if codeOf(err) != apierr.TooLarge || !strings.Contains(err.Error(), "more than 5 pages") {
		t.Fatalf("page budget: %v", err)
	}
	_, err = MarkdownToDOCX(context.Background(), long, Options{MaxBytes: 100_000})
	if codeOf(err) != apierr.TooLarge {
		t.Fatalf("docx byte budget: %v", err)
	}
	// One huge code block and one huge paragraph are checked while laid out.
	code := []byte("```\n" + strings.Repeat("line of code\n", 100_000) + "```\n")
	if _, err := MarkdownToPDF(context.Background(), code, Options{MaxPages: 10}); codeOf(err) != apierr.TooLarge {
		t.Fatalf("code block budget: %v", err)
	}
	para := []byte(strings.Repeat("word ", 400_000))
	if _, err := MarkdownToPDF(context.Background(), para, Options{MaxPages: 10}); codeOf(err) != apierr.TooLarge {
		t.Fatalf("paragraph budget: %v", err)
	}

	// Five times the long document (~1 s of work here) under a 20 ms
	// deadline: the deadline passes while it is laid out, however fast the
	// machine.
	longer := bytes.Repeat(long, 5)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = MarkdownToPDF(ctx, longer, Options{})
	if codeOf(err) != apierr.Timeout || time.Since(start) > 3*time.Second {
		t.Fatalf("deadline: %v after %v", err, time.Since(start))
	}
	gone, leave := context.WithCancel(context.Background())
	leave()
	if _, err := MarkdownToDOCX(gone, long, Options{}); codeOf(err) != apierr.Timeout || !strings.Contains(err.Error(), "cancelled") {
		t.Fatalf("caller gone: %v", err)
	}
	if _, err := MarkdownToPDF(context.Background(), make([]byte, DefaultMaxInput+1), Options{}); codeOf(err) != apierr.TooLarge {
		t.Fatalf("input budget: %v", err)
	}
}

// TestNesting: nesting past MaxNesting is refused before the parser runs
// (its work grows with the square of the depth); real nesting converts.
func TestNesting(t *testing.T) {
	for name, md := range map[string]string{
		"quotes":   strings.Repeat(">", 200_000) + " x\n",
		"mixed":    strings.Repeat("> - ", 50_000) + "x\n",
		"indented": "- a\n" + strings.Repeat(" ", 400) + "- b\n",
		"ordered":  strings.Repeat("1. ", 100) + "x\n",
	} {
		start := time.Now()
		_, err := MarkdownToPDF(context.Background(), []byte(md), Options{})
		if codeOf(err) != apierr.UnsupportedFormat || !strings.Contains(err.Error(), "levels deep") || time.Since(start) > 2*time.Second {
			t.Fatalf("%s: %v after %v", name, err, time.Since(start))
		}
		if _, err := MarkdownToDOCX(context.Background(), []byte(md), Options{}); codeOf(err) != apierr.UnsupportedFormat {
			t.Fatalf("%s docx: %v", name, err)
		}
	}
	var b strings.Builder
	for i := 0; i < 12; i++ {
		b.WriteString(strings.Repeat("  ", i) + "- level " + string(rune('a'+i)) + "\n")
	}
	b.WriteString("\n" + strings.Repeat("> ", 12) + "deep quote\n")
	pdf, err := MarkdownToPDF(context.Background(), []byte(b.String()), Options{})
	if err != nil {
		t.Fatal(err)
	}
	text := pdftotext(t, pdf)
	if !strings.Contains(text, "level l") || !strings.Contains(text, "deep quote") {
		t.Fatalf("nested text lost:\n%s", text)
	}
	// Emphasis nests without a line-level marker: the tree is flattened
	// below maxTreeDepth instead of recursing 100k levels.
	deep := []byte(strings.Repeat("*", 100_000) + "a" + strings.Repeat("*", 100_000) + "\n\n" + strings.Repeat("![", 5000) + "x" + strings.Repeat("](y)", 5000))
	if _, err := MarkdownToDOCX(context.Background(), deep, Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := MarkdownToPDF(context.Background(), deep, Options{}); err != nil {
		t.Fatal(err)
	}
}

// seeds are real markdown documents for the fuzz targets: the fixtures
// and the project's own README.
func seeds(f *testing.F) [][]byte {
	f.Helper()
	var out [][]byte
	paths, _ := filepath.Glob("testdata/*.md")
	paths = append(paths, "../../README.md")
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		out = append(out, b)
	}
	return append(out, []byte(sample), nil, []byte("|a|\n|-|\n|"+strings.Repeat("b", 300)+"|"))
}

// fuzzConvert checks one conversion: within its deadline it gives a
// document or a coded error that is not INTERNAL.
func fuzzConvert(t *testing.T, md []byte, conv func(context.Context, []byte, Options) ([]byte, error), magic string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	out, err := conv(ctx, md, Options{MaxPages: 200, MaxBytes: 8 << 20, coreFonts: testing.Short()})
	if time.Since(start) > 15*time.Second {
		t.Fatalf("conversion took %v past its 5 s deadline", time.Since(start))
	}
	if err != nil {
		switch codeOf(err) {
		case apierr.TooLarge, apierr.Timeout, apierr.UnsupportedFormat:
			return
		}
		t.Fatalf("%v", err)
	}
	if !bytes.HasPrefix(out, []byte(magic)) {
		t.Fatalf("output starts %q", out[:min(len(out), 8)])
	}
}

func FuzzMarkdownToPDF(f *testing.F) {
	for _, s := range seeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, md []byte) { fuzzConvert(t, md, MarkdownToPDF, "%PDF-") })
}

func FuzzMarkdownToDOCX(f *testing.F) {
	for _, s := range seeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, md []byte) { fuzzConvert(t, md, MarkdownToDOCX, "PK\x03\x04") })
}

func newTestDoc() *pdfDoc {
	return newPDFDoc(&budget{ctx: context.Background(), opt: Options{}.withDefaults()}, "", false)
}
