package files_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/files"
	"github.com/metaclaw/metaclaw/hostapi/hosttest"
	"github.com/metaclaw/metaclaw/hostapi/pdf"
	"github.com/metaclaw/metaclaw/hostapi/spreadsheet"
)

// TestExamples runs every example of the files area on a fresh workspace
// with its fixtures, through the JSON door, and checks the answer contains
// Want. (The door test in cmd/metaclaw runs them through every door.)
func TestExamples(t *testing.T) {
	h := hosttest.New(t, hostapi.Config{}, files.Register, spreadsheet.Register, pdf.Register)
	n := 0
	for _, op := range h.Registry.Ops() {
		if !strings.HasPrefix(op.Name, "files.") || strings.Count(op.Name, ".") != 1 {
			continue
		}
		if len(op.Examples) == 0 {
			t.Errorf("%s has no example", op.Label())
		}
		for i, ex := range op.Examples {
			n++
			t.Run(fmt.Sprintf("%s#%d", op.Tool, i+1), func(t *testing.T) {
				if op.OpenWorld {
					t.Skip("reaches outside the machine")
				}
				env := h.Env(fmt.Sprintf("ex-%d", n), "s")
				for _, name := range ex.Files {
					data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "examples", name))
					if err != nil {
						t.Fatal(err)
					}
					hosttest.Upload(t, env.WS, name, data, false)
				}
				for _, call := range ex.Setup {
					if _, err := h.Registry.CallTool(context.Background(), env, call.Tool, call.Args); err != nil {
						t.Fatalf("setup %s: %v", call.Tool, err)
					}
				}
				args, _ := json.Marshal(ex.Args)
				res, err := h.Registry.CallToolJSON(context.Background(), env, op.Tool, args)
				if err != nil {
					t.Fatalf("%s %s: %v", op.Tool, args, err)
				}
				if diff := contains(roundTrip(res), roundTrip(ex.Want), "result"); diff != "" {
					t.Fatalf("%s %s: %s", op.Tool, args, diff)
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
