// Package server is metaclaw's HTTP door (SPEC 9): file upload, download and
// the seed-002 content and convert APIs, a live SSE stream of file events,
// script runs, the meta-tools as JSON routes and over MCP (streamable HTTP),
// bearer-token auth with one workspace per token, Prometheus metrics and the
// embedded workspace web page.
//
// Every tool the server offers comes from the host's registry
// (Registry.Tools / Registry.CallTool); the server never names an operation.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/mux"

	"github.com/metaclaw/metaclaw/bindings/ts"
	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/server/mcpserver"
	"github.com/metaclaw/metaclaw/server/redact"
	"github.com/metaclaw/metaclaw/server/runfeed"
)

// Config is what a Server is built from.
type Config struct {
	Host *hostapi.Host
	// Tools tells the server when a workspace's saved tools change, so that
	// MCP clients get tools/list_changed (agenttools.Tools satisfies it).
	// May be nil.
	Tools ToolWatcher
	// Tokens bind bearer tokens to workspaces. Without tokens every request
	// works on Workspace and the server must only listen on loopback.
	Tokens []Token
	// Workspace is the workspace served when no tokens are configured
	// (default "default").
	Workspace string
	// MaxConcurrentRuns caps script runs and tool calls in flight; beyond it
	// requests get 503 BUSY (default 64).
	MaxConcurrentRuns int
	// MaxEventStreams caps open event streams (GET /api/events and MCP's
	// GET stream) in total (default 1024), MaxEventStreamsPerWorkspace per
	// workspace (default 64); beyond them a new stream gets BUSY.
	MaxEventStreams             int
	MaxEventStreamsPerWorkspace int
	// Heartbeat is the SSE keep-alive interval (default 15 s).
	Heartbeat time.Duration
	// InlineTextLimit is the largest text file the content API returns
	// inline (default 1 MB); larger or binary files get a signed URL.
	InlineTextLimit int64
	// ConvertTimeout bounds one markdown conversion (default 60 s);
	// ConvertMaxPages caps a converted PDF (default 2000 pages).
	ConvertTimeout  time.Duration
	ConvertMaxPages int
	// SignedURLTTL is how long a signed download URL stays valid (default 1 h).
	SignedURLTTL time.Duration
	// SecretFile holds the key that signs download URLs (default
	// DATA/secret, created 0600 on first start so URLs survive restarts).
	SecretFile string
	// PublicURL, when set, is the scheme://host prefix of signed URLs;
	// otherwise they are built from the request's Host.
	PublicURL string
	// BodyMinRate is the slowest average rate (bytes a second) a request
	// body may arrive at after BodyGrace (default 4 KiB/s after 10 s);
	// BodyIdleTimeout the longest pause in it (default 30 s). A slower
	// body ends with TIMEOUT.
	BodyMinRate     int64
	BodyGrace       time.Duration
	BodyIdleTimeout time.Duration
	// ShutdownTimeout bounds how long Serve waits for in-flight uploads and
	// runs after its context ends (default 60 s).
	ShutdownTimeout time.Duration
	// Version is reported to MCP clients.
	Version string
	Log     *slog.Logger
}

// ToolWatcher reports changes of a workspace's saved tools.
type ToolWatcher interface {
	OnChange(fn func(workspace string))
}

// Server is the HTTP server of one Host.
type Server struct {
	cfg     Config
	h       *hostapi.Host
	log     *slog.Logger
	tokens  *tokenSet
	secret  []byte
	router  *mux.Router
	handler http.Handler
	metrics *metrics
	streams *streamCaps
	redact  *redact.Redactor
	rate    bodyRate
	mcp     *mcpserver.Manager
	feed    *runfeed.Feed
	pages   *pages
	runs    chan struct{}

	closing   chan struct{}
	closeOnce sync.Once
}

// New builds a server for cfg.Host.
func New(cfg Config) (*Server, error) {
	if cfg.Host == nil {
		return nil, errors.New("server: no host")
	}
	if cfg.Workspace == "" {
		cfg.Workspace = "default"
	}
	if cfg.MaxConcurrentRuns <= 0 {
		cfg.MaxConcurrentRuns = 64
	}
	if cfg.MaxEventStreams <= 0 {
		cfg.MaxEventStreams = 1024
	}
	if cfg.MaxEventStreamsPerWorkspace <= 0 {
		cfg.MaxEventStreamsPerWorkspace = 64
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = 15 * time.Second
	}
	if cfg.InlineTextLimit <= 0 {
		cfg.InlineTextLimit = 1 << 20
	}
	if cfg.ConvertTimeout <= 0 {
		cfg.ConvertTimeout = 60 * time.Second
	}
	if cfg.SignedURLTTL <= 0 {
		cfg.SignedURLTTL = time.Hour
	}
	if cfg.BodyMinRate <= 0 {
		cfg.BodyMinRate = 4 << 10
	}
	if cfg.BodyGrace <= 0 {
		cfg.BodyGrace = 10 * time.Second
	}
	if cfg.BodyIdleTimeout <= 0 {
		cfg.BodyIdleTimeout = 30 * time.Second
	}
	if cfg.ShutdownTimeout <= 0 {
		cfg.ShutdownTimeout = 60 * time.Second
	}
	if cfg.SecretFile == "" {
		cfg.SecretFile = filepath.Join(cfg.Host.Config.DataDir, "secret")
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	if cfg.Log == nil {
		cfg.Log = cfg.Host.Log
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	tokens, err := newTokenSet(cfg.Tokens)
	if err != nil {
		return nil, err
	}
	secret, err := loadSecret(cfg.SecretFile)
	if err != nil {
		return nil, err
	}
	s := &Server{
		cfg: cfg, h: cfg.Host, log: cfg.Log, tokens: tokens, secret: secret,
		runs:    make(chan struct{}, cfg.MaxConcurrentRuns),
		closing: make(chan struct{}),
	}
	// The code profile searches the API with search_api.
	ts.Register(cfg.Host)
	s.metrics = newMetrics()
	s.streams = newStreamCaps(cfg.MaxEventStreamsPerWorkspace, cfg.MaxEventStreams)
	s.redact = redact.ForDataDir(cfg.Host.Config.DataDir)
	s.rate = bodyRate{minRate: cfg.BodyMinRate, grace: cfg.BodyGrace, idle: cfg.BodyIdleTimeout}
	s.observeRegistry()
	s.feed = runfeed.New(runfeed.Options{})
	s.pages = newPages(s)
	s.mcp = mcpserver.New(cfg.Host, mcpserver.Options{
		Log: cfg.Log, Version: cfg.Version, Gate: s.acquireRun, Redact: s.redact.Message, Around: s.trackTool("mcp"),
		Observe: func(ws, name string, _ time.Duration, err error) { s.metrics.observeDynamicTool(ws, name, err) },
	})
	if cfg.Tools != nil {
		cfg.Tools.OnChange(s.mcp.ToolsChanged)
	}
	s.routes()
	s.handler = s.middleware(s.protect(s.router))
	return s, nil
}

// Handler is the server's root handler.
func (s *Server) Handler() http.Handler { return s.handler }

// observeRegistry counts tool calls by name and outcome.
func (s *Server) observeRegistry() {
	s.h.Registry.AddObserver(func(op string, d time.Duration, err error) { s.metrics.observeTool(op, err) })
}

// acquireRun takes a slot of the run cap; ok is false when the cap is full.
func (s *Server) acquireRun() (release func(), ok bool) {
	select {
	case s.runs <- struct{}{}:
		s.metrics.runsInFlight.Add(1)
		return func() {
			s.metrics.runsInFlight.Add(-1)
			<-s.runs
		}, true
	default:
		return nil, false
	}
}

// Closing is closed when the server starts shutting down; long-lived
// streams end on it so that shutdown does not wait for them.
func (s *Server) Closing() <-chan struct{} { return s.closing }

func (s *Server) beginShutdown() { s.closeOnce.Do(func() { close(s.closing) }) }

// Serve answers requests on ln until ctx ends, then shuts down gracefully:
// it stops accepting connections, ends event streams and waits (up to
// ShutdownTimeout) for in-flight uploads and runs to finish.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 15 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		MaxHeaderBytes:    64 << 10,
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		s.beginShutdown()
		return err
	case <-ctx.Done():
	}
	s.log.Info("shutting down: finishing in-flight requests", "timeout", s.cfg.ShutdownTimeout.String())
	s.beginShutdown()
	sctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	err := srv.Shutdown(sctx)
	<-errc
	s.mcp.Close()
	if err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}

// CheckBind refuses to listen on a non-loopback address without tokens
// (SPEC 9): an unauthenticated server must not be reachable from elsewhere.
func CheckBind(addr string, haveTokens bool) error {
	if haveTokens {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("bad listen address %q: %v", addr, err)
	}
	if isLoopbackHost(host) {
		return nil
	}
	shown := host
	if shown == "" {
		shown = "all interfaces"
	}
	return fmt.Errorf("refusing to listen on %s (%s) without API tokens: anyone who can reach it could read and change the workspace; "+
		"pass --token SECRET:WORKSPACE (or --tokens-file) or listen on 127.0.0.1", addr, shown)
}

func isLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// ListenAndServe listens on addr (after CheckBind) and serves until ctx ends.
func (s *Server) ListenAndServe(ctx context.Context, addr string) error {
	if err := CheckBind(addr, !s.tokens.empty()); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	s.log.Info("metaclaw server listening", "addr", ln.Addr().String(), "tokens", s.tokens.count(), "pid", os.Getpid())
	return s.Serve(ctx, ln)
}
