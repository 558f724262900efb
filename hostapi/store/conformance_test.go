package store_test

import (
	"testing"

	"github.com/metaclaw/metaclaw/hostapi/store"
	"github.com/metaclaw/metaclaw/hostapi/store/storetest"
)

// TestConformance runs the backend conformance suite on the local store
// (the NATS backend runs the same suite in natsstore).
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t testing.TB, cfg store.Config) *store.Store {
		cfg.Dir = t.TempDir()
		s, err := store.Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}
