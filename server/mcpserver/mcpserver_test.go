package mcpserver

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/server/redact"
)

func TestTool(t *testing.T) {
	in := hostapi.ToolInfo{Name: "file_delete", Description: "Delete a file", Destructive: true,
		InputSchema: hostapi.Schema{"type": "object", "properties": map[string]any{"id": map[string]any{"type": "string"}}}}
	tl := Tool(in, nil)
	if tl.Name != "file_delete" || tl.Annotations.ReadOnlyHint || !*tl.Annotations.DestructiveHint || tl.Annotations.IdempotentHint || *tl.Annotations.OpenWorldHint {
		t.Fatalf("annotations %+v", tl.Annotations)
	}
	// A saved tool without an object schema still gets one (MCP requires
	// it), and the registry's schema map is not modified.
	bare := hostapi.ToolInfo{Name: "x_tool", InputSchema: hostapi.Schema{"properties": map[string]any{}}}
	if s := Tool(bare, nil).InputSchema.(hostapi.Schema); s["type"] != "object" || bare.InputSchema["type"] != nil {
		t.Fatalf("schema %v / %v", s, bare.InputSchema)
	}
}

func TestResults(t *testing.T) {
	m := &Manager{opts: Options{Redact: redact.New("/srv/data").Message}}
	ok := m.okResult(map[string]any{"a": "<b>", "n": 1.0}, false)
	if ok.IsError || string(ok.StructuredContent.(json.RawMessage)) != `{"a":"<b>","n":1}` {
		t.Fatalf("ok result %+v", ok)
	}
	if txt := ok.Content[0].(*mcp.TextContent).Text; txt != `{"a":"<b>","n":1}` {
		t.Fatalf("ok text %s", txt)
	}
	// Other results are wrapped as {"result": …} in structured content.
	if r := m.okResult([]any{1.0, 2.0}, true); string(r.StructuredContent.(json.RawMessage)) != `{"result":[1,2]}` || r.Content[0].(*mcp.TextContent).Text != "[1,2]" {
		t.Fatalf("array result %+v", r)
	}
	// An image result is image content too, and its text leaves the base64 out.
	img := m.okResult(map[string]any{"base64": "iVBORw0KGgo=", "mime_type": "image/png", "width": 1.0}, false)
	ic, isImage := img.Content[0].(*mcp.ImageContent)
	if !isImage || ic.MIMEType != "image/png" || string(ic.Data[:4]) != "\x89PNG" || strings.Contains(img.Content[1].(*mcp.TextContent).Text, "iVBOR") {
		t.Fatalf("image result %+v", img.Content)
	}
	er := m.errorResult(apierr.New(apierr.NotFound, "file %q not found in /srv/data/files/x", "x"))
	b, _ := json.Marshal(er)
	if !er.IsError || !strings.Contains(string(b), `\"code\":\"NOT_FOUND\"`) || strings.Contains(string(b), "/srv/data") {
		t.Fatalf("error result %s", b)
	}
	if er := m.errorResult(errors.New("boom")); !strings.Contains(string(mustMarshal(er)), "INTERNAL") {
		t.Fatal("plain error not coded")
	}
}

func mustMarshal(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}
