package host_test

import (
	"testing"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/host"
)

// Every op's input schema compiles (the registry compiles them lazily, on
// an op's first call, so that start-up does not pay for all of them).
func TestEverySchemaCompiles(t *testing.T) {
	h, _, err := host.Open(hostapi.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := h.Registry.CompileAll(); err != nil {
		t.Fatal(err)
	}
	if n := len(h.Registry.Ops()); n < 50 {
		t.Fatalf("only %d ops registered", n)
	}
}
