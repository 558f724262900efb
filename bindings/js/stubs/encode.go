package stubs

import (
	"encoding/base64"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dop251/goja"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// MaxDepth is how deeply a value crossing the VM's edge may nest; the
// registry's argument decoder refuses deeper arguments too.
const MaxDepth = 256

// Mode says what a JS value is being written out for.
type Mode uint8

const (
	// ForArgs writes host-call arguments: values JSON cannot carry (NaN,
	// Infinity, functions, symbols, BigInt) are VALIDATION_FAILED naming
	// where they are; keys are renamed by the argument's Shape; dates are
	// ISO strings and byte buffers base64.
	ForArgs Mode = iota
	// ForResult writes a run's result the way JSON.stringify would
	// (toJSON is honoured; NaN becomes null; functions are left out), with
	// cycles and excessive depth refused.
	ForResult
	// ForLog writes a console argument: it never fails; cycles print as
	// "[Circular]", what is too deep as "[Object]"/"[Array]", functions as
	// "[Function]".
	ForLog
)

// pathSeg is one step from the root to the value being written.
type pathSeg struct {
	key string
	idx int // ≥ 0 for an array element
}

// Encoder writes JS values as JSON. It runs on the VM goroutine; getters
// and toJSON methods may run script code, which the VM's interrupt stops.
type Encoder struct {
	vm   *goja.Runtime
	mode Mode
	buf  []byte
	// max bounds the output; exceeding it fails with tooBig.
	max    int
	tooBig func(limit int) *apierr.Error
	// root names the value in messages ("content", "the result").
	root      string
	ancestors []*goja.Object
	path      []pathSeg
	steps     int
	// stopped is polled every few thousand values: a long native walk
	// over a huge array ends when the run is being stopped.
	stopped func() bool
	err     *apierr.Error
}

// NewEncoder returns an encoder for vm. max ≤ 0 means no size bound.
func NewEncoder(vm *goja.Runtime, mode Mode, max int) *Encoder {
	return &Encoder{vm: vm, mode: mode, max: max}
}

// SetStop installs the function polled during long walks.
func (e *Encoder) SetStop(stopped func() bool) { e.stopped = stopped }

// SetTooBig sets the error returned when the output passes its bound.
func (e *Encoder) SetTooBig(f func(limit int) *apierr.Error) { e.tooBig = f }

// Reset empties the encoder for another value, keeping its buffer.
func (e *Encoder) Reset(max int) {
	e.buf = e.buf[:0]
	e.max = max
	e.ancestors = e.ancestors[:0]
	e.path = e.path[:0]
	e.err = nil
}

// Bytes is what has been written.
func (e *Encoder) Bytes() []byte { return e.buf }

// Len is how many bytes have been written.
func (e *Encoder) Len() int { return len(e.buf) }

// WriteRaw appends JSON text written by the caller (braces, keys).
func (e *Encoder) WriteRaw(s string) { e.buf = append(e.buf, s...) }

// WriteKey appends a quoted object key and a colon.
func (e *Encoder) WriteKey(k string) {
	e.buf = appendString(e.buf, k)
	e.buf = append(e.buf, ':')
}

// Encode writes v, named root in messages, following shape (ForArgs).
// It reports false for a value that writes nothing (undefined, a function
// in ForResult), so that object members can be left out.
func (e *Encoder) Encode(v goja.Value, root string, shape *Shape) (bool, *apierr.Error) {
	e.root = root
	e.path = e.path[:0]
	e.err = nil
	var wrote bool
	// A getter, a proxy trap or toJSON may throw: Try unwinds the VM's
	// stacks and hands the exception back. Uncatchable interrupts go on
	// up to the run.
	if ex := e.vm.Try(func() { wrote = e.value(v, shape, 0, "") }); ex != nil {
		return false, apierr.New(apierr.ValidationFailed, "%s: reading %s threw %s", e.where(), e.describeRoot(), oneLine(ex.Error()))
	}
	if e.err == nil {
		e.full()
	}
	if e.err != nil {
		return false, e.err
	}
	return wrote, nil
}

// Take returns what has been written and gives up the buffer when it is
// big (the caller keeps it), so the encoder does not pin a large array.
func (e *Encoder) Take() []byte {
	if cap(e.buf) > 64<<10 {
		b := e.buf
		e.buf = nil
		return b
	}
	return append([]byte(nil), e.buf...)
}

func (e *Encoder) describeRoot() string {
	if e.mode == ForResult {
		return "the value"
	}
	return "the argument"
}

// where names the current position: `argument "rows[2].x"`, or for a
// result `the result at "rows[2].x"`.
func (e *Encoder) where() string {
	p := e.pathString()
	switch e.mode {
	case ForArgs:
		return "argument " + strconv.Quote(p)
	default:
		if p == e.root {
			return e.root
		}
		return e.root + " at " + strconv.Quote(strings.TrimPrefix(strings.TrimPrefix(p, e.root), "."))
	}
}

// pathString renders the path, eliding the middle of very deep ones.
func (e *Encoder) pathString() string {
	var b strings.Builder
	b.WriteString(e.root)
	segs := e.path
	write := func(s pathSeg) {
		if s.idx >= 0 {
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(s.idx))
			b.WriteByte(']')
			return
		}
		b.WriteByte('.')
		b.WriteString(s.key)
	}
	if len(segs) > 12 {
		for _, s := range segs[:6] {
			write(s)
		}
		b.WriteString("…")
		for _, s := range segs[len(segs)-4:] {
			write(s)
		}
		return b.String()
	}
	for _, s := range segs {
		write(s)
	}
	return b.String()
}

func (e *Encoder) fail(code apierr.Code, format string, a ...any) {
	if e.err == nil {
		e.err = &apierr.Error{Code: code, Message: e.where() + ": " + fmt.Sprintf(format, a...)}
	}
}

func (e *Encoder) full() bool {
	if e.max > 0 && len(e.buf) > e.max {
		e.overflow()
		return true
	}
	return e.err != nil
}

// overflow records that the output passed its bound.
func (e *Encoder) overflow() {
	if e.err != nil {
		return
	}
	if e.tooBig != nil {
		e.err = e.tooBig(e.max)
		return
	}
	e.err = apierr.New(apierr.TooLarge, "%s is more than %d bytes as JSON", e.root, e.max)
}

func (e *Encoder) tick() bool {
	e.steps++
	if e.steps&4095 == 0 && e.stopped != nil && e.stopped() {
		if e.err == nil {
			e.err = apierr.New(apierr.Timeout, "the run was stopped while %s was being copied", e.root)
		}
		return true
	}
	return false
}

var (
	typeInt64   = reflect.TypeFor[int64]()
	typeFloat64 = reflect.TypeFor[float64]()
	typeBool    = reflect.TypeFor[bool]()

	typeArrayBuffer = reflect.TypeFor[goja.ArrayBuffer]()
	typeBytes       = reflect.TypeFor[[]byte]()
)

// value writes v; key is the member name for toJSON(key).
func (e *Encoder) value(v goja.Value, shape *Shape, depth int, key string) bool {
	if e.err != nil || e.full() || e.tick() {
		return false
	}
	if v == nil || goja.IsUndefined(v) {
		return false
	}
	if goja.IsNull(v) {
		e.buf = append(e.buf, "null"...)
		return true
	}
	switch t := v.(type) {
	case goja.String:
		if e.max > 0 && len(e.buf)+t.Length() > e.max {
			e.overflow()
			return false
		}
		e.buf = appendString(e.buf, t.String())
		return true
	case *goja.Object:
		return e.object(t, shape, depth, key)
	case *goja.Symbol:
		return e.unsupported("a Symbol")
	}
	switch v.ExportType() {
	case typeInt64:
		e.buf = strconv.AppendInt(e.buf, v.ToInteger(), 10)
		return true
	case typeFloat64:
		f := v.ToFloat()
		if math.IsNaN(f) || math.IsInf(f, 0) {
			switch e.mode {
			case ForArgs:
				e.fail(apierr.ValidationFailed, "%s is not a number JSON can carry; pass a finite number", v.String())
				return false
			case ForLog:
				e.buf = append(e.buf, v.String()...)
				return true
			}
			e.buf = append(e.buf, "null"...)
			return true
		}
		if f == math.Trunc(f) && math.Abs(f) < 1e21 {
			if f == 0 {
				e.buf = append(e.buf, '0')
				return true
			}
			if math.Abs(f) < 1<<63 {
				e.buf = strconv.AppendInt(e.buf, int64(f), 10)
				return true
			}
		}
		// JS number formatting, which is also valid JSON.
		e.buf = append(e.buf, v.String()...)
		return true
	case typeBool:
		e.buf = strconv.AppendBool(e.buf, v.ToBoolean())
		return true
	}
	if goja.IsBigInt(v) {
		if e.mode == ForLog {
			e.buf = append(e.buf, v.String()...)
			e.buf = append(e.buf, 'n')
			return true
		}
		return e.unsupported("a BigInt")
	}
	return e.unsupported("a " + v.ExportType().String())
}

func (e *Encoder) unsupported(what string) bool {
	switch e.mode {
	case ForArgs:
		e.fail(apierr.ValidationFailed, "%s cannot be passed to the host; use numbers, strings, booleans, arrays and plain objects", what)
	case ForResult:
		if what == "a BigInt" {
			e.fail(apierr.ValidationFailed, "a BigInt cannot be serialised to JSON; convert it with String() or Number()")
			return false
		}
		return false
	case ForLog:
		e.buf = append(e.buf, '"', '[')
		e.buf = append(e.buf, strings.TrimPrefix(what, "a ")...)
		e.buf = append(e.buf, ']', '"')
		return true
	}
	return false
}

var isoLayout = "2006-01-02T15:04:05.000Z"

func (e *Encoder) object(o *goja.Object, shape *Shape, depth int, key string) bool {
	if _, isFn := goja.AssertFunction(o); isFn {
		switch e.mode {
		case ForLog:
			e.buf = append(e.buf, `"[Function]"`...)
			return true
		case ForArgs:
			return e.unsupported("a function")
		}
		return false
	}
	if depth >= MaxDepth {
		switch e.mode {
		case ForLog:
			e.buf = append(e.buf, `"[Object]"`...)
			return true
		}
		e.fail(apierr.ValidationFailed, "nested more than %d levels deep; flatten the value", MaxDepth)
		return false
	}
	for _, a := range e.ancestors {
		if a == o {
			if e.mode == ForLog {
				e.buf = append(e.buf, `"[Circular]"`...)
				return true
			}
			e.fail(apierr.ValidationFailed, "the value refers back to itself (a cycle); pass a tree, not a graph")
			return false
		}
	}
	class := o.ClassName()
	if e.mode == ForResult {
		if toJSON, ok := goja.AssertFunction(o.Get("toJSON")); ok {
			r, err := toJSON(o, e.vm.ToValue(key))
			if err != nil {
				panic(err)
			}
			if r2, ok := r.(*goja.Object); !ok || r2 != o {
				return e.value(r, shape, depth, key)
			}
		}
	}
	switch class {
	case "Date":
		t, ok := o.Export().(time.Time)
		if !ok {
			e.buf = append(e.buf, "null"...)
			return true
		}
		e.buf = append(e.buf, '"')
		e.buf = t.UTC().AppendFormat(e.buf, isoLayout)
		e.buf = append(e.buf, '"')
		return true
	case "Number", "String", "Boolean":
		// Wrapper objects (new Number(1)) stand for their primitive.
		if p := primitiveOf(o, class); p != nil {
			return e.value(p, shape, depth, key)
		}
	}
	if e.mode == ForArgs {
		// Byte buffers travel as base64, as the host's byte parameters take them.
		switch o.ExportType() {
		case typeArrayBuffer:
			if b, ok := o.Export().(goja.ArrayBuffer); ok {
				return e.bytes(b.Bytes())
			}
		case typeBytes:
			if b, ok := o.Export().([]byte); ok {
				return e.bytes(b)
			}
		}
	}
	e.ancestors = append(e.ancestors, o)
	defer func() { e.ancestors = e.ancestors[:len(e.ancestors)-1] }()
	if class == "Array" {
		return e.array(o, shape.items(), depth)
	}
	e.buf = append(e.buf, '{')
	first := true
	for _, k := range o.Keys() {
		if e.err != nil {
			return false
		}
		name, sub := k, (*Shape)(nil)
		if e.mode == ForArgs {
			name, sub = shape.member(k)
		}
		mark := len(e.buf)
		if !first {
			e.buf = append(e.buf, ',')
		}
		e.buf = appendString(e.buf, name)
		e.buf = append(e.buf, ':')
		e.path = append(e.path, pathSeg{key: k, idx: -1})
		wrote := e.value(o.Get(k), sub, depth+1, k)
		e.path = e.path[:len(e.path)-1]
		if !wrote {
			e.buf = e.buf[:mark]
			continue
		}
		first = false
	}
	e.buf = append(e.buf, '}')
	return e.err == nil
}

func (e *Encoder) array(o *goja.Object, items *Shape, depth int) bool {
	n := o.Get("length").ToInteger()
	e.buf = append(e.buf, '[')
	for i := int64(0); i < n; i++ {
		if e.err != nil || e.full() {
			return false
		}
		if i > 0 {
			e.buf = append(e.buf, ',')
		}
		e.path = append(e.path, pathSeg{idx: int(i)})
		name := indexName(i)
		if !e.value(o.Get(name), items, depth+1, name) && e.err == nil {
			e.buf = append(e.buf, "null"...)
		}
		e.path = e.path[:len(e.path)-1]
	}
	e.buf = append(e.buf, ']')
	return e.err == nil
}

func (e *Encoder) bytes(b []byte) bool {
	n := (len(b) + 2) / 3 * 4
	if e.max > 0 && len(e.buf)+n > e.max {
		e.overflow()
		return false
	}
	e.buf = append(e.buf, '"')
	e.buf = base64.StdEncoding.AppendEncode(e.buf, b)
	e.buf = append(e.buf, '"')
	return true
}

func primitiveOf(o *goja.Object, class string) goja.Value {
	switch class {
	case "Number":
		return o.ToNumber()
	case "String":
		return o.ToString()
	}
	// valueOf of a Boolean wrapper; ToBoolean of an object is always true.
	if f, ok := goja.AssertFunction(o.Get("valueOf")); ok {
		if v, err := f(o); err == nil {
			return v
		}
	}
	return nil
}

// indexNames caches the decimal names of small array indexes.
var indexNames = func() []string {
	s := make([]string, 1<<14)
	for i := range s {
		s[i] = strconv.Itoa(i)
	}
	return s
}()

func indexName(i int64) string {
	if i < int64(len(indexNames)) {
		return indexNames[i]
	}
	return strconv.FormatInt(i, 10)
}

// AppendString appends s as a JSON string; invalid UTF-8 becomes U+FFFD.
func AppendString(dst []byte, s string) []byte { return appendString(dst, s) }

func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// StringJSONLen is how many bytes appendString writes for s.
func StringJSONLen(s string) int {
	n := 2
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t':
				n += 2
			case c < 0x20:
				n += 6
			default:
				n++
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			n += 6
		} else {
			n += size
		}
		i += size
	}
	return n
}

const hexDigits = "0123456789abcdef"

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
