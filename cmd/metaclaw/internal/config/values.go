package config

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// parse reads one text value of kind k. Errors say what was expected; the
// caller adds where the value came from.
func parse(s *Setting, text string) (any, error) {
	text = strings.TrimSpace(text)
	switch s.Kind {
	case String:
		return text, nil
	case Bool:
		switch strings.ToLower(text) {
		case "true", "1", "yes", "on":
			return true, nil
		case "false", "0", "no", "off", "":
			return false, nil
		}
	case Int:
		n, err := strconv.ParseInt(strings.ReplaceAll(text, "_", ""), 10, 64)
		if err == nil {
			return n, checkMin(s, n, strconv.FormatInt(s.Min, 10))
		}
	case Size:
		n, err := ParseSize(text)
		if err == nil {
			return n, checkMin(s, n, FormatSize(s.Min))
		}
	case Duration:
		d, err := time.ParseDuration(text)
		if err == nil {
			if d <= 0 {
				return nil, fmt.Errorf("%q must be longer than zero", text)
			}
			return d, nil
		}
	case Enum:
		for _, e := range s.Enum {
			if strings.EqualFold(text, e) {
				return e, nil
			}
		}
	case List:
		var out []string
		for _, part := range strings.Split(text, ",") {
			if part = strings.TrimSpace(part); part != "" {
				out = append(out, part)
			}
		}
		return out, nil
	case SizeMap:
		return parseSizeMap(s, text)
	}
	return nil, fmt.Errorf("%q is not %s", text, kindExample(s.Kind, s))
}

func checkMin(s *Setting, n int64, min string) error {
	if n < s.Min {
		return fmt.Errorf("%d is too small: the least is %s", n, min)
	}
	return nil
}

var sizeUnits = map[string]float64{
	"": 1, "b": 1,
	"k": 1 << 10, "kb": 1e3, "kib": 1 << 10,
	"m": 1 << 20, "mb": 1e6, "mib": 1 << 20,
	"g": 1 << 30, "gb": 1e9, "gib": 1 << 30,
	"t": 1 << 40, "tb": 1e12, "tib": 1 << 40,
}

// ParseSize reads a byte count: a number with an optional unit, decimal
// (KB, MB, GB, TB: powers of 1000) or binary (KiB, MiB, GiB, TiB, and the
// one-letter K, M, G, T: powers of 1024), case-insensitive: "50MB",
// "1.5 GiB", "1048576".
func ParseSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	i := strings.IndexFunc(s, func(r rune) bool { return (r < '0' || r > '9') && r != '.' && r != '_' })
	num, unit := s, ""
	if i >= 0 {
		num, unit = s[:i], strings.ToLower(strings.TrimSpace(s[i:]))
	}
	mult, ok := sizeUnits[unit]
	if !ok || num == "" {
		return 0, fmt.Errorf("%q is not a size (e.g. 50MB, 512KiB, 1GiB)", s)
	}
	f, err := strconv.ParseFloat(strings.ReplaceAll(num, "_", ""), 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a size (e.g. 50MB, 512KiB, 1GiB)", s)
	}
	v := f * mult
	if v >= math.MaxInt64 {
		return 0, fmt.Errorf("%q is too large", s)
	}
	if v != math.Trunc(v) {
		return 0, fmt.Errorf("%q is not a whole number of bytes", s)
	}
	return int64(v), nil
}

// FormatSize writes n in the largest unit that holds it exactly: 50MiB,
// 2GB, 1000 (bytes).
func FormatSize(n int64) string {
	if n == 0 {
		return "0"
	}
	for _, u := range []struct {
		name string
		mult int64
	}{{"TiB", 1 << 40}, {"TB", 1e12}, {"GiB", 1 << 30}, {"GB", 1e9}, {"MiB", 1 << 20}, {"MB", 1e6}, {"KiB", 1 << 10}, {"KB", 1e3}} {
		if n%u.mult == 0 {
			return strconv.FormatInt(n/u.mult, 10) + u.name
		}
	}
	return strconv.FormatInt(n, 10)
}

// format writes a parsed value back in the form a user would write it.
func format(s *Setting, v any) string {
	switch t := v.(type) {
	case nil:
		return ""
	case int64:
		if s.Kind == Size {
			return FormatSize(t)
		}
		return strconv.FormatInt(t, 10)
	case time.Duration:
		return FormatDuration(t)
	case []string:
		return strings.Join(t, ",")
	case map[string]int64:
		names := make([]string, 0, len(t))
		for n := range t {
			names = append(names, n)
		}
		sort.Strings(names)
		parts := make([]string, len(names))
		for i, n := range names {
			parts[i] = n + "=" + FormatSize(t[n])
		}
		return strings.Join(parts, ",")
	}
	return fmt.Sprint(v)
}

// parseSizeMap reads NAME=SIZE pairs separated by commas; a name given
// twice is a mistake, not an override.
func parseSizeMap(s *Setting, text string) (map[string]int64, error) {
	out := map[string]int64{}
	for _, part := range strings.Split(text, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, size, ok := strings.Cut(part, "=")
		name, size = strings.TrimSpace(name), strings.TrimSpace(size)
		if !ok || name == "" || size == "" {
			return nil, fmt.Errorf("%q is not NAME=SIZE (e.g. team=5GB)", part)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("%q is given twice", name)
		}
		n, err := ParseSize(size)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", name, err)
		}
		if n < 1 {
			return nil, fmt.Errorf("%s: a quota of %s holds nothing; give at least one byte", name, size)
		}
		out[name] = n
	}
	return out, nil
}

// FormatDuration writes d without zero tails: 1m, 1h30m, 1.5s.
func FormatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
