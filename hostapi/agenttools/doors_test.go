package agenttools_test

// These tests run saved tools, built-in script tools and run_script on the
// real goja runner, with arguments given as raw JSON bytes the way the
// HTTP, MCP and CLI doors receive them (Registry.CallToolJSON).

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/agenttools"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/files"
	"github.com/metaclaw/metaclaw/hostapi/hosttest"
	jsrun "github.com/metaclaw/metaclaw/runtime/js"
	"github.com/metaclaw/metaclaw/runtime/wasm"
)

type door struct {
	t   *testing.T
	h   *hostapi.Host
	env *hostapi.Env
}

// withCfg is base (a backend's config) with the test's limits.
func withCfg(base, test hostapi.Config) hostapi.Config {
	test.Backend = base.Backend
	return test
}

func newDoor(t *testing.T, cfg hostapi.Config) *door {
	t.Helper()
	h := hosttest.New(t, cfg, files.Register, func(h *hostapi.Host) error {
		_, err := agenttools.Register(h)
		return err
	})
	// Scripts on goja, modules on wazero, as a server runs them.
	mods, err := wasm.New(h, wasm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h.Runner = hostapi.Runners{JS: jsrun.New(h), WASM: mods.ForHost()}
	return &door{t: t, h: h, env: h.Env("default", "s1")}
}

// call runs a tool with raw JSON arguments and returns its answer as JSON.
func (d *door) call(tool, raw string) (string, error) {
	d.t.Helper()
	v, err := d.h.Registry.CallToolJSON(context.Background(), d.env, tool, []byte(raw))
	if err != nil {
		return "", err
	}
	b, err := json.Marshal(v)
	if err != nil {
		d.t.Fatal(err)
	}
	return string(b), nil
}

func (d *door) must(tool, raw string) string {
	d.t.Helper()
	s, err := d.call(tool, raw)
	if err != nil {
		d.t.Fatalf("%s %s: %v", tool, raw, err)
	}
	return s
}

func (d *door) expect(code apierr.Code, contains, tool, raw string) {
	d.t.Helper()
	_, err := d.call(tool, raw)
	if apierr.CodeOf(err) != code {
		d.t.Fatalf("%s %s: want %s, got %v", tool, raw, code, err)
	}
	if !strings.Contains(err.Error(), contains) {
		d.t.Fatalf("%s %s: error %q does not say %q", tool, raw, err, contains)
	}
}

// runResult runs a script through run_script and returns its result JSON.
func (d *door) runResult(raw string) string {
	d.t.Helper()
	out := d.must("run_script", raw)
	var res struct {
		OK     bool            `json:"ok"`
		Result json.RawMessage `json:"result"`
		Error  any             `json:"error"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || !res.OK {
		d.t.Fatalf("run_script %s: %s", raw, out)
	}
	return string(res.Result)
}

func TestRunScriptInputKeepsNumbers(t *testing.T) {
	d := newDoor(t, hostapi.Config{})
	cases := []struct{ input, want string }{
		{`{"n": 5}`, `{"sum":6,"type":"number"}`},
		{`{"n": 2.5}`, `{"sum":3.5,"type":"number"}`},
		{`{"n": -0.125e1}`, `{"sum":-0.25,"type":"number"}`},
		{`{"n": 9007199254740991}`, `{"sum":9007199254740992,"type":"number"}`},
		{`{"n": "5"}`, `{"sum":"51","type":"string"}`},
	}
	for _, c := range cases {
		got := d.runResult(`{"code": "return {type: typeof input.n, sum: input.n + 1};", "input": ` + c.input + `}`)
		if got != c.want {
			t.Errorf("input %s: got %s, want %s", c.input, got, c.want)
		}
	}
	if got := d.runResult(`{"code": "return [input, typeof input];", "input": 42}`); got != `[42,"number"]` {
		t.Errorf("scalar input: %s", got)
	}
	if got := d.runResult(`{"code": "return input === undefined || input === null;", "input": null}`); got != `true` {
		t.Errorf("null input: %s", got)
	}
	if got := d.runResult(`{"code": "return input.list.map((x) => x * 2);", "input": {"list": [1, 2.5, 3]}}`); got != `[2,5,6]` {
		t.Errorf("numbers in arrays: %s", got)
	}
	// Numbers that cannot be carried exactly are refused, naming the argument.
	d.expect(apierr.ValidationFailed, `"input.n"`, "run_script", `{"code": "return 1", "input": {"n": 1e400}}`)
	d.expect(apierr.ValidationFailed, `"input.n"`, "run_script", `{"code": "return 1", "input": {"n": 123456789012345678901234567890}}`)
	// A big result number comes back as the number JS computed.
	if got := d.runResult(`{"code": "return 2 ** 64;"}`); got != `18446744073709552000` {
		t.Errorf("big result: %s", got)
	}
}

func TestRunScriptTimeoutArgument(t *testing.T) {
	d := newDoor(t, hostapi.Config{})
	out := d.must("run_script", `{"code": "for (;;) {}", "timeout_ms": 50}`)
	if !strings.Contains(out, `"ok":false`) || !strings.Contains(out, `"code":"TIMEOUT"`) || !strings.Contains(out, "50ms") {
		t.Fatalf("timeout: %s", out)
	}
	// timeout_ms is bounded by the host's maximum; beyond it, or beyond
	// int64, the call is refused before anything runs.
	maxMs := d.h.Config.MaxLimits.Timeout.Milliseconds()
	d.expect(apierr.ValidationFailed, "timeout_ms", "run_script", fmt.Sprintf(`{"code": "return 1", "timeout_ms": %d}`, maxMs+1))
	d.expect(apierr.ValidationFailed, "timeout_ms", "run_script", `{"code": "return 1", "timeout_ms": 1e19}`)
	d.expect(apierr.ValidationFailed, "timeout_ms", "run_script", `{"code": "return 1", "timeout_ms": 9223372036854775808}`)
	d.expect(apierr.ValidationFailed, "timeout_ms", "run_script", `{"code": "return 1", "timeout_ms": 0}`)
	d.expect(apierr.ValidationFailed, "timeout_ms", "run_script", `{"code": "return 1", "timeout_ms": 2.5}`)
	d.expect(apierr.ValidationFailed, "timeout_ms", "run_script", `{"code": "return 1", "timeout_ms": "100"}`)
	// null means absent: the default applies.
	if got := d.runResult(`{"code": "return 7;", "timeout_ms": null, "input": null}`); got != `7` {
		t.Fatalf("null timeout: %s", got)
	}
	if got := d.runResult(fmt.Sprintf(`{"code": "return 8;", "timeout_ms": %d}`, maxMs)); got != `8` {
		t.Fatalf("max timeout: %s", got)
	}
}

func TestSavedToolsGetNumbers(t *testing.T) { agenttools.ForBackends(t, testSavedToolsGetNumbers) }

func testSavedToolsGetNumbers(t *testing.T, cfg hostapi.Config) {
	d := newDoor(t, withCfg(cfg, hostapi.Config{}))
	saved := d.must("tool_save", `{"name": "add_nums", "description": "Add a and b (and c when given)",
		"input_schema": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}, "c": {"type": "integer"}}, "required": ["a", "b"]},
		"code": "return input.c === undefined ? input.a + input.b : [input.a + input.b + input.c, Object.keys(input).length];"}`)
	if saved != `{"name":"add_nums","version":1}` {
		t.Fatalf("save: %s", saved)
	}
	for raw, want := range map[string]string{
		`{"a": 2, "b": 3}`:            `5`,
		`{"a": 2.5, "b": 0.25}`:       `2.75`,
		`{"a": -1, "b": 1e2}`:         `99`,
		`{"a": 2, "b": 3, "c": null}`: `5`, // null means absent
		`{"a": 2, "b": 3, "c": 4}`:    `[9,3]`,
	} {
		if got := d.must("add_nums", raw); got != want {
			t.Errorf("add_nums %s = %s, want %s", raw, got, want)
		}
	}
	d.expect(apierr.ValidationFailed, "add_nums", "add_nums", `{"a": "2", "b": 3}`)
	d.expect(apierr.ValidationFailed, "add_nums", "add_nums", `{"a": 2}`)
	d.expect(apierr.ValidationFailed, "add_nums", "add_nums", `{"a": null, "b": 3}`)
	d.expect(apierr.ValidationFailed, "add_nums", "add_nums", `{"a": 2, "b": 3, "c": 1.5}`)
	d.expect(apierr.ValidationFailed, `"a"`, "add_nums", `{"a": 1e400, "b": 3}`)

	// From a script, tools.call hands the same numbers over.
	if got := d.runResult(`{"code": "return await tools.call(\"add_nums\", {a: input.x, b: 0.5, c: null});", "input": {"x": 4}}`); got != `4.5` {
		t.Fatalf("tools.call: %s", got)
	}
	// A saved tool may call built-in meta-tools through tools.call.
	d.must("file_create", `{"name": "n.txt", "content": "a\nb\nc\n"}`)
	if got := d.runResult(`{"code": "return await tools.call(\"file_line_count\", {id: \"n.txt\"});"}`); got != `3` {
		t.Fatalf("tools.call of a meta-tool: %s", got)
	}
}

func TestBuiltinScriptToolsThroughJSON(t *testing.T) {
	d := newDoor(t, hostapi.Config{})
	d.must("file_create", `{"name": "people.csv", "content": "name,city\nAna,Lisboa\nBo,Oslo\nCy,Rome\n"}`)
	got := d.must("csv_preview", `{"id": "people.csv", "rows": 2}`)
	want := `{"delimiter":",","markdown":"| name | city |\n| --- | --- |\n| Ana | Lisboa |\n| Bo | Oslo |","shownRows":2,"totalLines":4}`
	if got != want {
		t.Fatalf("csv_preview rows=2:\n got %s\nwant %s", got, want)
	}
	if got := d.must("csv_preview", `{"id": "people.csv", "rows": null}`); !strings.Contains(got, `"shownRows":3`) {
		t.Fatalf("csv_preview rows=null means the default: %s", got)
	}
	d.expect(apierr.ValidationFailed, "csv_preview", "csv_preview", `{"id": "people.csv", "rows": 0}`)
	d.expect(apierr.ValidationFailed, "csv_preview", "csv_preview", `{"id": "people.csv", "rows": "2"}`)
	d.expect(apierr.NotFound, "missing.csv", "csv_preview", `{"id": "missing.csv"}`)

	d.must("file_create", `{"name": "b/big.txt", "content": "0123456789"}`)
	got = d.must("workspace_overview", `{"top": 1}`)
	if !strings.Contains(got, `"files":2`) || !strings.Contains(got, `"largest":[{"modifiedOn":`) || strings.Count(got, `"name":`) != 2 ||
		!strings.Contains(got, `"name":"people.csv"`) || !strings.Contains(got, `"totalBytes":47`) {
		t.Fatalf("workspace_overview top=1: %s", got)
	}
	if got := d.must("tour_demo", `{}`); !strings.Contains(got, `"lines":4`) || !strings.Contains(got, `"total":7}`) {
		t.Fatalf("tour_demo: %s", got)
	}
}

func TestToolSizeLimit(t *testing.T) { agenttools.ForBackends(t, testToolSizeLimit) }

func testToolSizeLimit(t *testing.T, cfg hostapi.Config) {
	d := newDoor(t, withCfg(cfg, hostapi.Config{}))
	save := func(name, code, desc string) error {
		args, _ := json.Marshal(map[string]any{"name": name, "description": desc, "code": code})
		_, err := d.call("tool_save", string(args))
		return err
	}
	// Tools of 5 MB of code each (issue 11 saved 40 of them): every one is
	// refused and nothing is stored. Three make the point; each parse of
	// 5 MB of JSON costs time.
	big := "return 1;//" + strings.Repeat("x", 5<<20)
	for i := range 3 {
		if err := save(fmt.Sprintf("big_%02d", i), big, "big"); apierr.CodeOf(err) != apierr.TooLarge || !strings.Contains(err.Error(), "256 KB") {
			t.Fatalf("5 MB tool %d: %v", i, err)
		}
	}
	if got := d.must("tool_list", `{}`); strings.Contains(got, "big_") {
		t.Fatalf("a refused tool was stored: %s", got)
	}
	// The limit counts code, schema and description together.
	desc := "fits exactly"
	fits := "return 1;//" + strings.Repeat("x", agenttools.MaxToolBytes-len("return 1;//")-len(desc)-len(`{"type":"object"}`))
	if err := save("just_fits", fits, desc); err != nil {
		t.Fatalf("a tool of exactly the limit: %v", err)
	}
	if err := save("one_over", fits+"x", desc); apierr.CodeOf(err) != apierr.TooLarge {
		t.Fatalf("one byte over: %v", err)
	}
	if err := save("long_desc", "return 1", strings.Repeat("d", 4097)); apierr.CodeOf(err) != apierr.ValidationFailed || !strings.Contains(err.Error(), "4096") {
		t.Fatalf("long description: %v", err)
	}
	if got := d.must("just_fits", `{}`); got != `1` {
		t.Fatalf("the tool that fits runs: %s", got)
	}
}

func TestRunScriptDescription(t *testing.T) {
	d := newDoor(t, hostapi.Config{})
	op := d.h.Registry.ByTool("run_script")
	if lim := hostapi.DefaultLimits(); lim.Timeout != 30*time.Second || lim.MemoryBytes != 256<<20 {
		t.Fatalf("the defaults changed (%+v): update this test", lim)
	}
	for _, want := range []string{"files", "tools", "input", "session", "console", "top-level await and return",
		"search_api", "Limits per run: 30 s (timeout_ms raises it up to 10 min)", "256 MB memory", "1 MB of console output", "10 MB result"} {
		if !strings.Contains(op.Doc, want) {
			t.Errorf("run_script's description lacks %q: %s", want, op.Doc)
		}
	}
	// It is part of the small "code" tool profile: keep it within ~350
	// tokens (characters / 4) with its schema and example (JavaScript and
	// the wasm argument for modules).
	tools, err := d.h.Registry.Tools(context.Background(), d.env)
	if err != nil {
		t.Fatal(err)
	}
	for _, ti := range tools {
		if ti.Name == "run_script" {
			b, _ := json.Marshal(ti)
			if len(b)/4 > 350 {
				t.Fatalf("run_script's tool entry is %d tokens: %s", len(b)/4, b)
			}
			return
		}
	}
	t.Fatal("run_script is not listed")
}

func TestRunScriptLimitsFollowTheHost(t *testing.T) {
	lim := hostapi.DefaultLimits()
	lim.MemoryBytes = 512 << 20
	lim.Timeout = 90 * time.Second
	d := newDoor(t, hostapi.Config{Limits: lim})
	if doc := d.h.Registry.ByTool("run_script").Doc; !strings.Contains(doc, "512 MB memory") || !strings.Contains(doc, "90 s (") {
		t.Fatalf("the description does not follow the host's limits: %s", doc)
	}
}

func TestSavedToolsCountTowardTheQuota(t *testing.T) {
	agenttools.ForBackends(t, testSavedToolsCountTowardTheQuota)
}

func testSavedToolsCountTowardTheQuota(t *testing.T, cfg hostapi.Config) {
	d := newDoor(t, withCfg(cfg, hostapi.Config{MaxWorkspaceSize: 1 << 20}))
	tool := func(name string, kb int) string {
		b, _ := json.Marshal(map[string]any{"name": name, "description": "d", "code": "return 1;//" + strings.Repeat("x", kb<<10-len("return 1;//d{\"type\":\"object\"}"))})
		return string(b)
	}
	used := func() int64 {
		u, _, err := d.env.WS.Usage()
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	for i := range 5 {
		d.must("tool_save", tool(fmt.Sprintf("tool_%d", i), 200))
	}
	if got := used(); got != 5*200<<10 {
		t.Fatalf("five 200 KB tools use %d bytes", got)
	}
	d.expect(apierr.QuotaExceeded, "quota", "tool_save", tool("tool_5", 200))
	if got := d.must("tool_list", `{}`); strings.Contains(got, "tool_5") || used() != 5*200<<10 {
		t.Fatalf("a refused tool was stored or charged: %d %s", used(), got)
	}
	// Files and tools share the quota.
	d.expect(apierr.QuotaExceeded, "quota", "file_create", `{"name": "f.txt", "content": "`+strings.Repeat("y", 50<<10)+`"}`)
	// A new version replaces its charge; deleting a tool frees it.
	d.must("tool_save", tool("tool_0", 10))
	if got := used(); got != 4*200<<10+10<<10 {
		t.Fatalf("after a smaller version: %d", got)
	}
	d.must("tool_save", tool("tool_5", 200))
	d.must("tool_delete", `{"name": "tool_1"}`)
	d.must("tool_delete", `{"name": "tool_2"}`)
	if got := used(); got != 3*200<<10+10<<10 {
		t.Fatalf("after deletes: %d", got)
	}
	d.must("file_create", `{"name": "f.txt", "content": "`+strings.Repeat("y", 50<<10)+`"}`)
	if got := d.must("tool_5", `{}`); got != `1` {
		t.Fatalf("tool_5 runs: %s", got)
	}
}
