package agenttools_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/hosttest"
)

// TestExamples runs every example of the saved-tools area on a fresh
// workspace with its fixtures and checks the answer contains Want; the
// JS-only tools.call runs as a script would call it.
func TestExamples(t *testing.T) {
	d := newDoor(t, hostapi.Config{})
	n := 0
	for _, op := range d.h.Registry.Ops() {
		if op.Name != "" && op.Namespace() != "tools" || op.Name == "" && op.Tool != "run_script" {
			continue
		}
		if len(op.Examples) == 0 {
			t.Errorf("%s has no example", op.Label())
		}
		for i, ex := range op.Examples {
			n++
			t.Run(fmt.Sprintf("%s#%d", op.Label(), i+1), func(t *testing.T) {
				env := d.h.Env(fmt.Sprintf("ex-%d", n), "s")
				for _, name := range ex.Files {
					data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "examples", name))
					if err != nil {
						t.Fatal(err)
					}
					hosttest.Upload(t, env.WS, name, data, false)
				}
				for _, call := range ex.Setup {
					if _, err := d.h.Registry.CallTool(context.Background(), env, call.Tool, call.Args); err != nil {
						t.Fatalf("setup %s: %v", call.Tool, err)
					}
				}
				var res any
				var err error
				if op.Tool != "" {
					args, _ := json.Marshal(ex.Args)
					res, err = d.h.Registry.CallToolJSON(context.Background(), env, op.Tool, args)
				} else {
					res, err = d.h.Registry.Invoke(context.Background(), env, op, ex.Args)
					res = hostapi.Project(res, hostapi.CamelCase)
				}
				if err != nil {
					t.Fatalf("%s %v: %v", op.Label(), ex.Args, err)
				}
				if diff := contains(roundTrip(res), roundTrip(ex.Want), "result"); diff != "" {
					t.Fatalf("%s %v: %s", op.Label(), ex.Args, diff)
				}
			})
		}
	}
}

func roundTrip(v any) any {
	b, _ := json.Marshal(v)
	var out any
	json.Unmarshal(b, &out)
	return out
}

// contains reports how got fails to contain want: objects key by key,
// arrays element by element (got may be longer), other values exactly.
func contains(got, want any, path string) string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return fmt.Sprintf("%s: got %v, want an object", path, got)
		}
		for k := range w {
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
