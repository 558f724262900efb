package wasm_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/store"
)

// The adapter runs hostapi.RunRequests with a module, as hostapi.Runners
// hands them over, and checks modules for tools.save.
func TestHostRunner(t *testing.T) {
	env := testEnv(t)
	ctx := context.Background()
	runners := hostapi.Runners{WASM: sharedRunner(t).ForHost()}
	if _, err := env.WS.Create(ctx, store.CreateOptions{Name: "mods/tiny.wasm", Source: store.SourceUpload}, bytes.NewReader(tinyModule())); err != nil {
		t.Fatal(err)
	}
	if _, err := env.WS.Create(ctx, store.CreateOptions{Name: "notes.txt", Source: store.SourceUpload}, bytes.NewReader([]byte("not a module\n"))); err != nil {
		t.Fatal(err)
	}
	lim := hostapi.RunLimits{Timeout: 2 * time.Minute}

	for name, req := range map[string]hostapi.RunRequest{
		"bytes": {Wasm: tinyModule(), Input: map[string]any{"n": 1}, Limits: lim},
		"ref":   {WasmRef: "mods/tiny.wasm", Limits: lim},
	} {
		res := runners.Run(ctx, env, req)
		if got := resultJSON(t, res); got != tinyResult {
			t.Fatalf("%s: result %s, want %s", name, got, tinyResult)
		}
		if err := runners.Check(ctx, env, req); err != nil {
			t.Fatalf("%s: check: %v", name, err)
		}
	}

	// Bad requests: each a coded error, in the run result or from Check.
	for name, c := range map[string]struct {
		req  hostapi.RunRequest
		code apierr.Code
		says string
	}{
		"code and module": {hostapi.RunRequest{Code: "return 1", Wasm: tinyModule(), Limits: lim}, apierr.ValidationFailed, "not both"},
		"bytes and ref":   {hostapi.RunRequest{Wasm: tinyModule(), WasmRef: "mods/tiny.wasm", Limits: lim}, apierr.ValidationFailed, "not both"},
		"missing file":    {hostapi.RunRequest{WasmRef: "nope.wasm", Limits: lim}, apierr.NotFound, "nope.wasm"},
		"not a module":    {hostapi.RunRequest{WasmRef: "notes.txt", Limits: lim}, apierr.UnsupportedFormat, "notes.txt"},
		"truncated":       {hostapi.RunRequest{Wasm: tinyModule()[:20], Limits: lim}, apierr.FileReadFailed, "truncated"},
	} {
		res := runners.Run(ctx, env, c.req)
		wantError(t, res, string(c.code), c.says)
		err := runners.Check(ctx, env, c.req)
		if apierr.CodeOf(err) != c.code {
			t.Fatalf("%s: check gave %v, want %s", name, err, c.code)
		}
	}
	// A script request reaching the adapter directly is refused, and
	// Runners sends scripts elsewhere (here: nowhere).
	wantError(t, sharedRunner(t).ForHost().Run(ctx, env, hostapi.RunRequest{Code: "return 1"}), string(apierr.ValidationFailed), "no module")
	wantError(t, runners.Run(ctx, env, hostapi.RunRequest{Code: "return 1"}), string(apierr.ToolWorkerUnavailable), "JavaScript")
	hostStillRuns(t, env)
}
