package pdf

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/store"
)

func TestMerge(t *testing.T) {
	e := newTestEnv(t)
	e.upload("a.pdf", textPDF(t, [][]string{{"a1"}}))
	e.upload("dir/b.pdf", textPDF(t, [][]string{{"b1"}, {"b2"}}))
	e.upload("c.pdf", rotated(t, textPDF(t, [][]string{{"c1"}, {"c2"}, {"c3"}}), 90, "1"))
	e.upload("form.pdf", formPDF(t))

	res := e.mustTool("pdf_merge", map[string]any{"ids": []any{"c.pdf", "a.pdf", "/dir/b.pdf", "form.pdf"}, "output_name": "out/all"})
	if res["name"] != "out/all.pdf" || res["pages"] != 7.0 || res["id"] == "" {
		t.Fatalf("merge = %v", res)
	}
	f := e.file("out/all.pdf")
	if f.Source != store.SourceDerived || f.MimeType != "application/pdf" {
		t.Fatalf("merged file: source %q mime %q", f.Source, f.MimeType)
	}
	got := pageTexts(t, e.mustTool("pdf_extract_text", map[string]any{"id": "out/all.pdf"}))
	if want := []string{"c1", "c2", "c3", "a1", "b1", "b2"}; !reflect.DeepEqual(got[:6], want) {
		t.Fatalf("merged texts = %q, want %q…", got, want)
	}
	if got := sizesOf(t, e, "out/all.pdf"); got[0] != [2]float64{842, 595} || got[1] != [2]float64{595, 842} {
		t.Fatalf("rotation lost in merge: %v", got)
	}
	// The form survives the merge and can still be filled.
	if n := len(e.mustTool("pdf_get_form_fields", map[string]any{"id": "out/all.pdf"})["fields"].([]any)); n != 7 {
		t.Fatalf("merged form has %d fields, want 7", n)
	}
	e.mustTool("pdf_fill_form", map[string]any{"id": "out/all.pdf", "fields": map[string]any{"name": "Merged"}})

	// Owner-protected inputs merge into an unprotected output.
	e.upload("owner.pdf", encrypted(t, textPDF(t, [][]string{{"locked"}}), "", "owner"))
	res = e.mustTool("pdf_merge", map[string]any{"ids": []any{"owner.pdf", "a.pdf"}, "output_name": "o.pdf"})
	if res["pages"] != 2.0 {
		t.Fatalf("merge = %v", res)
	}
	if info := e.mustTool("pdf_info", map[string]any{"id": "o.pdf"}); info["encrypted"] != false {
		t.Fatalf("merged output is encrypted: %v", info)
	}

	// Scripts get {id, name, pages}.
	v, err := e.js("files.pdf.merge", map[string]any{"ids": []any{"a.pdf", "a.pdf"}, "output_name": "twice.pdf"})
	if err != nil {
		t.Fatal(err)
	}
	if r := v.(FileResult); r.Pages != 2 || r.Name != "twice.pdf" {
		t.Fatalf("js merge = %+v", r)
	}
}

func TestMergeBadInput(t *testing.T) {
	e := newTestEnv(t)
	e.upload("a.pdf", textPDF(t, [][]string{{"a"}}))
	e.upload("taken.pdf", textPDF(t, [][]string{{"t"}}))
	e.upload("pic.png", pngBytes(t, 4, 4))
	e.upload("bad.pdf", []byte("%PDF-1.7\ntruncated"))
	for _, c := range []struct {
		args map[string]any
		code apierr.Code
	}{
		{map[string]any{"ids": []any{"a.pdf", "missing.pdf"}, "output_name": "x.pdf"}, apierr.NotFound},
		{map[string]any{"ids": []any{"a.pdf", "pic.png"}, "output_name": "x.pdf"}, apierr.UnsupportedFormat},
		{map[string]any{"ids": []any{"a.pdf", "bad.pdf"}, "output_name": "x.pdf"}, apierr.FileReadFailed},
		{map[string]any{"ids": []any{"a.pdf"}, "output_name": "taken.pdf"}, apierr.AlreadyExists},
		{map[string]any{"ids": []any{}, "output_name": "x.pdf"}, apierr.ValidationFailed},
		{map[string]any{"ids": []any{"a.pdf"}}, apierr.ValidationFailed},
		{map[string]any{"ids": []any{"a.pdf"}, "output_name": "../escape.pdf"}, apierr.ValidationFailed},
	} {
		_, err := e.tool("pdf_merge", c.args)
		wantCode(t, err, c.code)
	}
	if _, err := e.env.WS.Resolve(e.ctx, "x.pdf"); !apierr.Is(err, apierr.NotFound) {
		t.Fatal("a failed merge left an output file")
	}
}

func TestSplitPages(t *testing.T) {
	e := newTestEnv(t)
	var pages [][]string
	for _, p := range []string{"p1", "p2", "p3", "p4", "p5", "p6"} {
		pages = append(pages, []string{p})
	}
	e.upload("reports/q3.pdf", textPDF(t, pages))

	res, err := e.tool("pdf_split_pages", map[string]any{"id": "reports/q3.pdf", "ranges": []any{"1-3", "4", "5-"}})
	if err != nil {
		t.Fatal(err)
	}
	list := res.([]any)
	wantNames := []string{"reports/q3_p1-3.pdf", "reports/q3_p4.pdf", "reports/q3_p5-6.pdf"}
	wantPages := []float64{3, 1, 2}
	wantTexts := [][]string{{"p1", "p2", "p3"}, {"p4"}, {"p5", "p6"}}
	if len(list) != 3 {
		t.Fatalf("split = %v", list)
	}
	for i, item := range list {
		m := item.(map[string]any)
		if m["name"] != wantNames[i] || m["pages"] != wantPages[i] || m["id"] == "" {
			t.Fatalf("part %d = %v", i, m)
		}
		if f := e.file(wantNames[i]); f.Source != store.SourceDerived {
			t.Fatalf("%s source = %q", wantNames[i], f.Source)
		}
		got := pageTexts(t, e.mustTool("pdf_extract_text", map[string]any{"id": wantNames[i]}))
		if !reflect.DeepEqual(got, wantTexts[i]) {
			t.Fatalf("%s texts = %q", wantNames[i], got)
		}
	}

	// Scripts get the array of {id, name, pages}; "-2" counts from page 1.
	v, err := e.js("files.pdf.splitPages", map[string]any{"id": "reports/q3.pdf", "ranges": []any{"-2", " 6 "}})
	if err != nil {
		t.Fatal(err)
	}
	parts := v.([]FileResult)
	if len(parts) != 2 || parts[0].Name != "reports/q3_p1-2.pdf" || parts[0].Pages != 2 || parts[1].Name != "reports/q3_p6.pdf" {
		t.Fatalf("js split = %+v", parts)
	}
}

func TestSplitPagesBadInput(t *testing.T) {
	e := newTestEnv(t)
	e.upload("doc.pdf", textPDF(t, [][]string{{"1"}, {"2"}, {"3"}}))
	e.upload("doc_p2.pdf", textPDF(t, [][]string{{"taken"}}))
	for _, c := range []struct {
		ranges []any
		code   apierr.Code
		msg    string
	}{
		{[]any{"3-1"}, apierr.ValidationFailed, "backwards"},
		{[]any{"0"}, apierr.ValidationFailed, "from 1"},
		{[]any{"4"}, apierr.ValidationFailed, "3 pages"},
		{[]any{"2-9"}, apierr.ValidationFailed, "3 pages"},
		{[]any{"-"}, apierr.ValidationFailed, "not valid"},
		{[]any{"one"}, apierr.ValidationFailed, ""},
		{[]any{}, apierr.ValidationFailed, ""},
		{[]any{"1", "1"}, apierr.ValidationFailed, "repeat"},
		{[]any{"1", "2"}, apierr.AlreadyExists, "doc_p2.pdf"},
	} {
		_, err := e.tool("pdf_split_pages", map[string]any{"id": "doc.pdf", "ranges": c.ranges})
		wantCode(t, err, c.code)
		if !strings.Contains(err.Error(), c.msg) {
			t.Errorf("ranges %v: error %q should mention %q", c.ranges, err, c.msg)
		}
	}
	// The clash was found before anything was written.
	if _, err := e.env.WS.Resolve(e.ctx, "doc_p1.pdf"); !apierr.Is(err, apierr.NotFound) {
		t.Fatal("a refused split left a part behind")
	}
}

func TestMergeRespectsFileLimit(t *testing.T) {
	e := newTestEnvWith(t, hostapi.Config{DataDir: t.TempDir(), MaxFileSize: 4000})
	var ids []any
	for i := 0; i < 20; i++ {
		name := fmt.Sprintf("%d.pdf", i)
		e.upload(name, textPDF(t, [][]string{{strings.Repeat("filler text ", 20)}}))
		ids = append(ids, name)
	}
	_, err := e.tool("pdf_merge", map[string]any{"ids": ids, "output_name": "all.pdf"})
	wantCode(t, err, apierr.TooLarge)
}
