package table

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestExamples runs every table op's registry examples on their fixtures,
// each in a fresh workspace, and checks that the result contains Want.
// The door test in cmd/metaclaw runs them through every door; this one
// keeps them right while the package changes.
func TestExamples(t *testing.T) {
	th := newTestHost(t)
	n := 0
	for _, op := range th.h.Registry.Ops() {
		if len(op.Examples) == 0 {
			t.Errorf("%s has no example", op.Tool)
		}
		for i, ex := range op.Examples {
			n++
			t.Run(fmt.Sprintf("%s/%d", op.Tool, i), func(t *testing.T) {
				env := th.h.Env(fmt.Sprintf("example%d", n), "examples")
				for _, f := range ex.Files {
					data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "examples", f))
					if err != nil {
						t.Fatal(err)
					}
					th.uploadTo(env.WS, f, data)
				}
				got, err := th.h.Registry.CallTool(context.Background(), env, op.Tool, ex.Args)
				if err != nil {
					t.Fatalf("%s %v: %v", op.Tool, ex.Args, err)
				}
				if why := contained(asJSON(got), asJSON(ex.Want), "result"); why != "" {
					t.Fatalf("%s %v: %s\ngot %v", op.Tool, ex.Args, why, got)
				}
			})
		}
	}
}

func asJSON(v any) any {
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

// contained reports why got does not contain want ("" when it does):
// objects key by key as subsets, arrays element by element (got may be
// longer), anything else exactly.
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
		return ""
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
		return ""
	}
	if got != want {
		return fmt.Sprintf("%s is %v, want %v", at, got, want)
	}
	return ""
}
