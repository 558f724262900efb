package toolspec_test

// What a model sees (issue 13), against a real server with every
// operation registered, on 127.0.0.1, with the official MCP SDK client.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/metaclaw/metaclaw/bindings/ts"
	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/host"
	jsrt "github.com/metaclaw/metaclaw/runtime/js"
	"github.com/metaclaw/metaclaw/server"
	"github.com/metaclaw/metaclaw/server/toolspec"
)

type env struct {
	t   *testing.T
	h   *hostapi.Host
	url string
}

func start(t *testing.T) *env {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	h, parts, err := host.Open(hostapi.Config{DataDir: t.TempDir(), Log: log})
	if err != nil {
		t.Fatal(err)
	}
	h.Runner = jsrt.New(h)
	srv, err := server.New(server.Config{Host: h, Tools: parts.Tools, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
		h.Close()
	})
	return &env{t: t, h: h, url: ts.URL}
}

func (e *env) do(method, path string, body []byte) (int, []byte) {
	e.t.Helper()
	req, _ := http.NewRequest(method, e.url+path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func (e *env) getJSON(path string) map[string]any {
	e.t.Helper()
	code, b := e.do("GET", path, nil)
	if code != 200 {
		e.t.Fatalf("GET %s: %d %s", path, code, b)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		e.t.Fatalf("GET %s: %v", path, err)
	}
	return m
}

func (e *env) call(tool string, args any) map[string]any {
	e.t.Helper()
	b, _ := json.Marshal(args)
	code, out := e.do("POST", "/api/tools/"+tool, b)
	if code != 200 {
		e.t.Fatalf("%s: %d %s", tool, code, out)
	}
	var m map[string]any
	json.Unmarshal(out, &m)
	return m
}

func (e *env) upload(name string, content []byte) {
	e.t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	w, _ := mw.CreateFormFile("file", name)
	w.Write(content)
	mw.Close()
	req, _ := http.NewRequest("POST", e.url+"/api/files/upload", &buf)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 201 {
		e.t.Fatalf("upload %s: %v %v", name, err, resp.Status)
	}
	resp.Body.Close()
}

func (e *env) mcp(profile string, opts *mcp.ClientOptions) *mcp.ClientSession {
	e.t.Helper()
	endpoint := e.url + "/mcp"
	if profile != "" {
		endpoint += "?profile=" + profile
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint}, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { cs.Close() })
	return cs
}

func pngBytes(w, h int) []byte {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			img.Set(x, y, color.RGBA{uint8(x), uint8(y), 200, 255})
		}
	}
	var b bytes.Buffer
	png.Encode(&b, img)
	return b.Bytes()
}

var toolName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// strictKeywords are the keywords OpenAI's strict mode accepts.
var strictKeywords = map[string]bool{"type": true, "properties": true, "required": true, "additionalProperties": true, "items": true,
	"enum": true, "const": true, "anyOf": true, "description": true, "pattern": true, "format": true, "minimum": true, "maximum": true,
	"exclusiveMinimum": true, "exclusiveMaximum": true, "multipleOf": true, "minItems": true, "maxItems": true, "$ref": true, "$defs": true}

// checkStrict applies OpenAI's strict-mode rules to a schema node.
func checkStrict(s map[string]any, path string, root bool) error {
	for k := range s {
		if !strictKeywords[k] {
			return fmt.Errorf("%s: keyword %q is not allowed in strict mode", path, k)
		}
	}
	if root && s["type"] != "object" {
		return fmt.Errorf("%s: the root is not an object", path)
	}
	if alts, ok := s["anyOf"].([]any); ok {
		if root {
			return fmt.Errorf("%s: anyOf at the root", path)
		}
		for i, a := range alts {
			if err := checkStrict(a.(map[string]any), fmt.Sprintf("%s|%d", path, i), false); err != nil {
				return err
			}
		}
		return nil
	}
	_, hasEnum := s["enum"]
	_, hasConst := s["const"]
	types, hasType := s["type"]
	if !hasType && !hasEnum && !hasConst {
		return fmt.Errorf("%s: no type", path)
	}
	isType := func(want string) bool {
		switch t := types.(type) {
		case string:
			return t == want
		case []any:
			for _, x := range t {
				if x == want {
					return true
				}
			}
		}
		return false
	}
	if isType("object") {
		if s["additionalProperties"] != false {
			return fmt.Errorf("%s: additionalProperties is not false", path)
		}
		props, _ := s["properties"].(map[string]any)
		req := map[string]bool{}
		for _, r := range s["required"].([]any) {
			req[r.(string)] = true
		}
		if len(req) != len(props) {
			return fmt.Errorf("%s: required lists %d of %d properties", path, len(req), len(props))
		}
		for k, v := range props {
			if !req[k] {
				return fmt.Errorf("%s.%s: not required", path, k)
			}
			if err := checkStrict(v.(map[string]any), path+"."+k, false); err != nil {
				return err
			}
		}
	}
	if isType("array") {
		items, ok := s["items"].(map[string]any)
		if !ok {
			return fmt.Errorf("%s: array without items", path)
		}
		return checkStrict(items, path+"[]", false)
	}
	return nil
}

func compiles(t *testing.T, s any) *jsonschema.Schema {
	t.Helper()
	b, _ := json.Marshal(s)
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("mem://s.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("mem://s.json")
	if err != nil {
		t.Fatalf("schema does not compile: %v\n%s", err, b)
	}
	return sch
}

// TestProviderShapes: every tool (and a saved tool with a free-form schema)
// passes Anthropic's checks and OpenAI's strict-mode rules in both OpenAI
// shapes.
func TestProviderShapes(t *testing.T) {
	e := start(t)
	e.call("tool_save", map[string]any{"name": "free_form", "description": "Takes anything", "input_schema": map[string]any{"type": "object"},
		"code": "return input"})
	anth := e.getJSON("/api/tools?format=anthropic")["tools"].([]any)
	if len(anth) < 60 {
		t.Fatalf("%d tools", len(anth))
	}
	for _, x := range anth {
		m := x.(map[string]any)
		if len(m) != 3 || !toolName.MatchString(m["name"].(string)) || m["description"] == "" || m["input_schema"].(map[string]any)["type"] != "object" {
			t.Fatalf("not an Anthropic tool: %v", m)
		}
		compiles(t, m["input_schema"])
	}
	for _, q := range []string{"format=openai&strict=true", "format=openai&api=responses&strict=true", "format=openai-responses&strict=true"} {
		list := e.getJSON("/api/tools?" + q)["tools"].([]any)
		if len(list) != len(anth) {
			t.Fatalf("%s: %d tools", q, len(list))
		}
		for _, x := range list {
			m := x.(map[string]any)
			fn := m
			if strings.Contains(q, "responses") {
				if m["type"] != "function" || m["strict"] != true {
					t.Fatalf("%s: not a Responses tool: %v", q, m)
				}
			} else {
				fn = m["function"].(map[string]any)
				if m["type"] != "function" || fn["strict"] != true || len(m) != 2 {
					t.Fatalf("%s: not a Chat Completions tool: %v", q, m)
				}
			}
			if !toolName.MatchString(fn["name"].(string)) {
				t.Fatalf("name %v", fn["name"])
			}
			if err := checkStrict(fn["parameters"].(map[string]any), fn["name"].(string), true); err != nil {
				t.Errorf("%s: %v", q, err)
			}
			compiles(t, fn["parameters"])
		}
	}
	// Without strict, the OpenAI shape carries the registry's own schema.
	plain := e.getJSON("/api/tools?format=openai")["tools"].([]any)[0].(map[string]any)["function"].(map[string]any)
	if _, has := plain["strict"]; has {
		t.Fatalf("strict flag without strict=true: %v", plain)
	}
	for _, bad := range []string{"format=xml", "format=openai&api=assistants", "strict=maybe", "profile=tiny"} {
		if code, b := e.do("GET", "/api/tools?"+bad, nil); code != 400 || !bytes.Contains(b, []byte("VALIDATION_FAILED")) {
			t.Errorf("%s: %d %s", bad, code, b)
		}
	}
}

// strictCall fills every property of a strict schema that args does not
// give with null, as OpenAI's strict function calling does.
func strictCall(t *testing.T, e *env, tool string, args map[string]any) map[string]any {
	t.Helper()
	list := e.getJSON("/api/tools?format=openai&api=responses&strict=true")["tools"].([]any)
	for _, x := range list {
		m := x.(map[string]any)
		if m["name"] != tool {
			continue
		}
		out := map[string]any{}
		for k := range m["parameters"].(map[string]any)["properties"].(map[string]any) {
			out[k] = nil
		}
		for k, v := range args {
			if _, ok := out[k]; !ok {
				t.Fatalf("%s has no strict property %q", tool, k)
			}
			out[k] = v
		}
		return out
	}
	t.Fatalf("no tool %s", tool)
	return nil
}

// TestStrictCalls: calls shaped by strict schemas (every property present,
// null for the unused, JSON text for free-form values) work over HTTP and
// MCP.
func TestStrictCalls(t *testing.T) {
	e := start(t)
	cs := e.mcp("", nil)
	calls := []struct {
		tool string
		args map[string]any
		want string
	}{
		{"file_create", map[string]any{"name": "s.txt", "content": "one\ntwo\n"}, `"name":"s.txt"`},
		{"file_read_text", map[string]any{"id": "s.txt"}, `"content":"one\ntwo\n"`},
		{"run_script", map[string]any{"code": "return input.n + 1", "input_json": `{"n": 5}`}, `"result":6`},
		{"file_create", map[string]any{"name": "t.xlsx"}, `"name":"t.xlsx"`},
		{"spreadsheet_write_range", map[string]any{"id": "t.xlsx", "sheet": "Sheet1", "start_cell": "A1", "data": []any{[]any{"a", 1.5}, []any{"b", true}}}, `"cells":4`},
		{"spreadsheet_read_range", map[string]any{"id": "t.xlsx", "sheet": 1, "range": "A1:B2"}, `[["a",1.5],["b",true]]`},
	}
	for i, c := range calls {
		args := strictCall(t, e, c.tool, c.args)
		if i%2 == 0 {
			b, _ := json.Marshal(args)
			code, out := e.do("POST", "/api/tools/"+c.tool, b)
			if code != 200 || !strings.Contains(string(out), c.want) {
				t.Fatalf("HTTP %s %s: %d %s", c.tool, b, code, out)
			}
			continue
		}
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: c.tool, Arguments: args})
		if err != nil || res.IsError || !strings.Contains(textOf(res), c.want) {
			t.Fatalf("MCP %s: %v %s", c.tool, err, textOf(res))
		}
	}
	// JSON text that is not JSON is refused with the tool's example.
	code, out := e.do("POST", "/api/tools/run_script", []byte(`{"code":"return 1","input_json":"{nope"}`))
	if code != 400 || !strings.Contains(string(out), "input_json") || !strings.Contains(string(out), "example: run_script") {
		t.Fatalf("bad JSON text: %d %s", code, out)
	}
}

func textOf(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// TestMCPOutputSchemas: every tool has an output schema (an object) and
// its structured content matches it, for a spread of real calls.
func TestMCPOutputSchemas(t *testing.T) {
	e := start(t)
	e.upload("people.csv", []byte("name,age\nAnn,31\nBo,42\n"))
	e.upload("pic.png", pngBytes(40, 30))
	cs := e.mcp("", nil)
	lt, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	schemas := map[string]*jsonschema.Schema{}
	for _, tl := range lt.Tools {
		if tl.OutputSchema == nil {
			t.Fatalf("%s has no output schema", tl.Name)
		}
		if tl.OutputSchema.(map[string]any)["type"] != "object" {
			t.Fatalf("%s: output schema is not an object: %v", tl.Name, tl.OutputSchema)
		}
		schemas[tl.Name] = compiles(t, tl.OutputSchema)
		if tl.Name == "file_download" && (tl.Annotations.OpenWorldHint == nil || !*tl.Annotations.OpenWorldHint) {
			t.Errorf("file_download: openWorldHint %v", tl.Annotations.OpenWorldHint)
		}
		if tl.Name == "file_list" && (tl.Annotations.OpenWorldHint == nil || *tl.Annotations.OpenWorldHint || !tl.Annotations.ReadOnlyHint) {
			t.Errorf("file_list annotations %+v", tl.Annotations)
		}
	}
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"file_list", nil},
		{"file_info", map[string]any{"id": "people.csv"}},
		{"file_read_text", map[string]any{"id": "people.csv", "start_line": 2}},
		{"file_line_count", map[string]any{"id": "people.csv"}},
		{"file_search_text", map[string]any{"id": "people.csv", "pattern": "Bo"}},
		{"file_create", map[string]any{"name": "memo.pdf"}},
		{"pdf_info", map[string]any{"id": "memo.pdf"}},
		{"file_create", map[string]any{"name": "book.xlsx"}},
		{"spreadsheet_list_sheets", map[string]any{"id": "book.xlsx"}},
		{"spreadsheet_read_range", map[string]any{"id": "book.xlsx", "sheet": "Sheet1", "range": "A1:B2"}},
		{"image_info", map[string]any{"id": "pic.png"}},
		{"image_to_base64", map[string]any{"id": "pic.png"}},
		{"table_query", map[string]any{"path": "people.csv", "query": "SELECT name FROM data WHERE age > 40"}},
		{"run_script", map[string]any{"code": "return (await files.list()).length"}},
		{"search_api", map[string]any{"query": "pdf text"}},
		{"tool_list", nil},
	} {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: c.tool, Arguments: c.args})
		if err != nil || res.IsError {
			t.Fatalf("%s: %v %s", c.tool, err, textOf(res))
		}
		b, _ := json.Marshal(res.StructuredContent)
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		if err := schemas[c.tool].Validate(v); err != nil {
			t.Errorf("%s: structured content does not match its output schema: %v\n%s", c.tool, err, b)
		}
	}
	// Every registered op's schema derives and compiles, also the ones not
	// called above.
	for _, op := range e.h.Registry.Ops() {
		if op.Tool == "" {
			continue
		}
		s, _ := toolspec.OutputSchema(op)
		compiles(t, s)
	}
}

// TestMCPImageContent: image_to_base64 over MCP is image content a vision
// model sees.
func TestMCPImageContent(t *testing.T) {
	e := start(t)
	e.upload("pic.png", pngBytes(64, 48))
	cs := e.mcp("", nil)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "image_to_base64", Arguments: map[string]any{"id": "pic.png", "max_width": 32}})
	if err != nil || res.IsError {
		t.Fatalf("%v %s", err, textOf(res))
	}
	var img *mcp.ImageContent
	for _, c := range res.Content {
		if ic, ok := c.(*mcp.ImageContent); ok {
			img = ic
		}
	}
	if img == nil {
		t.Fatalf("no image content: %+v", res.Content)
	}
	decoded, format, err := image.Decode(bytes.NewReader(img.Data))
	if err != nil || decoded.Bounds().Dx() != 32 || decoded.Bounds().Dy() != 24 || img.MIMEType != "image/"+format {
		t.Fatalf("image content: %v %s %v", err, img.MIMEType, decoded.Bounds())
	}
	if strings.Contains(textOf(res), "base64\"") {
		t.Fatalf("the text repeats the base64: %s", textOf(res))
	}
}

// TestMCPResources: files are resources; text reads inline (decoded),
// binaries as blobs; a subscription hears about changes from other doors.
func TestMCPResources(t *testing.T) {
	e := start(t)
	e.upload("notes/todo.md", []byte("# Todo\n"))
	e.upload("latin1.csv", []byte("name\nMu\xf1oz\n"))
	e.upload("pic.png", pngBytes(4, 4))
	updated := make(chan string, 16)
	cs := e.mcp("", &mcp.ClientOptions{ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) {
		updated <- r.Params.URI
	}})
	ctx := context.Background()
	lr, err := cs.ListResources(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var uris []string
	for _, r := range lr.Resources {
		uris = append(uris, r.URI)
	}
	sort.Strings(uris)
	if strings.Join(uris, " ") != "metaclaw://files/latin1.csv metaclaw://files/notes/todo.md metaclaw://files/pic.png" {
		t.Fatalf("resources %v", uris)
	}
	rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "metaclaw://files/notes/todo.md"})
	if err != nil || rr.Contents[0].Text != "# Todo\n" || rr.Contents[0].MIMEType != "text/markdown" {
		t.Fatalf("read text: %v %+v", err, rr)
	}
	rr, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "metaclaw://files/latin1.csv"})
	if err != nil || rr.Contents[0].Text != "name\nMuñoz\n" {
		t.Fatalf("read latin1: %v %+v", err, rr)
	}
	rr, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "metaclaw://files/pic.png"})
	if err != nil || !bytes.Equal(rr.Contents[0].Blob, pngBytes(4, 4)) || rr.Contents[0].Text != "" {
		t.Fatalf("read binary: %v", err)
	}
	if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "metaclaw://files/nope.txt"}); err == nil {
		t.Fatal("a missing file read")
	}
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "metaclaw://files/notes/todo.md"}); err != nil {
		t.Fatal(err)
	}
	e.call("file_insert_lines", map[string]any{"id": "notes/todo.md", "after_line": 1, "content": "- ship"})
	select {
	case u := <-updated:
		if u != "metaclaw://files/notes/todo.md" {
			t.Fatalf("update for %s", u)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no resources/updated notification")
	}
	rr, _ = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "metaclaw://files/notes/todo.md"})
	if rr.Contents[0].Text != "# Todo\n- ship\n" {
		t.Fatalf("after the change: %q", rr.Contents[0].Text)
	}
	e.call("file_delete", map[string]any{"id": "notes/todo.md"})
	select {
	case u := <-updated:
		if u != "metaclaw://files/notes/todo.md" {
			t.Fatalf("update for %s", u)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no notification for the delete")
	}
}

// TestCodeProfile is issue 13's code-mode session over MCP: the list costs
// at most 1,500 tokens, search_api finds writeRange, and run_script uses it
// to write a workbook that the result lists.
func TestCodeProfile(t *testing.T) {
	e := start(t)
	for _, f := range []string{"", "anthropic", "openai", "openai-responses", "mcp"} {
		b, _ := json.Marshal(e.getJSON("/api/tools?profile=code&format=" + f)["tools"])
		var names []string
		var list []map[string]any
		json.Unmarshal(b, &list)
		for _, x := range list {
			if n, ok := x["name"].(string); ok {
				names = append(names, n)
			} else {
				names = append(names, x["function"].(map[string]any)["name"].(string))
			}
		}
		if strings.Join(names, ",") != "run_script,search_api,file_list" || toolspec.Tokens(b) > 1500 {
			t.Fatalf("format %q: %v, %d tokens", f, names, toolspec.Tokens(b))
		}
	}
	cs := e.mcp("code", nil)
	ctx := context.Background()
	lt, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	serialized, _ := json.Marshal(lt.Tools)
	if len(lt.Tools) != 3 || toolspec.Tokens(serialized) > 1500 {
		t.Fatalf("code profile over MCP: %d tools, %d tokens", len(lt.Tools), toolspec.Tokens(serialized))
	}
	t.Logf("code profile: %d tokens over MCP", toolspec.Tokens(serialized))
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "search_api", Arguments: map[string]any{"query": "spreadsheet write"}})
	if err != nil || res.IsError {
		t.Fatalf("search_api: %v %s", err, textOf(res))
	}
	var found ts.SearchResult
	json.Unmarshal([]byte(textOf(res)), &found)
	var decl string
	for _, m := range found.Matches {
		if m.Name == "files.spreadsheet.writeRange" {
			decl = m.Declaration
		}
	}
	if !strings.HasPrefix(decl, "files.spreadsheet.writeRange(id: string, sheet: string | number, startCell: string, data: Array<") {
		t.Fatalf("writeRange not found: %s", textOf(res))
	}
	// Tools outside the profile are not callable here.
	if res, _ := cs.CallTool(ctx, &mcp.CallToolParams{Name: "file_delete", Arguments: map[string]any{"id": "x"}}); res != nil && !res.IsError {
		t.Fatal("file_delete callable in the code profile")
	}
	code := `await files.create("report.xlsx");
const r = await files.spreadsheet.writeRange("report.xlsx", "Sheet1", "A1", [["Region", "Sales"], ["North", 1200], ["South", 980]]);
return { written: r.cells, back: await files.spreadsheet.readRange("report.xlsx", "Sheet1", "A1:B3") };`
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_script", Arguments: map[string]any{"code": code}})
	if err != nil || res.IsError {
		t.Fatalf("run_script: %v %s", err, textOf(res))
	}
	var run struct {
		OK     bool
		Result struct {
			Written float64
			Back    [][]any
		}
		Files []struct{ Name, Action string }
	}
	json.Unmarshal([]byte(textOf(res)), &run)
	if !run.OK || run.Result.Written != 6 || run.Result.Back[2][1] != 980.0 || len(run.Files) == 0 || run.Files[0].Name != "report.xlsx" {
		t.Fatalf("run: %s", textOf(res))
	}
	// The header chooses the profile too.
	req, _ := http.NewRequest("GET", e.url+"/api/tools?profile=code", nil)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 {
		t.Fatal(err)
	}
}

// TestSearchRanking: everyday queries find the operation a person means.
func TestSearchRanking(t *testing.T) {
	e := start(t)
	e.call("tool_save", map[string]any{"name": "count_todos", "description": "Count the unchecked todo items of a markdown file",
		"input_schema": map[string]any{"type": "object", "properties": map[string]any{"id": map[string]any{"type": "string"}}, "required": []any{"id"}},
		"code":         "return 1"})
	for q, want := range map[string]string{
		"spreadsheet write":     "files.spreadsheet.writeRange",
		"extract text from pdf": "files.pdf.extractText",
		"resize image":          "files.image.resize",
		"sql query csv":         "files.table.query",
		"count lines":           "files.lineCount",
		"todo items":            `tools.call("count_todos")`,
		"fill pdf form":         "files.pdf.fillForm",
		"undo":                  "files.revert",
	} {
		res := e.call("search_api", map[string]any{"query": q, "limit": 3})
		matches := res["matches"].([]any)
		if len(matches) == 0 || matches[0].(map[string]any)["name"] != want {
			t.Errorf("%q: %v", q, res)
			continue
		}
		m := matches[0].(map[string]any)
		if m["declaration"] == "" || m["doc"] == "" {
			t.Errorf("%q: %v", q, m)
		}
	}
	res := e.call("search_api", map[string]any{"query": "read text"})
	if ex := res["matches"].([]any)[0].(map[string]any)["example"]; !strings.HasPrefix(fmt.Sprint(ex), "await files.readText(") {
		t.Fatalf("example: %v", ex)
	}
	if res := e.call("search_api", map[string]any{"query": "zzzqqq"}); len(res["matches"].([]any)) != 0 {
		t.Fatalf("nonsense matched: %v", res)
	}
}

// tscDir holds the pinned TypeScript (package.json + package-lock.json).
const tscDir = "../../bindings/ts/testdata/tsc"

var tscOnce sync.Once

func tsc(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not installed; skipping the tsc check (install nodejs and npm)")
	}
	bin := filepath.Join(tscDir, "node_modules", ".bin", "tsc")
	tscOnce.Do(func() {
		if _, err := os.Stat(bin); err == nil {
			return
		}
		npm, err := exec.LookPath("npm")
		if err != nil {
			return
		}
		cmd := exec.Command(npm, "ci", "--no-audit", "--no-fund")
		cmd.Dir = tscDir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Logf("npm ci: %v\n%s", err, out)
		}
	})
	if _, err := os.Stat(bin); err != nil {
		t.Skip("TypeScript is not installed and npm ci failed; run `npm ci` in bindings/ts/testdata/tsc")
	}
	abs, _ := filepath.Abs(bin)
	return abs
}

// TestTypesTypeCheck: GET /api/types passes tsc --strict with TypeScript's
// default libraries, with a saved tool typed on tools.call, and a script
// written as the README shows (top-level await and return) type-checks.
func TestTypesTypeCheck(t *testing.T) {
	bin := tsc(t)
	e := start(t)
	e.call("tool_save", map[string]any{"name": "count_todos", "description": "Count todo items",
		"input_schema": map[string]any{"type": "object", "properties": map[string]any{"id": map[string]any{"type": "string"}, "max-items": map[string]any{"type": "integer"}}, "required": []any{"id"}},
		"code":         "return 1"})
	code, decl := e.do("GET", "/api/types", nil)
	if code != 200 || !bytes.Contains(decl, []byte(`call(name: "count_todos", args: { id: string; "max-items"?: number }): Promise<any>;`)) {
		t.Fatalf("types: %d\n%s", code, decl)
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "metaclaw.d.ts"), decl, 0o644)
	script := `const name = "notes/todo.md";
await files.create(name, { content: "# Todo\n- write tests\n", overwrite: true });
await files.insertLines(name, 1, "- ship it");
const [text, hits] = await Promise.all([files.readText(name), files.searchText(name, "^- ")]);
console.log(text.totalLines);
const sheets = await files.spreadsheet.listSheets("book.xlsx");
const n: number = await tools.call("count_todos", { id: name });
return { text: text.content, items: hits.matches.length, sheets: sheets.map(s => s.name), n, input, session: session.id };
`
	os.WriteFile(filepath.Join(dir, "script.ts"), []byte(ts.CheckableScript(script)), 0o644)
	run := func(files ...string) (string, error) {
		cmd := exec.Command(bin, append([]string{"--noEmit", "--strict"}, files...)...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := run("metaclaw.d.ts"); err != nil {
		t.Fatalf("tsc on the declarations: %v\n%s", err, out)
	}
	if out, err := run("metaclaw.d.ts", "script.ts"); err != nil {
		t.Fatalf("tsc on the README-style script: %v\n%s", err, out)
	}
	// The check has teeth: a wrong argument type fails on its own line.
	os.WriteFile(filepath.Join(dir, "bad.ts"), []byte(ts.CheckableScript("const a = 1;\nreturn await files.readText(42);\n")), 0o644)
	out, err := run("metaclaw.d.ts", "bad.ts")
	if err == nil || !strings.Contains(out, "bad.ts(2,") {
		t.Fatalf("a type error passed: %v\n%s", err, out)
	}
}

// TestValidationShowsExample: a VALIDATION_FAILED from each meta-tool
// door carries the tool's example call.
func TestValidationShowsExample(t *testing.T) {
	e := start(t)
	for _, body := range []string{`{"id": 5}`, `{"id":`, `[]`, `{"nope": 1}`} {
		code, out := e.do("POST", "/api/tools/file_read_text", []byte(body))
		if code != 400 || !strings.Contains(string(out), "example: file_read_text {") {
			t.Errorf("HTTP %s: %d %s", body, code, out)
		}
	}
	cs := e.mcp("", nil)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "file_read_text", Arguments: map[string]any{"id": 5}})
	if err != nil || !res.IsError || !strings.Contains(textOf(res), "example: file_read_text {") {
		t.Fatalf("MCP: %v %s", err, textOf(res))
	}
}
