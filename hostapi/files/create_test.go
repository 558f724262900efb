package files_test

// Format-aware create, tested with the real spreadsheet and PDF areas
// registered: the blank documents they make must be files their own
// operations (and excelize, pdfcpu, pdfium behind them) work on.

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/files"
	"github.com/metaclaw/metaclaw/hostapi/hosttest"
	"github.com/metaclaw/metaclaw/hostapi/pdf"
	"github.com/metaclaw/metaclaw/hostapi/spreadsheet"
)

func callJSON(t *testing.T, h *hostapi.Host, env *hostapi.Env, tool, raw string) (string, error) {
	t.Helper()
	v, err := h.Registry.CallToolJSON(context.Background(), env, tool, []byte(raw))
	if err != nil {
		return "", err
	}
	b, _ := json.Marshal(v)
	return string(b), nil
}

func mustJSON(t *testing.T, h *hostapi.Host, env *hostapi.Env, tool, raw string) string {
	t.Helper()
	out, err := callJSON(t, h, env, tool, raw)
	if err != nil {
		t.Fatalf("%s %s: %v", tool, raw, err)
	}
	return out
}

func TestCreateMakesDocumentsOfTheNamedFormat(t *testing.T) {
	h := hosttest.New(t, hostapi.Config{}, files.Register, spreadsheet.Register, pdf.Register)
	env := h.Env("default", "s")
	if h.BlankFor("a.xlsx") == nil || h.BlankFor("a.pdf") == nil {
		t.Fatal("the spreadsheet and PDF areas register blank makers for .xlsx and .pdf")
	}

	// A workbook with one sheet, Sheet1, that the spreadsheet tools fill.
	if got := mustJSON(t, h, env, "file_create", `{"name": "out/report.xlsx"}`); !strings.Contains(got, `"name":"out/report.xlsx"`) {
		t.Fatalf("create xlsx: %s", got)
	}
	if got := mustJSON(t, h, env, "file_info", `{"id": "out/report.xlsx"}`); !strings.Contains(got, `"mime_type":"application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"`) {
		t.Fatalf("xlsx type: %s", got)
	}
	if got := mustJSON(t, h, env, "spreadsheet_list_sheets", `{"id": "out/report.xlsx"}`); !strings.Contains(got, `"name":"Sheet1"`) || strings.Count(got, `"name"`) != 1 {
		t.Fatalf("sheets of a new workbook: %s", got)
	}
	mustJSON(t, h, env, "spreadsheet_write_range", `{"id": "out/report.xlsx", "sheet": "Sheet1", "start_cell": "A1", "data": [["Name", "Qty"], ["Ana", 3], ["Bo", 4.5]]}`)
	if got := mustJSON(t, h, env, "spreadsheet_read_range", `{"id": "out/report.xlsx", "sheet": 1, "range": "A1:B3"}`); got != `[["Name","Qty"],["Ana",3],["Bo",4.5]]` {
		t.Fatalf("read back: %s", got)
	}
	// The JS door (the op by its JS name) makes the same thing.
	op := h.Registry.ByName("files.create")
	if _, err := h.Registry.Invoke(context.Background(), env, op, map[string]any{"name": "Upper.XLSX"}); err != nil {
		t.Fatal(err)
	}
	if got := mustJSON(t, h, env, "spreadsheet_list_sheets", `{"id": "Upper.XLSX"}`); !strings.Contains(got, `"name":"Sheet1"`) {
		t.Fatalf("upper-case extension: %s", got)
	}

	// A one-page A4 PDF that the PDF tools draw on and read.
	mustJSON(t, h, env, "file_create", `{"name": "memo.pdf"}`)
	info := mustJSON(t, h, env, "pdf_info", `{"id": "memo.pdf"}`)
	var pi struct {
		Pages     int `json:"pages"`
		PageSizes []struct {
			Width, Height float64
		} `json:"page_sizes"`
	}
	json.Unmarshal([]byte(info), &pi)
	if pi.Pages != 1 || len(pi.PageSizes) != 1 || int(pi.PageSizes[0].Width+0.5) != 595 || int(pi.PageSizes[0].Height+0.5) != 842 {
		t.Fatalf("a new PDF is one A4 page: %s", info)
	}
	mustJSON(t, h, env, "pdf_add_text", `{"id": "memo.pdf", "page": 1, "text": "Quarterly memo", "x": 72, "y": 72}`)
	if got := mustJSON(t, h, env, "pdf_extract_text", `{"id": "memo.pdf"}`); !strings.Contains(got, "Quarterly memo") {
		t.Fatalf("text drawn on the new PDF: %s", got)
	}

	// Other names are text files, empty or with content, as before.
	mustJSON(t, h, env, "file_create", `{"name": "empty.txt"}`)
	mustJSON(t, h, env, "file_create", `{"name": "n.md", "content": "# hi\n"}`)
	if got := mustJSON(t, h, env, "file_info", `{"id": "empty.txt"}`); !strings.Contains(got, `"size":0`) {
		t.Fatalf("empty text: %s", got)
	}
	if got := mustJSON(t, h, env, "file_read_text", `{"id": "n.md"}`); got != `{"content":"# hi\n","total_lines":1}` {
		t.Fatalf("text content: %s", got)
	}

	// Text content for a workbook or a PDF is refused with the way to fill
	// one, and nothing is created; so is writeText of a new such name.
	for _, c := range []struct{ tool, raw, hint string }{
		{"file_create", `{"name": "data.xlsx", "content": "a,b\n1,2\n"}`, "spreadsheet_write_range"},
		{"file_create", `{"name": "letter.pdf", "content": "Dear Ana"}`, "pdf_add_text"},
		{"file_write_text", `{"id": "data.xlsx", "content": "a,b"}`, "spreadsheet_write_range"},
	} {
		_, err := callJSON(t, h, env, c.tool, c.raw)
		want := apierr.ValidationFailed
		if c.tool == "file_write_text" {
			want = apierr.UnsupportedFormat
		}
		if apierr.CodeOf(err) != want || !strings.Contains(err.Error(), c.hint) {
			t.Fatalf("%s %s: %v", c.tool, c.raw, err)
		}
	}
	if got := mustJSON(t, h, env, "file_list", `{"pattern": "{data.xlsx,letter.pdf}"}`); got != `{"files":[]}` {
		t.Fatalf("refused creates left files: %s", got)
	}
	// Overwriting a workbook with a blank one empties it.
	mustJSON(t, h, env, "file_create", `{"name": "out/report.xlsx", "overwrite": true}`)
	if got := mustJSON(t, h, env, "spreadsheet_read_range", `{"id": "out/report.xlsx", "sheet": "Sheet1", "range": "A1:B3"}`); got != `[]` {
		t.Fatalf("an overwritten workbook is blank: %s", got)
	}
}

// files.create's ttl: seconds, shown by file_info as expires_on, and the
// file goes with a file:deleted event when it runs out.
func TestCreateWithTTL(t *testing.T) {
	h := hosttest.New(t, hostapi.Config{}, files.Register)
	env := h.Env("default", "s")
	events, cancel := h.Store.Bus().Subscribe("default", 0)
	defer cancel()

	for _, bad := range []string{`0`, `-5`, `"1h"`, `1.5`, `31622401`, `true`} {
		_, err := callJSON(t, h, env, "file_create", `{"name": "bad.txt", "content": "x", "ttl": `+bad+`}`)
		if apierr.CodeOf(err) != apierr.ValidationFailed || !strings.Contains(err.Error(), `"ttl"`) {
			t.Fatalf("ttl %s: %v", bad, err)
		}
	}
	if got := mustJSON(t, h, env, "file_list", `{}`); got != `{"files":[]}` {
		t.Fatalf("a refused ttl created a file: %s", got)
	}

	mustJSON(t, h, env, "file_create", `{"name": "keep.txt", "content": "k"}`)
	if got := mustJSON(t, h, env, "file_info", `{"id": "keep.txt"}`); strings.Contains(got, "expires_on") {
		t.Fatalf("a file without ttl shows an expiry: %s", got)
	}
	before := time.Now()
	mustJSON(t, h, env, "file_create", `{"name": "tmp/scratch.txt", "content": "x", "ttl": 1}`)
	var info struct {
		ID        string    `json:"id"`
		ExpiresOn time.Time `json:"expires_on"`
	}
	if err := json.Unmarshal([]byte(mustJSON(t, h, env, "file_info", `{"id": "tmp/scratch.txt"}`)), &info); err != nil {
		t.Fatal(err)
	}
	if d := info.ExpiresOn.Sub(before); d < time.Second || d > 30*time.Second {
		t.Fatalf("expires_on %v is %v after the call, want about 1 s", info.ExpiresOn, d)
	}
	// A long ttl on an overwrite: the file gets the new expiry.
	mustJSON(t, h, env, "file_create", `{"name": "keep.txt", "content": "k2", "overwrite": true, "ttl": 31622400}`)
	var kept struct {
		ExpiresOn time.Time `json:"expires_on"`
	}
	json.Unmarshal([]byte(mustJSON(t, h, env, "file_info", `{"id": "keep.txt"}`)), &kept)
	if d := time.Until(kept.ExpiresOn); d < 365*24*time.Hour || d > 366*24*time.Hour {
		t.Fatalf("overwrite with a ttl of a year expires in %v", d)
	}
	for {
		select {
		case e := <-events:
			if e.Type != "file:deleted" || e.Data["id"] != info.ID {
				continue
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the expired file was not deleted")
		}
		break
	}
	if _, err := callJSON(t, h, env, "file_info", `{"id": "tmp/scratch.txt"}`); apierr.CodeOf(err) != apierr.NotFound {
		t.Fatalf("expired file: %v", err)
	}
	if got := mustJSON(t, h, env, "file_list", `{}`); !strings.Contains(got, `"name":"keep.txt"`) || strings.Contains(got, "scratch") {
		t.Fatalf("list after expiry: %s", got)
	}
}
