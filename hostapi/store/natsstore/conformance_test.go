package natsstore

import (
	"testing"

	"github.com/metaclaw/metaclaw/hostapi/store"
	"github.com/metaclaw/metaclaw/hostapi/store/storetest"
)

// TestConformance runs the store's conformance suite on NATS.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t testing.TB, cfg store.Config) *store.Store {
		return newDeployment().host(t, cfg, 0)
	})
}
