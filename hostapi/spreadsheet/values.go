package spreadsheet

import (
	"bytes"
	"math"
	"strconv"
	"strings"
	"time"
)

// kind is the type of a decoded cell value.
type kind uint8

const (
	kEmpty   kind = iota
	kNumber       // n
	kString       // s
	kBool         // n: 0 or 1
	kDate         // s: ISO 8601
	kError        // s: "#DIV/0!" …
	kPending      // a formula without a cached value: s = formula, n = dateKind
)

// value is one decoded cell value.
type value struct {
	k kind
	n float64
	s string
}

// colValue is a value at a 1-based column.
type colValue struct {
	col int
	v   value
}

// toAny converts a value to the JSON shape scripts see.
func (v value) toAny() any {
	switch v.k {
	case kNumber:
		return v.n
	case kString, kDate, kError:
		return v.s
	case kBool:
		return v.n != 0
	}
	return nil
}

// typeName is the readCell/columnTypes name of a value's type.
func (v value) typeName() string {
	switch v.k {
	case kNumber:
		return "number"
	case kString:
		return "string"
	case kBool:
		return "boolean"
	case kDate:
		return "date"
	case kError:
		return "error"
	}
	return "empty"
}

// resolver turns raw cells into values: shared strings, booleans, numbers
// and dates (through the cell's number format).
type resolver struct {
	sst      *sharedStrings
	styles   *styleTable
	date1904 bool
}

func (rv *resolver) resolve(c *rawCell) (value, error) {
	pending := func() value {
		if c.hasF {
			return value{k: kPending, s: string(c.f), n: float64(rv.styles.kind(c.style))}
		}
		return value{}
	}
	switch c.typ {
	case 's':
		v := bytes.TrimSpace(c.v)
		if len(v) == 0 {
			return pending(), nil
		}
		idx, ok := atoiBytes(v, math.MaxInt32)
		if !ok {
			return value{k: kString, s: string(c.v)}, nil
		}
		s, ok, err := rv.sst.get(idx)
		if err != nil {
			return value{}, err
		}
		if !ok {
			return value{}, nil
		}
		return value{k: kString, s: s}, nil
	case 'b':
		v := bytes.TrimSpace(c.v)
		if len(v) == 0 {
			return pending(), nil
		}
		if string(v) == "1" || strings.EqualFold(string(v), "true") {
			return value{k: kBool, n: 1}, nil
		}
		return value{k: kBool}, nil
	case 'e':
		if len(c.v) == 0 {
			return pending(), nil
		}
		return value{k: kError, s: string(c.v)}, nil
	case 'S', 'i':
		if c.typ == 'i' && c.hasIS {
			return value{k: kString, s: decodeEscapes(string(c.is))}, nil
		}
		if len(c.v) == 0 {
			return pending(), nil
		}
		return value{k: kString, s: string(c.v)}, nil
	case 'd':
		if len(c.v) == 0 {
			return pending(), nil
		}
		return value{k: kDate, s: normalizeISO(string(bytes.TrimSpace(c.v)))}, nil
	}
	v := bytes.TrimSpace(c.v)
	if len(v) == 0 {
		return pending(), nil
	}
	return numberValue(string(v), rv.styles.kind(c.style), rv.date1904), nil
}

// numberValue types a numeric cell text, formatting dates as ISO strings.
func numberValue(text string, dk dateKind, date1904 bool) value {
	f, err := strconv.ParseFloat(text, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return value{k: kString, s: text}
	}
	if dk != notDate {
		if s, ok := serialToISO(f, dk, date1904); ok {
			return value{k: kDate, s: s}
		}
	}
	return value{k: kNumber, n: f}
}

var (
	epoch1900 = time.Date(1899, 12, 30, 0, 0, 0, 0, time.UTC)
	epoch1904 = time.Date(1904, 1, 1, 0, 0, 0, 0, time.UTC)
)

// serialToISO converts an Excel date serial to ISO 8601: "2024-01-15" for
// date formats (with the time when the serial has one), "10:30:00" for a
// time format on a serial below one day, milliseconds only when present.
func serialToISO(f float64, dk dateKind, date1904 bool) (string, bool) {
	if f < 0 || f >= 2958466 { // after 9999-12-31
		return "", false
	}
	ms := int64(math.Round(f * 86400000))
	days, rem := ms/86400000, ms%86400000
	var t time.Time
	switch {
	case date1904:
		t = epoch1904.AddDate(0, 0, int(days))
	case days >= 61:
		t = epoch1900.AddDate(0, 0, int(days))
	default:
		// Excel counts a 29 February 1900 that never was; serials below 61
		// are one day off from the 1899-12-30 epoch.
		t = epoch1900.AddDate(0, 0, int(days)+1)
	}
	t = t.Add(time.Duration(rem) * time.Millisecond)
	clock := "15:04:05"
	if rem%1000 != 0 {
		clock = "15:04:05.000"
	}
	switch {
	case dk == timeOnly && days == 0:
		return t.Format(clock), true
	case dk == dateOnly && rem == 0:
		return t.Format("2006-01-02"), true
	}
	return t.Format("2006-01-02T" + clock), true
}

// normalizeISO keeps t="d" cell text, trimming a redundant midnight or Z.
func normalizeISO(s string) string {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999", "2006-01-02T15:04:05", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			t = t.UTC()
			switch {
			case t.Hour() == 0 && t.Minute() == 0 && t.Second() == 0 && t.Nanosecond() == 0:
				return t.Format("2006-01-02")
			case t.Nanosecond() != 0:
				return t.Format("2006-01-02T15:04:05.000")
			}
			return t.Format("2006-01-02T15:04:05")
		}
	}
	return s
}
