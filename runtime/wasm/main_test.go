package wasm_test

import (
	"os"
	"sync"
	"testing"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/host"
	"github.com/metaclaw/metaclaw/runtime/wasm"
)

// One host and one runner serve the package's tests (each test works in a
// workspace of its own); tests that need other settings build their own.
var (
	shared struct {
		once   sync.Once
		dir    string
		host   *hostapi.Host
		runner *wasm.Runner
		err    error
	}
)

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.host != nil {
		shared.host.Close()
	}
	if shared.dir != "" {
		os.RemoveAll(shared.dir)
	}
	os.Exit(code)
}

func openShared() {
	shared.dir, shared.err = os.MkdirTemp("", "wasm-runtime-test-")
	if shared.err != nil {
		return
	}
	shared.host, _, shared.err = host.Open(hostapi.Config{DataDir: shared.dir})
	if shared.err != nil {
		return
	}
	shared.runner, shared.err = wasm.New(shared.host, wasm.Options{})
}

func sharedHost(t testing.TB) *hostapi.Host {
	t.Helper()
	shared.once.Do(openShared)
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.host
}

func sharedRunner(t testing.TB) *wasm.Runner {
	sharedHost(t)
	return shared.runner
}
