package ts

import (
	"context"
	"strings"
	"testing"

	"github.com/metaclaw/metaclaw/hostapi"
)

// registry declares two operations the way the format packages do (real
// declarations, real handlers), for the projections below.
func registry() *hostapi.Registry {
	reg := hostapi.NewRegistry()
	handler := func(context.Context, *hostapi.Call) (any, error) { return nil, nil }
	type lines struct {
		Content    string `json:"content"`
		TotalLines int    `json:"totalLines"`
		Encoding   string `json:"encoding,omitempty"`
	}
	reg.Add(hostapi.Op{
		Name: "files.readText", Tool: "file_read_text", Doc: "Read lines of a text file.",
		Params: []hostapi.Param{hostapi.Ref(""),
			{Name: "start_line", Schema: hostapi.Integer(1), Group: "options"},
			{Name: "end_line", Schema: hostapi.Integer(1), Group: "options"}},
		Result: lines{}, Handler: handler,
	}, hostapi.Op{
		Name: "files.spreadsheet.writeRange", Tool: "spreadsheet_write_range", Doc: "Write rows of cells into a sheet.",
		Params: []hostapi.Param{hostapi.Ref(""),
			{Name: "sheet", Schema: hostapi.Schema{"type": []any{"string", "integer"}}, Required: true},
			{Name: "start_cell", Schema: hostapi.String(), Required: true},
			{Name: "data", Schema: hostapi.ArrayOf(hostapi.Schema{"type": "array"}), Required: true},
			{Name: "fields", Schema: hostapi.Schema{"type": "object", "additionalProperties": hostapi.String()}}},
		Result: map[string]int{}, Handler: handler,
	})
	return reg
}

func TestDeclarations(t *testing.T) {
	d := Declarations(registry())
	for _, want := range []string{
		"interface Console {", "declare var console: Console;",
		"readText(id: string, options?: { startLine?: number; endLine?: number }): Promise<{ content: string; totalLines: number; encoding?: string }>;",
		"writeRange(id: string, sheet: string | number, startCell: string, data: Array<Array<any>>, fields?: Record<string, string>): Promise<Record<string, number>>;",
		"readonly spreadsheet: {",
	} {
		if !strings.Contains(d, want) {
			t.Errorf("declarations lack %q:\n%s", want, d)
		}
	}
	if strings.Contains(d, "declare const console") {
		t.Fatal("console declared as a const (clashes with lib.dom)")
	}
}

func TestExampleCall(t *testing.T) {
	reg := registry()
	read, write := reg.ByName("files.readText"), reg.ByName("files.spreadsheet.writeRange")
	for _, c := range []struct {
		op   *hostapi.Op
		args map[string]any
		want string
	}{
		{read, map[string]any{"id": "a.txt"}, `await files.readText("a.txt")`},
		{read, map[string]any{"id": "a.txt", "end_line": 3}, `await files.readText("a.txt", { endLine: 3 })`},
		{write, map[string]any{"id": "b.xlsx", "sheet": 1, "start_cell": "A1", "data": []any{[]any{"x", 2}}},
			`await files.spreadsheet.writeRange("b.xlsx", 1, "A1", [["x",2]])`},
	} {
		if got := ExampleCall(c.op, c.args); got != c.want {
			t.Errorf("got %s\nwant %s", got, c.want)
		}
	}
}

func TestSearchWords(t *testing.T) {
	if got := strings.Join(words("files.spreadsheet.writeRange spreadsheet_write_range Sheets"), " "); got != "file spreadsheet write range spreadsheet write range sheet" {
		t.Fatalf("words: %s", got)
	}
	if got := strings.Join(queryTerms("text from a PDF"), " "); got != "text pdf" {
		t.Fatalf("terms: %s", got)
	}
	res := Search(registry(), []hostapi.ToolInfo{{Name: "count_todos", Description: "Count todo items"}}, "write cells", 5)
	if len(res.Matches) == 0 || res.Matches[0].Name != "files.spreadsheet.writeRange" {
		t.Fatalf("search: %+v", res)
	}
	if res := Search(registry(), []hostapi.ToolInfo{{Name: "count_todos", Description: "Count todo items"}}, "todo", 5); len(res.Matches) != 1 ||
		res.Matches[0].Declaration != `tools.call(name: "count_todos", args?: Record<string, any>): Promise<any>` {
		t.Fatalf("saved tool: %+v", res)
	}
}

func TestCheckableScript(t *testing.T) {
	got := CheckableScript("const a = 1;\nreturn a;")
	// The script's lines keep their numbers.
	if lines := strings.Split(got, "\n"); !strings.HasSuffix(lines[0], "const a = 1;") || lines[1] != "return a;" || lines[2] != "}" {
		t.Fatalf("%q", got)
	}
}
