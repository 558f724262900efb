// Package download fetches a URL on the server for files.download (SPEC
// section 8) without letting a script use the host as a proxy into its own
// network (SSRF).
//
// The defence sits at dial time: a custom DialContext resolves the host
// itself, vets every resolved address, and then dials exactly the vetted IP.
// Because the address that is checked is the address that is connected to,
// a DNS answer that changes between check and use (DNS rebinding) cannot
// slip through, and every redirect hop goes through the same dialer.
package download

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// Defaults applied when an Options field is zero.
const (
	DefaultTimeout      = 60 * time.Second
	DefaultMaxRedirects = 5
)

// userAgent identifies the fetcher so server operators can tell who calls.
const userAgent = "metaclaw-download/1"

// Options tune one Fetch.
type Options struct {
	// AllowPrivate is a local test/dev flag: it lets downloads reach
	// loopback and private addresses. The cloud metadata address stays
	// blocked regardless.
	AllowPrivate bool
	// MaxBytes caps the body while streaming; exceeding it gives
	// apierr.TooLarge. Zero or negative means no cap, so callers should
	// always set it.
	MaxBytes int64
	// Timeout limits the whole request, including reading the body
	// (default 60s).
	Timeout time.Duration
	// MaxRedirects is how many redirects are followed (default 5; negative
	// means none).
	MaxRedirects int
	// Resolver looks host names up; nil means net.DefaultResolver. Tests
	// inject one so that no real DNS is needed.
	Resolver Resolver

	// hooks is set only by this package's tests; production code cannot
	// reach it, so the production policy stays exactly classify().
	hooks *testHooks
}

// testHooks loosen the policy just enough for tests that must reach a
// server on 127.0.0.1 while AllowPrivate is false.
type testHooks struct {
	// allowAddrs are exact ip:port pairs that bypass classify.
	allowAddrs []netip.AddrPort
	// tlsConfig replaces the default TLS client config (test root CAs).
	tlsConfig *tls.Config
}

// Resolver is the part of *net.Resolver that Fetch uses.
type Resolver interface {
	LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error)
}

// Result is a successful response whose body has not been read yet.
type Result struct {
	// Body streams the response; reading past MaxBytes returns an
	// *apierr.Error with code TOO_LARGE. The caller must Close it; closing
	// also releases the request's timer and connections.
	Body io.ReadCloser
	// Filename comes from Content-Disposition, else the last path segment
	// of the final URL, else "download"; it is always a safe single path
	// component of at most 255 bytes.
	Filename    string
	ContentType string
	// FinalURL is the URL after redirects, with any userinfo removed so it
	// can be stored and shown without leaking credentials.
	FinalURL string
	// Size is the Content-Length, or -1 when the server did not send one.
	Size int64
}

// Fetch GETs rawURL under the SSRF policy of SPEC 8 and returns the
// response body for streaming. Errors are always *apierr.Error.
func Fetch(ctx context.Context, rawURL string, opt Options) (*Result, error) {
	u, err := parseURL(rawURL)
	if err != nil {
		return nil, err
	}
	host := u.Hostname()
	timeout := opt.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	maxRedirects := opt.MaxRedirects
	if maxRedirects == 0 {
		maxRedirects = DefaultMaxRedirects
	}
	if maxRedirects < 0 {
		maxRedirects = 0
	}
	res := opt.Resolver
	if res == nil {
		res = net.DefaultResolver
	}
	pol := policy{allowPrivate: opt.AllowPrivate}
	var tlsConf *tls.Config
	if opt.hooks != nil {
		pol.allowAddrs = opt.hooks.allowAddrs
		tlsConf = opt.hooks.tlsConfig
	}

	dl := newDialer(pol, res)
	tr := &http.Transport{
		// Environment proxies would connect on our behalf to hosts we never
		// vetted (and could reach the internal network), so none are used.
		Proxy:               nil,
		DialContext:         dl.DialContext,
		TLSClientConfig:     tlsConf,
		ForceAttemptHTTP2:   true,
		TLSHandshakeTimeout: 15 * time.Second,
		// We want the bytes exactly as served: sizes then match
		// Content-Length, and a gzip bomb cannot inflate past the cap
		// behind our back.
		DisableCompression: true,
		IdleConnTimeout:    30 * time.Second,
	}
	client := &http.Client{
		Transport: tr,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) > maxRedirects {
				return apierr.New(apierr.ValidationFailed, "too many redirects: %q redirected more than %d times; give the file's direct URL", host, maxRedirects)
			}
			if s := req.URL.Scheme; s != "http" && s != "https" {
				return apierr.New(apierr.ValidationFailed, "%q redirected to a %q URL; only http and https downloads are allowed", host, s)
			}
			if req.URL.Hostname() == "" {
				return apierr.New(apierr.ValidationFailed, "%q redirected to a URL without a host", host)
			}
			return nil
		},
	}

	ctx, cancel := context.WithTimeout(ctx, timeout)
	cleanup := func() {
		cancel()
		tr.CloseIdleConnections()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		cleanup()
		return nil, apierr.Wrap(apierr.ValidationFailed, err, "cannot build a request for host %q", host)
	}
	req.Header.Set("User-Agent", userAgent)
	resp, err := client.Do(req)
	if err != nil {
		// Map before cleanup: cleanup cancels ctx, which would make every
		// failure look like a cancellation.
		err = mapError(ctx, err, host, timeout)
		cleanup()
		return nil, err
	}
	finalURL := resp.Request.URL
	finalHost := finalURL.Hostname()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		resp.Body.Close()
		cleanup()
		return nil, apierr.New(apierr.FileReadFailed, "%q answered HTTP %d %s; check the URL and that the file is publicly reachable",
			finalHost, resp.StatusCode, http.StatusText(resp.StatusCode))
	}
	if opt.MaxBytes > 0 && resp.ContentLength > opt.MaxBytes {
		resp.Body.Close()
		cleanup()
		return nil, tooLarge(finalHost, opt.MaxBytes, resp.ContentLength)
	}

	clean := *finalURL
	clean.User = nil
	return &Result{
		Body: &body{
			rc:      resp.Body,
			ctx:     ctx,
			cleanup: cleanup,
			host:    finalHost,
			timeout: timeout,
			max:     opt.MaxBytes,
			left:    opt.MaxBytes,
		},
		Filename:    pickFilename(resp.Header.Get("Content-Disposition"), finalURL),
		ContentType: resp.Header.Get("Content-Type"),
		FinalURL:    clean.String(),
		Size:        resp.ContentLength,
	}, nil
}

// parseURL accepts only absolute http(s) URLs with a host.
func parseURL(rawURL string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSpace(rawURL))
	if err != nil {
		// url.Error would echo the URL, userinfo included; say less.
		return nil, apierr.New(apierr.ValidationFailed, "the download URL is malformed; give an absolute http:// or https:// URL")
	}
	// url.Parse lower-cases the scheme, so "HTTP://" is accepted too.
	if u.Scheme != "http" && u.Scheme != "https" {
		scheme := u.Scheme
		if scheme == "" {
			scheme = "(none)"
		}
		return nil, apierr.New(apierr.ValidationFailed, "URL scheme %q is not allowed; only http and https downloads are supported", scheme)
	}
	if u.Hostname() == "" {
		return nil, apierr.New(apierr.ValidationFailed, "the download URL has no host; give an absolute http:// or https:// URL")
	}
	if _, _, err := hostLiteral(u.Hostname()); err != nil {
		return nil, err
	}
	return u, nil
}

// policy decides which addresses a connection may go to.
type policy struct {
	allowPrivate bool
	allowAddrs   []netip.AddrPort // tests only
}

// check returns a SANDBOX_VIOLATION error if ap may not be dialed. host is
// the name the user asked for, so the message points at the URL.
func (p policy) check(host string, ap netip.AddrPort) error {
	if slices.Contains(p.allowAddrs, ap) {
		return nil
	}
	kind := classify(ap.Addr())
	if kind == "" || (p.allowPrivate && kind != kindMetadata) {
		return nil
	}
	return refuse(host, ap.Addr(), kind)
}

func refuse(host string, ip netip.Addr, kind string) error {
	if ip.IsValid() && ip.String() != host {
		return apierr.New(apierr.SandboxViolation,
			"host %q resolves to %s, a %s address; downloads from private addresses are not allowed, only public internet hosts",
			host, ip, kind)
	}
	return apierr.New(apierr.SandboxViolation,
		"host %q is a %s address; downloads from private addresses are not allowed, only public internet hosts",
		host, kind)
}

// dialer resolves, vets and dials; it is the only way the transport opens
// connections.
type dialer struct {
	pol policy
	res Resolver
	d   net.Dialer
}

func newDialer(pol policy, res Resolver) *dialer {
	dl := &dialer{pol: pol, res: res}
	dl.d = net.Dialer{
		Timeout:   30 * time.Second,
		KeepAlive: 30 * time.Second,
		// Belt and braces: DialContext already dials only vetted IPs, but
		// Control sees the address the socket really connects to, so a
		// future change that passes a host name through cannot bypass
		// the policy.
		Control: func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return apierr.New(apierr.SandboxViolation, "refusing to connect to %q: cannot vet the address", address)
			}
			return pol.check(ap.Addr().String(), ap)
		},
	}
	return dl
}

// DialContext resolves host once, refuses the whole host if any of its
// addresses is forbidden, and then dials the vetted IPs themselves.
// Refusing on any bad address (rather than skipping it) keeps the rule
// simple and deterministic: a public name with a private record is
// suspicious, not something to work around.
func (dl *dialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, apierr.Wrap(apierr.ValidationFailed, err, "bad host:port %q", addr)
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return nil, apierr.Wrap(apierr.ValidationFailed, err, "bad port %q for host %q", portStr, host)
	}
	ips, err := dl.resolve(ctx, host)
	if err != nil {
		return nil, err
	}
	targets := make([]netip.AddrPort, 0, len(ips))
	for _, ip := range ips {
		ap := netip.AddrPortFrom(ip, uint16(port))
		if err := dl.pol.check(host, ap); err != nil {
			return nil, err
		}
		targets = append(targets, ap)
	}
	var firstErr error
	for _, ap := range targets {
		c, err := dl.d.DialContext(ctx, network, ap.String())
		if err == nil {
			return c, nil
		}
		if firstErr == nil {
			firstErr = err
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, firstErr
}

// resolve turns host into addresses without any DNS for IP literals; a
// host that ends in a number is an IP literal or refused, never looked up.
// It sees every hop's host as the transport dials it (after IDNA mapping,
// so "127。1" arrives here as "127.1").
func (dl *dialer) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	ip, isLiteral, err := hostLiteral(host)
	if err != nil {
		return nil, err
	}
	if isLiteral {
		return []netip.Addr{ip.Unmap()}, nil
	}
	// RFC 6761: localhost names always mean this machine, whatever DNS
	// says; refuse them without a lookup.
	lower := strings.ToLower(strings.TrimSuffix(host, "."))
	if !dl.pol.allowPrivate && (lower == "localhost" || strings.HasSuffix(lower, ".localhost")) {
		return nil, refuse(host, netip.Addr{}, kindLoopback)
	}
	addrs, err := dl.res.LookupIPAddr(ctx, host)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var dnsErr *net.DNSError
		if errors.As(err, &dnsErr) {
			if dnsErr.IsNotFound {
				return nil, apierr.Wrap(apierr.NotFound, err, "host %q not found: DNS has no address for it; check the URL", host)
			}
			if dnsErr.IsTimeout {
				return nil, apierr.Wrap(apierr.Timeout, err, "looking up host %q timed out; try again later", host)
			}
		}
		return nil, apierr.Wrap(apierr.FileReadFailed, err, "could not look up host %q: %v", host, err)
	}
	out := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		ip, ok := netip.AddrFromSlice(a.IP)
		if !ok {
			continue
		}
		ip = ip.Unmap()
		if ip.Is6() && a.Zone != "" {
			ip = ip.WithZone(a.Zone)
		}
		out = append(out, ip)
	}
	if len(out) == 0 {
		return nil, apierr.New(apierr.NotFound, "host %q not found: DNS returned no usable address; check the URL", host)
	}
	return out, nil
}

// mapError turns a client or body-read error into a coded one. Our own
// coded errors (policy refusals, redirect limits, DNS) come back wrapped
// in *url.Error / *net.OpError and are unwrapped as they are.
func mapError(ctx context.Context, err error, host string, timeout time.Duration) error {
	if e, ok := errors.AsType[*apierr.Error](err); ok {
		return e
	}
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded), errors.Is(err, context.DeadlineExceeded):
		return apierr.Wrap(apierr.Timeout, err, "download from %q did not finish within %s; the server is too slow or the file too big for the time limit", host, timeout)
	case errors.Is(ctx.Err(), context.Canceled):
		return apierr.Wrap(apierr.Timeout, err, "download from %q was cancelled before it finished", host)
	}
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		return apierr.Wrap(apierr.Timeout, err, "download from %q timed out; the server is too slow", host)
	}
	// *url.Error's text repeats the URL (and its user name); report only
	// the underlying cause.
	cause := err
	if ue, ok := errors.AsType[*url.Error](err); ok {
		cause = ue.Err
	}
	return apierr.Wrap(apierr.FileReadFailed, err, "download from %q failed: %v", host, cause)
}

func tooLarge(host string, limit, size int64) error {
	if size >= 0 {
		return apierr.New(apierr.TooLarge, "the file at %q is %d bytes, more than the %d-byte download limit", host, size, limit)
	}
	return apierr.New(apierr.TooLarge, "the download from %q is larger than the %d-byte limit", host, limit)
}

// body enforces MaxBytes while streaming, codes read errors and releases
// the request's context and connections on Close.
type body struct {
	rc      io.ReadCloser
	ctx     context.Context
	cleanup func()
	host    string
	timeout time.Duration
	max     int64 // <= 0: no cap
	left    int64
	err     error // sticky error once the cap is hit or reading failed
	once    sync.Once
}

func (b *body) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if b.max > 0 && int64(len(p)) > b.left+1 {
		// Ask for one byte more than allowed: getting it proves the body
		// is too large without reading much past the cap.
		p = p[:b.left+1]
	}
	n, err := b.rc.Read(p)
	if b.max > 0 {
		if int64(n) > b.left {
			n = int(b.left)
			b.left = 0
			b.err = tooLarge(b.host, b.max, -1)
			return n, b.err
		}
		b.left -= int64(n)
	}
	if err != nil && err != io.EOF {
		b.err = mapError(b.ctx, err, b.host, b.timeout)
		return n, b.err
	}
	return n, err
}

func (b *body) Close() error {
	var err error
	b.once.Do(func() {
		err = b.rc.Close()
		b.cleanup()
	})
	return err
}
