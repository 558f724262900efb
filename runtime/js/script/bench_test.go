package script

import (
	"context"
	"testing"
	"time"

	"github.com/metaclaw/metaclaw/bindings/js/stubs"
)

// BenchmarkTrivialRun is what a worker does for `return 1`: prepare a VM
// with the API, compile (cached) and run, encode the result.
func BenchmarkTrivialRun(b *testing.B) {
	spec := &stubs.Spec{}
	for _, p := range []string{"files.list", "files.info", "files.readText", "files.spreadsheet.readRange", "tools.call"} {
		spec.Methods = append(spec.Methods, stubs.Method{Path: p})
	}
	plan := stubs.NewPlan(spec)
	req := Request{Code: "return 1", Limits: Limits{Timeout: time.Second, ResultBytes: 1 << 20, LogBytes: 1 << 20, MaxCalls: 16}}
	for i := 0; i < b.N; i++ {
		r, err := New(plan)
		if err != nil {
			b.Fatal(err)
		}
		out := r.Exec(context.Background(), req, nil, Options{WatchMemory: true})
		if !out.OK {
			b.Fatal(out.Err)
		}
	}
}
