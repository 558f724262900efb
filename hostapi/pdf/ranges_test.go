package pdf

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/hosttest"
)

// TestNumbersOutOfRange (issue 11): every numeric argument of every PDF
// operation has a minimum and a maximum, and a value beyond them — as a
// Go integer, a float, or a JSON literal past int64 — is VALIDATION_FAILED
// naming the argument, never wrapped into range. Nothing changes.
func TestNumbersOutOfRange(t *testing.T) {
	e := newTestEnv(t)
	for _, name := range []string{"report.pdf", "form.pdf", "logo.png"} {
		data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "examples", name))
		if err != nil {
			t.Fatal(err)
		}
		hosttest.Upload(t, e.env.WS, name, data, false)
	}
	before := snapshot(t, e)
	checked := 0
	for _, op := range e.h.Registry.Ops() {
		for _, p := range op.Params {
			sch, wrap := p.Schema, func(v any) any { return v }
			if sch["type"] == "array" {
				sch = sch["items"].(hostapi.Schema)
				wrap = func(v any) any { return []any{v} }
			}
			kind, _ := sch["type"].(string)
			if kind != "integer" && kind != "number" {
				continue
			}
			if _, ok := sch["minimum"]; !ok {
				if _, ok := sch["exclusiveMinimum"]; !ok {
					t.Errorf("%s.%s has no minimum", op.Tool, p.Name)
				}
			}
			if _, ok := sch["maximum"]; !ok {
				t.Errorf("%s.%s has no maximum", op.Tool, p.Name)
			}
			for _, v := range []any{int64(1) << 40, int64(math.MaxInt64), json.Number("1e19"), json.Number("18446744073709551617"),
				-(int64(1) << 40), 1e300, -1e300, json.Number("-9223372036854775809")} {
				args := map[string]any{}
				for k, x := range op.Examples[0].Args {
					args[k] = x
				}
				args[p.Name] = wrap(v)
				_, err := e.tool(op.Tool, args)
				if apierr.CodeOf(err) != apierr.ValidationFailed || !strings.Contains(err.Error(), p.Name) {
					t.Errorf("%s with %s = %v: %v, want VALIDATION_FAILED naming %s", op.Tool, p.Name, v, err, p.Name)
				}
				checked++
			}
			if kind == "integer" {
				args := map[string]any{}
				for k, x := range op.Examples[0].Args {
					args[k] = x
				}
				args[p.Name] = wrap(2.5)
				if _, err := e.tool(op.Tool, args); apierr.CodeOf(err) != apierr.ValidationFailed {
					t.Errorf("%s with %s = 2.5: %v", op.Tool, p.Name, err)
				}
			}
		}
	}
	for _, size := range []any{[]any{json.Number("1e19"), 500}, []any{500, -1}, []any{0, 500}, []any{1e300, 1}} {
		_, err := e.tool("pdf_add_page", map[string]any{"id": "report.pdf", "size": size})
		if apierr.CodeOf(err) != apierr.ValidationFailed || !strings.Contains(err.Error(), "size") {
			t.Errorf("pdf_add_page with size %v: %v", size, err)
		}
	}
	if checked == 0 {
		t.Fatal("no numeric argument was checked")
	}
	if after := snapshot(t, e); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("files changed:\n%v\n%v", before, after)
	}
}

// snapshot maps every file of the workspace to its sha256.
func snapshot(t *testing.T, e *testEnv) map[string]string {
	t.Helper()
	fs, err := e.env.WS.List(e.ctx, "**")
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, f := range fs {
		m[f.Name] = f.SHA256
	}
	return m
}
