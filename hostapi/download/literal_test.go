package download

import (
	"context"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"testing"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// TestNonCanonicalIPv4Refused is issue 11's SSRF: inet_aton spellings of
// internal addresses were sent to DNS instead of being refused. Each is now
// refused before any lookup or connection, also with AllowPrivate (a
// non-canonical literal is never what a person meant to type).
func TestNonCanonicalIPv4Refused(t *testing.T) {
	srv := newCountingServer(t, nil)
	p := srv.port()
	for host, canonical := range map[string]string{
		"127.1":               "127.0.0.1",
		"2130706433":          "127.0.0.1",
		"0x7f000001":          "127.0.0.1",
		"0X7F000001":          "127.0.0.1",
		"0177.0.0.1":          "127.0.0.1",
		"0x7f.1":              "127.0.0.1",
		"127.0.1":             "127.0.0.1",
		"127.000.000.001":     "127.0.0.1",
		"017700000001":        "127.0.0.1",
		"127.0.0.1.":          "127.0.0.1",
		"0":                   "0.0.0.0",
		"0x0":                 "0.0.0.0",
		"10.1":                "10.0.0.1",
		"3232235521":          "192.168.0.1",
		"0xa9fea9fe":          "169.254.169.254",
		"0251.0376.0251.0376": "169.254.169.254",
	} {
		for _, allowPrivate := range []bool{false, true} {
			res := &fakeResolver{}
			_, err := Fetch(context.Background(), "http://"+host+":"+p+"/x", Options{Resolver: res, AllowPrivate: allowPrivate})
			e := wantCode(t, err, apierr.SandboxViolation)
			if !strings.Contains(e.Message, canonical) || !strings.Contains(e.Message, "another form") {
				t.Errorf("%s: message %q does not name %s", host, e.Message, canonical)
			}
			if n := len(res.lookups()); n != 0 {
				t.Errorf("%s: %d DNS lookups", host, n)
			}
		}
	}
	// A public address in another form is refused too, with the form to
	// write; so is a host that ends in a number without being an address.
	for host, want := range map[string]string{
		"134744072":       "write it as 8.8.8.8",
		"8.8.2056":        "write it as 8.8.8.8",
		"1.2.3.256":       "not an IPv4 address",
		"999.1.1.1":       "not an IPv4 address",
		"files.example.9": "not an IPv4 address",
		"1.2.3.4.5":       "not an IPv4 address",
		"0x1g.0.0.1":      "not an IPv4 address",
		"09.1.1.1":        "not an IPv4 address",
	} {
		res := &fakeResolver{}
		_, err := Fetch(context.Background(), "http://"+host+"/x", Options{Resolver: res})
		e := wantCode(t, err, apierr.ValidationFailed)
		if !strings.Contains(e.Message, want) || len(res.lookups()) != 0 {
			t.Errorf("%s: %q, %d lookups", host, e.Message, len(res.lookups()))
		}
	}
	if srv.hits.Load() != 0 {
		t.Fatalf("the loopback server was contacted %d times", srv.hits.Load())
	}
}

// TestNamesStillResolve: names that merely contain digits are names, and
// canonical literals keep working.
func TestNamesStillResolve(t *testing.T) {
	srv := newCountingServer(t, nil)
	ap := srv.addrPort()
	res := &fakeResolver{hosts: map[string][]string{
		"1.2.3.4.nip.example": {"127.0.0.1"},
		"files-2024.example":  {"127.0.0.1"},
		"0x.example":          {"127.0.0.1"},
	}}
	for _, host := range []string{"1.2.3.4.nip.example", "files-2024.example", "0x.example"} {
		_, b := fetchAll(t, "http://"+host+":"+srv.port()+"/f", Options{Resolver: res, hooks: &testHooks{allowAddrs: []netip.AddrPort{ap}}})
		if string(b) != "hello" {
			t.Fatalf("%s: %q", host, b)
		}
	}
	if got := res.lookups(); len(got) != 3 {
		t.Fatalf("lookups %v", got)
	}
	// A canonical literal goes straight to the dialer (no DNS).
	_, b := fetchAll(t, srv.URL+"/f", Options{Resolver: res, hooks: &testHooks{allowAddrs: []netip.AddrPort{ap}}})
	if string(b) != "hello" || len(res.lookups()) != 3 {
		t.Fatalf("literal: %q, lookups %v", b, res.lookups())
	}
}

// TestNonCanonicalRedirectAndUnicode: the same refusal on a redirect hop,
// and for hosts that IDNA maps to a non-canonical literal ("１２７.１",
// "127。1"), which reach the dialer in their ASCII form.
func TestNonCanonicalRedirectAndUnicode(t *testing.T) {
	target := newCountingServer(t, nil)
	hop := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://0x7f000001:"+target.port()+"/secret", http.StatusFound)
	})
	res := &fakeResolver{}
	_, err := Fetch(context.Background(), hop.URL+"/go", Options{Resolver: res, hooks: &testHooks{allowAddrs: []netip.AddrPort{hop.addrPort()}}})
	wantCode(t, err, apierr.SandboxViolation)
	for _, host := range []string{"１２７.１", "127。1", "127。0。0。1"} {
		_, err := Fetch(context.Background(), "http://"+url.PathEscape(host)+":"+target.port()+"/x", Options{Resolver: res})
		if c := apierr.CodeOf(err); c != apierr.SandboxViolation && c != apierr.ValidationFailed {
			t.Errorf("%s: %v", host, err)
		}
	}
	if len(res.lookups()) != 0 || target.hits.Load() != 0 {
		t.Fatalf("lookups %v, target hits %d", res.lookups(), target.hits.Load())
	}
}

func TestParseIPv4(t *testing.T) {
	for in, want := range map[string]string{
		"1.2.3.4": "1.2.3.4", "0x01.0x02.0x03.0x04": "1.2.3.4", "01.02.03.04": "1.2.3.4", "16909060": "1.2.3.4",
		"1.131844": "1.2.3.4", "1.2.772": "1.2.3.4", "0x": "0.0.0.0", "4294967295": "255.255.255.255", "1.2.3.4.": "1.2.3.4",
	} {
		a, ok := parseIPv4(in)
		if !ok || a.String() != want {
			t.Errorf("%s: %v %v, want %s", in, a, ok, want)
		}
	}
	for _, in := range []string{"4294967296", "1.2.3.4.5", "256.1.1.1", "1.16777216", "08", "0x1.0xfffffffff", "", ".", "1..2", "a.b.c.d"} {
		if a, ok := parseIPv4(in); ok {
			t.Errorf("%q parsed as %v", in, a)
		}
	}
}

// FuzzHostLiteral: whatever the host, a host that ends in a number is
// either its own canonical dotted quad or refused; an accepted literal
// always parses back to itself; and Fetch never looks such a host up.
func FuzzHostLiteral(f *testing.F) {
	for _, s := range []string{"127.1", "2130706433", "0x7f000001", "0177.0.0.1", "127.0.0.1", "example.com", "1.2.3.4.example",
		"::1", "::ffff:127.0.0.1", "fe80::1%eth0", "0x", "09", "1.2.3.4.", "..", "[::1]", "host:80", "ｅｘａｍｐｌｅ.com", "127。1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, host string) {
		addr, ok, err := hostLiteral(host)
		if err != nil {
			if c := apierr.CodeOf(err); c != apierr.ValidationFailed && c != apierr.SandboxViolation {
				t.Fatalf("%q: %v", host, err)
			}
		}
		if ok {
			back, perr := netip.ParseAddr(host)
			if perr != nil || back != addr {
				t.Fatalf("%q accepted as %v but parses as %v (%v)", host, addr, back, perr)
			}
		}
		if err == nil && !ok && !strings.Contains(host, ":") && endsInNumber(host) {
			t.Fatalf("%q ends in a number but was let through as a name", host)
		}
		if a4, valid := parseIPv4(host); valid && a4.String() != host && err == nil {
			t.Fatalf("%q spells %v but was not refused", host, a4)
		}
		// The dialer's resolver is where DNS would be asked: a host that
		// ends in a number never gets there.
		res := &fakeResolver{}
		newDialer(policy{}, res).resolve(context.Background(), host)
		if endsInNumber(host) && !strings.Contains(host, ":") && len(res.lookups()) > 0 {
			t.Fatalf("%q was looked up", host)
		}
		// parseURL refuses what hostLiteral refuses.
		u := &url.URL{Scheme: "http", Host: host, Path: "/"}
		if strings.Contains(host, ":") {
			u.Host = "[" + host + "]"
		}
		if pu, perr := parseURL(u.String()); perr == nil {
			if _, _, lerr := hostLiteral(pu.Hostname()); lerr != nil {
				t.Fatalf("parseURL accepted %q: %v", pu.Hostname(), lerr)
			}
		}
	})
}
