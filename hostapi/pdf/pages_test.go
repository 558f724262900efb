package pdf

import (
	"reflect"
	"testing"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

func sizesOf(t *testing.T, e *testEnv, ref string) [][2]float64 {
	t.Helper()
	var out [][2]float64
	for _, p := range e.mustTool("pdf_info", map[string]any{"id": ref})["page_sizes"].([]any) {
		m := p.(map[string]any)
		out = append(out, [2]float64{m["width"].(float64), m["height"].(float64)})
	}
	return out
}

func TestAddPage(t *testing.T) {
	e := newTestEnv(t)
	orig := e.upload("doc.pdf", textPDF(t, [][]string{{"one"}, {"two"}}))

	// Default: at the end, sized like its neighbour.
	if r := e.mustTool("pdf_add_page", map[string]any{"id": "doc.pdf"}); r["pages"] != 3.0 {
		t.Fatalf("pages = %v", r["pages"])
	}
	if !e.file("doc.pdf").HasBackup {
		t.Fatal("no backup after addPage")
	}
	e.mustTool("pdf_add_page", map[string]any{"id": "doc.pdf", "size": "Letter", "orientation": "landscape"})
	e.mustTool("pdf_add_page", map[string]any{"id": "doc.pdf", "size": []any{300, 400}, "orientation": "landscape", "after": 0})
	r := e.mustTool("pdf_add_page", map[string]any{"id": "doc.pdf", "size": "A4", "after": 2})
	if r["pages"] != 6.0 {
		t.Fatalf("pages = %v", r["pages"])
	}
	want := [][2]float64{{400, 300}, {595, 842}, {595.28, 841.89}, {595, 842}, {595, 842}, {792, 612}}
	if got := sizesOf(t, e, "doc.pdf"); !reflect.DeepEqual(got, want) {
		t.Fatalf("sizes = %v\nwant %v", got, want)
	}
	got := pageTexts(t, e.mustTool("pdf_extract_text", map[string]any{"id": "doc.pdf"}))
	if want := []string{"", "one", "", "two", "", ""}; !reflect.DeepEqual(got, want) {
		t.Fatalf("texts = %q, want %q", got, want)
	}

	// A page inherits no rotation from a rotated document.
	e.upload("rot.pdf", rotated(t, textPDF(t, [][]string{{"r"}}), 90, "1"))
	e.mustTool("pdf_add_page", map[string]any{"id": "rot.pdf", "size": "A4"})
	if got := sizesOf(t, e, "rot.pdf"); !reflect.DeepEqual(got, [][2]float64{{842, 595}, {595.28, 841.89}}) {
		t.Fatalf("sizes = %v", got)
	}

	before := e.file("doc.pdf")
	_, err := e.tool("pdf_add_page", map[string]any{"id": "doc.pdf", "after": 7})
	wantCode(t, err, apierr.ValidationFailed)
	_, err = e.tool("pdf_add_page", map[string]any{"id": "doc.pdf", "size": "B7"})
	wantCode(t, err, apierr.ValidationFailed)
	_, err = e.tool("pdf_add_page", map[string]any{"id": "doc.pdf", "size": []any{0, 100}})
	wantCode(t, err, apierr.ValidationFailed)
	_, err = e.tool("pdf_add_page", map[string]any{"id": "doc.pdf", "orientation": "sideways"})
	wantCode(t, err, apierr.ValidationFailed)
	e.unchanged("doc.pdf", before)

	// The backup is the state before the first edit (SPEC 2).
	back, err := e.env.WS.Revert(e.ctx, "doc.pdf")
	if err != nil {
		t.Fatal(err)
	}
	if back.SHA256 != orig.SHA256 {
		t.Fatal("revert did not restore the original")
	}
}

func TestDeletePage(t *testing.T) {
	e := newTestEnv(t)
	data := withProperties(t, textPDF(t, [][]string{{"one"}, {"two"}, {"three"}}), map[string]string{"Title": "Keep me"})
	e.upload("doc.pdf", data)
	if r := e.mustTool("pdf_delete_page", map[string]any{"id": "doc.pdf", "page": 2}); r["pages"] != 2.0 {
		t.Fatalf("pages = %v", r["pages"])
	}
	got := pageTexts(t, e.mustTool("pdf_extract_text", map[string]any{"id": "doc.pdf"}))
	if !reflect.DeepEqual(got, []string{"one", "three"}) {
		t.Fatalf("texts = %q", got)
	}
	if info := e.mustTool("pdf_info", map[string]any{"id": "doc.pdf"}); info["title"] != "Keep me" || info["pages"] != 2.0 {
		t.Fatalf("info = %v", info)
	}

	before := e.file("doc.pdf")
	_, err := e.tool("pdf_delete_page", map[string]any{"id": "doc.pdf", "page": 3})
	wantCode(t, err, apierr.ValidationFailed)
	_, err = e.tool("pdf_delete_page", map[string]any{"id": "doc.pdf", "page": 0})
	wantCode(t, err, apierr.ValidationFailed)
	e.unchanged("doc.pdf", before)

	e.mustTool("pdf_delete_page", map[string]any{"id": "doc.pdf", "page": 1})
	last := e.file("doc.pdf")
	_, err = e.tool("pdf_delete_page", map[string]any{"id": "doc.pdf", "page": 1})
	wantCode(t, err, apierr.ValidationFailed)
	e.unchanged("doc.pdf", last)
}

func TestDeletePageDropsItsFormFields(t *testing.T) {
	e := newTestEnv(t)
	e.upload("form.pdf", formPDF(t))
	e.mustTool("pdf_add_page", map[string]any{"id": "form.pdf"})
	// The fields stay while their page does.
	e.mustTool("pdf_delete_page", map[string]any{"id": "form.pdf", "page": 2})
	if n := len(e.mustTool("pdf_get_form_fields", map[string]any{"id": "form.pdf"})["fields"].([]any)); n != 7 {
		t.Fatalf("fields after deleting the blank page = %d, want 7", n)
	}
	e.mustTool("pdf_add_page", map[string]any{"id": "form.pdf"})
	e.mustTool("pdf_delete_page", map[string]any{"id": "form.pdf", "page": 1})
	if n := len(e.mustTool("pdf_get_form_fields", map[string]any{"id": "form.pdf"})["fields"].([]any)); n != 0 {
		t.Fatalf("fields after deleting their page = %d, want 0", n)
	}
	if info := e.mustTool("pdf_info", map[string]any{"id": "form.pdf"}); info["has_form"] != false || info["pages"] != 1.0 {
		t.Fatalf("info = %v", info)
	}
}
