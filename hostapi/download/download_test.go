package download

// Every server here is an httptest server on 127.0.0.1 and every host name
// is answered by fakeResolver, so no test ever sends traffic off the
// machine or queries real DNS. Refusals of non-loopback literals (10.x,
// 169.254.169.254, ...) happen before any socket is opened.

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// fakeResolver answers from a fixed table and records every lookup.
type fakeResolver struct {
	hosts map[string][]string
	// fail, if set, is returned for every lookup.
	fail  error
	mu    sync.Mutex
	calls []string
}

func (r *fakeResolver) LookupIPAddr(_ context.Context, host string) ([]net.IPAddr, error) {
	r.mu.Lock()
	r.calls = append(r.calls, host)
	r.mu.Unlock()
	if r.fail != nil {
		return nil, r.fail
	}
	ips, ok := r.hosts[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	var out []net.IPAddr
	for _, s := range ips {
		out = append(out, net.IPAddr{IP: net.ParseIP(s)})
	}
	return out, nil
}

func (r *fakeResolver) lookups() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.calls...)
}

func wantCode(t *testing.T, err error, code apierr.Code) *apierr.Error {
	t.Helper()
	if err == nil {
		t.Fatalf("want %s error, got nil", code)
	}
	e, ok := errors.AsType[*apierr.Error](err)
	if !ok {
		t.Fatalf("want *apierr.Error %s, got %T: %v", code, err, err)
	}
	if e.Code != code {
		t.Fatalf("want code %s, got %s: %s", code, e.Code, e.Message)
	}
	return e
}

// countingServer is a loopback server that counts requests, so tests can
// prove a refused target was never contacted.
type countingServer struct {
	*httptest.Server
	hits atomic.Int64
}

func newCountingServer(t *testing.T, h http.HandlerFunc) *countingServer {
	t.Helper()
	cs := &countingServer{}
	cs.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cs.hits.Add(1)
		if h != nil {
			h(w, r)
			return
		}
		io.WriteString(w, "hello")
	}))
	t.Cleanup(cs.Close)
	return cs
}

func (cs *countingServer) port() string {
	u, _ := url.Parse(cs.URL)
	return u.Port()
}

func (cs *countingServer) addrPort() netip.AddrPort {
	u, _ := url.Parse(cs.URL)
	return netip.MustParseAddrPort(u.Host)
}

func fetchAll(t *testing.T, rawURL string, opt Options) (*Result, []byte) {
	t.Helper()
	res, err := Fetch(context.Background(), rawURL, opt)
	if err != nil {
		t.Fatalf("Fetch(%s): %v", rawURL, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return res, b
}

func TestRefusesPrivateLiteralsAndLocalhost(t *testing.T) {
	srv := newCountingServer(t, nil)
	p := srv.port()
	urls := []string{
		"http://127.0.0.1:" + p + "/",
		"http://localhost:" + p + "/",
		"http://LOCALHOST.:" + p + "/",
		"http://app.localhost:" + p + "/",
		"http://[::1]:" + p + "/",
		"http://[::ffff:127.0.0.1]:" + p + "/",
		"http://0.0.0.0:" + p + "/",
		"http://[::]:" + p + "/",
		"http://10.0.0.1/",
		"http://192.168.1.1/",
		"http://172.16.0.1/",
		"http://169.254.169.254/latest/meta-data/",
		"http://[fd00:ec2::254]/",
		"http://100.64.0.1/",
		"http://[fe80::1%25lo]/",
		"https://10.1.2.3:8443/secret",
		"http://user:secret@127.0.0.1:" + p + "/",
	}
	for _, raw := range urls {
		t.Run(raw, func(t *testing.T) {
			r := &fakeResolver{}
			start := time.Now()
			_, err := Fetch(context.Background(), raw, Options{Resolver: r, Timeout: 5 * time.Second})
			e := wantCode(t, err, apierr.SandboxViolation)
			u, _ := url.Parse(raw)
			if !strings.Contains(e.Message, fmt.Sprintf("%q", u.Hostname())) || !strings.Contains(e.Message, "private addresses are not allowed") {
				t.Errorf("message should name the host and the rule: %s", e.Message)
			}
			if strings.Contains(e.Error(), "secret") {
				t.Errorf("message leaks userinfo: %s", e.Error())
			}
			if calls := r.lookups(); len(calls) != 0 {
				t.Errorf("literal/localhost needed no DNS, got lookups %v", calls)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("refusal took %v; it must happen before connecting", d)
			}
		})
	}
	if n := srv.hits.Load(); n != 0 {
		t.Fatalf("loopback server was contacted %d times", n)
	}
}

func TestRefusesHostResolvingToPrivate(t *testing.T) {
	srv := newCountingServer(t, nil)
	p := srv.port()
	r := &fakeResolver{hosts: map[string][]string{
		"evil.test":     {"127.0.0.1"},
		"evil6.test":    {"::1"},
		"mapped.test":   {"::ffff:127.0.0.1"},
		"meta.test":     {"169.254.169.254"},
		"intranet.test": {"10.0.0.5"},
		"mixed.test":    {"127.0.0.1", "10.0.0.1"},
	}}
	// The hook lets 127.0.0.1:p itself through, so only mixed.test's
	// 10.0.0.1 record can cause its refusal: one allowed record is not
	// enough, any forbidden record refuses the host.
	mixedHooks := &testHooks{allowAddrs: []netip.AddrPort{srv.addrPort()}}
	for host := range r.hosts {
		t.Run(host, func(t *testing.T) {
			opt := Options{Resolver: r}
			if host == "mixed.test" {
				opt.hooks = mixedHooks
			}
			_, err := Fetch(context.Background(), "http://"+host+":"+p+"/", opt)
			e := wantCode(t, err, apierr.SandboxViolation)
			if !strings.Contains(e.Message, `"`+host+`"`) || !strings.Contains(e.Message, "private addresses are not allowed") {
				t.Errorf("message: %s", e.Message)
			}
		})
	}
	if n := srv.hits.Load(); n != 0 {
		t.Fatalf("loopback server was contacted %d times", n)
	}
}

func TestDNSFailures(t *testing.T) {
	r := &fakeResolver{}
	_, err := Fetch(context.Background(), "http://nowhere.test/x", Options{Resolver: r})
	e := wantCode(t, err, apierr.NotFound)
	if !strings.Contains(e.Message, `"nowhere.test"`) {
		t.Errorf("message: %s", e.Message)
	}

	r = &fakeResolver{fail: &net.DNSError{Err: "server misbehaving", Name: "x.test", IsTemporary: true}}
	_, err = Fetch(context.Background(), "http://x.test/", Options{Resolver: r})
	wantCode(t, err, apierr.FileReadFailed)

	r = &fakeResolver{hosts: map[string][]string{"empty.test": {}}}
	_, err = Fetch(context.Background(), "http://empty.test/", Options{Resolver: r})
	wantCode(t, err, apierr.NotFound)
}

// TestAllowListHook shows the test-only hook lets exactly one loopback
// ip:port through while AllowPrivate is false; the redirect tests rely on it.
func TestAllowListHook(t *testing.T) {
	srv := newCountingServer(t, nil)
	r := &fakeResolver{hosts: map[string][]string{"public.test": {"127.0.0.1"}}}
	opt := Options{Resolver: r, hooks: &testHooks{allowAddrs: []netip.AddrPort{srv.addrPort()}}}
	res, b := fetchAll(t, "http://public.test:"+srv.port()+"/a.txt", opt)
	if string(b) != "hello" || res.Filename != "a.txt" {
		t.Fatalf("got %q filename %q", b, res.Filename)
	}
	// Same IP, other port: not on the list.
	other := newCountingServer(t, nil)
	_, err := Fetch(context.Background(), "http://public.test:"+other.port()+"/", opt)
	wantCode(t, err, apierr.SandboxViolation)
	if other.hits.Load() != 0 {
		t.Fatal("other port was contacted")
	}
}

func TestRefusesRedirectToPrivate(t *testing.T) {
	target := newCountingServer(t, nil)
	tp := target.port()
	var location atomic.Value
	public := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, location.Load().(string), http.StatusFound)
	})
	r := &fakeResolver{hosts: map[string][]string{
		"public.test": {"127.0.0.1"},
		"evil.test":   {"127.0.0.1"},
	}}
	opt := Options{Resolver: r, hooks: &testHooks{allowAddrs: []netip.AddrPort{public.addrPort()}}}
	for _, loc := range []string{
		"http://127.0.0.1:" + tp + "/",
		"http://evil.test:" + tp + "/",
		"http://localhost:" + tp + "/",
		"http://[::1]:" + tp + "/",
		"http://169.254.169.254/latest/meta-data/iam/",
		"http://10.0.0.1/admin",
	} {
		t.Run(loc, func(t *testing.T) {
			location.Store(loc)
			before := public.hits.Load()
			_, err := Fetch(context.Background(), "http://public.test:"+public.port()+"/start", opt)
			wantCode(t, err, apierr.SandboxViolation)
			if public.hits.Load() != before+1 {
				t.Errorf("the allowed first hop should have been fetched once")
			}
		})
	}
	if n := target.hits.Load(); n != 0 {
		t.Fatalf("redirect target on loopback was contacted %d times", n)
	}
}

func TestRedirectToOtherSchemeRefused(t *testing.T) {
	for _, loc := range []string{"ftp://127.0.0.1/file", "file:///etc/passwd", "gopher://127.0.0.1:70/"} {
		srv := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Location", loc)
			w.WriteHeader(http.StatusMovedPermanently)
		})
		_, err := Fetch(context.Background(), srv.URL+"/x", Options{AllowPrivate: true})
		wantCode(t, err, apierr.ValidationFailed)
	}
}

func TestDownloadAllowPrivate(t *testing.T) {
	payload := make([]byte, 256<<10)
	rand.Read(payload)
	srv := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", strconv.Itoa(len(payload)))
		if r.URL.Query().Get("cd") != "" {
			w.Header().Set("Content-Disposition", r.URL.Query().Get("cd"))
		}
		w.Write(payload)
	})
	res, b := fetchAll(t, srv.URL+"/files/data.bin", Options{AllowPrivate: true})
	if !bytes.Equal(b, payload) {
		t.Fatalf("body differs: %d bytes vs %d", len(b), len(payload))
	}
	if res.Filename != "data.bin" || res.ContentType != "application/octet-stream" ||
		res.Size != int64(len(payload)) || res.FinalURL != srv.URL+"/files/data.bin" {
		t.Fatalf("result: %+v", res)
	}

	cd := url.QueryEscape(`attachment; filename="Quarterly Report.xlsx"`)
	res, _ = fetchAll(t, srv.URL+"/files/data.bin?cd="+cd, Options{AllowPrivate: true})
	if res.Filename != "Quarterly Report.xlsx" {
		t.Fatalf("filename from Content-Disposition: %q", res.Filename)
	}
	cd = url.QueryEscape(`attachment; filename="../../../etc/cron.d/x"`)
	res, _ = fetchAll(t, srv.URL+"/files/data.bin?cd="+cd, Options{AllowPrivate: true})
	if res.Filename != "x" {
		t.Fatalf("traversal filename: %q", res.Filename)
	}
	res, _ = fetchAll(t, srv.URL+"/", Options{AllowPrivate: true})
	if res.Filename != "download" {
		t.Fatalf("fallback filename: %q", res.Filename)
	}
}

func TestHTTPS(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "tls ok")
	}))
	// The failed-verification case below makes the server log a handshake
	// error; that is expected, so keep it out of the test output.
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	defer srv.Close()
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	hooks := &testHooks{tlsConfig: &tls.Config{RootCAs: pool}}

	_, b := fetchAll(t, srv.URL+"/s.txt", Options{AllowPrivate: true, hooks: hooks})
	if string(b) != "tls ok" {
		t.Fatalf("body %q", b)
	}

	// We dial the vetted IP, but the certificate must still be checked
	// against the URL's host name: the test cert does not cover public.test.
	u, _ := url.Parse(srv.URL)
	r := &fakeResolver{hosts: map[string][]string{"public.test": {"127.0.0.1"}}}
	_, err := Fetch(context.Background(), "https://public.test:"+u.Port()+"/", Options{
		Resolver: r,
		hooks:    &testHooks{tlsConfig: hooks.tlsConfig, allowAddrs: []netip.AddrPort{netip.MustParseAddrPort(u.Host)}},
	})
	e := wantCode(t, err, apierr.FileReadFailed)
	if !strings.Contains(e.Message, "certificate") {
		t.Errorf("message: %s", e.Message)
	}
}

func TestMaxBytes(t *testing.T) {
	payload := bytes.Repeat([]byte("x"), 1000)
	srv := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("chunked") != "" {
			// Flushing before writing forces chunked encoding: no
			// Content-Length, so only the streaming cap can catch it.
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			for i := 0; i < len(payload); i += 100 {
				w.Write(payload[i : i+100])
				w.(http.Flusher).Flush()
			}
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(payload)))
		w.Write(payload)
	})

	// Declared too large: refused before the body is read.
	_, err := Fetch(context.Background(), srv.URL+"/big", Options{AllowPrivate: true, MaxBytes: 999})
	e := wantCode(t, err, apierr.TooLarge)
	if !strings.Contains(e.Message, "1000") || !strings.Contains(e.Message, "999") {
		t.Errorf("message: %s", e.Message)
	}

	// Undeclared size: caught while streaming, never more than MaxBytes.
	res, err := Fetch(context.Background(), srv.URL+"/big?chunked=1", Options{AllowPrivate: true, MaxBytes: 250})
	if err != nil {
		t.Fatal(err)
	}
	if res.Size != -1 {
		t.Errorf("chunked Size = %d, want -1", res.Size)
	}
	got, err := io.ReadAll(res.Body)
	wantCode(t, err, apierr.TooLarge)
	if len(got) > 250 {
		t.Errorf("read %d bytes past the 250-byte cap", len(got))
	}
	// The error is sticky.
	if _, err := res.Body.Read(make([]byte, 10)); !apierr.Is(err, apierr.TooLarge) {
		t.Errorf("second read: %v", err)
	}
	res.Body.Close()
	res.Body.Close() // idempotent

	// Exactly at the cap is fine, with and without Content-Length.
	for _, q := range []string{"", "?chunked=1"} {
		res, b := fetchAll(t, srv.URL+"/big"+q, Options{AllowPrivate: true, MaxBytes: 1000})
		if len(b) != 1000 {
			t.Errorf("%q: got %d bytes (size %d)", q, len(b), res.Size)
		}
	}
}

func TestRedirectLimit(t *testing.T) {
	srv := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		// /hop/N redirects N more times before reaching the file.
		if n, ok := strings.CutPrefix(r.URL.Path, "/hop/"); ok {
			i, _ := strconv.Atoi(n)
			next := "/files/report.csv"
			if i > 1 {
				next = fmt.Sprintf("/hop/%d", i-1)
			}
			http.Redirect(w, r, next, http.StatusFound)
			return
		}
		io.WriteString(w, "a,b\n1,2\n")
	})
	res, b := fetchAll(t, srv.URL+"/hop/5", Options{AllowPrivate: true})
	if string(b) != "a,b\n1,2\n" || res.Filename != "report.csv" || res.FinalURL != srv.URL+"/files/report.csv" {
		t.Fatalf("5 redirects: %q %+v", b, res)
	}
	_, err := Fetch(context.Background(), srv.URL+"/hop/6", Options{AllowPrivate: true})
	e := wantCode(t, err, apierr.ValidationFailed)
	if !strings.Contains(e.Message, "too many redirects") {
		t.Errorf("message: %s", e.Message)
	}

	_, err = Fetch(context.Background(), srv.URL+"/hop/3", Options{AllowPrivate: true, MaxRedirects: 2})
	wantCode(t, err, apierr.ValidationFailed)
	fetchAll(t, srv.URL+"/hop/2", Options{AllowPrivate: true, MaxRedirects: 2})
	_, err = Fetch(context.Background(), srv.URL+"/hop/1", Options{AllowPrivate: true, MaxRedirects: -1})
	wantCode(t, err, apierr.ValidationFailed)
}

func TestNon2xx(t *testing.T) {
	srv := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		code, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/"))
		http.Error(w, "nope", code)
	})
	for _, code := range []int{404, 403, 500, 503} {
		_, err := Fetch(context.Background(), fmt.Sprintf("%s/%d", srv.URL, code), Options{AllowPrivate: true})
		e := wantCode(t, err, apierr.FileReadFailed)
		if !strings.Contains(e.Message, strconv.Itoa(code)) {
			t.Errorf("%d: message %s", code, e.Message)
		}
	}
}

func TestTimeout(t *testing.T) {
	srv := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow-body" {
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(http.StatusOK)
			io.WriteString(w, "start")
			w.(http.Flusher).Flush()
		}
		// Stop as soon as the client gives up, so srv.Close does not wait.
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	})

	start := time.Now()
	_, err := Fetch(context.Background(), srv.URL+"/slow-headers", Options{AllowPrivate: true, Timeout: 200 * time.Millisecond})
	wantCode(t, err, apierr.Timeout)
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("timeout took %v", d)
	}

	res, err := Fetch(context.Background(), srv.URL+"/slow-body", Options{AllowPrivate: true, Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	start = time.Now()
	_, err = io.ReadAll(res.Body)
	wantCode(t, err, apierr.Timeout)
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("body timeout took %v", d)
	}

	// A caller's own cancellation is also reported, not hung on.
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	_, err = Fetch(ctx, srv.URL+"/slow-headers", Options{AllowPrivate: true})
	wantCode(t, err, apierr.Timeout)
}

func TestSchemesRefused(t *testing.T) {
	r := &fakeResolver{}
	for _, raw := range []string{
		"ftp://example.test/file",
		"file:///etc/passwd",
		"gopher://example.test/",
		"javascript:alert(1)",
		"mailto:a@example.test",
		"data:text/plain,hi",
		"",
		"example.test/no-scheme",
		"//example.test/x",
		"http://",
		"https:///path-only",
		"http://[::1",
	} {
		_, err := Fetch(context.Background(), raw, Options{Resolver: r})
		if !apierr.Is(err, apierr.ValidationFailed) {
			t.Errorf("%q: want VALIDATION_FAILED, got %v", raw, err)
		}
	}
	if calls := r.lookups(); len(calls) != 0 {
		t.Errorf("refused URLs were looked up: %v", calls)
	}
}

func TestUserinfoNotLeaked(t *testing.T) {
	var gotUser, gotPass atomic.Value
	srv := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		u, p, _ := r.BasicAuth()
		gotUser.Store(u)
		gotPass.Store(p)
		if r.URL.Path == "/missing" {
			http.NotFound(w, r)
			return
		}
		io.WriteString(w, "ok")
	})
	withCreds := strings.Replace(srv.URL, "http://", "http://alice:s3cr3t@", 1)
	res, _ := fetchAll(t, withCreds+"/f.txt", Options{AllowPrivate: true})
	if gotUser.Load() != "alice" || gotPass.Load() != "s3cr3t" {
		t.Errorf("userinfo should be sent as basic auth, got %v/%v", gotUser.Load(), gotPass.Load())
	}
	if strings.Contains(res.FinalURL, "s3cr3t") || strings.Contains(res.FinalURL, "alice") {
		t.Errorf("FinalURL leaks userinfo: %s", res.FinalURL)
	}
	_, err := Fetch(context.Background(), withCreds+"/missing", Options{AllowPrivate: true})
	if err == nil || strings.Contains(err.Error(), "s3cr3t") {
		t.Errorf("error leaks userinfo: %v", err)
	}
	_, err = Fetch(context.Background(), "ftp://alice:s3cr3t@h/", Options{})
	if err == nil || strings.Contains(err.Error(), "s3cr3t") {
		t.Errorf("error leaks userinfo: %v", err)
	}
	_, err = Fetch(context.Background(), "http://alice:s3cr3t@127.0.0.1:1/", Options{AllowPrivate: true})
	if err == nil || strings.Contains(err.Error(), "s3cr3t") {
		t.Errorf("connection error leaks userinfo: %v", err)
	}
}
