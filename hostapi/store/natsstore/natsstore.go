// Package natsstore is the shared backend of the store on NATS JetStream,
// for several metaclaw hosts serving the same workspaces (issue 15, seed
// 003): bodies in an object store bucket; file metadata, name claims,
// per-file leases and quota ledgers in one key-value bucket that every
// host follows (index.go), saved tools in another (compare-and-set on
// revisions everywhere); change events on a stream so that a client
// resumes on any host. What a crash can leave behind — a dead host's
// event, reservation, lease, half-stored body, unreferenced body,
// unclaimed record or delete marker — is repaired or removed by the
// others (repair.go, janitor.go).
//
//	b, err := natsstore.Open(ctx, natsstore.Config{URL: "nats://n1:4222,nats://n2:4222", CredsFile: "metaclaw.creds"})
//	st, err := store.Open(store.Config{Dir: "data", Backend: b})
//
// With URL "embedded", Open starts a JetStream server inside the process,
// its storage under Config.StoreDir (one box, durable), and connects to it
// in-process.
package natsstore

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/store"
)

// Config says how to reach NATS and how the buckets are made.
type Config struct {
	// URL is a comma-separated list of nats:// URLs, or "embedded".
	URL string
	// Credentials: a .creds file (JWT + NKey seed), or a user and
	// password, or a token. All optional.
	CredsFile string
	User      string
	Password  string
	Token     string
	// StoreDir is the embedded server's JetStream storage (URL
	// "embedded"); metaclaw serve uses <data>/nats.
	StoreDir string
	// Prefix names the buckets and subjects ("metaclaw" by default), so
	// that several deployments can share one NATS.
	Prefix string
	// Replicas of every bucket and stream (1, or 3 in a three-node
	// cluster); default 1.
	Replicas int
	// LeaseTime is how long a host that stops answering keeps its file
	// leases and quota reservations; default 15 s.
	LeaseTime time.Duration
	// EventHistory is how many events per workspace the event stream
	// keeps for resuming clients; default 10,000.
	EventHistory int
	// JanitorInterval is how often this host looks for what crashed hosts
	// left behind (default 1 min; every host does, at random offsets).
	JanitorInterval time.Duration
	// OrphanAge is how old an unreferenced body of a live host must be
	// before the janitor removes it (default 1 h: a write in progress
	// holds its body that long at most).
	OrphanAge time.Duration
	// Timeout bounds one request to NATS; default 10 s.
	Timeout time.Duration
	// Name labels this host's connection (monitoring).
	Name string
}

const (
	DefaultPrefix    = "metaclaw"
	DefaultLeaseTime = 15 * time.Second
)

// conn is one host's connection and the buckets of a deployment.
type conn struct {
	cfg    Config
	nc     *nats.Conn
	js     jetstream.JetStream
	srv    *server.Server // embedded server, if any
	hostID string

	files, hosts, tools    jetstream.KeyValue
	bodies                 jetstream.ObjectStore
	bodiesStream           jetstream.Stream
	bodiesName             string
	events                 jetstream.Stream
	eventsName, eventsSubj string

	ixMu    sync.Mutex
	ix      *index
	repair  *repair
	janitor *janitor

	stop chan struct{}
	wg   sync.WaitGroup
	// bg are background steps (a tombstone's removal, a release), each
	// bounded by the timeout; Close waits for them.
	bg sync.WaitGroup

	aliveMu sync.Mutex
	alive   map[string]time.Time // hosts seen alive, until when to trust it
}

// Open connects to NATS (or starts the embedded server), creates the
// buckets and stream it needs when they are missing, starts this host's
// heartbeat and returns the backend for store.Config.Backend.
func Open(ctx context.Context, cfg Config) (*store.Backend, error) {
	_, b, err := open(ctx, cfg)
	return b, err
}

// open is Open, also returning the connection (tests reach the janitor
// and the repair through it).
func open(ctx context.Context, cfg Config) (*conn, *store.Backend, error) {
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultPrefix
	}
	if cfg.Replicas <= 0 {
		cfg.Replicas = 1
	}
	if cfg.LeaseTime <= 0 {
		cfg.LeaseTime = DefaultLeaseTime
	}
	if cfg.EventHistory <= 0 {
		cfg.EventHistory = store.DefaultEventHistory
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.Name == "" {
		cfg.Name = "metaclaw"
	}
	if cfg.JanitorInterval <= 0 {
		cfg.JanitorInterval = time.Minute
	}
	if cfg.OrphanAge <= 0 {
		cfg.OrphanAge = time.Hour
	}
	c := &conn{cfg: cfg, hostID: uuid.NewString(), stop: make(chan struct{}), alive: map[string]time.Time{}}
	opts := []nats.Option{
		nats.Name(cfg.Name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		// After a failover the watch of the files bucket follows again at
		// once (index.follow).
		nats.ReconnectHandler(func(*nats.Conn) {
			if ix := c.index(); ix != nil {
				ix.kick()
			}
		}),
		nats.Timeout(cfg.Timeout),
	}
	url := cfg.URL
	if strings.EqualFold(strings.TrimSpace(url), "embedded") {
		if cfg.StoreDir == "" {
			return nil, nil, apierr.New(apierr.ValidationFailed, "an embedded NATS server needs a directory for its storage (the data directory's nats/ folder)")
		}
		srv, err := StartServer(ServerConfig{StoreDir: cfg.StoreDir, Port: -1, Host: "127.0.0.1"})
		if err != nil {
			return nil, nil, err
		}
		c.srv = srv
		url = srv.ClientURL()
		opts = append(opts, nats.InProcessServer(srv))
	} else {
		if strings.TrimSpace(url) == "" {
			return nil, nil, apierr.New(apierr.ValidationFailed, "no NATS URL given; pass --nats nats://host:4222 (several comma-separated) or --nats embedded")
		}
		switch {
		case cfg.CredsFile != "":
			opts = append(opts, nats.UserCredentials(cfg.CredsFile))
		case cfg.User != "":
			opts = append(opts, nats.UserInfo(cfg.User, cfg.Password))
		case cfg.Token != "":
			opts = append(opts, nats.Token(cfg.Token))
		}
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		c.shutdownServer()
		return nil, nil, apierr.Wrap(apierr.Internal, err, "cannot connect to NATS at %s (%v); check --nats and the credentials", redact(url), err)
	}
	c.nc = nc
	// Few chunks in flight: a 50 MB upload must not sit in memory.
	c.js, err = jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(64), jetstream.WithDefaultTimeout(cfg.Timeout))
	if err != nil {
		c.closeConn()
		return nil, nil, apierr.Wrap(apierr.Internal, err, "NATS JetStream is not available (%v); enable JetStream on the server", err)
	}
	if err := c.setup(ctx); err != nil {
		c.closeConn()
		return nil, nil, err
	}
	c.wg.Add(1)
	go c.heartbeat()
	ix, err := newIndex(ctx, c)
	if err != nil {
		c.closeConn()
		return nil, nil, err
	}
	ev := &events{c: c, ix: ix, last: map[string]uint64{}}
	rp := newRepair(c, ev)
	ix.mu.Lock()
	ix.observe = rp.observe
	ix.mu.Unlock()
	bl := &blobs{c: c}
	lg := &ledger{c: c, ix: ix, pending: map[string]map[string]bool{}, flushes: map[string]bool{}}
	jn := &janitor{c: c, ix: ix, blobs: bl, ledger: lg, seen: map[string]int64{}}
	c.wg.Add(2)
	go rp.run()
	go jn.run()
	c.ixMu.Lock()
	c.ix, c.repair, c.janitor = ix, rp, jn
	c.ixMu.Unlock()
	return c, &store.Backend{
		Blobs:  bl,
		Meta:   &meta{c: c, ix: ix, kv: c.files},
		Leases: &leases{c: c},
		Quota:  lg,
		Events: ev,
		Tools:  &tools{c: c},
		HostID: c.hostID,
		Close: func() error {
			// Stop the loops, finish the background steps, then stop
			// following the bucket.
			c.stopLoops()
			c.bg.Wait()
			ix.close()
			c.closeConn()
			return nil
		},
	}, nil
}

// index is the host's view of the files bucket once it exists.
func (c *conn) index() *index {
	c.ixMu.Lock()
	defer c.ixMu.Unlock()
	return c.ix
}

// redact hides a password in a URL for messages.
func redact(url string) string {
	var out []string
	for _, u := range strings.Split(url, ",") {
		if at := strings.LastIndex(u, "@"); at >= 0 {
			if i := strings.Index(u, "://"); i >= 0 && i < at {
				u = u[:i+3] + "***" + u[at:]
			}
		}
		out = append(out, u)
	}
	return strings.Join(out, ",")
}

// setup creates or updates the deployment's buckets and stream.
func (c *conn) setup(ctx context.Context) error {
	p, r := c.cfg.Prefix, c.cfg.Replicas
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	kv := func(name, desc string, ttl time.Duration) (jetstream.KeyValue, error) {
		cfg := jetstream.KeyValueConfig{Bucket: p + "_" + name, Description: desc, History: 1, TTL: ttl,
			Storage: jetstream.FileStorage, Replicas: r}
		b, err := c.js.CreateOrUpdateKeyValue(ctx, cfg)
		if err != nil {
			return nil, apierr.Wrap(apierr.Internal, err, "cannot create the NATS key-value bucket %q (%v)", cfg.Bucket, err)
		}
		return b, nil
	}
	var err error
	if c.files, err = kv("files", "metaclaw file records, name claims, file leases and quota ledgers", 0); err != nil {
		return err
	}
	if c.hosts, err = kv("hosts", "metaclaw host heartbeats", c.cfg.LeaseTime); err != nil {
		return err
	}
	if c.tools, err = kv("tools", "metaclaw saved agent tools", 0); err != nil {
		return err
	}
	c.bodies, err = c.js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: p + "_bodies",
		Description: "metaclaw file bodies", Storage: jetstream.FileStorage, Replicas: r})
	if err != nil {
		return apierr.Wrap(apierr.Internal, err, "cannot create the NATS object store %q (%v)", p+"_bodies", err)
	}
	c.bodiesName = p + "_bodies"
	if c.bodiesStream, err = c.js.Stream(ctx, "OBJ_"+c.bodiesName); err != nil {
		return apierr.Wrap(apierr.Internal, err, "cannot open the NATS object store %q (%v)", p+"_bodies", err)
	}
	c.eventsName, c.eventsSubj = p+"_events", p+".events."
	c.events, err = c.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: c.eventsName, Description: "metaclaw change events, one subject per workspace",
		Subjects: []string{c.eventsSubj + ">"}, Storage: jetstream.FileStorage, Replicas: r,
		MaxMsgsPerSubject: int64(c.cfg.EventHistory), Discard: jetstream.DiscardOld, AllowDirect: true,
	})
	if err != nil {
		return apierr.Wrap(apierr.Internal, err, "cannot create the NATS stream %q (%v)", c.eventsName, err)
	}
	return nil
}

// heartbeat keeps this host's key in the hosts bucket, whose entries
// expire after LeaseTime: a host that stops is dead to the others then.
func (c *conn) heartbeat() {
	defer c.wg.Done()
	beat := func() {
		ctx, cancel := context.WithTimeout(context.Background(), c.cfg.Timeout)
		c.hosts.Put(ctx, c.hostID, []byte(time.Now().UTC().Format(time.RFC3339Nano)))
		cancel()
	}
	beat()
	t := time.NewTicker(c.cfg.LeaseTime / 4)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			ctx, cancel := context.WithTimeout(context.Background(), c.cfg.Timeout)
			c.hosts.Delete(ctx, c.hostID)
			cancel()
			return
		case <-t.C:
			beat()
		}
	}
}

// isAlive reports whether host still beats. This host always is; another
// is trusted for a quarter of the lease time after it was last seen.
func (c *conn) isAlive(ctx context.Context, host string) bool {
	if host == c.hostID {
		return true
	}
	c.aliveMu.Lock()
	until, ok := c.alive[host]
	c.aliveMu.Unlock()
	if ok && time.Now().Before(until) {
		return true
	}
	_, err := c.hosts.Get(ctx, host)
	if err != nil {
		if !errors.Is(err, jetstream.ErrKeyNotFound) {
			return true // cannot tell: do not take over
		}
		return false
	}
	c.aliveMu.Lock()
	c.alive[host] = time.Now().Add(c.cfg.LeaseTime / 4)
	c.aliveMu.Unlock()
	return true
}

// background runs fn in the background with a bounded context; Close
// waits for it.
func (c *conn) background(fn func(ctx context.Context)) {
	c.bg.Add(1)
	go func() {
		defer c.bg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), c.cfg.Timeout)
		defer cancel()
		fn(ctx)
	}()
}

// stopLoops ends the heartbeat, the repair and the janitor.
func (c *conn) stopLoops() {
	select {
	case <-c.stop:
	default:
		close(c.stop)
	}
	c.wg.Wait()
}

func (c *conn) closeConn() {
	c.stopLoops()
	if c.nc != nil {
		c.nc.Drain()
		c.nc.Close()
	}
	c.shutdownServer()
}

func (c *conn) shutdownServer() {
	if c.srv != nil {
		c.srv.Shutdown()
		c.srv.WaitForShutdown()
	}
}

// wsKey is a workspace's name as a key or subject token.
func wsKey(ws string) string { return base64.RawURLEncoding.EncodeToString([]byte(ws)) }

func wsName(key string) (string, bool) {
	b, err := base64.RawURLEncoding.DecodeString(key)
	return string(b), err == nil
}

// unavailable turns a NATS error into a coded one.
func unavailable(what string, err error) error {
	var ae *apierr.Error
	if errors.As(err, &ae) {
		return ae
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) {
		return apierr.Wrap(apierr.Timeout, err, "%s timed out waiting for NATS; try again", what)
	}
	if errors.Is(err, context.Canceled) {
		return apierr.From(err)
	}
	return apierr.Wrap(apierr.Busy, err, "%s failed: NATS is unavailable (%v); try again", what, err)
}

func isWrongRevision(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant) {
		return true
	}
	return errors.Is(err, jetstream.ErrKeyExists) || strings.Contains(err.Error(), "wrong last sequence")
}

// deleteAt deletes key if it is still at rev. The revision it returns is
// at most the deletion's (the library does not report it): enough to
// order the deletion after rev in the index.
func deleteAt(ctx context.Context, kv jetstream.KeyValue, key string, rev uint64) (uint64, error) {
	if err := kv.Delete(ctx, key, jetstream.LastRevision(rev)); err != nil {
		return 0, err
	}
	return rev + 1, nil
}
