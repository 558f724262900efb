package pdf

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/store"
)

// blankPDF is what the host makes for files.create("memo.pdf").
func blankPDF(t testing.TB, e *testEnv) []byte {
	t.Helper()
	blank := e.h.BlankFor("Memo.PDF")
	if blank == nil {
		t.Fatal("no blank maker registered for .pdf")
	}
	var b bytes.Buffer
	if err := blank(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestBlankPDF: the document files.create makes for a .pdf name is one
// empty A4 page that every operation works on, and poppler agrees.
func TestBlankPDF(t *testing.T) {
	e := newTestEnv(t)
	data := blankPDF(t, e)
	if again := blankPDF(t, e); !bytes.Equal(data, again) {
		t.Fatal("the blank PDF differs from one call to the next")
	}
	if _, err := e.env.WS.Create(e.ctx, store.CreateOptions{Name: "memo.pdf", Source: store.SourceCreated}, bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	if mt := e.file("memo.pdf").MimeType; mt != "application/pdf" {
		t.Fatalf("mime type = %q", mt)
	}
	info := e.mustTool("pdf_info", map[string]any{"id": "memo.pdf"})
	want := map[string]any{"pages": 1.0, "page_sizes": []any{map[string]any{"page": 1.0, "width": 595.28, "height": 841.89}},
		"title": "", "author": "", "has_form": false, "encrypted": false}
	if !reflect.DeepEqual(info, want) {
		t.Fatalf("info = %v\nwant %v", info, want)
	}
	if got := pageTexts(t, e.mustTool("pdf_extract_text", map[string]any{"id": "memo.pdf"})); !reflect.DeepEqual(got, []string{""}) {
		t.Fatalf("blank page text = %q", got)
	}
	if ff := e.mustTool("pdf_get_form_fields", map[string]any{"id": "memo.pdf"}); !reflect.DeepEqual(ff, map[string]any{"fields": []any{}}) {
		t.Fatalf("fields = %v", ff)
	}
	_, err := e.tool("pdf_delete_page", map[string]any{"id": "memo.pdf", "page": 1})
	wantCode(t, err, apierr.ValidationFailed)

	// A report from nothing: text, an image, a second page.
	e.mustTool("pdf_add_text", map[string]any{"id": "memo.pdf", "page": 1, "text": "Memo to all staff\nThe office closes at 5 pm.", "x": 72, "y": 72, "size": 14})
	e.upload("dot.png", pngBytes(t, 20, 20))
	e.mustTool("pdf_add_image", map[string]any{"id": "memo.pdf", "page": 1, "image_id": "dot.png", "x": 500, "y": 40, "width": 40})
	if r := e.mustTool("pdf_add_page", map[string]any{"id": "memo.pdf"}); r["pages"] != 2.0 {
		t.Fatalf("add page = %v", r)
	}
	e.mustTool("pdf_add_text", map[string]any{"id": "memo.pdf", "page": 2, "text": "Page two", "x": 72, "y": 72})
	got := pageTexts(t, e.mustTool("pdf_extract_text", map[string]any{"id": "memo.pdf"}))
	if !reflect.DeepEqual(got, []string{"Memo to all staff\nThe office closes at 5 pm.", "Page two"}) {
		t.Fatalf("text = %q", got)
	}
	if r := e.mustTool("pdf_render_page", map[string]any{"id": "memo.pdf", "page": 2, "width": 600}); r["name"] != "memo_p2.png" || r["height"] != 849.0 {
		t.Fatalf("render = %v", r)
	}
	if r := e.mustTool("pdf_fill_form", map[string]any{"id": "memo.pdf", "fields": map[string]any{"x": "y"}}); !reflect.DeepEqual(r["not_found"], []any{"x"}) {
		t.Fatalf("fill = %v", r)
	}
	if r := e.mustTool("pdf_merge", map[string]any{"ids": []any{"memo.pdf", "memo.pdf"}, "output_name": "twice"}); r["pages"] != 4.0 || r["name"] != "twice.pdf" {
		t.Fatalf("merge = %v", r)
	}
	parts, err := e.tool("pdf_split_pages", map[string]any{"id": "memo.pdf", "ranges": []any{"2"}})
	if err != nil || parts.([]any)[0].(map[string]any)["name"] != "memo_p2.pdf" {
		t.Fatalf("split = %v, %v", parts, err)
	}

	// Independent readers agree: poppler's page size and text.
	if _, err := exec.LookPath("pdfinfo"); err != nil {
		t.Skip("pdfinfo (poppler-utils) is not installed")
	}
	p := filepath.Join(t.TempDir(), "blank.pdf")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("pdfinfo", p).CombinedOutput()
	if err != nil {
		t.Fatalf("pdfinfo: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "Page size:       595.28 x 841.89 pts (A4)") || !strings.Contains(string(out), "Pages:           1") {
		t.Fatalf("pdfinfo disagrees:\n%s", out)
	}
	if strings.Contains(string(out), "Syntax") {
		t.Fatalf("pdfinfo reports errors:\n%s", out)
	}
	if txt := popplerText(t, e.body("memo.pdf")); !strings.Contains(txt, "The office closes at 5 pm.") || !strings.Contains(txt, "Page two") {
		t.Fatalf("pdftotext = %q", txt)
	}
}
