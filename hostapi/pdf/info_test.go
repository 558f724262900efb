package pdf

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

func TestInfoPagesSizesAndMetadata(t *testing.T) {
	e := newTestEnv(t)
	data := textPDF(t, [][]string{{"one"}, {"two"}, {"three"}})
	data = rotated(t, data, 90, "2")
	data = withProperties(t, data, map[string]string{"Title": "Quarterly Report", "Author": "Ada Lovelace"})
	e.upload("r.pdf", data)

	got := e.mustTool("pdf_info", map[string]any{"id": "r.pdf"})
	want := map[string]any{
		"pages": 3.0,
		"page_sizes": []any{
			map[string]any{"page": 1.0, "width": 595.0, "height": 842.0},
			map[string]any{"page": 2.0, "width": 842.0, "height": 595.0}, // rotated: as displayed
			map[string]any{"page": 3.0, "width": 595.0, "height": 842.0},
		},
		"title": "Quarterly Report", "author": "Ada Lovelace", "has_form": false, "encrypted": false,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("info = %v\nwant %v", got, want)
	}

	// Scripts get the Go result, projected to camelCase by the bindings.
	v, err := e.js("files.pdf.info", map[string]any{"id": "r.pdf"})
	if err != nil {
		t.Fatal(err)
	}
	if r := v.(InfoResult); r.Pages != 3 || len(r.PageSizes) != 3 || r.Title != "Quarterly Report" {
		t.Fatalf("js info = %+v", r)
	}
}

func TestInfoFormAndEncryption(t *testing.T) {
	e := newTestEnv(t)
	e.upload("form.pdf", formPDF(t))
	if r := e.mustTool("pdf_info", map[string]any{"id": "form.pdf"}); r["has_form"] != true {
		t.Fatalf("form.pdf has_form = %v", r["has_form"])
	}
	plain := textPDF(t, [][]string{{"secret"}, {"more"}})
	e.upload("owner.pdf", encrypted(t, plain, "", "owner-secret"))
	r := e.mustTool("pdf_info", map[string]any{"id": "owner.pdf"})
	if r["encrypted"] != true || r["pages"] != 2.0 {
		t.Fatalf("owner-protected info = %v", r)
	}

	// A document that needs a password to open cannot be read at all.
	locked := e.upload("locked.pdf", encrypted(t, plain, "user-secret", "owner-secret"))
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"pdf_info", map[string]any{"id": "locked.pdf"}},
		{"pdf_extract_text", map[string]any{"id": "locked.pdf"}},
		{"pdf_get_form_fields", map[string]any{"id": "locked.pdf"}},
		{"pdf_add_text", map[string]any{"id": "locked.pdf", "page": 1, "text": "x", "x": 1, "y": 1}},
		{"pdf_delete_page", map[string]any{"id": "locked.pdf", "page": 1}},
		{"pdf_split_pages", map[string]any{"id": "locked.pdf", "ranges": []any{"1"}}},
		{"pdf_merge", map[string]any{"ids": []any{"locked.pdf"}, "output_name": "m.pdf"}},
	} {
		_, err := e.tool(c.tool, c.args)
		wantCode(t, err, apierr.UnsupportedFormat)
	}
	e.unchanged("locked.pdf", locked)
}

func TestInfoRepairsBrokenXref(t *testing.T) {
	e := newTestEnv(t)
	good := textPDF(t, [][]string{{"alpha"}, {"beta"}})
	i := bytes.LastIndex(good, []byte("startxref"))
	broken := append([]byte(nil), good...)
	copy(broken[i+len("startxref\n"):], "99999")
	f := e.upload("broken.pdf", broken)

	// pdfium rebuilds the cross-reference table: the file can be described
	// and read even though the editing library refuses it.
	r := e.mustTool("pdf_info", map[string]any{"id": "broken.pdf"})
	if r["pages"] != 2.0 {
		t.Fatalf("info of repaired file = %v", r)
	}
	text := e.mustTool("pdf_extract_text", map[string]any{"id": "broken.pdf"})
	if got := pageTexts(t, text); !reflect.DeepEqual(got, []string{"alpha", "beta"}) {
		t.Fatalf("text = %q", got)
	}
	_, err := e.tool("pdf_add_text", map[string]any{"id": "broken.pdf", "page": 1, "text": "x", "x": 1, "y": 1})
	wantCode(t, err, apierr.FileReadFailed)
	e.unchanged("broken.pdf", f)
}
