package agenttools_test

// WebAssembly through run_script and saved tools, on the real wazero
// runner, with arguments as raw JSON the way the HTTP, MCP and CLI doors
// hand them over, and from scripts (tools.save, tools.call).

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/agenttools"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/files"
	"github.com/metaclaw/metaclaw/hostapi/hosttest"
	jsrun "github.com/metaclaw/metaclaw/runtime/js"
	"github.com/metaclaw/metaclaw/runtime/wasm/wasmtest"
)

// echoWasm is the examples' module: it answers with its input.
func echoWasm(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "examples", "echo.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// trapWasm fails at once.
func trapWasm() []byte {
	return wasmtest.Module{
		Funcs:   []wasmtest.Func{{Body: []byte{wasmtest.OpUnreachable}}},
		Exports: map[string]uint32{"_start": 0},
		Memory:  wasmtest.Pages(1),
	}.Bytes()
}

// runOutcome runs run_script and returns the run result.
func (d *door) runOutcome(raw string) map[string]any {
	d.t.Helper()
	var res map[string]any
	if err := json.Unmarshal([]byte(d.must("run_script", raw)), &res); err != nil {
		d.t.Fatal(err)
	}
	return res
}

func TestRunScriptWasm(t *testing.T) {
	d := newDoor(t, hostapi.Config{})
	echo := echoWasm(t)
	hosttest.Upload(t, d.env.WS, "mods/echo.wasm", echo, false)
	hosttest.Upload(t, d.env.WS, "notes.txt", []byte("not a module\n"), false)

	// A workspace file, by name and by id, and the bytes in base64: the
	// module reads the input, numbers as numbers.
	f, err := d.env.WS.Resolve(context.Background(), "mods/echo.wasm")
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{"mods/echo.wasm", "/mods/echo.wasm", f.ID, base64.StdEncoding.EncodeToString(echo), base64.RawURLEncoding.EncodeToString(echo)} {
		args, _ := json.Marshal(map[string]any{"wasm": ref, "input": map[string]any{"n": 5, "x": 2.5, "s": "é"}, "timeout_ms": 60000})
		if got := d.runResult(string(args)); got != `{"n":5,"s":"é","x":2.5}` {
			t.Fatalf("wasm %.40s: result %s", ref, got)
		}
	}
	if got := d.runResult(`{"wasm": "mods/echo.wasm"}`); got != `null` {
		t.Fatalf("no input: %s", got)
	}

	// Refused before anything runs: both or neither of code and wasm, an
	// empty or broken wasm argument.
	d.expect(apierr.ValidationFailed, "not both", "run_script", `{"code": "return 1", "wasm": "mods/echo.wasm"}`)
	d.expect(apierr.ValidationFailed, "code", "run_script", `{"input": 1}`)
	d.expect(apierr.ValidationFailed, "wasm", "run_script", `{"wasm": ""}`)
	d.expect(apierr.ValidationFailed, "base64", "run_script", `{"wasm": "AGFzbQ***"}`)
	d.expect(apierr.ValidationFailed, "wasm", "run_script", `{"wasm": 42}`)

	// Failures inside the run are the run's error, as for scripts.
	for raw, code := range map[string]string{
		`{"wasm": "missing.wasm"}`: "NOT_FOUND",
		`{"wasm": "notes.txt"}`:    "UNSUPPORTED_FORMAT",
		`{"wasm": "` + base64.StdEncoding.EncodeToString(trapWasm()) + `"}`: "VALIDATION_FAILED",
	} {
		res := d.runOutcome(raw)
		e, _ := res["error"].(map[string]any)
		if res["ok"] != false || e == nil || e["code"] != code || res["result"] != nil {
			t.Fatalf("%.60s: %v, want error %s", raw, res, code)
		}
	}
	// The host carries on.
	if got := d.runResult(`{"wasm": "mods/echo.wasm", "input": [1, 2]}`); got != `[1,2]` {
		t.Fatalf("after failures: %s", got)
	}
}

func TestSavedWasmTools(t *testing.T) { agenttools.ForBackends(t, testSavedWasmTools) }

func testSavedWasmTools(t *testing.T, cfg hostapi.Config) {
	d := newDoor(t, withCfg(cfg, hostapi.Config{}))
	hosttest.Upload(t, d.env.WS, "tools/echo.wasm", echoWasm(t), false)
	hosttest.Upload(t, d.env.WS, "tools/trap.wasm", trapWasm(), false)
	hosttest.Upload(t, d.env.WS, "notes.txt", []byte("not a module\n"), false)
	mod, err := d.env.WS.Resolve(context.Background(), "tools/echo.wasm")
	if err != nil {
		t.Fatal(err)
	}

	saved := d.must("tool_save", `{"name": "echo_args", "description": "Answer with the arguments",
		"input_schema": {"type": "object", "properties": {"n": {"type": "integer"}, "tag": {"type": "string"}}, "required": ["n"]},
		"wasm": "tools/echo.wasm"}`)
	if saved != `{"name":"echo_args","version":1}` {
		t.Fatalf("save: %s", saved)
	}
	// The tool keeps the module's file id, and says so; it has no code.
	var got struct {
		Name, Code, Wasm string
		Version          int
		InputSchema      map[string]any `json:"input_schema"`
	}
	json.Unmarshal([]byte(d.must("tool_get", `{"name": "echo_args"}`)), &got)
	if got.Name != "echo_args" || got.Wasm != mod.ID || got.Code != "" || got.Version != 1 || got.InputSchema["required"] == nil {
		t.Fatalf("tool_get: %+v", got)
	}
	if list := d.must("tool_list", `{}`); !strings.Contains(list, `"name":"echo_args"`) || !strings.Contains(list, `"wasm":"`+mod.ID+`"`) {
		t.Fatalf("tool_list: %s", list)
	}

	// Called as a meta-tool, with its arguments validated and numbers kept;
	// null means absent.
	if out := d.must("echo_args", `{"n": 3, "tag": "x"}`); out != `{"n":3,"tag":"x"}` {
		t.Fatalf("echo_args: %s", out)
	}
	if out := d.must("echo_args", `{"n": 3, "tag": null}`); out != `{"n":3}` {
		t.Fatalf("echo_args with null: %s", out)
	}
	d.expect(apierr.ValidationFailed, "echo_args", "echo_args", `{"n": "3"}`)
	d.expect(apierr.ValidationFailed, "echo_args", "echo_args", `{"tag": "x"}`)
	// From a script, with tools.call, and saved from a script too.
	if out := d.runResult(`{"code": "return await tools.call(\"echo_args\", {n: input.n * 2});", "input": {"n": 21}}`); out != `{"n":42}` {
		t.Fatalf("tools.call: %s", out)
	}
	if out := d.runResult(`{"code": "const s = await tools.save({name: \"echo_again\", description: \"echo\", wasm: \"tools/echo.wasm\"}); return [s, await tools.call(\"echo_again\", {k: [true, null]})];"}`); out != `[{"name":"echo_again","version":1},{"k":[true,null]}]` {
		t.Fatalf("tools.save from a script: %s", out)
	}
	// The tool follows its file, not its name.
	d.must("file_rename", `{"id": "tools/echo.wasm", "new_name": "tools/renamed.wasm"}`)
	if out := d.must("echo_args", `{"n": 1}`); out != `{"n":1}` {
		t.Fatalf("after a rename: %s", out)
	}

	// Refused at save, and nothing stored: not a module, no such file,
	// bytes instead of a file, code and wasm, a bad name.
	for raw, want := range map[string]struct {
		code apierr.Code
		says string
	}{
		`{"name": "bad_mod", "description": "d", "wasm": "notes.txt"}`:                                              {apierr.UnsupportedFormat, "notes.txt"},
		`{"name": "bad_mod", "description": "d", "wasm": "nope.wasm"}`:                                              {apierr.NotFound, "nope.wasm"},
		`{"name": "bad_mod", "description": "d", "wasm": "` + base64.StdEncoding.EncodeToString(echoWasm(t)) + `"}`: {apierr.ValidationFailed, "workspace file"},
		`{"name": "bad_mod", "description": "d", "wasm": "tools/renamed.wasm", "code": "return 1"}`:                 {apierr.ValidationFailed, "not both"},
		`{"name": "bad_mod", "description": "d"}`:                                                                   {apierr.ValidationFailed, "code"},
		`{"name": "file_list", "description": "d", "wasm": "tools/renamed.wasm"}`:                                   {apierr.ValidationFailed, "built-in"},
		`{"name": "bad_mod", "description": "d", "code": "#!wasm ` + mod.ID + `"}`:                                  {apierr.ValidationFailed, "#!wasm"},
	} {
		d.expect(want.code, want.says, "tool_save", raw)
	}
	if list := d.must("tool_list", `{}`); strings.Contains(list, "bad_mod") {
		t.Fatalf("a refused tool was stored: %s", list)
	}

	// A module that fails fails the call with the run's code.
	d.must("tool_save", `{"name": "always_traps", "description": "fails", "wasm": "tools/trap.wasm"}`)
	d.expect(apierr.ValidationFailed, `tool "always_traps" failed: the module trapped`, "always_traps", `{}`)
	// A tool whose module file is gone says so.
	d.must("file_delete", `{"id": "tools/renamed.wasm"}`)
	d.expect(apierr.NotFound, "was deleted", "echo_args", `{"n": 1}`)
	// A JavaScript version replaces the WebAssembly one.
	if out := d.must("tool_save", `{"name": "echo_args", "description": "now JS", "code": "return input.n;"}`); out != `{"name":"echo_args","version":2}` {
		t.Fatalf("JS version: %s", out)
	}
	if out := d.must("echo_args", `{"n": 4}`); out != `4` {
		t.Fatalf("JS version runs: %s", out)
	}
}

// A host without a WebAssembly runtime refuses WebAssembly tools when they
// are saved, not when they are first called.
func TestWasmToolNeedsARuntime(t *testing.T) {
	h := hosttest.New(t, hostapi.Config{}, files.Register, func(h *hostapi.Host) error {
		_, err := agenttools.Register(h)
		return err
	})
	h.Runner = hostapi.Runners{JS: jsrun.New(h)}
	d := &door{t: t, h: h, env: h.Env("default", "s1")}
	hosttest.Upload(t, d.env.WS, "echo.wasm", echoWasm(t), false)
	d.expect(apierr.ToolWorkerUnavailable, "no WebAssembly runtime", "tool_save", `{"name": "echo_args", "description": "d", "wasm": "echo.wasm"}`)
	res := d.runOutcome(`{"wasm": "echo.wasm"}`)
	if e, _ := res["error"].(map[string]any); res["ok"] != false || e["code"] != "TOOL_WORKER_UNAVAILABLE" {
		t.Fatalf("run_script without a runtime: %v", res)
	}
	h.Runner = jsrun.New(h)
	d.expect(apierr.ToolWorkerUnavailable, "no WebAssembly runtime", "tool_save", `{"name": "echo_args", "description": "d", "wasm": "echo.wasm"}`)
}
