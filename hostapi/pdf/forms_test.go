package pdf

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/pdfcpu/pdfcpu/pkg/api"
	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/model"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

func TestGetFormFields(t *testing.T) {
	e := newTestEnv(t)
	e.upload("form.pdf", withButtonAndSignature(t, formPDF(t)))
	got := e.mustTool("pdf_get_form_fields", map[string]any{"id": "form.pdf"})
	want := map[string]any{"fields": []any{
		map[string]any{"name": "name", "type": "text", "value": ""},
		map[string]any{"name": "city", "type": "text", "value": "Paris"},
		map[string]any{"name": "notes", "type": "text", "value": ""},
		map[string]any{"name": "agree", "type": "checkbox", "value": false},
		map[string]any{"name": "gender", "type": "radio", "value": nil, "options": []any{"female", "male"}},
		map[string]any{"name": "color", "type": "dropdown", "value": "red", "options": []any{"red", "green", "blue"}},
		map[string]any{"name": "fruit", "type": "listbox", "value": []any{"apple"}, "options": []any{"apple", "pear", "plum"}},
		map[string]any{"name": "submit", "type": "button", "value": nil},
		map[string]any{"name": "signature", "type": "signature", "value": false},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("fields = %v\nwant %v", got, want)
	}
	e.upload("plain.pdf", textPDF(t, [][]string{{"no form"}}))
	if got := e.mustTool("pdf_get_form_fields", map[string]any{"id": "plain.pdf"}); !reflect.DeepEqual(got, map[string]any{"fields": []any{}}) {
		t.Fatalf("plain fields = %v", got)
	}
}

func TestFillForm(t *testing.T) {
	e := newTestEnv(t)
	orig := e.upload("form.pdf", formPDF(t))
	values := map[string]any{
		"name":   "Jane Doe",
		"city":   "Zürich",
		"notes":  "First line\nsecond line",
		"agree":  true,
		"gender": "male",
		"color":  "blue",
		"fruit":  []any{"plum"},
		"phone":  "+41 44 000",
	}
	res := e.mustTool("pdf_fill_form", map[string]any{"id": "form.pdf", "fields": values})
	want := map[string]any{
		"filled":    []any{"agree", "city", "color", "fruit", "gender", "name", "notes"},
		"not_found": []any{"phone"},
	}
	if !reflect.DeepEqual(res, want) {
		t.Fatalf("fill = %v\nwant %v", res, want)
	}
	if !e.file("form.pdf").HasBackup {
		t.Fatal("no backup after fillForm")
	}

	// Read back by this package …
	fields := map[string]any{}
	for _, f := range e.mustTool("pdf_get_form_fields", map[string]any{"id": "form.pdf"})["fields"].([]any) {
		m := f.(map[string]any)
		fields[m["name"].(string)] = m["value"]
	}
	wantValues := map[string]any{"name": "Jane Doe", "city": "Zürich", "notes": "First line\nsecond line", "agree": true,
		"gender": "male", "color": "blue", "fruit": []any{"plum"}}
	if !reflect.DeepEqual(fields, wantValues) {
		t.Fatalf("read back = %v\nwant %v", fields, wantValues)
	}
	// … by pdfcpu's own form reader …
	body := e.body("form.pdf")
	ff, err := api.FormFields(bytes.NewReader(body), model.NewDefaultConfiguration())
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]string{}
	for _, f := range ff {
		byName[f.Name] = f.V
	}
	for name, v := range map[string]string{"name": "Jane Doe", "city": "Zürich", "gender": "male", "color": "blue", "fruit": "plum"} {
		if byName[name] != v {
			t.Errorf("pdfcpu reads %s = %q, want %q", name, byName[name], v)
		}
	}
	// … and as a viewer shows it: poppler draws the appearance streams.
	shown := popplerText(t, body)
	for _, s := range []string{"Jane Doe", "Zürich", "First line", "second line", "blue"} {
		if !strings.Contains(shown, s) {
			t.Errorf("poppler does not show %q:\n%s", s, shown)
		}
	}

	// Unchecking and clearing work too; revert goes back to the blank form.
	e.mustTool("pdf_fill_form", map[string]any{"id": "form.pdf", "fields": map[string]any{"agree": false, "gender": nil, "name": ""}})
	for _, f := range e.mustTool("pdf_get_form_fields", map[string]any{"id": "form.pdf"})["fields"].([]any) {
		m := f.(map[string]any)
		switch m["name"] {
		case "agree":
			if m["value"] != false {
				t.Errorf("agree = %v", m["value"])
			}
		case "gender":
			if m["value"] != nil {
				t.Errorf("gender = %v", m["value"])
			}
		case "name":
			if m["value"] != "" {
				t.Errorf("name = %v", m["value"])
			}
		}
	}
	if back, err := e.env.WS.Revert(e.ctx, "form.pdf"); err != nil || back.SHA256 != orig.SHA256 {
		t.Fatalf("revert: %v", err)
	}
}

func TestFillFormNonLatinValue(t *testing.T) {
	if !unicodeFontInstalled() {
		t.Skip("no Unicode TrueType font installed (fonts-dejavu-core); non-Latin values cannot be drawn")
	}
	e := newTestEnv(t)
	e.upload("form.pdf", formPDF(t))
	e.mustTool("pdf_fill_form", map[string]any{"id": "form.pdf", "fields": map[string]any{"name": "Nguyễn Thị Minh Khai", "city": "Москва"}})
	shown := popplerText(t, e.body("form.pdf"))
	for _, s := range []string{"Nguyễn Thị Minh Khai", "Москва"} {
		if !strings.Contains(shown, s) {
			t.Errorf("poppler does not show %q:\n%s", s, shown)
		}
	}
}

func TestFillFormRejectsBadValues(t *testing.T) {
	e := newTestEnv(t)
	f := e.upload("form.pdf", withButtonAndSignature(t, formPDF(t)))
	for _, fields := range []map[string]any{
		{"name": "ok", "gender": "other"},         // not an option; nothing is written
		{"color": "purple"},                       // dropdown without free text
		{"fruit": []any{"apple", "pear"}},         // single-select list box
		{"agree": "maybe"},                        // checkbox
		{"agree": 1},                              // checkbox
		{"name": map[string]any{"a": 1}},          // schema: objects are not values
		{"submit": "press"},                       // push button
		{"signature": "Jane"},                     // signature
		{},                                        // nothing to fill
		{"name": []any{map[string]any{}}, "x": 1}, // list of objects
	} {
		_, err := e.tool("pdf_fill_form", map[string]any{"id": "form.pdf", "fields": fields})
		wantCode(t, err, apierr.ValidationFailed)
	}
	e.unchanged("form.pdf", f)
	if e.file("form.pdf").HasBackup {
		t.Fatal("a refused fill must not touch the file")
	}
}

func TestFillFormWithoutForm(t *testing.T) {
	e := newTestEnv(t)
	f := e.upload("plain.pdf", textPDF(t, [][]string{{"no form"}}))
	res := e.mustTool("pdf_fill_form", map[string]any{"id": "plain.pdf", "fields": map[string]any{"b": "x", "a": "y"}})
	if !reflect.DeepEqual(res, map[string]any{"filled": []any{}, "not_found": []any{"a", "b"}}) {
		t.Fatalf("fill = %v", res)
	}
	// Nothing matched, so nothing was rewritten.
	e.unchanged("plain.pdf", f)
	if e.file("plain.pdf").HasBackup {
		t.Fatal("a fill that matched nothing rewrote the file")
	}
}
