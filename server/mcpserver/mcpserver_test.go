package mcpserver

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

func TestTool(t *testing.T) {
	in := hostapi.ToolInfo{Name: "file_delete", Description: "Delete a file", Destructive: true,
		InputSchema: hostapi.Schema{"type": "object", "properties": map[string]any{"id": map[string]any{"type": "string"}}}}
	tl := Tool(in)
	if tl.Name != "file_delete" || tl.Annotations.ReadOnlyHint || !*tl.Annotations.DestructiveHint || tl.Annotations.IdempotentHint || *tl.Annotations.OpenWorldHint {
		t.Fatalf("annotations %+v", tl.Annotations)
	}
	// A saved tool without an object schema still gets one (MCP requires
	// it), and the registry's schema map is not modified.
	bare := hostapi.ToolInfo{Name: "x_tool", InputSchema: hostapi.Schema{"properties": map[string]any{}}}
	if s := Tool(bare).InputSchema.(hostapi.Schema); s["type"] != "object" || bare.InputSchema["type"] != nil {
		t.Fatalf("schema %v / %v", s, bare.InputSchema)
	}
}

func TestResults(t *testing.T) {
	ok := okResult(map[string]any{"a": "<b>", "n": 1.0})
	if ok.IsError || ok.StructuredContent == nil {
		t.Fatalf("ok result %+v", ok)
	}
	if txt := ok.Content[0].(*mcp.TextContent).Text; txt != `{"a":"<b>","n":1}` {
		t.Fatalf("ok text %s", txt)
	}
	// Non-object results are text only.
	if r := okResult([]any{1.0, 2.0}); r.StructuredContent != nil {
		t.Fatal("array result as structured content")
	}
	er := errorResult(apierr.New(apierr.NotFound, "file %q not found", "x"))
	b, _ := json.Marshal(er)
	if !er.IsError || !strings.Contains(string(b), `\"code\":\"NOT_FOUND\"`) {
		t.Fatalf("error result %s", b)
	}
	if er := errorResult(errors.New("boom")); !strings.Contains(string(mustMarshal(er)), "INTERNAL") {
		t.Fatal("plain error not coded")
	}
}

func mustMarshal(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}
