package image

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/metaclaw/metaclaw/hostapi/hosttest"
)

// TestExamples runs every image op's registry examples on their fixtures,
// each in a fresh workspace, and checks that the result contains Want.
// The door test in cmd/metaclaw runs them through every door; this one
// keeps them right while the package changes.
func TestExamples(t *testing.T) {
	e := newEnv(t)
	n := 0
	for _, op := range e.h.Registry.Ops() {
		if len(op.Examples) == 0 {
			t.Errorf("%s has no example", op.Tool)
		}
		for i, ex := range op.Examples {
			n++
			t.Run(fmt.Sprintf("%s/%d", op.Tool, i), func(t *testing.T) {
				env := e.h.Env(fmt.Sprintf("example%d", n), "examples")
				for _, f := range ex.Files {
					data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "examples", f))
					if err != nil {
						t.Fatal(err)
					}
					hosttest.Upload(t, env.WS, f, data, false)
				}
				got, err := e.h.Registry.CallTool(e.ctx, env, op.Tool, ex.Args)
				if err != nil {
					t.Fatalf("%s %v: %v", op.Tool, ex.Args, err)
				}
				if why := containsJSON(got, ex.Want); why != "" {
					t.Fatalf("%s %v: %s\ngot %v", op.Tool, ex.Args, why, got)
				}
			})
		}
	}
}

// containsJSON reports why got does not contain want ("" when it does),
// both compared as JSON values: objects key by key as subsets, arrays
// element by element (got may be longer), anything else exactly.
func containsJSON(got, want any) string {
	return contained(jsonValue(got), jsonValue(want), "result")
}

func jsonValue(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		panic(err)
	}
	return out
}

func contained(got, want any, at string) string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return fmt.Sprintf("%s is %T, want an object", at, got)
		}
		for k, wv := range w {
			gv, ok := g[k]
			if !ok {
				return fmt.Sprintf("%s has no key %q", at, k)
			}
			if why := contained(gv, wv, at+"."+k); why != "" {
				return why
			}
		}
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) < len(w) {
			return fmt.Sprintf("%s is %v, want at least %d elements", at, got, len(w))
		}
		for i := range w {
			if why := contained(g[i], w[i], fmt.Sprintf("%s[%d]", at, i)); why != "" {
				return why
			}
		}
	default:
		if !reflect.DeepEqual(got, want) {
			return fmt.Sprintf("%s is %#v, want %#v", at, got, want)
		}
	}
	return ""
}
