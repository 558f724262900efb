package download

import (
	"net/netip"
)

// Address kinds that classify reports. Each one names why a download may
// not connect there; the empty string means "public internet, allowed".
const (
	kindMetadata    = "cloud metadata"
	kindUnspecified = "unspecified"
	kindLoopback    = "loopback"
	kindPrivate     = "private"
	kindLinkLocal   = "link-local"
	kindMulticast   = "multicast"
	kindBroadcast   = "broadcast"
	kindCGNAT       = "carrier-grade NAT"
	kindReserved    = "reserved"
	kindInvalid     = "invalid"
)

// metadataAddrs are the cloud instance-metadata endpoints (AWS, GCP, Azure,
// OpenStack all use 169.254.169.254; AWS also serves fd00:ec2::254 on
// Nitro). They hand out credentials, so they stay blocked even when
// AllowPrivate is set: a developer flag must never leak cloud keys.
var metadataAddrs = []netip.Addr{
	netip.MustParseAddr("169.254.169.254"),
	netip.MustParseAddr("fd00:ec2::254"),
}

// blockedPrefixes are ranges that netip's Is* predicates do not cover but
// that still never lead to a public internet host.
var blockedPrefixes = []struct {
	p    netip.Prefix
	kind string
}{
	// "This network": Linux routes 0.x.y.z to the local host.
	{netip.MustParsePrefix("0.0.0.0/8"), kindUnspecified},
	// RFC 6598 shared address space: inside ISP/cloud NAT, not the internet.
	{netip.MustParsePrefix("100.64.0.0/10"), kindCGNAT},
	// IETF protocol assignments (includes NAT64 discovery 192.0.0.170/171).
	{netip.MustParsePrefix("192.0.0.0/24"), kindReserved},
	// Documentation and benchmarking ranges: never legitimately routed, but
	// often configured on internal lab networks.
	{netip.MustParsePrefix("192.0.2.0/24"), kindReserved},
	{netip.MustParsePrefix("198.18.0.0/15"), kindReserved},
	{netip.MustParsePrefix("198.51.100.0/24"), kindReserved},
	{netip.MustParsePrefix("203.0.113.0/24"), kindReserved},
	// Limited broadcast must be checked before the wider class E block so
	// the message says "broadcast".
	{netip.MustParsePrefix("255.255.255.255/32"), kindBroadcast},
	{netip.MustParsePrefix("240.0.0.0/4"), kindReserved},
	// Deprecated IPv4-compatible IPv6 (::a.b.c.d) could smuggle any IPv4
	// address past the v4 checks.
	{netip.MustParsePrefix("::/96"), kindReserved},
	// Discard-only, deprecated site-local (an old private range),
	// Teredo tunnels (the inner IPv4 target is obfuscated, so we cannot vet
	// it) and documentation.
	{netip.MustParsePrefix("100::/64"), kindReserved},
	{netip.MustParsePrefix("fec0::/10"), kindPrivate},
	{netip.MustParsePrefix("2001::/32"), kindReserved},
	{netip.MustParsePrefix("2001:db8::/32"), kindReserved},
}

// embeddingPrefixes are IPv6 ranges that carry an IPv4 address inside them
// and are translated to it by a gateway (NAT64, 6to4). The embedded IPv4
// address is classified like any other, so 64:ff9b::7f00:1 is as forbidden
// as 127.0.0.1. offset is the byte index of the embedded IPv4 address.
var embeddingPrefixes = []struct {
	p      netip.Prefix
	offset int
}{
	{netip.MustParsePrefix("64:ff9b::/96"), 12},   // RFC 6052 well-known NAT64
	{netip.MustParsePrefix("64:ff9b:1::/48"), 12}, // RFC 8215 local-use NAT64
	{netip.MustParsePrefix("2002::/16"), 2},       // RFC 3056 6to4
}

// classify returns why ip must not be connected to, or "" if it is an
// ordinary public unicast address. It is the whole production policy;
// keep it strict and table-driven so it can be reviewed at a glance.
func classify(ip netip.Addr) string {
	// Zoned addresses never match a Prefix, so drop the zone first; and
	// ::ffff:a.b.c.d reaches the IPv4 host, so judge it as IPv4.
	ip = ip.WithZone("").Unmap()
	if !ip.IsValid() {
		return kindInvalid
	}
	for _, m := range metadataAddrs {
		if ip == m {
			return kindMetadata
		}
	}
	switch {
	case ip.IsUnspecified():
		return kindUnspecified
	case ip.IsLoopback():
		return kindLoopback
	case ip.IsPrivate(): // RFC 1918 and fc00::/7
		return kindPrivate
	case ip.IsLinkLocalUnicast(): // 169.254/16, fe80::/10
		return kindLinkLocal
	case ip.IsMulticast(): // includes link- and interface-local multicast
		return kindMulticast
	}
	for _, b := range blockedPrefixes {
		if b.p.Contains(ip) {
			return b.kind
		}
	}
	for _, e := range embeddingPrefixes {
		if e.p.Contains(ip) {
			b := ip.As16()
			inner := netip.AddrFrom4([4]byte(b[e.offset : e.offset+4]))
			if k := classify(inner); k != "" {
				return k
			}
			return ""
		}
	}
	// Anything left that is not global unicast is something we did not
	// think of; refuse rather than guess.
	if !ip.IsGlobalUnicast() {
		return kindReserved
	}
	return ""
}
