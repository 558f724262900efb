package agenttools

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

func TestParseHeader(t *testing.T) {
	tool, err := ParseHeader("// @tool my_tool\n// @description Does a thing.\n// @input {\"type\":\"object\",\"required\":[\"id\"]}\nreturn 1;\n")
	if err != nil || tool.Name != "my_tool" || tool.Description != "Does a thing." || tool.InputSchema["required"] == nil {
		t.Fatalf("%+v %v", tool, err)
	}
	for _, bad := range []string{"return 1", "// @tool x_y\nreturn 1", "// @tool a\n// @description d\n// @input {nope\n"} {
		if _, err := ParseHeader(bad); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

func TestSaveRules(t *testing.T) { ForBackends(t, testSaveRules) }

func testSaveRules(t *testing.T, cfg hostapi.Config) {
	cfg.DataDir = t.TempDir()
	h, err := hostapi.NewHost(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	tools, err := Register(h)
	if err != nil {
		t.Fatal(err)
	}
	changed := make(chan string, 16)
	tools.OnChange(func(ws string) { changed <- ws })
	waitChange := func(what string) {
		t.Helper()
		select {
		case ws := <-changed:
			if ws != "default" {
				t.Fatalf("%s: change notified for workspace %q", what, ws)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no change notification", what)
		}
	}
	env := h.Env("default", "s")
	save := func(args map[string]any) error {
		_, err := h.Registry.CallTool(context.Background(), env, "tool_save", args)
		return err
	}
	ok := map[string]any{"name": "sum_two", "description": "adds", "code": "return input.a + input.b",
		"input_schema": map[string]any{"type": "object", "properties": map[string]any{"a": map[string]any{"type": "number"}}}}
	if err := save(ok); err != nil {
		t.Fatal(err)
	}
	waitChange("save")
	cases := map[string]map[string]any{
		"bad name":       {"name": "Bad-Name", "description": "d", "code": "return 1"},
		"shadows":        {"name": "tool_list", "description": "d", "code": "return 1"},
		"builtin script": {"name": "csv_preview", "description": "d", "code": "return 1"},
		"syntax":         {"name": "broken", "description": "d", "code": "return (("},
		"schema type":    {"name": "arr_tool", "description": "d", "code": "return 1", "input_schema": map[string]any{"type": "array"}},
		"bad schema":     {"name": "bad_schema", "description": "d", "code": "return 1", "input_schema": map[string]any{"type": "object", "minProperties": "x"}},
		"no description": {"name": "nodesc", "description": "", "code": "return 1"},
	}
	for label, args := range cases {
		if err := save(args); apierr.CodeOf(err) != apierr.ValidationFailed {
			t.Errorf("%s: %v", label, err)
		}
	}
	got, err := h.Registry.CallTool(context.Background(), env, "tool_get", map[string]any{"name": "sum_two"})
	if err != nil || !strings.Contains(mustString(got), `"code":"return input.a + input.b"`) || !strings.Contains(mustString(got), `"version":1`) {
		t.Fatalf("get: %v %v", got, err)
	}
	list, _ := h.Registry.Tools(context.Background(), env)
	names := []string{}
	for _, ti := range list {
		names = append(names, ti.Name)
	}
	if !strings.Contains(strings.Join(names, ","), "sum_two") || !strings.Contains(strings.Join(names, ","), "csv_preview") {
		t.Fatalf("tool list: %v", names)
	}
	if _, err := h.Registry.CallTool(context.Background(), env, "tool_delete", map[string]any{"name": "sum_two"}); err != nil {
		t.Fatal(err)
	}
	waitChange("delete")
	if _, err := h.Registry.CallTool(context.Background(), env, "tool_delete", map[string]any{"name": "sum_two"}); apierr.CodeOf(err) != apierr.NotFound {
		t.Fatalf("second delete: %v", err)
	}
	// Refused saves and deletes notify nobody.
	select {
	case ws := <-changed:
		t.Fatalf("a refused change notified %q", ws)
	default:
	}
	// Without a runner, calling a saved tool says so.
	save(ok)
	if _, err := h.Registry.CallTool(context.Background(), env, "sum_two", map[string]any{"a": 1}); apierr.CodeOf(err) != apierr.ToolWorkerUnavailable {
		t.Fatalf("no runner: %v", err)
	}
}

func TestBuiltinScriptsLoad(t *testing.T) {
	h, _ := hostapi.NewHost(hostapi.Config{DataDir: t.TempDir()})
	defer h.Close()
	tl := &Tools{host: h, builtins: map[string]*Tool{}}
	if err := tl.loadBuiltins(fstest.MapFS{"bad.js": {Data: []byte("return 1")}}); err == nil {
		t.Fatal("a script without a header must stop start-up")
	}
	twice := fstest.MapFS{
		"a.js": {Data: []byte("// @tool same_name\n// @description a\nreturn 1")},
		"b.js": {Data: []byte("// @tool same_name\n// @description b\nreturn 2")},
	}
	if err := tl.loadBuiltins(twice); err == nil || !strings.Contains(err.Error(), "same_name") {
		t.Fatalf("two scripts with one name must stop start-up: %v", err)
	}
}

func mustString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestBuiltinScriptsAreValid checks what start-up does not: every built-in
// script tool passes the checks a saved tool passes (its schema compiles,
// its code parses, its name shadows no meta-tool).
func TestBuiltinScriptsAreValid(t *testing.T) {
	h, err := hostapi.NewHost(hostapi.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	tools, err := Register(h)
	if err != nil {
		t.Fatal(err)
	}
	if len(tools.builtins) < 3 {
		t.Fatalf("built-ins: %v", tools.builtins)
	}
	for name, b := range tools.builtins {
		if err := tools.check(b); err != nil {
			t.Errorf("scripts/%s: %v", name, err)
		}
	}
}
