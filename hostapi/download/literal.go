package download

import (
	"net/netip"
	"strconv"
	"strings"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// IP literals are where SSRF filters are usually fooled: resolvers and
// browsers accept IPv4 addresses in the old inet_aton forms ("127.1",
// "2130706433", "0x7f000001", "0177.0.0.1"), which a filter that only knows
// dotted quads takes for host names and sends to DNS, or to a resolver that
// quietly reads them as the address they spell. Here a host is either a
// canonical IP literal, or a name that does not end in a number; anything
// else is refused before any lookup, the way the WHATWG URL standard
// treats a host that "ends in a number".

// hostLiteral classifies a URL host (as url.URL.Hostname returns it). ok
// reports an IP literal, returned as addr; a host name gives ok false and
// no error. A host that ends in a number but is not a canonical dotted
// quad is an error: SANDBOX_VIOLATION when the address it spells is one a
// download may not reach, VALIDATION_FAILED otherwise (with the canonical
// form to write instead).
func hostLiteral(host string) (addr netip.Addr, ok bool, err error) {
	if strings.Contains(host, ":") {
		a, perr := netip.ParseAddr(host)
		if perr != nil {
			return netip.Addr{}, false, apierr.New(apierr.ValidationFailed, "host %q is not a valid IPv6 address; check the URL", host)
		}
		return a, true, nil
	}
	if !endsInNumber(host) {
		return netip.Addr{}, false, nil
	}
	a, valid := parseIPv4(host)
	if !valid {
		return netip.Addr{}, false, apierr.New(apierr.ValidationFailed,
			"host %q ends in a number but is not an IPv4 address; write an address as four decimal numbers (1.2.3.4) or give a host name", host)
	}
	if a.String() == host {
		return a, true, nil
	}
	if kind := classify(a); kind != "" {
		return netip.Addr{}, false, apierr.New(apierr.SandboxViolation,
			"host %q is %s written in another form, a %s address; downloads from private addresses are not allowed, only public internet hosts", host, a, kind)
	}
	return netip.Addr{}, false, apierr.New(apierr.ValidationFailed,
		"host %q is an IPv4 address in a non-standard form; write it as %s", host, a)
}

// endsInNumber reports whether the last label of host (ignoring one
// trailing dot) is a number in any of the inet_aton radixes: such a host is
// an IPv4 address or nothing (WHATWG URL, "ends in a number checker").
func endsInNumber(host string) bool {
	parts := strings.Split(host, ".")
	if len(parts) > 1 && parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	last := parts[len(parts)-1]
	if last == "" {
		return false
	}
	if strings.Trim(last, "0123456789") == "" {
		return true
	}
	_, ok := ipv4Number(last)
	return ok
}

// parseIPv4 reads host with inet_aton's rules: one to four parts, each
// decimal, octal (a leading 0) or hexadecimal (0x); the last part fills the
// bytes the others leave.
func parseIPv4(host string) (netip.Addr, bool) {
	parts := strings.Split(host, ".")
	if len(parts) > 1 && parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	if len(parts) == 0 || len(parts) > 4 {
		return netip.Addr{}, false
	}
	nums := make([]uint64, len(parts))
	for i, p := range parts {
		n, ok := ipv4Number(p)
		if !ok {
			return netip.Addr{}, false
		}
		nums[i] = n
	}
	last := len(nums) - 1
	for _, n := range nums[:last] {
		if n > 255 {
			return netip.Addr{}, false
		}
	}
	if nums[last] >= 1<<(8*(5-len(nums))) {
		return netip.Addr{}, false
	}
	v := nums[last]
	for i, n := range nums[:last] {
		v |= n << (8 * (3 - i))
	}
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}

// ipv4Number parses one part of an inet_aton address.
func ipv4Number(s string) (uint64, bool) {
	if s == "" {
		return 0, false
	}
	base := 10
	switch {
	case len(s) >= 2 && (s[:2] == "0x" || s[:2] == "0X"):
		base, s = 16, s[2:]
		if s == "" {
			return 0, true // "0x" is zero
		}
	case len(s) >= 2 && s[0] == '0':
		base, s = 8, s[1:]
	}
	for _, c := range s {
		if !isDigit(c, base) {
			return 0, false
		}
	}
	// Values past 32 bits are invalid anyway; cap the length so that
	// ParseUint never overflows on a long run of digits.
	if len(s) > 32 {
		return 0, false
	}
	n, err := strconv.ParseUint(s, base, 64)
	return n, err == nil
}

func isDigit(c rune, base int) bool {
	switch {
	case c >= '0' && c <= '9':
		return int(c-'0') < base
	case base == 16:
		return c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
	}
	return false
}
