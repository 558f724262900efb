package wasm_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/store"
	"github.com/metaclaw/metaclaw/runtime/wasm"
)

// TestRegistryExamplesThroughWASM is the door test for the WASM door: every
// example of every operation, called from a Go module through the host
// ABI, answers what the registry answers the meta-tool doors (same value
// up to ids and times, same error code and message) and contains the
// example's Want. Read-only operations answer the same by their JS name.
func TestRegistryExamplesThroughWASM(t *testing.T) {
	h := sharedHost(t)
	r := sharedRunner(t)
	bin := probe(t)
	n := 0
	for _, op := range h.Registry.Ops() {
		for i, ex := range op.Examples {
			n++
			label := fmt.Sprintf("%s#%d", op.Label(), i+1)
			refWS, wasmWS := fmt.Sprintf("exref-%03d", n), fmt.Sprintf("exwasm-%03d", n)
			t.Run(label, func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				for _, ws := range []string{refWS, wasmWS} {
					if err := prepareExample(ctx, h, ws, ex); err != nil {
						t.Fatal(err)
					}
				}
				want := referenceAnswer(ctx, h, refWS, op, ex.Args)
				if want.Code == string(apierr.ToolWorkerUnavailable) {
					t.Skipf("%s needs a script runner, which this host has none of (the JS runtime's tests cover it)", label)
				}
				name := op.Tool
				if name == "" {
					name = op.Name
				}
				got := wasmAnswer(t, r, h.Env(wasmWS, "wasm-door"), bin, name, ex.Args)
				if want.Code != "" && op.OpenWorld {
					if got.Code != want.Code {
						t.Fatalf("%s reaches outside: the registry answers %s, the module got %s", label, want, got)
					}
					return
				}
				if !sameAnswer(got, want) {
					t.Fatalf("%s %v\n module got: %s\nregistry says: %s", name, ex.Args, got, want)
				}
				if want.Code == "" && ex.Want != nil {
					if diff := contains(got.Value, roundTrip(ex.Want), "result"); diff != "" {
						t.Fatalf("%s: the module's result does not contain Want: %s\nresult: %s", label, diff, got)
					}
				}
				if op.ReadOnly && op.Name != "" && op.Tool != "" {
					byJS := wasmAnswer(t, r, h.Env(wasmWS, "wasm-door"), bin, op.Name, ex.Args)
					if !sameAnswer(byJS, got) {
						t.Fatalf("%s answers %s by its JS name and %s by its tool name", label, byJS, got)
					}
				}
			})
		}
	}
	if n < 40 {
		t.Fatalf("only %d examples in the registry", n)
	}
}

// answer is a result or a coded error, as JSON values.
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

func prepareExample(ctx context.Context, h *hostapi.Host, ws string, ex hostapi.Example) error {
	for _, name := range ex.Files {
		f, err := os.Open(filepath.Join("..", "..", "testdata", "examples", name))
		if err != nil {
			return err
		}
		_, err = h.Store.Workspace(ws).Create(ctx, store.CreateOptions{Name: name, Source: store.SourceUpload}, f)
		f.Close()
		if err != nil {
			return fmt.Errorf("upload %s: %v", name, err)
		}
	}
	for _, call := range ex.Setup {
		if _, err := h.Registry.CallTool(ctx, h.Env(ws, "setup"), call.Tool, call.Args); err != nil {
			return fmt.Errorf("setup %s: %v", call.Tool, err)
		}
	}
	return nil
}

// referenceAnswer is what the meta-tool doors answer (for an op without a
// tool name, its snake_case projection).
func referenceAnswer(ctx context.Context, h *hostapi.Host, ws string, op *hostapi.Op, args map[string]any) answer {
	env := h.Env(ws, "wasm-door")
	var res any
	var err error
	if op.Tool != "" {
		res, err = h.Registry.CallTool(ctx, env, op.Tool, args)
	} else if res, err = h.Registry.Invoke(ctx, env, op, args); err == nil {
		res = hostapi.Project(res, hostapi.SnakeCase)
	}
	if err != nil {
		e := apierr.Of(err)
		return answer{Code: string(e.Code), Msg: e.Message}
	}
	return answer{Value: roundTrip(res)}
}

// wasmAnswer calls name with args from the probe module.
func wasmAnswer(t *testing.T, r *wasm.Runner, env *hostapi.Env, bin []byte, name string, args map[string]any) answer {
	t.Helper()
	res := r.Run(context.Background(), env, wasm.Request{Module: bin, Input: map[string]any{"mode": "call", "op": name, "args": args},
		Limits: hostapi.RunLimits{Timeout: 2 * time.Minute}})
	var got struct {
		Result json.RawMessage
		Error  *struct{ Code, Message string }
	}
	decode(t, res, &got)
	if got.Error != nil {
		return answer{Code: got.Error.Code, Msg: got.Error.Message}
	}
	var v any
	if err := json.Unmarshal(got.Result, &v); err != nil {
		t.Fatalf("the module's result is not JSON: %v", err)
	}
	return answer{Value: v}
}

func roundTrip(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("unencodable: %v", err)
	}
	var out any
	json.Unmarshal(b, &out)
	return out
}

var (
	uuidRE = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	timeRE = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$`)
)

// normalize masks what differs between two workspaces: ids, times, the
// session and timings.
func normalize(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, x := range t {
			if k == "source_session_id" || strings.HasSuffix(k, "_ms") {
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
		return a.Code == b.Code && uuidRE.ReplaceAllString(a.Msg, "<id>") == uuidRE.ReplaceAllString(b.Msg, "<id>")
	}
	return reflect.DeepEqual(normalize(a.Value), normalize(b.Value))
}

// contains reports where got does not hold want: objects key by key,
// arrays element by element (got may be longer), other values exactly.
func contains(got, want any, path string) string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return fmt.Sprintf("%s: got %v, want an object", path, got)
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
			return fmt.Sprintf("%s: got %v, want at least %d elements", path, got, len(w))
		}
		for i := range w {
			if d := contains(g[i], w[i], fmt.Sprintf("%s[%d]", path, i)); d != "" {
				return d
			}
		}
		return ""
	}
	if !reflect.DeepEqual(got, want) {
		return fmt.Sprintf("%s: got %v, want %v", path, got, want)
	}
	return ""
}
