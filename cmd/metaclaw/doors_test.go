package main

// The door test (issue 12): every example call declared in the registry
// (hostapi.Op.Examples) runs through every door a caller can use —
// JavaScript in the sandbox, the CLI on a data directory and against a
// server, HTTP, MCP over streamable HTTP and over stdio — and each door must
// give the registry's own answer, projected the way that door projects it
// (camelCase for scripts, snake_case for the rest), and contain the
// example's Want. Bad arguments must give the same coded error everywhere.
//
// Nothing here names an operation: the cases come from the registry, so a
// new operation is covered by declaring its examples.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	jsb "github.com/metaclaw/metaclaw/bindings/js"
	"github.com/metaclaw/metaclaw/bindings/ts"
	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/host"
	"github.com/metaclaw/metaclaw/hostapi/store"
	jsrt "github.com/metaclaw/metaclaw/runtime/js"
	"github.com/metaclaw/metaclaw/server"
)

// fixtureDir holds the files examples work on.
var fixtureDir = filepath.Join("..", "..", "testdata", "examples")

// ---- the metaclaw binary, built once per test run ----

var (
	binOnce sync.Once
	binPath string
	binErr  error
	binDir  string
)

// metaclawBinary builds cmd/metaclaw once into a temporary directory (the
// real binary, as users run it); TestMain removes it.
func metaclawBinary(t testing.TB) string {
	t.Helper()
	binOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "metaclaw-bin-")
		if binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "metaclaw")
		goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
		if _, err := os.Stat(goTool); err != nil {
			goTool = "go"
		}
		cmd := exec.Command(goTool, "build", "-o", binPath, ".")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out.String())
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// ---- the doors ----

// answer is what a door said: a result, or a coded error.
type answer struct {
	Value any
	Code  string
	Msg   string
}

func (a answer) String() string {
	if a.Code != "" {
		return a.Code + ": " + a.Msg
	}
	b, _ := json.Marshal(a.Value)
	if len(b) > 600 {
		b = append(b[:600], "…"...)
	}
	return string(b)
}

// fromJSON reads a door's JSON answer: a result, or {"error":{code,message}}.
func fromJSON(b []byte, isError bool) answer {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return answer{Code: "DOOR_BROKEN", Msg: fmt.Sprintf("not JSON (%v): %.300s", err, b)}
	}
	if m, ok := v.(map[string]any); ok && len(m) == 1 {
		if e, ok := m["error"].(map[string]any); ok {
			return answer{Code: fmt.Sprint(e["code"]), Msg: fmt.Sprint(e["message"])}
		}
	}
	if isError {
		return answer{Code: "DOOR_BROKEN", Msg: fmt.Sprintf("an error without {error:{code,message}}: %.300s", b)}
	}
	return answer{Value: v}
}

func fromErr(err error) answer {
	e := apierr.Of(err)
	return answer{Code: string(e.Code), Msg: e.Message}
}

// roundTrip round-trips v through JSON, as every door's answer does.
func roundTrip(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("unencodable: %v", err)
	}
	var out any
	json.Unmarshal(b, &out)
	return out
}

// doors is one host (and server) per door, each on its own data directory,
// with the same workspace names on every one.
type doors struct {
	bin string
	// ref answers through the registry itself; js through the script
	// runner; the others through their transports.
	ref, js, cli, remote, http, mcpHTTP, stdio *hostapi.Host
	remoteURL, httpURL, mcpURL                 string
	cliData, stdioData                         string
	tokens                                     map[string]string // workspace → secret
	closers                                    []func()
}

var (
	doorsOnce sync.Once
	shared    *doors
	doorsErr  error
)

// doorWorkspaces are the workspaces the servers have tokens for: one per
// example, one for bad input.
func doorWorkspaces(reg *hostapi.Registry) []string {
	ws := []string{"bad-input"}
	for _, c := range exampleCases(reg) {
		ws = append(ws, c.ws)
	}
	return ws
}

// sharedDoors builds the doors once per test binary; TestMain closes them.
func sharedDoors(t *testing.T) *doors {
	t.Helper()
	doorsOnce.Do(func() { shared, doorsErr = openDoors(metaclawBinary(t)) })
	if doorsErr != nil {
		t.Fatal(doorsErr)
	}
	return shared
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func openDoors(bin string) (*doors, error) {
	root, err := os.MkdirTemp("", "metaclaw-doors-")
	if err != nil {
		return nil, err
	}
	d := &doors{bin: bin, tokens: map[string]string{}}
	d.closers = append(d.closers, func() { os.RemoveAll(root) })
	open := func(name string) (*hostapi.Host, *host.Parts, error) {
		h, parts, err := host.Open(hostapi.Config{DataDir: filepath.Join(root, name), Log: quietLog()})
		if err != nil {
			return nil, nil, err
		}
		d.closers = append(d.closers, func() { h.Close() })
		ts.Register(h) // as the CLI and the server do
		// Scripts run where `metaclaw serve` runs them: in sandbox
		// workers (this test binary is one, through worker.go). The
		// reference runs them in-process, so the two runners are
		// compared too.
		if name == "ref" {
			if err := setRunners(h, jsrt.New(h), true); err != nil {
				return nil, nil, err
			}
		} else if err := startPool(h, 1, 0); err != nil {
			return nil, nil, err
		}
		return h, parts, nil
	}
	if d.ref, _, err = open("ref"); err != nil {
		return d, err
	}
	var toks []server.Token
	for i, ws := range doorWorkspaces(d.ref.Registry) {
		secret := fmt.Sprintf("door-token-%04d", i)
		d.tokens[ws] = secret
		toks = append(toks, server.Token{Secret: secret, Workspace: ws})
	}
	serve := func(name string) (*hostapi.Host, string, error) {
		h, parts, err := open(name)
		if err != nil {
			return nil, "", err
		}
		srv, err := server.New(server.Config{Host: h, Tools: parts.Tools, Tokens: toks, Log: quietLog(), MaxConcurrentRuns: 256})
		if err != nil {
			return nil, "", err
		}
		ts := httptest.NewServer(srv.Handler())
		d.closers = append(d.closers, ts.Close)
		return h, ts.URL, nil
	}
	if d.js, _, err = open("js"); err != nil {
		return d, err
	}
	if d.cli, _, err = open("cli"); err != nil {
		return d, err
	}
	d.cliData = d.cli.Config.DataDir
	if d.stdio, _, err = open("stdio"); err != nil {
		return d, err
	}
	d.stdioData = d.stdio.Config.DataDir
	if d.remote, d.remoteURL, err = serve("remote"); err != nil {
		return d, err
	}
	if d.http, d.httpURL, err = serve("http"); err != nil {
		return d, err
	}
	if d.mcpHTTP, d.mcpURL, err = serve("mcp-http"); err != nil {
		return d, err
	}
	return d, nil
}

func (d *doors) close() {
	for i := len(d.closers) - 1; i >= 0; i-- {
		d.closers[i]()
	}
}

// door is one way in. Tool doors take snake_case arguments as JSON.
type door struct {
	name string
	host func(d *doors) *hostapi.Host
	call func(ctx context.Context, d *doors, ws, tool string, args []byte) answer
}

// toolDoors are the meta-tool doors, each answering snake_case JSON.
var toolDoors = []door{
	{"cli", func(d *doors) *hostapi.Host { return d.cli }, func(ctx context.Context, d *doors, ws, tool string, args []byte) answer {
		return d.runCLI(ctx, "tool", tool, string(args), "--data", d.cliData, "--workspace", ws)
	}},
	{"cli-remote", func(d *doors) *hostapi.Host { return d.remote }, func(ctx context.Context, d *doors, ws, tool string, args []byte) answer {
		return d.runCLI(ctx, "tool", tool, string(args), "--server", d.remoteURL, "--token", d.tokens[ws])
	}},
	{"http", func(d *doors) *hostapi.Host { return d.http }, func(ctx context.Context, d *doors, ws, tool string, args []byte) answer {
		req, _ := http.NewRequestWithContext(ctx, "POST", d.httpURL+"/api/tools/"+tool, bytes.NewReader(args))
		req.Header.Set("Authorization", "Bearer "+d.tokens[ws])
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return answer{Code: "DOOR_BROKEN", Msg: err.Error()}
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		a := fromJSON(b, resp.StatusCode != 200)
		if a.Code != "" {
			if want := apierr.Code(a.Code).HTTPStatus(); want != resp.StatusCode {
				a.Msg += fmt.Sprintf(" [HTTP %d, want %d]", resp.StatusCode, want)
			}
		}
		return a
	}},
	{"mcp-http", func(d *doors) *hostapi.Host { return d.mcpHTTP }, func(ctx context.Context, d *doors, ws, tool string, args []byte) answer {
		cs, err := d.mcpHTTPSession(ctx, ws)
		if err != nil {
			return answer{Code: "DOOR_BROKEN", Msg: err.Error()}
		}
		defer cs.Close()
		return mcpCall(ctx, cs, tool, args)
	}},
	{"mcp-stdio", func(d *doors) *hostapi.Host { return d.stdio }, func(ctx context.Context, d *doors, ws, tool string, args []byte) answer {
		cs, err := d.mcpStdioSession(ctx, ws)
		if err != nil {
			return answer{Code: "DOOR_BROKEN", Msg: err.Error()}
		}
		defer cs.Close()
		return mcpCall(ctx, cs, tool, args)
	}},
}

// runCLI runs the metaclaw binary and reads its JSON answer: stdout is
// the result (exit 0) or {"error":…} (exit 1).
func (d *doors) runCLI(ctx context.Context, args ...string) answer {
	cmd := exec.CommandContext(ctx, d.bin, append(args, "--session", "door-test")...)
	cmd.Env = cliEnv()
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := cmd.ProcessState.ExitCode()
	if code != 0 && code != 1 {
		return answer{Code: "DOOR_BROKEN", Msg: fmt.Sprintf("exit %d (%v): %s %s", code, err, out.String(), errOut.String())}
	}
	return fromJSON(out.Bytes(), code == 1)
}

// cliEnv is the environment of the CLI children: none of the METACLAW_*
// settings of whoever runs the tests.
func cliEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "METACLAW_") {
			env = append(env, kv)
		}
	}
	return env
}

type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

func (d *doors) mcpHTTPSession(ctx context.Context, ws string) (*mcp.ClientSession, error) {
	c := mcp.NewClient(&mcp.Implementation{Name: "door-test", Version: "1"}, nil)
	return c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: d.mcpURL + "/mcp", DisableStandaloneSSE: true,
		HTTPClient: &http.Client{Transport: bearer{d.tokens[ws]}}}, nil)
}

func (d *doors) mcpStdioSession(ctx context.Context, ws string) (*mcp.ClientSession, error) {
	cmd := exec.Command(d.bin, "mcp", "--data", d.stdioData, "--workspace", ws)
	cmd.Env = cliEnv()
	c := mcp.NewClient(&mcp.Implementation{Name: "door-test", Version: "1"}, nil)
	return c.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 5 * time.Second}, nil)
}

func mcpCall(ctx context.Context, cs *mcp.ClientSession, tool string, args []byte) answer {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: json.RawMessage(args)})
	if err != nil {
		return answer{Code: "DOOR_BROKEN", Msg: err.Error()}
	}
	a := fromJSON([]byte(text(res)), res.IsError)
	if res.IsError || res.StructuredContent == nil {
		return a
	}
	// The structured content is the whole answer: the text is the same,
	// a non-object result wrapped as {"result": …} (MCP wants an object),
	// or a part of it (an image travels as image content, not as text).
	sc := roundTrip(res.StructuredContent)
	if m, ok := sc.(map[string]any); ok && len(m) == 1 && reflect.DeepEqual(m["result"], a.Value) {
		return a
	}
	if diff := contains(sc, a.Value, "structuredContent"); diff != "" {
		return answer{Code: "DOOR_BROKEN", Msg: fmt.Sprintf("the text says what structuredContent does not: %s", diff)}
	}
	return answer{Value: sc}
}

// ---- the examples ----

// exampleCase is one example of one op, with the workspace it runs in.
type exampleCase struct {
	op    *hostapi.Op
	ex    hostapi.Example
	label string // "image_resize#2"
	ws    string
}

// exampleCases lists every example of every op in registry order.
func exampleCases(reg *hostapi.Registry) []exampleCase {
	var out []exampleCase
	for _, op := range reg.Ops() {
		for i, ex := range op.Examples {
			out = append(out, exampleCase{op: op, ex: ex, label: fmt.Sprintf("%s#%d", op.Label(), i+1), ws: fmt.Sprintf("ex-%03d", len(out))})
		}
	}
	return out
}

// prepare uploads the example's fixtures into workspace ws of h and makes
// its setup calls (Example.Setup: a revert needs an edit before it, a
// delete something saved), through h's registry, in order.
func prepare(ctx context.Context, h *hostapi.Host, ws string, c exampleCase) error {
	if err := uploadFixtures(ctx, h, ws, c.ex.Files); err != nil {
		return err
	}
	for _, call := range c.ex.Setup {
		if _, err := h.Registry.CallTool(ctx, h.Env(ws, "door-test"), call.Tool, call.Args); err != nil {
			return fmt.Errorf("setup %s %v: %v", call.Tool, call.Args, err)
		}
	}
	return nil
}

// uploadFixtures puts the example's fixtures into workspace ws of h.
func uploadFixtures(ctx context.Context, h *hostapi.Host, ws string, names []string) error {
	for _, name := range names {
		f, err := os.Open(filepath.Join(fixtureDir, name))
		if err != nil {
			return fmt.Errorf("fixture %s: %v (fixtures live in testdata/examples)", name, err)
		}
		_, err = h.Store.Workspace(ws).Create(ctx, store.CreateOptions{Name: name, Source: store.SourceUpload}, f)
		f.Close()
		if err != nil {
			return fmt.Errorf("upload %s: %v", name, err)
		}
	}
	return nil
}

// referenceAnswers runs args through the registry itself and projects the
// result both ways: snake_case as the meta-tool doors answer, camelCase
// as scripts see it.
func referenceAnswers(ctx context.Context, h *hostapi.Host, ws string, op *hostapi.Op, args map[string]any) (snake, camel answer) {
	res, err := h.Registry.Invoke(ctx, h.Env(ws, "door-test"), op, args)
	if err != nil {
		a := fromErr(err)
		return a, a
	}
	camel = answer{Value: roundTrip(hostapi.Project(res, hostapi.CamelCase))}
	if op.ToolResult != nil {
		res = op.ToolResult(res)
	}
	return answer{Value: roundTrip(hostapi.Project(res, hostapi.SnakeCase))}, camel
}

// jsCall writes a script that calls op's stub with args mapped the way
// bindings/js maps them: positional parameters in order, group parameters
// as one options object with camelCase keys.
func jsCall(op *hostapi.Op, args map[string]any) string { return jsCallExtra(op, args, nil) }

// jsCallExtra is jsCall with extra keys in the first options object (an
// option the stub does not know).
func jsCallExtra(op *hostapi.Op, args, extra map[string]any) string {
	var parts []string
	for _, s := range jsb.SlotInfos(op) {
		if s.Param != nil {
			v, ok := args[s.Param.Name]
			if !ok {
				parts = append(parts, "undefined")
				continue
			}
			parts = append(parts, jsLiteral(camelize(v, s.Param.Schema)))
			continue
		}
		obj := map[string]any{}
		for _, f := range s.Fields {
			if v, ok := args[f.Name]; ok {
				obj[hostapi.CamelName(f.Name)] = camelize(v, f.Schema)
			}
		}
		for k, v := range extra {
			obj[k] = v
		}
		extra = nil
		if len(obj) == 0 {
			parts = append(parts, "undefined")
		} else {
			parts = append(parts, jsLiteral(obj))
		}
	}
	for len(parts) > 0 && parts[len(parts)-1] == "undefined" {
		parts = parts[:len(parts)-1]
	}
	return "return await " + op.Name + "(" + strings.Join(parts, ", ") + ");"
}

// camelize renames the declared properties of object values to camelCase,
// as a script writes them ({numberFormat: …}); free-form data keeps its keys.
func camelize(v any, schema hostapi.Schema) any {
	switch t := v.(type) {
	case map[string]any:
		props, _ := schema["properties"].(hostapi.Schema)
		out := make(map[string]any, len(t))
		for k, x := range t {
			if sub, ok := props[k].(hostapi.Schema); ok {
				out[hostapi.CamelName(k)] = camelize(x, sub)
			} else {
				out[k] = x
			}
		}
		return out
	case []any:
		items, _ := schema["items"].(hostapi.Schema)
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = camelize(x, items)
		}
		return out
	}
	return v
}

func jsLiteral(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// runJS runs code on h's runner and reads the run's result or error.
func runJS(ctx context.Context, h *hostapi.Host, ws, code string) answer {
	res := h.Runner.Run(ctx, h.Env(ws, "door-test"), hostapi.RunRequest{Code: code, Name: "door.js", Limits: hostapi.RunLimits{Timeout: 60 * time.Second}})
	if !res.OK {
		if res.Error == nil {
			return answer{Code: "DOOR_BROKEN", Msg: "a failed run without an error"}
		}
		return answer{Code: string(res.Error.Code), Msg: res.Error.Message}
	}
	return answer{Value: roundTrip(res.Result)}
}

// ---- comparing answers ----

var (
	uuidRE = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	timeRE = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$`)
)

// volatile reports whether key holds a value that differs between two
// equal calls: who made the call, how long it or a part of it took
// (duration_ms, query_elapsed_ms, …).
func volatile(key string) bool {
	k := strings.ToLower(key)
	return k == "source_session_id" || k == "sourcesessionid" || strings.Contains(k, "duration") || strings.Contains(k, "elapsed")
}

// normalize masks ids, times and the volatile keys so that answers from
// different workspaces and doors compare equal.
func normalize(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, x := range t {
			if volatile(k) {
				out[k] = "<volatile>"
				continue
			}
			out[k] = normalize(x)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = normalize(x)
		}
		return out
	case string:
		if timeRE.MatchString(t) {
			return "<time>"
		}
		return uuidRE.ReplaceAllString(t, "<id>")
	}
	return v
}

func sameAnswer(a, b answer) bool {
	if a.Code != "" || b.Code != "" {
		return a.Code == b.Code && a.Msg == b.Msg
	}
	return reflect.DeepEqual(normalize(a.Value), normalize(b.Value))
}

// contains reports whether got holds want: objects key by key, arrays
// element by element (got may be longer), other values exactly (numbers
// as JSON numbers). It returns where they differ.
func contains(got, want any, path string) string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return fmt.Sprintf("%s: got %s, want an object", path, short(got))
		}
		keys := make([]string, 0, len(w))
		for k := range w {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if _, ok := g[k]; !ok {
				return fmt.Sprintf("%s.%s: missing", path, k)
			}
			if d := contains(g[k], w[k], path+"."+k); d != "" {
				return d
			}
		}
		return ""
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) < len(w) {
			return fmt.Sprintf("%s: got %s, want at least %d elements", path, short(got), len(w))
		}
		for i := range w {
			if d := contains(g[i], w[i], fmt.Sprintf("%s[%d]", path, i)); d != "" {
				return d
			}
		}
		return ""
	}
	if !reflect.DeepEqual(got, want) {
		return fmt.Sprintf("%s: got %s, want %s", path, short(got), short(want))
	}
	return ""
}

func short(v any) string {
	b, _ := json.Marshal(v)
	if len(b) > 200 {
		b = append(b[:200], "…"...)
	}
	return string(b)
}

// ---- the tests ----

// TestEveryOpHasAnExample: an operation without an example is not covered
// by the door test, so it fails the build's tests.
func TestEveryOpHasAnExample(t *testing.T) {
	h, _, err := host.Open(hostapi.Config{DataDir: t.TempDir(), Log: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	var missing []string
	for _, op := range h.Registry.Ops() {
		if len(op.Examples) == 0 {
			missing = append(missing, op.Label())
		}
		for i, ex := range op.Examples {
			for _, f := range ex.Files {
				if st, err := os.Stat(filepath.Join(fixtureDir, f)); err != nil || st.Size() > 200<<10 {
					t.Errorf("%s example %d: fixture %s is missing or over 200 KB (%v)", op.Label(), i+1, f, err)
				}
			}
			if ex.Args == nil {
				t.Errorf("%s example %d has no Args (use an empty map for none)", op.Label(), i+1)
			}
		}
	}
	if len(missing) == 0 {
		return
	}
	msg := fmt.Sprintf("%d operations have no example (hostapi.Op.Examples): %s", len(missing), strings.Join(missing, ", "))
	if os.Getenv("METACLAW_ALLOW_MISSING_EXAMPLES") != "" {
		t.Skip(msg)
	}
	t.Fatal(msg)
}

// TestDoors runs every example through every door.
func TestDoors(t *testing.T) {
	d := sharedDoors(t)
	cases := exampleCases(d.ref.Registry)
	if len(cases) == 0 {
		t.Fatal("no examples in the registry")
	}
	for _, c := range cases {
		t.Run(c.label, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			d.runExample(ctx, t, c)
		})
	}
}

func (d *doors) runExample(ctx context.Context, t *testing.T, c exampleCase) {
	args, err := json.Marshal(c.ex.Args)
	if err != nil {
		t.Fatalf("args: %v", err)
	}
	for _, h := range []*hostapi.Host{d.ref, d.js, d.cli, d.remote, d.http, d.mcpHTTP, d.stdio} {
		if err := prepare(ctx, h, c.ws, c); err != nil {
			t.Fatal(err)
		}
	}
	snake, camel := referenceAnswers(ctx, d.ref, c.ws, c.op, c.ex.Args)
	switch {
	case snake.Code != "" && c.op.OpenWorld:
		// An op that reaches outside (a download) may find the world
		// unreachable here; every door must still say so alike.
		t.Logf("%s %s reaches outside and got %s; checking that every door answers the same", c.op.Label(), args, snake)
	case snake.Code != "":
		t.Fatalf("%s %s: the registry answers %s", c.op.Label(), args, snake)
	case c.ex.Want != nil:
		if diff := contains(snake.Value, roundTrip(c.ex.Want), "result"); diff != "" {
			t.Errorf("%s %s: the result does not contain Want: %s\nresult: %s", c.op.Tool, args, diff, snake)
		}
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	got := map[string]answer{}
	if c.op.Name != "" {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := runJS(ctx, d.js, c.ws, jsCall(c.op, c.ex.Args))
			mu.Lock()
			got["js"] = a
			mu.Unlock()
		}()
	}
	if c.op.Tool != "" {
		for _, dr := range toolDoors {
			wg.Add(1)
			go func() {
				defer wg.Done()
				a := dr.call(ctx, d, c.ws, c.op.Tool, args)
				mu.Lock()
				got[dr.name] = a
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	for name, a := range got {
		want := snake
		if name == "js" {
			want = camel
		}
		if !sameAnswer(a, want) {
			call := c.op.Tool + " " + string(args)
			if name == "js" {
				call = jsCall(c.op, c.ex.Args)
			}
			t.Errorf("%s: %s\n got: %s\nwant: %s", name, call, a, want)
		}
	}
}

// ---- bad input ----

// badCase is one malformed call: args as raw JSON, and the argument the
// error must name.
type badCase struct {
	op    *hostapi.Op
	kind  string // "string for a number", …
	param string // the argument the message must name
	args  []byte
	// js is the script making the same mistake, "" where a script cannot
	// make it (an unknown argument of a stub without an options object).
	js string
	// jsOnly cases are mistakes only a script can make (NaN).
	jsOnly bool
}

// schemaTypes lists the JSON types a parameter's schema allows.
func schemaTypes(s hostapi.Schema) map[string]bool {
	out := map[string]bool{}
	switch t := s["type"].(type) {
	case string:
		out[t] = true
	case []any:
		for _, x := range t {
			out[fmt.Sprint(x)] = true
		}
	case []string:
		for _, x := range t {
			out[x] = true
		}
	}
	return out
}

// bigInteger is beyond int64 and beyond every float64-exact integer.
const bigInteger = "100000000000000000000"

// badCases derives the malformed calls of every op with a meta-tool name
// and an example, from the example's arguments: each numeric parameter as
// a string, a float where an integer is required, an integer beyond int64,
// null and nothing for each required parameter, and an unknown argument.
func badCases(reg *hostapi.Registry) []badCase {
	var out []badCase
	for _, op := range reg.Ops() {
		if op.Tool == "" || len(op.Examples) == 0 {
			continue
		}
		base := op.Examples[0].Args
		with := func(kind, param string, raw string, drop bool) {
			m := map[string]json.RawMessage{}
			for k, v := range base {
				b, _ := json.Marshal(v)
				m[k] = b
			}
			jsArgs := map[string]any{}
			for k, v := range base {
				jsArgs[k] = v
			}
			if drop {
				delete(m, param)
				delete(jsArgs, param)
			} else {
				m[param] = json.RawMessage(raw)
				var v any
				dec := json.NewDecoder(strings.NewReader(raw))
				dec.UseNumber()
				dec.Decode(&v)
				jsArgs[param] = v
			}
			b, _ := json.Marshal(m)
			c := badCase{op: op, kind: kind, param: param, args: b}
			switch {
			case op.Name == "":
			case kind == "unknown argument" && hasGroup(op):
				delete(jsArgs, param)
				c.js = jsCallExtra(op, jsArgs, map[string]any{hostapi.CamelName(param): 1})
			case kind != "unknown argument":
				c.js = jsCall(op, jsArgs)
			}
			out = append(out, c)
		}
		for _, p := range op.Params {
			types := schemaTypes(p.Schema)
			numeric := types["integer"] || types["number"]
			if numeric && !types["string"] {
				with("string for a number", p.Name, `"7"`, false)
			}
			if types["integer"] && !types["number"] {
				with("float for an integer", p.Name, "1.5", false)
			}
			if types["integer"] {
				with("integer beyond int64", p.Name, bigInteger, false)
			}
			if p.Required {
				with("null", p.Name, "null", false)
				with("missing", p.Name, "", true)
			}
		}
		with("unknown argument", "no_such_arg", "1", false)
		// NaN and ±Infinity exist only in scripts: JSON has no way to say
		// them. Each replaces the first number in a parameter's value.
		if op.Name != "" {
			for _, p := range op.Params {
				v, ok := base[p.Name]
				if !ok {
					continue
				}
				for _, bad := range []string{"NaN", "Infinity", "-Infinity"} {
					if nv, found := replaceFirstNumber(v, jsRawMarker(bad)); found {
						args := map[string]any{}
						for k, x := range base {
							args[k] = x
						}
						args[p.Name] = nv
						out = append(out, badCase{op: op, kind: bad + " from a script", param: p.Name, jsOnly: true,
							js: strings.ReplaceAll(jsCall(op, args), `"`+jsRawMarker(bad)+`"`, bad)})
					}
				}
			}
		}
	}
	return out
}

// jsRawMarker stands for a JS literal that JSON cannot write; jsCall's
// output has it quoted, and the caller swaps it for the literal.
func jsRawMarker(lit string) string { return "@@js:" + lit + "@@" }

// replaceFirstNumber replaces the first number inside v (depth first) with
// with; found says whether there was one.
func replaceFirstNumber(v any, with any) (any, bool) {
	switch t := v.(type) {
	case int, int64, float64, json.Number:
		return with, true
	case []any:
		out := append([]any(nil), t...)
		for i, x := range t {
			if nv, ok := replaceFirstNumber(x, with); ok {
				out[i] = nv
				return out, true
			}
		}
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if nv, ok := replaceFirstNumber(t[k], with); ok {
				out := make(map[string]any, len(t))
				for k2, x := range t {
					out[k2] = x
				}
				out[k] = nv
				return out, true
			}
		}
	}
	return v, false
}

func hasGroup(op *hostapi.Op) bool {
	for _, p := range op.Params {
		if p.Group != "" {
			return true
		}
	}
	return false
}

// namesArg reports whether msg names the argument, as the meta-tool
// doors write it or as a script does (camelCase).
func namesArg(msg, param string) bool {
	return strings.Contains(msg, param) || strings.Contains(msg, hostapi.CamelName(param))
}

// cliSample is how many ops each kind of mistake is tried on through the
// CLI doors, which start a process per call; the other doors try every
// case. The CLI hands its JSON to the same decoder as HTTP does, so what a
// CLI door could break (re-encoding numbers, nulls, unknown keys) shows
// on a few ops of each kind.
const cliSample = 3

// TestBadInputEveryDoor: every malformed call gives VALIDATION_FAILED
// naming the argument, the same from every door.
func TestBadInputEveryDoor(t *testing.T) {
	d := sharedDoors(t)
	cases := badCases(d.ref.Registry)
	if len(cases) == 0 {
		t.Fatal("no bad-input cases: no op has an example")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const ws = "bad-input"
	stdio, err := d.mcpStdioSession(ctx, ws)
	if err != nil {
		t.Fatal(err)
	}
	defer stdio.Close()
	mcpHTTP, err := d.mcpHTTPSession(ctx, ws)
	if err != nil {
		t.Fatal(err)
	}
	defer mcpHTTP.Close()
	sessions := map[string]*mcp.ClientSession{"mcp-stdio": stdio, "mcp-http": mcpHTTP}

	perKind := map[string]int{}
	var timeMu sync.Mutex
	spent := map[string]time.Duration{}
	calls := map[string]int{}
	timed := func(door string, start time.Time) {
		timeMu.Lock()
		spent[door] += time.Since(start)
		calls[door]++
		timeMu.Unlock()
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	for _, c := range cases {
		label := fmt.Sprintf("%s %s (%s)", c.op.Tool, c.args, c.kind)
		if c.jsOnly {
			label = fmt.Sprintf("%s (%s)", c.js, c.kind)
		}
		if c.js != "" {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sem <- struct{}{}
				defer func() { <-sem }()
				defer timed("js", time.Now())
				a := runJS(ctx, d.js, ws, c.js)
				if a.Code != string(apierr.ValidationFailed) || !namesArg(a.Msg, c.param) {
					t.Errorf("%s: js %s answers %s; want VALIDATION_FAILED naming %q", label, c.js, a, c.param)
				}
			}()
		}
		if c.jsOnly {
			perKind[c.kind]++
			continue
		}
		ref := fromErr(func() error {
			_, err := d.ref.Registry.CallToolJSON(ctx, d.ref.Env(ws, "door-test"), c.op.Tool, c.args)
			return err
		}())
		if ref.Code != string(apierr.ValidationFailed) || !namesArg(ref.Msg, c.param) {
			t.Errorf("%s: the registry answers %s; want VALIDATION_FAILED naming %q", label, ref, c.param)
			continue
		}
		useCLI := perKind[c.kind] < cliSample
		perKind[c.kind]++
		for _, dr := range toolDoors {
			if strings.HasPrefix(dr.name, "cli") && !useCLI {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				sem <- struct{}{}
				defer func() { <-sem }()
				defer timed(dr.name, time.Now())
				var a answer
				if cs := sessions[dr.name]; cs != nil {
					a = mcpCall(ctx, cs, c.op.Tool, c.args)
				} else {
					a = dr.call(ctx, d, ws, c.op.Tool, c.args)
				}
				if !sameAnswer(a, ref) {
					t.Errorf("%s: %s answers %s\nwant %s", label, dr.name, a, ref)
				}
			}()
		}
	}
	wg.Wait()
	t.Logf("%d malformed calls (%d kinds) through every door", len(cases), len(perKind))
	for door, d := range spent {
		t.Logf("  %-10s %4d calls, %v", door, calls[door], d.Round(time.Millisecond))
	}
	// Nothing was written by any of them.
	for _, h := range []*hostapi.Host{d.ref, d.js, d.cli, d.remote, d.http, d.mcpHTTP, d.stdio} {
		if list, err := h.Store.Workspace(ws).List(ctx, ""); err != nil || len(list) != 0 {
			t.Errorf("%s: the bad calls left files: %v %v", h.Config.DataDir, list, err)
		}
	}
}

// ---- numbers of every Go type ----

// numberVariants are the Go types a number may arrive as from an embedder
// or a decoder: each must give the same result.
var numberVariants = []struct {
	name string
	conv func(f float64, text string) any
}{
	{"int", func(f float64, _ string) any {
		if f == float64(int(f)) {
			return int(f)
		}
		return f
	}},
	{"int64", func(f float64, _ string) any {
		if f == float64(int64(f)) {
			return int64(f)
		}
		return f
	}},
	{"float64", func(f float64, _ string) any { return f }},
	{"json.Number", func(_ float64, text string) any { return json.Number(text) }},
}

// withNumbers rewrites every number inside v with conv; it reports
// whether there was one.
func withNumbers(v any, conv func(float64, string) any) (any, bool) {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		found := false
		for k, x := range t {
			var f bool
			out[k], f = withNumbers(x, conv)
			found = found || f
		}
		return out, found
	case []any:
		out := make([]any, len(t))
		found := false
		for i, x := range t {
			var f bool
			out[i], f = withNumbers(x, conv)
			found = found || f
		}
		return out, found
	case json.Number:
		f, _ := t.Float64()
		return conv(f, t.String()), true
	}
	return v, false
}

// TestNumberTypes feeds every example's numbers as int, int64, float64
// and json.Number through the registry's meta-tool entry point: the
// results must be identical.
func TestNumberTypes(t *testing.T) {
	d := sharedDoors(t)
	tried := 0
	for _, c := range exampleCases(d.ref.Registry) {
		if c.op.Tool == "" {
			continue
		}
		// The example's arguments with numbers kept as written.
		raw, _ := json.Marshal(c.ex.Args)
		base, err := hostapi.ParseArgs(raw)
		if err != nil {
			t.Fatalf("%s: %v", c.label, err)
		}
		if _, found := withNumbers(map[string]any(base), func(f float64, _ string) any { return f }); !found {
			continue
		}
		tried++
		t.Run(c.label, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			var first answer
			for i, v := range numberVariants {
				args, _ := withNumbers(map[string]any(base), v.conv)
				ws := fmt.Sprintf("num-%s-%s", c.ws, v.name)
				if err := prepare(ctx, d.ref, ws, c); err != nil {
					t.Fatal(err)
				}
				res, err := d.ref.Registry.CallTool(ctx, d.ref.Env(ws, "door-test"), c.op.Tool, args.(map[string]any))
				a := answer{Value: roundTrip(res)}
				if err != nil {
					a = fromErr(err)
				}
				if a.Code != "" && !c.op.OpenWorld {
					t.Errorf("%s as %s: %s", raw, v.name, a)
				}
				if i == 0 {
					first = a
				} else if !sameAnswer(a, first) {
					t.Errorf("%s: numbers as %s give\n%s\nbut as %s\n%s", raw, v.name, a, numberVariants[0].name, first)
				}
			}
		})
	}
	if tried == 0 {
		t.Fatal("no example has a number to vary")
	}
}

// TestToolListsAgree: the CLI's `tools --json`, GET /api/tools and MCP's
// tools/list offer the same tools, and the CLI and HTTP lists carry every
// op's examples as the registry declares them.
func TestToolListsAgree(t *testing.T) {
	d := sharedDoors(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const ws = "bad-input"
	want := map[string]any{} // tool → its examples as JSON
	for _, op := range d.ref.Registry.Ops() {
		if op.Tool != "" {
			want[op.Tool] = roundTrip(op.Examples)
		}
	}
	lists := map[string]map[string]any{}
	read := func(door string, b []byte) {
		var res struct {
			Tools []struct {
				Name     string
				Examples any
			}
		}
		if err := json.Unmarshal(b, &res); err != nil {
			t.Fatalf("%s: %v: %.300s", door, err, b)
		}
		lists[door] = map[string]any{}
		for _, tl := range res.Tools {
			lists[door][tl.Name] = tl.Examples
		}
	}
	out, errOut, code := cli(t, "tools", "--json", "--data", d.cliData, "--workspace", ws)
	if code != 0 {
		t.Fatalf("tools --json: %d %s", code, errOut)
	}
	read("cli", []byte(out))
	req, _ := http.NewRequestWithContext(ctx, "GET", d.httpURL+"/api/tools", nil)
	req.Header.Set("Authorization", "Bearer "+d.tokens[ws])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	read("http", b)
	cs, err := d.mcpHTTPSession(ctx, ws)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	lt, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	lists["mcp"] = map[string]any{}
	for _, tl := range lt.Tools {
		lists["mcp"][tl.Name] = nil
	}
	for tool, examples := range want {
		for door, list := range lists {
			got, ok := list[tool]
			if !ok {
				t.Errorf("%s does not offer %s", door, tool)
				continue
			}
			if door != "mcp" && !reflect.DeepEqual(got, examples) && !(got == nil && len(examples.([]any)) == 0) {
				t.Errorf("%s: %s's examples are %s, want %s", door, tool, short(got), short(examples))
			}
		}
	}
	for door, list := range lists {
		for tool := range list {
			if _, ok := want[tool]; !ok && door != "mcp" && !d.ref.Registry.IsBuiltin(tool) {
				// Saved and built-in script tools come from the workspace;
				// every door must still agree on them.
				for other, l := range lists {
					if _, ok := l[tool]; !ok {
						t.Errorf("%s offers %s but %s does not", door, tool, other)
					}
				}
			}
		}
	}
}
