package stubs

import (
	"errors"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/dop251/goja"
)

// Decode turns JSON text into plain JS values: objects (keys in the order
// written, "__proto__" an ordinary own key as JSON.parse makes it), arrays,
// strings, numbers, booleans and null. It does not use the VM's JSON object,
// which a script may have replaced. Integral numbers within ±2^53 become
// exact integers.
func Decode(vm *goja.Runtime, data []byte) (goja.Value, error) {
	d := jsonDecoder{vm: vm, data: data}
	d.space()
	v, err := d.value(0)
	if err != nil {
		return nil, err
	}
	d.space()
	if d.pos != len(d.data) {
		return nil, d.errorf("data after the JSON value")
	}
	return v, nil
}

type jsonDecoder struct {
	vm   *goja.Runtime
	data []byte
	pos  int
	// scratch holds array items while an array is read (reused by depth).
	scratch [][]any
}

func (d *jsonDecoder) errorf(msg string) error {
	return errors.New("invalid JSON at byte " + strconv.Itoa(d.pos) + ": " + msg)
}

func (d *jsonDecoder) space() {
	for d.pos < len(d.data) {
		switch d.data[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

func (d *jsonDecoder) value(depth int) (goja.Value, error) {
	if depth > MaxDepth {
		return nil, d.errorf("nested too deeply")
	}
	if d.pos >= len(d.data) {
		return nil, d.errorf("unexpected end")
	}
	switch c := d.data[d.pos]; {
	case c == '{':
		return d.object(depth)
	case c == '[':
		return d.array(depth)
	case c == '"':
		s, err := d.string()
		if err != nil {
			return nil, err
		}
		return d.vm.ToValue(s), nil
	case c == 't':
		return d.literal("true", d.vm.ToValue(true))
	case c == 'f':
		return d.literal("false", d.vm.ToValue(false))
	case c == 'n':
		return d.literal("null", goja.Null())
	case c == '-' || c >= '0' && c <= '9':
		return d.number()
	}
	return nil, d.errorf("unexpected character")
}

func (d *jsonDecoder) literal(word string, v goja.Value) (goja.Value, error) {
	if len(d.data)-d.pos < len(word) || string(d.data[d.pos:d.pos+len(word)]) != word {
		return nil, d.errorf("unexpected character")
	}
	d.pos += len(word)
	return v, nil
}

func (d *jsonDecoder) object(depth int) (goja.Value, error) {
	d.pos++ // {
	obj := d.vm.NewObject()
	d.space()
	if d.pos < len(d.data) && d.data[d.pos] == '}' {
		d.pos++
		return obj, nil
	}
	for {
		d.space()
		if d.pos >= len(d.data) || d.data[d.pos] != '"' {
			return nil, d.errorf("expected an object key")
		}
		k, err := d.string()
		if err != nil {
			return nil, err
		}
		d.space()
		if d.pos >= len(d.data) || d.data[d.pos] != ':' {
			return nil, d.errorf("expected ':'")
		}
		d.pos++
		d.space()
		v, err := d.value(depth + 1)
		if err != nil {
			return nil, err
		}
		if k == "__proto__" {
			obj.DefineDataProperty(k, v, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_TRUE)
		} else {
			obj.Set(k, v)
		}
		d.space()
		if d.pos >= len(d.data) {
			return nil, d.errorf("unexpected end in an object")
		}
		switch d.data[d.pos] {
		case ',':
			d.pos++
		case '}':
			d.pos++
			return obj, nil
		default:
			return nil, d.errorf("expected ',' or '}'")
		}
	}
}

func (d *jsonDecoder) array(depth int) (goja.Value, error) {
	d.pos++ // [
	for len(d.scratch) <= depth {
		d.scratch = append(d.scratch, nil)
	}
	items := d.scratch[depth][:0]
	d.space()
	if d.pos < len(d.data) && d.data[d.pos] == ']' {
		d.pos++
		return d.vm.NewArray(), nil
	}
	for {
		d.space()
		v, err := d.value(depth + 1)
		if err != nil {
			return nil, err
		}
		items = append(items, v)
		d.space()
		if d.pos >= len(d.data) {
			return nil, d.errorf("unexpected end in an array")
		}
		switch d.data[d.pos] {
		case ',':
			d.pos++
		case ']':
			d.pos++
			arr := d.vm.NewArray(items...)
			clear(items)
			d.scratch[depth] = items[:0]
			return arr, nil
		default:
			return nil, d.errorf("expected ',' or ']'")
		}
	}
}

func (d *jsonDecoder) number() (goja.Value, error) {
	start := d.pos
	integral := true
	if d.data[d.pos] == '-' {
		d.pos++
	}
	digits := d.pos
	for d.pos < len(d.data) {
		c := d.data[d.pos]
		switch {
		case c >= '0' && c <= '9':
		case c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-':
			integral = false
		default:
			goto done
		}
		d.pos++
	}
done:
	if d.pos == digits {
		return nil, d.errorf("a number without digits")
	}
	text := string(d.data[start:d.pos])
	if integral && d.pos-digits <= 15 {
		n, err := strconv.ParseInt(text, 10, 64)
		if err == nil {
			return d.vm.ToValue(n), nil
		}
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil {
		var ne *strconv.NumError
		if !errors.As(err, &ne) || ne.Err != strconv.ErrRange {
			return nil, d.errorf("malformed number")
		}
	}
	if f == float64(int64(f)) && f >= -(1<<53) && f <= 1<<53 {
		return d.vm.ToValue(int64(f)), nil
	}
	return d.vm.ToValue(f), nil
}

// string reads a JSON string; d.pos is at the opening quote.
func (d *jsonDecoder) string() (string, error) {
	d.pos++
	start := d.pos
	// Fast path: no escapes.
	for d.pos < len(d.data) {
		c := d.data[d.pos]
		if c == '"' {
			s := string(d.data[start:d.pos])
			d.pos++
			return s, nil
		}
		if c == '\\' || c < 0x20 {
			break
		}
		d.pos++
	}
	buf := append([]byte(nil), d.data[start:d.pos]...)
	for d.pos < len(d.data) {
		c := d.data[d.pos]
		switch {
		case c == '"':
			d.pos++
			return string(buf), nil
		case c < 0x20:
			return "", d.errorf("a control character in a string")
		case c != '\\':
			buf = append(buf, c)
			d.pos++
			continue
		}
		d.pos++
		if d.pos >= len(d.data) {
			break
		}
		e := d.data[d.pos]
		d.pos++
		switch e {
		case '"', '\\', '/':
			buf = append(buf, e)
		case 'b':
			buf = append(buf, '\b')
		case 'f':
			buf = append(buf, '\f')
		case 'n':
			buf = append(buf, '\n')
		case 'r':
			buf = append(buf, '\r')
		case 't':
			buf = append(buf, '\t')
		case 'u':
			r, ok := d.hex4()
			if !ok {
				return "", d.errorf("a malformed \\u escape")
			}
			if utf16.IsSurrogate(r) {
				r2 := utf8.RuneError
				if d.pos+1 < len(d.data) && d.data[d.pos] == '\\' && d.data[d.pos+1] == 'u' {
					save := d.pos
					d.pos += 2
					if lo, ok := d.hex4(); ok {
						r2 = utf16.DecodeRune(r, lo)
						if r2 == utf8.RuneError {
							d.pos = save
						}
					} else {
						d.pos = save
					}
				}
				r = r2
			}
			buf = utf8.AppendRune(buf, r)
		default:
			return "", d.errorf("a malformed escape")
		}
	}
	return "", d.errorf("an unterminated string")
}

func (d *jsonDecoder) hex4() (rune, bool) {
	if len(d.data)-d.pos < 4 {
		return 0, false
	}
	var r rune
	for _, c := range d.data[d.pos : d.pos+4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, false
		}
	}
	d.pos += 4
	return r, true
}
