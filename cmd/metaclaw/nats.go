package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/store"
	"github.com/metaclaw/metaclaw/hostapi/store/natsstore"
)

// With the nats setting, workspaces live on NATS JetStream (issue 15):
// every host that names the same deployment serves the same files, events
// and saved tools, and the data directory only holds this host's caches.
//
//   - nats: nats://a:4222,nats://b:4222 joins a deployment, for every
//     command (serve, mcp, run, tool, tools, files, fsck).
//   - nats: embedded makes `serve` run a JetStream server of its own,
//     stored in DATA/nats and listening on nats_listen, which other hosts
//     join with --nats nats://THIS-HOST:PORT. A one-shot command on that
//     data directory joins the serving process's NATS while it runs, and
//     otherwise starts the embedded server for itself.

// sharedStore is an open NATS backend and what must be undone after the
// host that uses it has closed (the store closes the backend itself).
type sharedStore struct {
	backend *store.Backend
	// clientURL is where other hosts join an embedded server ("" when
	// this host joined someone else's).
	clientURL string
	undo      []func()
}

// close runs the undo steps, last first: the backend (when the store has
// not closed it), the embedded server, the data directory's lock.
func (s *sharedStore) close() {
	if s == nil {
		return
	}
	for i := len(s.undo) - 1; i >= 0; i-- {
		s.undo[i]()
	}
	s.undo = nil
}

// openShared opens the NATS backend the configuration names, or returns
// nil when workspaces stay in the data directory. serving is true for
// `metaclaw serve`, which runs the embedded server for others to join.
func (g *globals) openShared(serving bool) (*sharedStore, error) {
	c := g.cfg
	url := strings.TrimSpace(c.String("nats"))
	if url == "" {
		return nil, nil
	}
	s := &sharedStore{}
	cfg := natsstore.Config{
		URL: url, CredsFile: c.String("nats_creds"), User: c.String("nats_user"), Password: c.String("nats_password"),
		Token: c.String("nats_token"), StoreDir: filepath.Join(g.data, "nats"), Replicas: int(c.Int("nats_replicas")),
		Prefix: c.String("nats_prefix"), EventHistory: 0, Name: "metaclaw " + hostName(),
	}
	if strings.EqualFold(url, "embedded") {
		if err := g.embedded(s, &cfg, serving); err != nil {
			s.close()
			return nil, err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := natsstore.Open(ctx, cfg)
	if err != nil {
		s.close()
		return nil, err
	}
	// The store closes the backend with the host; closing it here too
	// (when the host never opened) must be harmless.
	var once sync.Once
	var closeErr error
	closeBackend := b.Close
	b.Close = func() error {
		once.Do(func() { closeErr = closeBackend() })
		return closeErr
	}
	s.undo = append(s.undo, func() { b.Close() })
	s.backend = b
	return s, nil
}

// embedded settles where an embedded NATS server runs: started here for
// serve (listening on nats_listen), the serving process's while one runs
// on this data directory, else one started for this command alone.
func (g *globals) embedded(s *sharedStore, cfg *natsstore.Config, serving bool) error {
	c := g.cfg
	if cfg.CredsFile != "" {
		return apierr.New(apierr.ValidationFailed, "nats_creds is for joining a NATS deployment (--nats nats://…); the embedded server takes nats_user and nats_password, or nats_token")
	}
	if cfg.Replicas > 1 {
		return apierr.New(apierr.ValidationFailed, "nats_replicas %d needs a cluster of at least %d NATS servers; the embedded server is one (use 1, or run a NATS cluster and join it with --nats)", cfg.Replicas, cfg.Replicas)
	}
	listen := c.String("nats_listen")
	if serving {
		srv, err := startEmbeddedNATS(cfg.StoreDir, listen, cfg.User, cfg.Password, cfg.Token)
		if err != nil {
			return err
		}
		s.undo = append(s.undo, func() { srv.Shutdown(); srv.WaitForShutdown() })
		s.clientURL = srv.ClientURL()
		cfg.URL = s.clientURL
		return nil
	}
	// A one-shot command: if a server holds this data directory, it runs
	// the embedded NATS; join it where it listens.
	release, err := store.LockServer(g.data)
	if apierr.Is(err, apierr.Busy) {
		host, port, _ := net.SplitHostPort(listen)
		if port == "0" {
			return apierr.New(apierr.Busy, "%s; it runs the embedded NATS server on a port chosen at start (nats_listen %s): "+
				"join it with --nats nats://127.0.0.1:PORT, the port its start-up line names", apierr.Of(err).Message, listen)
		}
		if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
			host = "127.0.0.1"
		}
		cfg.URL = "nats://" + net.JoinHostPort(host, port)
		return nil
	}
	if err != nil {
		return err
	}
	// Nobody serves it: the store is this command's alone for its
	// lifetime (in process, on a loopback port of its own).
	s.undo = append(s.undo, release)
	return nil
}

// startEmbeddedNATS starts a JetStream server stored in dir and listening
// on listen. Beyond loopback it insists on credentials: its clients read
// and write every workspace.
func startEmbeddedNATS(dir, listen, user, password, token string) (*natsserver.Server, error) {
	host, portText, err := net.SplitHostPort(listen)
	if err != nil {
		return nil, apierr.New(apierr.ValidationFailed, "nats_listen %q is not host:port", listen)
	}
	port, err := strconv.Atoi(portText)
	if err != nil || port < 0 || port > 65535 {
		return nil, apierr.New(apierr.ValidationFailed, "nats_listen %q: %q is not a port", listen, portText)
	}
	if port == 0 {
		port = -1 // the server's "pick a free port"
	}
	if host == "" {
		host = "0.0.0.0"
	}
	if !isLoopback(host) && user == "" && token == "" {
		return nil, apierr.New(apierr.ValidationFailed, "nats_listen %s takes NATS clients from other machines, which could then read and change every workspace: "+
			"set nats_user and nats_password (or nats_token), which the other hosts join with, or listen on 127.0.0.1", listen)
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, apierr.Wrap(apierr.Internal, err, "cannot create the embedded NATS server's directory %s: %v", dir, err)
	}
	opts := &natsserver.Options{
		ServerName: "metaclaw-" + hostName(),
		Host:       host,
		Port:       port,
		JetStream:  true,
		StoreDir:   dir,
		NoLog:      true,
		NoSigs:     true,
	}
	switch {
	case user != "":
		opts.Username, opts.Password = user, password
	case token != "":
		opts.Authorization = token
	}
	srv, err := natsserver.NewServer(opts)
	if err != nil {
		return nil, apierr.Wrap(apierr.Internal, err, "cannot start the embedded NATS server: %v", err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(30 * time.Second) {
		srv.Shutdown()
		return nil, apierr.New(apierr.Internal, "the embedded NATS server did not start listening on %s within 30 s; is the port taken (another NATS, another metaclaw)? choose another with --nats-listen", listen)
	}
	return srv, nil
}

// isLoopback reports whether host names only this machine.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// hostName names this process in NATS connection lists and server names.
func hostName() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		h = "host"
	}
	return fmt.Sprintf("%s-%d", h, os.Getpid())
}
