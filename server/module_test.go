package server

import (
	"encoding/base64"
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/runtime/wasm"
	"github.com/metaclaw/metaclaw/runtime/wasm/wasmtest"
)

// startWithModules is a test server whose host runs scripts (JS) and
// modules (wazero); it returns the guest module of testdata/wasmguest,
// built once per test binary with the Go toolchain running the tests.
func startWithModules(t *testing.T) (*env, []byte) {
	t.Helper()
	mod := wasmtest.BuildGo(t, "testdata/wasmguest")[0]
	e := start(t, opts{})
	r, err := wasm.New(e.h, wasm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e.h.Runner = hostapi.Runners{JS: e.h.Runner, WASM: r.ForHost()}
	return e, mod
}

func TestRunModule(t *testing.T) {
	e, mod := startWithModules(t)
	e.upload("notes.txt", []byte("first line\nsecond line\n"), "")
	up := e.upload("guest.wasm", mod, "?name=mods/guest.wasm")
	input := map[string]any{"read": "notes.txt", "write": "out/w.txt", "text": "yo"}
	want := `{"files":[{"action":"created","iconType":"text","name":"out/w.txt"}],"logs":[{"level":"log","message":"hello from wasm"}],"ok":true,` +
		`"result":{"content":"first line\nsecond line\n","greeting":"hi yo","total_lines":2,"wrote":"out/w.txt"}}`
	b64 := base64.StdEncoding.EncodeToString(mod)
	for name, wasmArg := range map[string]string{
		"base64":             b64,
		"base64 unpadded":    base64.RawURLEncoding.EncodeToString(mod),
		"base64 with breaks": b64[:1000] + "\n" + b64[1000:],
		"file name":          "mods/guest.wasm",
		"file name with /":   "/mods/guest.wasm",
		"file id":            up["id"].(string),
	} {
		t.Run(name, func(t *testing.T) {
			e.do("DELETE", "/api/files/out%2Fw.txt", nil, nil)
			resp, b := e.do("POST", "/api/run", strings.NewReader(mustJSON(map[string]any{"wasm": wasmArg, "input": input})), nil)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, b)
			}
			var res map[string]any
			json.Unmarshal(b, &res)
			// The run result has SPEC 5's shape, the same keys as a script's.
			if ms, _ := res["durationMs"].(float64); ms <= 0 {
				t.Errorf("durationMs %v", res["durationMs"])
			}
			delete(res, "durationMs")
			for _, f := range res["files"].([]any) {
				delete(f.(map[string]any), "id")
			}
			if got := mustJSON(res); got != want {
				t.Fatalf("module run\n got %s\nwant %s", got, want)
			}
			if resp.Header.Get("X-Run-Id") == "" {
				t.Error("no X-Run-Id")
			}
		})
	}
	// Same keys as a script's run result.
	js := e.json("POST", "/api/run", map[string]any{"code": "return 1"}, 200)
	mr := e.json("POST", "/api/run", map[string]any{"wasm": "mods/guest.wasm"}, 200)
	if !slices.Equal(slices.Sorted(maps.Keys(js)), slices.Sorted(maps.Keys(mr))) {
		t.Errorf("script result %v, module result %v: not the same keys", js, mr)
	}
	if got := mustJSON(mr["result"]); got != `{"greeting":"hi "}` {
		t.Errorf("module without input: %s", got)
	}
	// The written file is there.
	if _, b := e.do("GET", "/api/files/out%2Fw.txt/download", nil, nil); string(b) != "yo" {
		t.Errorf("written file %q", b)
	}
}

func TestRunModuleBadInput(t *testing.T) {
	e, mod := startWithModules(t)
	e.upload("not.wasm", []byte("this is text, not a module"), "")
	e.upload("trunc.wasm", mod[:4096], "")
	before := e.json("GET", "/api/files", nil, 200)

	// Refused before a run starts: a coded error with its status.
	for body, code := range map[string]string{
		`{"wasm": 5}`:                            "VALIDATION_FAILED",
		`{"wasm": {"ref": "m.wasm"}}`:            "VALIDATION_FAILED",
		`{"wasm": ""}`:                           "VALIDATION_FAILED",
		`{"wasm": "AGFzbQ!!not base64"}`:         "VALIDATION_FAILED",
		`{"code": "return 1", "wasm": "m.wasm"}`: "VALIDATION_FAILED",
		`{"wasm": "m.wasm", "timeout_ms": -5}`:   "VALIDATION_FAILED",
		`{"input": {}}`:                          "VALIDATION_FAILED",
		`{"wasm": null}`:                         "VALIDATION_FAILED", // null is absent: neither code nor wasm
		`{"wasm": "m.wasm"`:                      "VALIDATION_FAILED",
	} {
		resp, b := e.do("POST", "/api/run", strings.NewReader(body), nil)
		errCode(t, resp, b, http.StatusBadRequest, code)
		if strings.Contains(body, `"code"`) && !strings.Contains(string(b), "not both") {
			t.Errorf("%s: %s", body, b)
		}
	}

	// Runs that fail: ok:false with the runtime's code, the host carries on.
	for name, c := range map[string]struct {
		body map[string]any
		code apierr.Code
		msg  string
	}{
		"missing file":     {map[string]any{"wasm": "nope.wasm"}, apierr.NotFound, "nope.wasm"},
		"not a module":     {map[string]any{"wasm": "not.wasm"}, apierr.UnsupportedFormat, ""},
		"truncated file":   {map[string]any{"wasm": "trunc.wasm"}, apierr.FileReadFailed, "truncated"},
		"truncated bytes":  {map[string]any{"wasm": base64.StdEncoding.EncodeToString(mod[:4096])}, apierr.FileReadFailed, "truncated"},
		"module's failure": {map[string]any{"wasm": base64.StdEncoding.EncodeToString(mod), "input": map[string]any{"fail": "missing.txt"}}, apierr.NotFound, "missing.txt"},
	} {
		res := e.json("POST", "/api/run", c.body, 200)
		er, _ := res["error"].(map[string]any)
		if res["ok"] != false || er == nil || er["code"] != string(c.code) || !strings.Contains(er["message"].(string), c.msg) {
			t.Errorf("%s: %v", name, res)
		}
		if strings.Contains(mustJSON(res), e.h.Config.DataDir) {
			t.Errorf("%s: a server path in %v", name, res)
		}
	}
	// Nothing else changed.
	if after := e.json("GET", "/api/files", nil, 200); mustJSON(after) != mustJSON(before) {
		t.Errorf("files changed:\n%v\n%v", before, after)
	}
	// The host still runs modules and scripts.
	if res := e.json("POST", "/api/run", map[string]any{"wasm": base64.StdEncoding.EncodeToString(mod), "input": map[string]any{"text": "again"}}, 200); res["ok"] != true {
		t.Fatalf("after bad modules: %v", res)
	}
}

func TestRunModuleWithoutRuntime(t *testing.T) {
	e := start(t, opts{}) // a plain JavaScript runner
	resp, b := e.do("POST", "/api/run", strings.NewReader(`{"wasm":"m.wasm"}`), nil)
	errCode(t, resp, b, http.StatusServiceUnavailable, "TOOL_WORKER_UNAVAILABLE")
	e.h.Runner = hostapi.Runners{JS: e.h.Runner} // a dispatcher without WASM
	resp, b = e.do("POST", "/api/run", strings.NewReader(`{"wasm":"m.wasm"}`), nil)
	errCode(t, resp, b, http.StatusServiceUnavailable, "TOOL_WORKER_UNAVAILABLE")
	if res := e.json("POST", "/api/run", map[string]any{"code": "return 3"}, 200); res["result"].(float64) != 3 {
		t.Fatalf("scripts still run: %v", res)
	}
}

// The server reads a wasm argument as the WebAssembly runtime does.
func TestModuleArgMatchesRuntime(t *testing.T) {
	mod := []byte("\x00asm\x01\x00\x00\x00 some bytes")
	b64 := base64.StdEncoding.EncodeToString(mod)
	for _, s := range []string{b64, base64.RawStdEncoding.EncodeToString(mod), base64.URLEncoding.EncodeToString(mod),
		" " + b64 + "\n", b64[:8] + "\r\n" + b64[8:], "mods/x.wasm", "  /x.wasm ", "", "   ", "AGFzbQ%%", "AGFzbQ", "3f2a-uuid"} {
		ours, oerr := moduleArg(s)
		theirs, terr := wasm.ModuleArg(s)
		if apierr.CodeOf(oerr) != apierr.CodeOf(terr) || string(ours.Wasm) != string(theirs.Module) || ours.WasmRef != theirs.Ref {
			t.Errorf("%q: server (%q, %q, %v) runtime (%q, %q, %v)", s, ours.Wasm, ours.WasmRef, oerr, theirs.Module, theirs.Ref, terr)
		}
	}
}
