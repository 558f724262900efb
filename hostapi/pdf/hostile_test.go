package pdf

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// TestHostileFiles feeds damaged files to every operation: each answers a
// coded error quickly and leaves the file as it was.
func TestHostileFiles(t *testing.T) {
	e := newTestEnv(t)
	good := textPDF(t, [][]string{{"one"}, {"two"}, {"three"}})
	files := map[string]struct {
		data []byte
		code apierr.Code
	}{
		"half.pdf":    {good[:len(good)/2], apierr.FileReadFailed},
		"tail.pdf":    {good[:len(good)-40], apierr.FileReadFailed},
		"header.pdf":  {[]byte("%PDF-1.7\n"), apierr.FileReadFailed},
		"garbage.pdf": {append([]byte("%PDF-1.4\n"), bytes.Repeat([]byte("<< /Type /Page >> garbage 0 R ] [ ("), 500)...), apierr.FileReadFailed},
		"png.pdf":     {pngBytes(t, 8, 8), apierr.UnsupportedFormat},
		"empty.pdf":   {nil, apierr.UnsupportedFormat},
	}
	e.upload("ok.pdf", good)
	// Start the text engine first: the time limit below is for the calls,
	// not for compiling pdfium on a cold cache.
	e.mustTool("pdf_extract_text", map[string]any{"id": "ok.pdf"})
	for name, c := range files {
		f := e.upload(name, c.data)
		for _, call := range []struct {
			tool string
			args map[string]any
		}{
			{"pdf_info", map[string]any{"id": name}},
			{"pdf_extract_text", map[string]any{"id": name}},
			{"pdf_get_form_fields", map[string]any{"id": name}},
			{"pdf_add_page", map[string]any{"id": name}},
			{"pdf_delete_page", map[string]any{"id": name, "page": 1}},
			{"pdf_add_text", map[string]any{"id": name, "page": 1, "text": "x", "x": 1, "y": 1}},
			{"pdf_fill_form", map[string]any{"id": name, "fields": map[string]any{"a": "b"}}},
			{"pdf_split_pages", map[string]any{"id": name, "ranges": []any{"1"}}},
			{"pdf_render_page", map[string]any{"id": name, "page": 1, "output": "render.png"}},
			{"pdf_merge", map[string]any{"ids": []any{"ok.pdf", name}, "output_name": "merged.pdf"}},
		} {
			start := time.Now()
			_, err := e.tool(call.tool, call.args)
			if apierr.CodeOf(err) != c.code {
				t.Errorf("%s on %s: got %v, want %s", call.tool, name, err, c.code)
			}
			if d := time.Since(start); d > 30*time.Second { // a hang, not slowness on a busy machine
				t.Errorf("%s on %s took %v", call.tool, name, d)
			}
		}
		e.unchanged(name, f)
		if e.file(name).HasBackup {
			t.Errorf("%s was rewritten", name)
		}
	}
}

func TestTenThousandPages(t *testing.T) {
	e := newTestEnv(t)
	e.upload("big.pdf", manyPagesPDF(10000))
	// A bound against hangs, not a speed target (benchmarks hold those):
	// the whole sequence takes ~3 s of CPU, far longer on a loaded machine.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	e.ctx = ctx
	info := e.mustTool("pdf_info", map[string]any{"id": "big.pdf"})
	if info["pages"] != 10000.0 || len(info["page_sizes"].([]any)) != 10000 {
		t.Fatalf("pages = %v", info["pages"])
	}
	r := e.mustTool("pdf_extract_text", map[string]any{"id": "big.pdf", "pages": []any{1, 10000}})
	if got := pageTexts(t, r); len(got) != 2 || got[1] != "Page text" {
		t.Fatalf("texts = %q", got)
	}
	e.mustTool("pdf_add_text", map[string]any{"id": "big.pdf", "page": 10000, "text": "last", "x": 72, "y": 100})
	if r := e.mustTool("pdf_delete_page", map[string]any{"id": "big.pdf", "page": 5000}); r["pages"] != 9999.0 {
		t.Fatalf("pages after delete = %v", r["pages"])
	}
	r = e.mustTool("pdf_extract_text", map[string]any{"id": "big.pdf", "pages": []any{9999}})
	if got := pageTexts(t, r); got[0] != "last\nPage text" && got[0] != "Page text\nlast" {
		t.Fatalf("last page = %q", got)
	}
}

func TestGuard(t *testing.T) {
	ctx := context.Background()
	_, err := guard(ctx, "x.pdf", func() (int, error) { panic("nil map") })
	wantCode(t, err, apierr.FileReadFailed)

	v, err := guard(ctx, "x.pdf", func() (int, error) { return 7, nil })
	if v != 7 || err != nil {
		t.Fatalf("guard = %v, %v", v, err)
	}
	boom := errors.New("boom")
	if _, err := guard(ctx, "x.pdf", func() (int, error) { return 0, boom }); !errors.Is(err, boom) {
		t.Fatalf("guard lost the error: %v", err)
	}

	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	release := make(chan struct{})
	defer close(release)
	start := time.Now()
	_, err = guard(short, "x.pdf", func() (int, error) { <-release; return 0, nil })
	wantCode(t, err, apierr.Timeout)
	if time.Since(start) > time.Second {
		t.Fatal("guard did not return at the deadline")
	}
}

func TestOpsDeclared(t *testing.T) {
	e := newTestEnv(t)
	want := map[string]string{
		"pdf_info":            "files.pdf.info",
		"pdf_extract_text":    "files.pdf.extractText",
		"pdf_add_page":        "files.pdf.addPage",
		"pdf_delete_page":     "files.pdf.deletePage",
		"pdf_add_text":        "files.pdf.addText",
		"pdf_add_image":       "files.pdf.addImage",
		"pdf_get_form_fields": "files.pdf.getFormFields",
		"pdf_fill_form":       "files.pdf.fillForm",
		"pdf_merge":           "files.pdf.merge",
		"pdf_split_pages":     "files.pdf.splitPages",
	}
	for tool, name := range want {
		op := e.h.Registry.ByTool(tool)
		if op == nil || op.Name != name || op.Doc == "" {
			t.Fatalf("%s: op = %+v", tool, op)
		}
	}
	// addText(ref, page, text, {x, y}, {font, size, color}).
	op := e.h.Registry.ByName("files.pdf.addText")
	var groups []string
	for _, p := range op.Params {
		groups = append(groups, p.Name+":"+p.Group)
	}
	wantGroups := []string{"id:", "page:", "text:", "x:position", "y:position", "font:style", "size:style", "color:style"}
	if len(groups) != len(wantGroups) {
		t.Fatalf("addText params = %v", groups)
	}
	for i := range groups {
		if groups[i] != wantGroups[i] {
			t.Fatalf("addText params = %v, want %v", groups, wantGroups)
		}
	}
	if !e.h.Registry.ByTool("pdf_info").ReadOnly || !e.h.Registry.ByTool("pdf_delete_page").Destructive {
		t.Fatal("annotations missing")
	}
	// Unknown arguments name the real ones.
	_, err := e.tool("pdf_info", map[string]any{"id": "a.pdf", "page": 1})
	wantCode(t, err, apierr.ValidationFailed)
}
