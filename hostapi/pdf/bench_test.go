package pdf

import (
	"fmt"
	"testing"
)

// Targets (issue 4): merge 50 two-page PDFs ≤ 200 ms; extractText of 20
// pages ≤ 150 ms warm; fillForm of 3 fields ≤ 20 ms; first extractText
// after a restart with a warm compilation cache ≤ 300 ms. Each iteration is
// a whole meta-tool call: schema validation, store locks, reads and the
// atomic write included.

func BenchmarkMerge50(b *testing.B) {
	e := newTestEnv(b)
	ids := make([]any, 50)
	for i := range ids {
		name := fmt.Sprintf("in/%02d.pdf", i)
		e.upload(name, textPDF(b, [][]string{{fmt.Sprintf("file %d page 1", i)}, {fmt.Sprintf("file %d page 2", i)}}))
		ids[i] = name
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r := e.mustTool("pdf_merge", map[string]any{"ids": ids, "output_name": fmt.Sprintf("out/%d.pdf", i)})
		if r["pages"] != 100.0 {
			b.Fatalf("pages = %v", r["pages"])
		}
	}
}

func BenchmarkExtractText20Pages(b *testing.B) {
	e := newTestEnv(b)
	e.upload("long.pdf", textPDF(b, twentyPages()))
	e.mustTool("pdf_extract_text", map[string]any{"id": "long.pdf"}) // warm
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r := e.mustTool("pdf_extract_text", map[string]any{"id": "long.pdf"})
		if len(r["pages"].([]any)) != 20 {
			b.Fatal("wrong page count")
		}
	}
}

func BenchmarkFillForm3Fields(b *testing.B) {
	e := newTestEnv(b)
	e.upload("form.pdf", formPDF(b))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r := e.mustTool("pdf_fill_form", map[string]any{"id": "form.pdf", "fields": map[string]any{
			"name": fmt.Sprintf("Jane Doe %d", i), "city": "Zürich", "agree": i%2 == 0,
		}})
		if len(r["filled"].([]any)) != 3 {
			b.Fatalf("fill = %v", r)
		}
	}
}

func BenchmarkFirstExtractAfterRestart(b *testing.B) {
	dir := b.TempDir()
	data := textPDF(b, twentyPages()[:1])
	func() { // warm the compilation cache once, as an earlier process would
		e := newTestEnvAt(b, dir)
		e.upload("a.pdf", data)
		e.mustTool("pdf_extract_text", map[string]any{"id": "a.pdf"})
		e.h.Close()
	}()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		e := newTestEnvAt(b, dir)
		b.StartTimer()
		e.mustTool("pdf_extract_text", map[string]any{"id": "a.pdf"})
		b.StopTimer()
		e.h.Close()
		b.StartTimer()
	}
}
