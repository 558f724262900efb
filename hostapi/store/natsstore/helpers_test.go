package natsstore

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/metaclaw/metaclaw/hostapi/store"
)

// One embedded JetStream server per test binary (a child process of the
// kill test starts none); every test deployment gets its own bucket
// prefix, so tests do not see each other's data.
var (
	testServer *server.Server
	prefixes   atomic.Int64
	benchDirs  []string // removed when the binary ends
)

func TestMain(m *testing.M) {
	if mode := os.Getenv("NATSSTORE_CHILD"); mode != "" {
		os.Exit(runChild(mode))
	}
	dir, err := os.MkdirTemp("", "natsstore-test-")
	if err != nil {
		panic(err)
	}
	testServer, err = StartServer(ServerConfig{StoreDir: dir, Port: -1})
	if err != nil {
		panic(err)
	}
	code := m.Run()
	for _, d := range benchDirs {
		os.RemoveAll(d)
	}
	testServer.Shutdown()
	testServer.WaitForShutdown()
	os.RemoveAll(dir)
	os.Exit(code)
}

// deployment is a fresh set of buckets on the test server.
type deployment struct {
	url    string
	prefix string
}

func newDeployment() deployment {
	return deployment{url: testServer.ClientURL(), prefix: fmt.Sprintf("t%d", prefixes.Add(1))}
}

// host opens one metaclaw host's store on d.
func (d deployment) host(t testing.TB, cfg store.Config, lease time.Duration) *store.Store {
	t.Helper()
	b, err := Open(context.Background(), Config{URL: d.url, Prefix: d.prefix, LeaseTime: lease})
	if err != nil {
		t.Fatal(err)
	}
	return d.storeOn(t, cfg, b)
}

// backend opens one host's backend on d, with its connection; the
// janitor does not run by itself (tests call its pass).
func (d deployment) backend(t testing.TB, lease time.Duration) (*conn, *store.Backend) {
	t.Helper()
	c, b, err := open(context.Background(), Config{URL: d.url, Prefix: d.prefix, LeaseTime: lease, JanitorInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return c, b
}

// storeOn opens a store on backend b, closed when the test ends.
func (d deployment) storeOn(t testing.TB, cfg store.Config, b *store.Backend) *store.Store {
	t.Helper()
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	cfg.Backend = b
	s, err := store.Open(cfg)
	if err != nil {
		b.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
