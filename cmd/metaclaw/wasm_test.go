package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// runResult is the part of a run result the WebAssembly tests read.
type runResult struct {
	OK     bool
	Result any
	Logs   []map[string]any
	Files  []map[string]any
	Error  *struct{ Code, Message string }
}

func parseRun(t *testing.T, out string) runResult {
	t.Helper()
	var r runResult
	dec := json.NewDecoder(strings.NewReader(out))
	dec.UseNumber() // numbers exactly as the module wrote them
	if err := dec.Decode(&r); err != nil {
		t.Fatalf("not a run result: %v\n%s", err, out)
	}
	return r
}

// TestRunModule: `metaclaw run` takes a WebAssembly module, recognised by
// its name or its magic bytes, with --input as its stdin; its host calls
// change the workspace like a script's; a broken module is a coded error.
func TestRunModule(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	echo := write("echo.wasm", echoModule())
	out, errOut, code := cli(t, "run", echo, "--input", `{"n": 3, "tags": ["a", null], "big": 9007199254740991}`, "--data", data)
	r := parseRun(t, out)
	if code != 0 || !r.OK || jsonText(r.Result) != `{"big":9007199254740991,"n":3,"tags":["a",null]}` {
		t.Fatalf("run echo.wasm: %d %s %s", code, out, errOut)
	}
	// An integer JSON cannot carry exactly is refused, as at every door.
	out, errOut, code = cli(t, "run", echo, "--input", `{"big": 9007199254740993}`, "--data", data)
	if code != 1 || !strings.Contains(out+errOut, "VALIDATION_FAILED") || !strings.Contains(out+errOut, "--input") {
		t.Fatalf("run with an inexact number: %d %s %s", code, out, errOut)
	}
	// No input: the module reads an empty stdin and writes nothing; the
	// result is null.
	out, _, code = cli(t, "run", echo, "--data", data)
	if r := parseRun(t, out); code != 0 || !r.OK || r.Result != nil {
		t.Fatalf("run without input: %d %s", code, out)
	}
	// Any name, if the bytes are a module.
	bin := write("echo.bin", echoModule())
	out, _, code = cli(t, "run", bin, "--input", `"hi"`, "--data", data)
	if r := parseRun(t, out); code != 0 || !r.OK || r.Result != "hi" {
		t.Fatalf("run a module named .bin: %d %s", code, out)
	}

	// A host call writes a file; the run result lists it, and the CLI reads it.
	writer := write("writer.wasm", callThenEchoModule("file_write_text", `{"id": "from-wasm.md", "content": "# made by a module\n"}`))
	out, errOut, code = cli(t, "run", writer, "--input", `{"done": true}`, "--data", data)
	r = parseRun(t, out)
	if code != 0 || !r.OK || jsonText(r.Result) != `{"done":true}` || len(r.Files) != 1 || r.Files[0]["name"] != "from-wasm.md" {
		t.Fatalf("run writer.wasm: %d %s %s", code, out, errOut)
	}
	out, _, code = cli(t, "tool", "file_read_text", `{"id": "from-wasm.md"}`, "--data", data)
	if code != 0 || !strings.Contains(out, `"content": "# made by a module\n"`) {
		t.Fatalf("the module's file: %d %s", code, out)
	}

	// Failures: exit 1 with a coded error, and the host goes on.
	for _, tc := range []struct {
		name string
		body []byte
		code string
		says string
	}{
		{"trap.wasm", trapModule(), "VALIDATION_FAILED", "trapped"},
		{"text.wasm", []byte("return 1;\n"), "UNSUPPORTED_FORMAT", "not a WebAssembly module"},
		{"cut.wasm", echoModule()[:40], "", "WebAssembly"},
	} {
		out, errOut, code := cli(t, "run", write(tc.name, tc.body), "--data", data)
		r := parseRun(t, out)
		if code != 1 || r.OK || r.Error == nil || tc.code != "" && r.Error.Code != tc.code || !strings.Contains(r.Error.Message, tc.says) {
			t.Errorf("%s: %d %s %s", tc.name, code, out, errOut)
		}
	}
	if _, errOut, code := cli(t, "run", write("empty.wasm", nil), "--data", data); code != 2 || !strings.Contains(errOut, "empty.wasm is empty") {
		t.Errorf("empty module: %d %s", code, errOut)
	}
	// JavaScript still runs as JavaScript.
	js := write("s.js", []byte(`return (await files.readText("from-wasm.md")).content.length;`))
	if out, _, code := cli(t, "run", js, "--data", data); code != 0 || parseRun(t, out).Result != json.Number("19") {
		t.Fatalf("script after modules: %d %s", code, out)
	}
}

// TestSavedModuleTools: a WebAssembly tool saved through the CLI is called
// by `metaclaw tool`, from a script, and over MCP (stdio, a real process),
// where run_script takes a module too.
func TestSavedModuleTools(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	mod := filepath.Join(dir, "echo.wasm")
	os.WriteFile(mod, echoModule(), 0o644)
	if out, errOut, code := cli(t, "files", "upload", mod, "--name", "tools/echo.wasm", "--data", data, "--json"); code != 0 || !strings.Contains(out, `"name": "tools/echo.wasm"`) {
		t.Fatalf("upload: %d %s %s", code, out, errOut)
	}
	save := `{"name": "echo_args", "description": "Answer with the arguments", "wasm": "tools/echo.wasm",
		"input_schema": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}}`
	if out, errOut, code := cli(t, "tool", "tool_save", save, "--data", data); code != 0 || !strings.Contains(out, `"version": 1`) {
		t.Fatalf("tool_save: %d %s %s", code, out, errOut)
	}
	// Refused at save: not a module.
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("not a module\n"), 0o644)
	cli(t, "files", "upload", filepath.Join(dir, "notes.txt"), "--data", data)
	if out, _, code := cli(t, "tool", "tool_save", `{"name": "bad_mod", "description": "d", "wasm": "notes.txt"}`, "--data", data); code != 1 || !strings.Contains(out, `"code": "UNSUPPORTED_FORMAT"`) {
		t.Fatalf("saving a text file as a module: %d %s", code, out)
	}

	if out, errOut, code := cli(t, "tool", "echo_args", `{"n": 7}`, "--data", data); code != 0 || strings.Join(strings.Fields(out), "") != `{"n":7}` {
		t.Fatalf("metaclaw tool echo_args: %d %s %s", code, out, errOut)
	}
	if out, _, code := cli(t, "tool", "echo_args", `{"n": "7"}`, "--data", data); code != 1 || !strings.Contains(out, `"code": "VALIDATION_FAILED"`) {
		t.Fatalf("bad arguments: %d %s", code, out)
	}
	js := filepath.Join(dir, "call.js")
	os.WriteFile(js, []byte(`return await tools.call("echo_args", {n: input.n + 1});`), 0o644)
	if out, errOut, code := cli(t, "run", js, "--input", `{"n": 41}`, "--data", data); code != 0 || jsonText(parseRun(t, out).Result) != `{"n":42}` {
		t.Fatalf("from a script: %d %s %s", code, out, errOut)
	}

	// MCP over stdio: the saved tool is listed and called; run_script runs
	// a workspace module and a base64 one.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.CommandTransport{Command: self("mcp", "--data", data)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	lt, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	listed := false
	for _, tl := range lt.Tools {
		listed = listed || tl.Name == "echo_args"
	}
	if !listed {
		t.Fatal("mcp tools/list lacks echo_args")
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo_args", Arguments: map[string]any{"n": 5}})
	if err != nil || res.IsError || text(res) != `{"n":5}` {
		t.Fatalf("mcp echo_args: %v %s", err, text(res))
	}
	for _, wasm := range []string{"tools/echo.wasm", base64.StdEncoding.EncodeToString(echoModule())} {
		res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_script", Arguments: map[string]any{"wasm": wasm, "input": map[string]any{"x": []any{1, 2}}}})
		if err != nil || res.IsError {
			t.Fatalf("mcp run_script wasm: %v %s", err, text(res))
		}
		if r := parseRun(t, text(res)); !r.OK || jsonText(r.Result) != `{"x":[1,2]}` {
			t.Fatalf("mcp run_script wasm %.20s: %s", wasm, text(res))
		}
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_script", Arguments: map[string]any{"wasm": "tools/echo.wasm", "code": "return 1"}})
	if err != nil || !res.IsError || !strings.Contains(text(res), "not both") {
		t.Fatalf("mcp run_script with code and wasm: %v %s", err, text(res))
	}
}
