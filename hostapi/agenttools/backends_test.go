package agenttools

// The saved-tool tests run once per store backend: the local one (SQLite)
// and NATS JetStream (an embedded server started once for the test
// binary, each test on its own buckets).

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/store"
	"github.com/metaclaw/metaclaw/hostapi/store/natsstore"
)

var (
	natsServer *server.Server
	prefixes   atomic.Int64
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "agenttools-nats-")
	if err != nil {
		panic(err)
	}
	natsServer, err = natsstore.StartServer(natsstore.ServerConfig{StoreDir: dir, Port: -1})
	if err != nil {
		panic(err)
	}
	code := m.Run()
	natsServer.Shutdown()
	natsServer.WaitForShutdown()
	os.RemoveAll(dir)
	os.Exit(code)
}

// NATSDeployment returns a fresh deployment on the test server: each call
// of the function it returns is one more host's backend on it.
func NATSDeployment(t testing.TB) func() *store.Backend {
	prefix := fmt.Sprintf("at%d", prefixes.Add(1))
	return func() *store.Backend {
		t.Helper()
		b, err := natsstore.Open(context.Background(), natsstore.Config{URL: natsServer.ClientURL(), Prefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
}

// ForBackends runs fn as a subtest on each backend; cfg (with Backend set
// for NATS) opens one host.
func ForBackends(t *testing.T, fn func(t *testing.T, cfg hostapi.Config)) {
	t.Run("local", func(t *testing.T) { fn(t, hostapi.Config{}) })
	t.Run("nats", func(t *testing.T) { fn(t, hostapi.Config{Backend: NATSDeployment(t)()}) })
}
