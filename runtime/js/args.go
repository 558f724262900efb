package js

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// fastArgs reads a host call's JSON arguments into Go values that the
// registry's decoder treats exactly as it treats ParseArgs' json.Numbers:
// integers as int64, other numbers as float64 (the registry then applies
// its rules — 2^53, integer parameters, integral floats — to both alike),
// and a json.Number only for what neither holds (its error then reads the
// same). It reports false for anything it does not read exactly as
// hostapi.ParseArgs does — malformed JSON, data after the object, a value
// nested deeper than fastMaxDepth, a string it would have to unescape
// differently — and the caller then goes through Registry.InvokeJSON,
// whose errors it keeps.
//
// Why: a script's writeRange of 100,000 × 10 cells is a 7.7 MB argument;
// encoding/json with UseNumber spends about as long reading it as the
// spreadsheet engine spends writing it (a json.Number string per cell,
// converted again by the registry). The worker's own encoder writes
// compact JSON, which this reads in one pass without those strings.
func fastArgs(raw []byte) (map[string]any, bool) {
	if len(raw) == 0 {
		return nil, false
	}
	// Plain strings are slices of one copy of the text: one allocation
	// instead of one per string (a 100,000-row write has a million cells).
	p := argParser{b: raw, s: string(raw)}
	p.space()
	if p.i >= len(p.b) || p.b[p.i] != '{' {
		return nil, false
	}
	v, ok := p.value(0)
	if !ok {
		return nil, false
	}
	p.space()
	if p.i != len(p.b) {
		return nil, false
	}
	m, ok := v.(map[string]any)
	return m, ok
}

// fastMaxDepth is far below encoding/json's own nesting limit and above
// the registry's (hostapi refuses arguments nested deeper than 256 with a
// message naming the argument; such input takes the slow path to get it).
const fastMaxDepth = 200

type argParser struct {
	b []byte
	s string // b as a string
	i int
	// stack holds the elements of the arrays being read, so that each
	// array is allocated once at its final length rather than grown.
	stack []any
}

func (p *argParser) space() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *argParser) value(depth int) (any, bool) {
	if depth > fastMaxDepth {
		return nil, false
	}
	p.space()
	if p.i >= len(p.b) {
		return nil, false
	}
	switch c := p.b[p.i]; {
	case c == '{':
		return p.object(depth)
	case c == '[':
		return p.array(depth)
	case c == '"':
		return p.str()
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	case c == 't':
		return true, p.literal("true")
	case c == 'f':
		return false, p.literal("false")
	case c == 'n':
		return nil, p.literal("null")
	}
	return nil, false
}

func (p *argParser) literal(word string) bool {
	if len(p.b)-p.i < len(word) || string(p.b[p.i:p.i+len(word)]) != word {
		return false
	}
	p.i += len(word)
	return true
}

func (p *argParser) object(depth int) (any, bool) {
	p.i++ // {
	m := map[string]any{}
	p.space()
	if p.i < len(p.b) && p.b[p.i] == '}' {
		p.i++
		return m, true
	}
	for {
		p.space()
		if p.i >= len(p.b) || p.b[p.i] != '"' {
			return nil, false
		}
		k, ok := p.str()
		if !ok {
			return nil, false
		}
		p.space()
		if p.i >= len(p.b) || p.b[p.i] != ':' {
			return nil, false
		}
		p.i++
		v, ok := p.value(depth + 1)
		if !ok {
			return nil, false
		}
		m[k.(string)] = v // the last of duplicate keys wins, as in encoding/json
		p.space()
		if p.i >= len(p.b) {
			return nil, false
		}
		switch p.b[p.i] {
		case ',':
			p.i++
		case '}':
			p.i++
			return m, true
		default:
			return nil, false
		}
	}
}

func (p *argParser) array(depth int) (any, bool) {
	p.i++ // [
	p.space()
	if p.i < len(p.b) && p.b[p.i] == ']' {
		p.i++
		return []any{}, true
	}
	base := len(p.stack)
	defer func() { clear(p.stack[base:]); p.stack = p.stack[:base] }()
	for {
		v, ok := p.value(depth + 1)
		if !ok {
			return nil, false
		}
		p.stack = append(p.stack, v)
		p.space()
		if p.i >= len(p.b) {
			return nil, false
		}
		switch p.b[p.i] {
		case ',':
			p.i++
		case ']':
			p.i++
			return append(make([]any, 0, len(p.stack)-base), p.stack[base:]...), true
		default:
			return nil, false
		}
	}
}

// str reads a string. Plain ones (printable ASCII, no escapes) are sliced
// as they are; any other goes through encoding/json, so that escapes and
// invalid UTF-8 read exactly as ParseArgs reads them.
func (p *argParser) str() (any, bool) {
	start := p.i
	p.i++ // "
	plain := true
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			if plain {
				return p.s[start+1 : p.i-1], true
			}
			var s string
			if json.Unmarshal(p.b[start:p.i], &s) != nil {
				return nil, false
			}
			return s, true
		case c == '\\':
			plain = false
			p.i += 2
		case c < 0x20:
			return nil, false
		case c >= utf8.RuneSelf:
			plain = false
			p.i++
		default:
			p.i++
		}
	}
	return nil, false
}

// number reads a JSON number: an integer of up to 18 digits as an int64,
// a fraction or exponent as a float64 (the registry's own decoder parses
// them the same way), anything beyond those as a json.Number.
func (p *argParser) number() (any, bool) {
	start := p.i
	if p.b[p.i] == '-' {
		p.i++
	}
	digits := p.i
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		p.i++
	}
	n := p.i - digits
	if n == 0 || (n > 1 && p.b[digits] == '0') {
		return nil, false
	}
	integer := true
	if p.i < len(p.b) && p.b[p.i] == '.' {
		integer = false
		p.i++
		f := p.i
		for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
			p.i++
		}
		if p.i == f {
			return nil, false
		}
	}
	if p.i < len(p.b) && (p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		integer = false
		p.i++
		if p.i < len(p.b) && (p.b[p.i] == '+' || p.b[p.i] == '-') {
			p.i++
		}
		e := p.i
		for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
			p.i++
		}
		if p.i == e {
			return nil, false
		}
	}
	text := p.b[start:p.i]
	if integer && n <= 18 { // fits an int64 whatever the digits
		var v int64
		for _, c := range p.b[digits:p.i] {
			v = v*10 + int64(c-'0')
		}
		if start != digits {
			v = -v
		}
		return v, true
	}
	if !integer {
		if f, err := strconv.ParseFloat(string(text), 64); err == nil {
			return f, true
		}
	}
	return json.Number(text), true
}
