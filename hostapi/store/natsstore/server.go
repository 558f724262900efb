package natsstore

import (
	"net"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// ServerConfig describes a NATS server with JetStream run inside this
// process: `metaclaw serve --nats embedded` (one box) and the tests (one
// server, or a three-node cluster on loopback).
type ServerConfig struct {
	// StoreDir holds JetStream's files.
	StoreDir string
	// Host and Port the server listens on for clients; Port -1 picks a
	// free one (ClientURL tells which).
	Host string
	Port int
	// Name identifies the server in a cluster (default: generated).
	Name string
	// Cluster joins the server to a cluster; nil runs it alone.
	Cluster *ClusterConfig
}

// ClusterConfig is a server's place in a cluster.
type ClusterConfig struct {
	Name   string // the cluster's name, the same on every node
	Host   string
	Port   int      // for routes from the other nodes
	Routes []string // nats-route://host:port of the other nodes
}

// StartServer starts a JetStream server and waits until it takes clients.
func StartServer(cfg ServerConfig) (*server.Server, error) {
	if cfg.Host == "" {
		cfg.Host = "127.0.0.1"
	}
	opts := &server.Options{
		ServerName: cfg.Name,
		Host:       cfg.Host,
		Port:       cfg.Port,
		JetStream:  true,
		StoreDir:   cfg.StoreDir,
		NoLog:      true,
		NoSigs:     true,
	}
	if cfg.Cluster != nil {
		opts.Cluster = server.ClusterOpts{Name: cfg.Cluster.Name, Host: cfg.Cluster.Host, Port: cfg.Cluster.Port}
		if opts.Cluster.Host == "" {
			opts.Cluster.Host = cfg.Host
		}
		for _, r := range cfg.Cluster.Routes {
			opts.Routes = append(opts.Routes, server.RoutesFromStr(r)...)
		}
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, apierr.Wrap(apierr.Internal, err, "cannot start the embedded NATS server: %v", err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(30 * time.Second) {
		srv.Shutdown()
		return nil, apierr.New(apierr.Internal, "the embedded NATS server did not start within 30 s; check that its storage directory is writable")
	}
	return srv, nil
}

// FreePort returns a loopback TCP port that was free a moment ago (for
// cluster routes, which must be known before the servers start).
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	_, p, _ := net.SplitHostPort(l.Addr().String())
	return strconv.Atoi(p)
}
