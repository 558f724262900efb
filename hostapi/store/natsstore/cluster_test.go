package natsstore

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/store"
	"github.com/metaclaw/metaclaw/hostapi/store/storetest"
)

// Three embedded servers in a cluster, every bucket and stream replicated
// three times: stopping one during a stream of uploads and reads loses
// nothing, and no request fails for longer than the failover.
func TestClusterFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-node cluster")
	}
	var ports [3]int
	for i := range ports {
		p, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = p
	}
	var servers [3]*server.Server
	var urls []string
	for i := range servers {
		var routes []string
		for j, p := range ports {
			if j != i {
				routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", p))
			}
		}
		srv, err := StartServer(ServerConfig{StoreDir: t.TempDir(), Port: -1, Name: fmt.Sprintf("n%d", i+1),
			Cluster: &ClusterConfig{Name: "metaclaw", Port: ports[i], Routes: routes}})
		if err != nil {
			t.Fatal(err)
		}
		servers[i] = srv
		t.Cleanup(srv.Shutdown)
		urls = append(urls, srv.ClientURL())
	}
	// The cluster takes a moment to elect its JetStream leader: Open
	// retries until the replicated buckets exist.
	var b *store.Backend
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(bg, 4*time.Second)
		var err error
		b, err = Open(ctx, Config{URL: strings.Join(urls, ","), Replicas: 3, LeaseTime: 2 * time.Second, Timeout: 3 * time.Second})
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cluster did not take the buckets: %v", err)
		}
	}
	t.Logf("the cluster took the buckets after %v", time.Since(deadline.Add(-60*time.Second)))
	s, err := store.Open(store.Config{Dir: t.TempDir(), Backend: b})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	w := s.Workspace("default")

	// retry runs op until it succeeds, recording the longest run of
	// failures; a request may fail while the cluster fails over, never
	// for longer.
	var worst time.Duration
	retry := func(what string, op func() error) {
		start := time.Now()
		for {
			err := op()
			if err == nil {
				worst = max(worst, time.Since(start))
				return
			}
			if time.Since(start) > 20*time.Second {
				t.Fatalf("%s failed for %v: %v", what, time.Since(start), err)
			}
			time.Sleep(100 * time.Millisecond) // back off while the cluster elects new leaders
		}
	}
	body := func(i int) string { return strings.Repeat(fmt.Sprintf("file %d\n", i), 20_000) }
	const files = 30
	for i := range files {
		if i == 10 {
			servers[0].Shutdown() // the node the host connected to first
		}
		name := fmt.Sprintf("f%02d.txt", i)
		retry("upload "+name, func() error {
			_, err := w.Create(bg, store.CreateOptions{Name: name}, strings.NewReader(body(i)))
			if apierr.Is(err, apierr.AlreadyExists) {
				return nil // an earlier try committed before its answer was lost
			}
			return err
		})
		retry("read "+name, func() error {
			r, err := w.Open(bg, name)
			if err != nil {
				return err
			}
			defer r.Close()
			got, err := io.ReadAll(r)
			if err == nil && string(got) != body(i) {
				t.Fatalf("%s read back %d bytes", name, len(got))
			}
			return err
		})
	}
	list, err := w.List(bg, "")
	if err != nil || len(list) != files {
		t.Fatalf("%d files listed after the failover, want %d (%v)", len(list), files, err)
	}
	for i := range files {
		if got := storetest.Read(t, w, fmt.Sprintf("f%02d.txt", i)); got != body(i) {
			t.Fatalf("f%02d.txt changed: %d bytes", i, len(got))
		}
	}
	t.Logf("longest failure during the failover: %v", worst)
}
