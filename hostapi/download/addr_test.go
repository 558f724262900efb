package download

import (
	"net/netip"
	"testing"
)

// TestClassify checks the policy table by classification only: no packet is
// sent to any of these addresses.
func TestClassify(t *testing.T) {
	cases := []struct {
		ip   string
		want string
	}{
		// Public: allowed.
		{"8.8.8.8", ""},
		{"1.1.1.1", ""},
		{"93.184.216.34", ""},
		{"2606:4700:4700::1111", ""},
		{"2a00:1450:4001:80b::200e", ""},
		{"::ffff:8.8.8.8", ""},
		{"64:ff9b::808:808", ""}, // NAT64 of 8.8.8.8
		{"2002:808:808::1", ""},  // 6to4 of 8.8.8.8
		{"100.63.255.255", ""},   // just below CGNAT
		{"100.128.0.0", ""},      // just above CGNAT
		{"172.15.255.255", ""},   // just below 172.16/12
		{"172.32.0.0", ""},       // just above 172.16/12
		{"169.253.255.255", ""},  // just below link-local

		// Loopback.
		{"127.0.0.1", kindLoopback},
		{"127.255.255.254", kindLoopback},
		{"::1", kindLoopback},
		{"::ffff:127.0.0.1", kindLoopback},
		{"64:ff9b::7f00:1", kindLoopback}, // NAT64 of 127.0.0.1
		{"2002:7f00:1::", kindLoopback},   // 6to4 of 127.0.0.1

		// Private.
		{"10.0.0.1", kindPrivate},
		{"10.255.255.255", kindPrivate},
		{"172.16.0.1", kindPrivate},
		{"172.31.255.255", kindPrivate},
		{"192.168.1.1", kindPrivate},
		{"::ffff:10.1.2.3", kindPrivate},
		{"::ffff:192.168.0.1", kindPrivate},
		{"fc00::1", kindPrivate},
		{"fd12:3456::1", kindPrivate},
		{"fec0::1", kindPrivate},
		{"64:ff9b::a00:1", kindPrivate}, // NAT64 of 10.0.0.1

		// Link-local and metadata.
		{"169.254.0.1", kindLinkLocal},
		{"169.254.169.254", kindMetadata},
		{"::ffff:169.254.169.254", kindMetadata},
		{"::ffff:a9fe:a9fe", kindMetadata},
		{"fd00:ec2::254", kindMetadata},
		{"fe80::1", kindLinkLocal},
		{"fe80::1%eth0", kindLinkLocal},

		// Multicast, unspecified, broadcast, CGNAT, reserved.
		{"224.0.0.1", kindMulticast},
		{"239.255.255.250", kindMulticast},
		{"ff02::1", kindMulticast},
		{"ff05::2", kindMulticast},
		{"0.0.0.0", kindUnspecified},
		{"0.1.2.3", kindUnspecified},
		{"::", kindUnspecified},
		{"::ffff:0.0.0.0", kindUnspecified},
		{"255.255.255.255", kindBroadcast},
		{"100.64.0.1", kindCGNAT},
		{"100.127.255.255", kindCGNAT},
		{"::ffff:100.64.0.1", kindCGNAT},
		{"240.0.0.1", kindReserved},
		{"192.0.0.170", kindReserved},
		{"198.18.0.1", kindReserved},
		{"192.0.2.1", kindReserved},
		{"::7f00:1", kindReserved}, // IPv4-compatible form
		{"2001::1", kindReserved},  // Teredo
		{"2001:db8::1", kindReserved},
		{"100::1", kindReserved},
	}
	for _, c := range cases {
		got := classify(netip.MustParseAddr(c.ip))
		if got != c.want {
			t.Errorf("classify(%s) = %q, want %q", c.ip, got, c.want)
		}
	}
	if got := classify(netip.Addr{}); got != kindInvalid {
		t.Errorf("classify(zero Addr) = %q, want %q", got, kindInvalid)
	}
}

func TestPolicyAllowPrivateKeepsMetadataBlocked(t *testing.T) {
	p := policy{allowPrivate: true}
	for _, s := range []string{"127.0.0.1:80", "10.0.0.1:80", "[::1]:80", "[fc00::1]:443"} {
		if err := p.check("h", netip.MustParseAddrPort(s)); err != nil {
			t.Errorf("AllowPrivate: %s refused: %v", s, err)
		}
	}
	for _, s := range []string{"169.254.169.254:80", "[fd00:ec2::254]:80", "[::ffff:169.254.169.254]:80"} {
		if err := p.check("h", netip.MustParseAddrPort(s)); err == nil {
			t.Errorf("AllowPrivate: metadata %s allowed", s)
		}
	}
}

// TestControlHookRefuses calls the dialer's Control function directly: it
// is the last line of defence and must refuse on its own.
func TestControlHookRefuses(t *testing.T) {
	dl := newDialer(policy{}, nil)
	for _, a := range []string{"127.0.0.1:80", "[::1]:443", "10.0.0.1:80", "169.254.169.254:80", "not-an-address"} {
		err := dl.d.Control("tcp", a, nil)
		wantCode(t, err, "SANDBOX_VIOLATION")
	}
	if err := dl.d.Control("tcp4", "8.8.8.8:443", nil); err != nil {
		t.Errorf("Control refused a public address: %v", err)
	}
}
