package spreadsheet

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	"github.com/metaclaw/metaclaw/hostapi"
)

// exampleEffects read back what each write example did, so that an
// example is checked by its effect and not only by its {ok: true}.
var exampleEffects = map[string][]struct {
	tool string
	args map[string]any
	want any
}{
	"spreadsheet_write_range/0": {{"spreadsheet_read_range", map[string]any{"sheet": "Sales", "range": "A8:F8"},
		[]any{[]any{"West", "Widget", 4, 2.5, "2024-03-05", 10}}}},
	"spreadsheet_write_range/1": {{"spreadsheet_read_range", map[string]any{"sheet": "Notes", "range": "A1:D2"},
		[]any{[]any{"Prices are in EUR", nil, "Rate", 1.08}, []any{"Source: order system export", nil, "Updated", nil}}}},
	"spreadsheet_write_cell/0": {{"spreadsheet_read_range", map[string]any{"sheet": "Sales", "range": "D2:F2"}, []any{[]any{2.75, "2024-01-15", 33}}},
		{"spreadsheet_read_cell", map[string]any{"sheet": "Sales", "cell": "F7"}, map[string]any{"value": 233}}},
	"spreadsheet_write_cell/1": {{"spreadsheet_read_cell", map[string]any{"sheet": "Sales", "cell": "G1"},
		map[string]any{"value": "Margin", "format": map[string]any{"bold": true}}}},
	"spreadsheet_write_cell/2": {{"spreadsheet_read_cell", map[string]any{"sheet": "Sales", "cell": "G2"},
		map[string]any{"value": 2.5, "formula": "F2/C2", "format": map[string]any{"number_format": "0.00"}}}},
	"spreadsheet_add_sheet/0": {{"spreadsheet_list_sheets", map[string]any{},
		[]any{map[string]any{"name": "Sales"}, map[string]any{"name": "Notes"}, map[string]any{"name": "Summary", "rows": 0}}}},
	"spreadsheet_delete_sheet/0": {{"spreadsheet_list_sheets", map[string]any{}, []any{map[string]any{"name": "Sales", "rows": 7}}}},
	"spreadsheet_insert_rows/0": {{"spreadsheet_read_range", map[string]any{"sheet": "Sales", "range": "A1:A4"},
		[]any{[]any{"Region"}, []any{nil}, []any{nil}, []any{"North"}}},
		{"spreadsheet_read_cell", map[string]any{"sheet": "Sales", "cell": "F9"}, map[string]any{"value": 230, "formula": "SUM(F4:F8)"}}},
	"spreadsheet_delete_rows/0": {{"spreadsheet_read_range", map[string]any{"sheet": "Sales", "range": "A5:F6"},
		[]any{[]any{"West", "Gizmo", 3, 20, "2024-02-10", 60}, []any{"Total", nil, 28, nil, nil, 160}}}},
	"spreadsheet_set_format/0": {{"spreadsheet_read_cell", map[string]any{"sheet": "Sales", "cell": "C1"},
		map[string]any{"value": "Units", "format": map[string]any{"bold": true, "fill_color": "#DDEBF7", "column_width": 14}}}},
	"spreadsheet_set_format/1": {{"spreadsheet_read_cell", map[string]any{"sheet": "Sales", "cell": "D3"},
		map[string]any{"value": 10, "format": map[string]any{"number_format": "#,##0.00"}}}},
}

// TestExamples runs every spreadsheet op's registry examples on their
// fixtures, each in a fresh workspace, checks that the result contains
// Want, and reads back what the writes did. The door test in cmd/metaclaw
// runs them through every door; this one keeps them right here.
func TestExamples(t *testing.T) {
	te := newEnv(t)
	n := 0
	for _, op := range te.h.Registry.Ops() {
		if len(op.Examples) == 0 {
			t.Errorf("%s has no example", op.Tool)
		}
		for i, ex := range op.Examples {
			n++
			key := fmt.Sprintf("%s/%d", op.Tool, i)
			t.Run(key, func(t *testing.T) {
				env := te.h.Env(fmt.Sprintf("example%d", n), "examples")
				for _, f := range ex.Files {
					data := readFixture(t, f)
					if len(data) > 200<<10 {
						t.Fatalf("fixture %s has %d bytes; keep example fixtures under 200 KB", f, len(data))
					}
					upload(t, env, f, data)
				}
				// The arguments travel as JSON, as every door but JS sends them.
				raw, err := json.Marshal(ex.Args)
				if err != nil {
					t.Fatal(err)
				}
				got, err := te.h.Registry.CallToolJSON(te.ctx, env, op.Tool, raw)
				if err != nil {
					t.Fatalf("%s %s: %v", op.Tool, raw, err)
				}
				if why := containsJSON(got, ex.Want); why != "" {
					t.Fatalf("%s %s: %s\ngot %v", op.Tool, raw, why, got)
				}
				// A read from a script gives the same answer (camelCase
				// there, snake_case here).
				if op.ReadOnly && op.ToolResult == nil {
					js, err := te.h.Registry.Invoke(te.ctx, env, op, jsArgs(t, raw))
					if err != nil {
						t.Fatalf("%s from JS: %v", op.Name, err)
					}
					if !reflect.DeepEqual(jsonValue(hostapi.Project(js, hostapi.SnakeCase)), jsonValue(got)) {
						t.Fatalf("%s: JS answers %v, the tool %v", op.Name, js, got)
					}
				}
				for _, eff := range exampleEffects[key] {
					args := map[string]any{"id": ex.Args["id"]}
					for k, v := range eff.args {
						args[k] = v
					}
					res, err := te.h.Registry.CallTool(te.ctx, env, eff.tool, args)
					if err != nil {
						t.Fatalf("after the example, %s %v: %v", eff.tool, args, err)
					}
					if why := containsJSON(res, eff.want); why != "" {
						t.Fatalf("after the example, %s %v: %s\ngot %v", eff.tool, args, why, res)
					}
				}
			})
		}
	}
}

// jsArgs decodes raw meta-tool arguments the way a script's would arrive.
func jsArgs(t *testing.T, raw []byte) map[string]any {
	t.Helper()
	args, err := hostapi.ParseArgs(raw)
	if err != nil {
		t.Fatal(err)
	}
	return args
}

// containsJSON reports why got does not contain want ("" when it does),
// both compared as JSON values: objects key by key as subsets, arrays
// element by element (got may be longer), anything else exactly.
func containsJSON(got, want any) string {
	return contained(jsonValue(got), jsonValue(want), "result")
}

func jsonValue(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		panic(err)
	}
	return out
}

func contained(got, want any, at string) string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return fmt.Sprintf("%s is %T, want an object", at, got)
		}
		for k, wv := range w {
			gv, ok := g[k]
			if !ok {
				return fmt.Sprintf("%s has no key %q", at, k)
			}
			if why := contained(gv, wv, at+"."+k); why != "" {
				return why
			}
		}
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) < len(w) {
			return fmt.Sprintf("%s is %v, want at least %d elements", at, got, len(w))
		}
		for i := range w {
			if why := contained(g[i], w[i], fmt.Sprintf("%s[%d]", at, i)); why != "" {
				return why
			}
		}
	default:
		if !reflect.DeepEqual(got, want) {
			return fmt.Sprintf("%s is %#v, want %#v", at, got, want)
		}
	}
	return ""
}
