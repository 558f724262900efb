package wasm_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	abi "github.com/metaclaw/metaclaw/bindings/wasm"
)

var update = flag.Bool("update", false, "rewrite the generated guest SDK (bindings/wasm/guest/ops.go)")

// TestGuestSDKIsCurrent keeps the guest SDK's typed helpers equal to what
// the registry generates: an operation added, renamed or reshaped shows up
// here until the file is regenerated with -update.
func TestGuestSDKIsCurrent(t *testing.T) {
	h := sharedHost(t)
	src, err := abi.GuestSource(h.Registry)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("..", "..", "bindings", "wasm", "guest", "ops.go")
	if *update {
		if err := os.WriteFile(path, src, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	have, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(have, src) {
		t.Fatalf("%s is not what the registry generates; run go test ./runtime/wasm -run TestGuestSDKIsCurrent -update", path)
	}
}
