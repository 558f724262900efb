// Package wasmtest builds Go programs into WebAssembly modules for tests,
// with the Go toolchain that runs the tests (no downloads): GOOS=wasip1
// GOARCH=wasm, as users build their modules.
package wasmtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

var (
	mu     sync.Mutex
	built  = map[string]result{} // absolute directory → module
	outDir string
)

type result struct {
	bin []byte
	err error
}

// GoTool is the go command of the toolchain running the tests.
func GoTool() string {
	if p := filepath.Join(runtime.GOROOT(), "bin", "go"); fileExists(p) {
		return p
	}
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return "go"
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// BuildGo returns the modules built from the main packages in dirs (paths
// relative to the test's directory, e.g. "testdata/probe"), each built
// once per test binary: later calls return the same bytes. The go build
// cache makes a rebuild with unchanged sources a link (a second or two)
// rather than a compile.
func BuildGo(tb testing.TB, dirs ...string) [][]byte {
	tb.Helper()
	mu.Lock()
	defer mu.Unlock()
	if outDir == "" {
		d, err := os.MkdirTemp("", "wasmtest-")
		if err != nil {
			tb.Fatal(err)
		}
		outDir = d
	}
	abs := make([]string, len(dirs))
	var todo []string
	for i, d := range dirs {
		a, err := filepath.Abs(d)
		if err != nil {
			tb.Fatal(err)
		}
		abs[i] = a
		if _, ok := built[a]; !ok {
			todo = append(todo, a)
		}
	}
	if len(todo) > 0 {
		err := goBuild(outDir, todo)
		for _, a := range todo {
			r := result{err: err}
			if err == nil {
				r.bin, r.err = os.ReadFile(wasmPath(outDir, a))
			}
			built[a] = r
		}
	}
	out := make([][]byte, len(dirs))
	for i, a := range abs {
		r := built[a]
		if r.err != nil {
			tb.Fatalf("building %s for wasip1: %v", dirs[i], r.err)
		}
		out[i] = r.bin
	}
	return out
}

func wasmPath(out, dir string) string { return filepath.Join(out, filepath.Base(dir)+".wasm") }

// goBuild builds the main packages in dirs into out/<base>.wasm.
func goBuild(out string, dirs []string) error {
	for _, d := range dirs {
		cmd := exec.Command(GoTool(), "build", "-trimpath", "-o", wasmPath(out, d), ".")
		cmd.Dir = d
		cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0", "GOPROXY=off", "GOTOOLCHAIN=local", "GOFLAGS=-buildvcs=false")
		if msg, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%v: %s", err, strings.TrimSpace(string(msg)))
		}
	}
	return nil
}
