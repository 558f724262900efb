package wasm

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/metaclaw/metaclaw/hostapi"
)

type SampleItem struct {
	ID      string    `json:"id"`
	Name    string    `json:"name"`
	Created time.Time `json:"createdOn"`
}

type SampleResult struct {
	Items      []SampleItem      `json:"items"`
	TotalLines int               `json:"totalLines"`
	Extra      map[string]string `json:"extra,omitempty"`
	Raw        []byte            `json:"raw"`
	Any        any               `json:"any"`
	Next       *SampleItem       `json:"next"`
}

func noop(context.Context, *hostapi.Call) (any, error) { return nil, nil }

func sampleRegistry() *hostapi.Registry {
	reg := hostapi.NewRegistry()
	reg.Add(hostapi.Op{
		Name: "files.sample.readThings", Tool: "sample_read_things", Doc: "Read things. */ stays inside the comment.",
		Params: []hostapi.Param{
			{Name: "id", Schema: hostapi.Schema{"type": "string"}, Doc: "File id", Required: true},
			{Name: "range", Schema: hostapi.Schema{"type": "string"}, Required: true},
			{Name: "sheet", Schema: hostapi.Schema{"type": []any{"string", "integer"}}, Required: true},
			{Name: "start_line", Schema: hostapi.Schema{"type": "integer"}, Doc: "First line", Group: "options"},
			{Name: "width", Schema: hostapi.Schema{"type": []any{"integer", "null"}}},
			{Name: "fit", Schema: hostapi.Schema{"type": "string", "enum": []any{"cover", "fill"}}, Group: "options"},
			{Name: "overlays", Schema: hostapi.Schema{"type": "array", "items": hostapi.Schema{"type": "object", "required": []any{"ref"},
				"properties": hostapi.Schema{"ref": hostapi.Schema{"type": "string", "description": "Overlay file"}, "opacity": hostapi.Schema{"type": "number"}}}}},
			{Name: "tables", Schema: hostapi.Schema{"type": "object", "additionalProperties": hostapi.Schema{"type": "string"}}, Group: "options"},
			{Name: "size", Schema: hostapi.Schema{"oneOf": []any{hostapi.Schema{"type": "string"}, hostapi.Schema{"type": "array"}}}, Group: "options"},
			{Name: "data", Schema: hostapi.Schema{"type": "array", "items": hostapi.Schema{"type": "array"}}, Group: "options"},
		},
		Result:  SampleResult{},
		Handler: noop,
	}, hostapi.Op{
		Name: "files.sample.list", Tool: "sample_list", Doc: "List.",
		Result:     []SampleItem(nil),
		ToolResult: func(v any) any { return struct{ Items []SampleItem }{v.([]SampleItem)} },
		Handler:    noop,
	}, hostapi.Op{
		Name: "things.count", Doc: "Only in scripts.", Result: 0, Handler: noop,
	}, hostapi.Op{
		Tool: "only_a_tool", Doc: "No JS name: reachable through Call, no helper.", Handler: noop,
	})
	return reg
}

func TestGuestSource(t *testing.T) {
	src, err := GuestSource(sampleRegistry())
	if err != nil {
		t.Fatal(err)
	}
	s := squeeze(string(src))
	for _, want := range []string{
		"//go:build wasip1\n\npackage guest\n",
		"type SampleOps struct{}",
		"var Sample SampleOps",
		// Required arguments are positional (a keyword is renamed), optional ones in Options.
		"func (SampleOps) ReadThings(id string, rangeArg string, sheet any, opts *SampleReadThingsOptions) (WasmSampleResult, error)",
		"// Read things. */ stays inside the comment.",
		"//   - id: File id",
		"// It calls sample_read_things (JS: files.sample.readThings).",
		"StartLine *int64 `json:\"start_line,omitempty\"`",
		"Width *int64 `json:\"width,omitempty\"`",
		"Fit *string `json:\"fit,omitempty\"`",
		"Overlays []SampleReadThingsOverlay `json:\"overlays,omitempty\"`",
		"Tables map[string]string `json:\"tables,omitempty\"`",
		"Size any `json:\"size,omitempty\"`",
		"Data [][]any `json:\"data,omitempty\"`",
		// An object argument becomes a struct, its optional scalars pointers.
		"type SampleReadThingsOverlay struct {",
		"Opacity *float64 `json:\"opacity,omitempty\"`",
		"// Overlay file\n\tRef string `json:\"ref\"`",
		// Results keep the host's field names with snake_case JSON keys.
		"TotalLines int64 `json:\"total_lines\"`",
		"Items []WasmSampleItem `json:\"items\"`",
		"Created time.Time `json:\"created_on\"`",
		"Extra map[string]string `json:\"extra,omitempty\"`",
		"Raw []byte `json:\"raw\"`",
		"Any any `json:\"any\"`",
		"Next *WasmSampleItem `json:\"next\"`",
		`err := Call("sample_read_things", &args, &out)`,
		// A reshaped tool result is what the helper returns.
		"func (SampleOps) List() (SampleListResult, error)",
		// An op without a tool is called by its JS name.
		"func (ThingsOps) Count() (int64, error)",
		`err := Call("things.count", &args, &out)`,
		`"time"`,
	} {
		if !strings.Contains(s, squeeze(want)) {
			t.Errorf("the generated source lacks %q", want)
		}
	}
	if strings.Contains(s, "only_a_tool") || strings.Contains(s, "OnlyATool") {
		t.Error("an op without a JS name got a helper")
	}
	again, _ := GuestSource(sampleRegistry())
	if string(again) != string(src) {
		t.Error("two generations differ")
	}
}

// squeeze collapses the runs of blanks gofmt aligns columns with.
func squeeze(s string) string {
	return regexp.MustCompile(`[ \t]+`).ReplaceAllString(s, " ")
}

func TestGuestSourceNameClash(t *testing.T) {
	reg := hostapi.NewRegistry()
	reg.Add(hostapi.Op{Name: "files.sample.get", Tool: "sample_get", Result: SampleItem{}, Handler: noop},
		hostapi.Op{Name: "files.other.get", Tool: "other_get", Result: struct{ A int }{}, Handler: noop,
			Params: []hostapi.Param{{Name: "x", Schema: hostapi.Schema{"type": "object", "properties": hostapi.Schema{"a": hostapi.Schema{"type": "string"}}}}}},
		// Its options struct is named like the sample op's result type.
		hostapi.Op{Name: "files.wasm.sample", Tool: "wasm_sample", Handler: noop,
			Params: []hostapi.Param{{Name: "item", Schema: hostapi.Schema{"type": "object", "properties": hostapi.Schema{"a": hostapi.Schema{"type": "string"}}}}}})
	_, err := GuestSource(reg)
	if err == nil || !strings.Contains(err.Error(), "WasmSampleItem") {
		t.Fatalf("err = %v, want a clash over WasmSampleItem", err)
	}
}

func TestNames(t *testing.T) {
	for in, want := range map[string]string{"readText": "ReadText", "image_id": "ImageID", "to_base64": "ToBase64", "pdf": "PDF",
		"ids": "IDs", "mime_type": "MimeType", "url": "URL", "window_offset": "WindowOffset"} {
		if got := exportName(in); got != want {
			t.Errorf("exportName(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{"start_line": "startLine", "image_id": "imageID", "range": "rangeArg", "id": "id", "type": "typeArg", "args": "argsArg"} {
		if got := paramName(in); got != want {
			t.Errorf("paramName(%q) = %q, want %q", in, got, want)
		}
	}
}
