package js

import (
	"bytes"
	"encoding"
	"encoding/base64"
	"encoding/json"
	"math"
	"reflect"
	"slices"
	"strconv"
	"time"

	"github.com/metaclaw/metaclaw/bindings/js/stubs"
	"github.com/metaclaw/metaclaw/hostapi"
)

// EncodeResult writes a handler's result as the JSON a script receives:
// the values of hostapi.Project(v, hostapi.CamelCase) — the same type
// switch at the top and inside []any and map[string]any, the same
// reflection below structs —, with struct fields in their declaration
// order (so files.info() reads id, name, size… as declared) and map keys
// sorted. NaN and infinities, which JSON cannot carry, are written as null.
func EncodeResult(v any) []byte {
	w := resultWriter{buf: make([]byte, 0, 256)}
	w.value(v, 0)
	return w.buf
}

type resultWriter struct{ buf []byte }

// maxResultDepth stops a self-referencing Go value (a handler bug) from
// recursing forever.
const maxResultDepth = 512

func (w *resultWriter) value(v any, depth int) {
	if depth > maxResultDepth {
		w.buf = append(w.buf, "null"...)
		return
	}
	switch t := v.(type) {
	case nil:
		w.buf = append(w.buf, "null"...)
	case string:
		w.buf = appendJSONString(w.buf, t)
	case bool:
		w.buf = strconv.AppendBool(w.buf, t)
	case float64:
		w.float(t)
	case int:
		w.buf = strconv.AppendInt(w.buf, int64(t), 10)
	case int64:
		w.buf = strconv.AppendInt(w.buf, t, 10)
	case []any:
		w.buf = append(w.buf, '[')
		for i, x := range t {
			if i > 0 {
				w.buf = append(w.buf, ',')
			}
			w.value(x, depth+1)
		}
		w.buf = append(w.buf, ']')
	case [][]any:
		w.buf = append(w.buf, '[')
		for i, row := range t {
			if i > 0 {
				w.buf = append(w.buf, ',')
			}
			w.value(row, depth+1)
		}
		w.buf = append(w.buf, ']')
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		w.buf = append(w.buf, '{')
		for i, k := range keys {
			if i > 0 {
				w.buf = append(w.buf, ',')
			}
			w.buf = appendJSONString(w.buf, k)
			w.buf = append(w.buf, ':')
			w.value(t[k], depth+1)
		}
		w.buf = append(w.buf, '}')
	case time.Time:
		w.buf = append(w.buf, '"')
		w.buf = t.UTC().AppendFormat(w.buf, time.RFC3339Nano)
		w.buf = append(w.buf, '"')
	case json.RawMessage:
		var out bytes.Buffer
		if len(t) == 0 || json.Compact(&out, t) != nil {
			w.buf = append(w.buf, "null"...)
			return
		}
		w.buf = append(w.buf, out.Bytes()...)
	default:
		w.reflected(reflect.ValueOf(v), depth)
	}
}

func (w *resultWriter) float(f float64) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		w.buf = append(w.buf, "null"...)
		return
	}
	if f == math.Trunc(f) && math.Abs(f) < 1e15 {
		w.buf = strconv.AppendInt(w.buf, int64(f), 10)
		return
	}
	w.buf = strconv.AppendFloat(w.buf, f, 'g', -1, 64)
}

var (
	timeType      = reflect.TypeFor[time.Time]()
	textMarshaler = reflect.TypeFor[encoding.TextMarshaler]()
)

func (w *resultWriter) reflected(rv reflect.Value, depth int) {
	if !rv.IsValid() {
		w.buf = append(w.buf, "null"...)
		return
	}
	if rv.Type() == timeType {
		t := rv.Interface().(time.Time)
		w.buf = append(w.buf, '"')
		w.buf = t.UTC().AppendFormat(w.buf, time.RFC3339Nano)
		w.buf = append(w.buf, '"')
		return
	}
	switch rv.Kind() {
	case reflect.Pointer, reflect.Interface:
		if rv.IsNil() {
			w.buf = append(w.buf, "null"...)
			return
		}
		w.reflected(rv.Elem(), depth+1)
	case reflect.Bool:
		w.buf = strconv.AppendBool(w.buf, rv.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		w.buf = strconv.AppendInt(w.buf, rv.Int(), 10)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		w.buf = strconv.AppendUint(w.buf, rv.Uint(), 10)
	case reflect.Float32, reflect.Float64:
		w.float(rv.Float())
	case reflect.String:
		w.buf = appendJSONString(w.buf, rv.String())
	case reflect.Slice:
		if rv.Type().Elem().Kind() == reflect.Uint8 {
			w.buf = append(w.buf, '"')
			w.buf = base64.StdEncoding.AppendEncode(w.buf, rv.Bytes())
			w.buf = append(w.buf, '"')
			return
		}
		if rv.IsNil() {
			w.buf = append(w.buf, "[]"...)
			return
		}
		fallthrough
	case reflect.Array:
		w.buf = append(w.buf, '[')
		for i := 0; i < rv.Len(); i++ {
			if i > 0 {
				w.buf = append(w.buf, ',')
			}
			w.reflected(rv.Index(i), depth+1)
		}
		w.buf = append(w.buf, ']')
	case reflect.Map:
		if rv.IsNil() {
			w.buf = append(w.buf, "null"...)
			return
		}
		type entry struct {
			key string
			val reflect.Value
		}
		entries := make([]entry, 0, rv.Len())
		it := rv.MapRange()
		for it.Next() {
			entries = append(entries, entry{mapKey(it.Key()), it.Value()})
		}
		slices.SortFunc(entries, func(a, b entry) int {
			switch {
			case a.key < b.key:
				return -1
			case a.key > b.key:
				return 1
			}
			return 0
		})
		w.buf = append(w.buf, '{')
		for i, e := range entries {
			if i > 0 {
				w.buf = append(w.buf, ',')
			}
			w.buf = appendJSONString(w.buf, e.key)
			w.buf = append(w.buf, ':')
			w.reflected(e.val, depth+1)
		}
		w.buf = append(w.buf, '}')
	case reflect.Struct:
		w.buf = append(w.buf, '{')
		first := true
		for _, f := range hostapi.StructFields(rv.Type()) {
			fv := rv.FieldByIndex(f.Index)
			if f.OmitEmpty && fv.IsZero() {
				continue
			}
			if !first {
				w.buf = append(w.buf, ',')
			}
			first = false
			w.buf = appendJSONString(w.buf, f.Camel)
			w.buf = append(w.buf, ':')
			w.reflected(fv, depth+1)
		}
		w.buf = append(w.buf, '}')
	default:
		w.buf = append(w.buf, "null"...)
	}
}

func mapKey(k reflect.Value) string {
	if k.Kind() == reflect.String {
		return k.String()
	}
	if k.Type().Implements(textMarshaler) {
		b, _ := k.Interface().(encoding.TextMarshaler).MarshalText()
		return string(b)
	}
	b, _ := json.Marshal(k.Interface())
	return string(bytes.Trim(b, `"`))
}

func appendJSONString(dst []byte, s string) []byte { return stubs.AppendString(dst, s) }
