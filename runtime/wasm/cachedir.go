package wasm

import (
	"os"
	"path/filepath"
)

// DefaultCacheDir is where compiled WebAssembly is cached unless Options
// say otherwise: $METACLAW_CACHE_DIR/wazero when that is set, else the
// user's cache directory ($XDG_CACHE_HOME or ~/.cache on Linux) under
// metaclaw/wazero; "" when there is none. It is the PDF engine's
// directory too (hostapi/pdf.DefaultCacheDir, kept equal by a test):
// entries are machine code keyed by the module's content hash, the wazero
// version and the CPU, so every data directory and process of the user
// shares them, and a module compiled once starts fast after a restart.
func DefaultCacheDir() string {
	if d := os.Getenv("METACLAW_CACHE_DIR"); d != "" {
		return filepath.Join(d, "wazero")
	}
	if d, err := os.UserCacheDir(); err == nil && d != "" {
		return filepath.Join(d, "metaclaw", "wazero")
	}
	return ""
}
