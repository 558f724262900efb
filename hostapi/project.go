package hostapi

import (
	"encoding"
	"encoding/base64"
	"encoding/json"
	"reflect"
	"strings"
	"sync"
	"time"
	"unicode"
)

// KeyStyle is how struct field names are spelled in a projection.
type KeyStyle int

const (
	// CamelCase: the JS sandbox's keys (totalLines, mimeType).
	CamelCase KeyStyle = iota
	// SnakeCase: meta-tools, HTTP and MCP (total_lines, mime_type).
	SnakeCase
)

// Project turns a handler result into plain JSON values (map[string]any,
// []any, string, float64, bool, nil) with struct keys in the given style.
// Struct fields are named by their json tags, written in camelCase; map keys
// are data and are never renamed.
func Project(v any, style KeyStyle) any {
	switch t := v.(type) {
	case nil:
		return nil
	case string, bool, float64:
		return t
	case int:
		return float64(t)
	case int64:
		return float64(t)
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = Project(x, style)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, x := range t {
			out[k] = Project(x, style)
		}
		return out
	case time.Time:
		return t.UTC().Format(time.RFC3339Nano)
	case json.RawMessage:
		var x any
		if json.Unmarshal(t, &x) != nil {
			return nil
		}
		return x
	}
	return projectValue(reflect.ValueOf(v), style)
}

var textMarshaler = reflect.TypeFor[encoding.TextMarshaler]()

func projectValue(rv reflect.Value, style KeyStyle) any {
	if !rv.IsValid() {
		return nil
	}
	if rv.Type() == reflect.TypeFor[time.Time]() {
		return rv.Interface().(time.Time).UTC().Format(time.RFC3339Nano)
	}
	switch rv.Kind() {
	case reflect.Pointer, reflect.Interface:
		if rv.IsNil() {
			return nil
		}
		return projectValue(rv.Elem(), style)
	case reflect.Bool:
		return rv.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return float64(rv.Int())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return float64(rv.Uint())
	case reflect.Float32, reflect.Float64:
		return rv.Float()
	case reflect.String:
		return rv.String()
	case reflect.Slice:
		if rv.IsNil() {
			if rv.Type().Elem().Kind() == reflect.Uint8 {
				return ""
			}
			return []any{}
		}
		if rv.Type().Elem().Kind() == reflect.Uint8 {
			return base64.StdEncoding.EncodeToString(rv.Bytes())
		}
		fallthrough
	case reflect.Array:
		out := make([]any, rv.Len())
		for i := range out {
			out[i] = projectValue(rv.Index(i), style)
		}
		return out
	case reflect.Map:
		if rv.IsNil() {
			return nil
		}
		out := make(map[string]any, rv.Len())
		it := rv.MapRange()
		for it.Next() {
			k := it.Key()
			var key string
			if k.Kind() == reflect.String {
				key = k.String()
			} else if k.Type().Implements(textMarshaler) {
				b, _ := k.Interface().(encoding.TextMarshaler).MarshalText()
				key = string(b)
			} else {
				key = toString(k)
			}
			out[key] = projectValue(it.Value(), style)
		}
		return out
	case reflect.Struct:
		fields := StructFields(rv.Type())
		out := make(map[string]any, len(fields))
		for _, f := range fields {
			fv := rv.FieldByIndex(f.Index)
			if f.OmitEmpty && fv.IsZero() {
				continue
			}
			name := f.Camel
			if style == SnakeCase {
				name = f.Snake
			}
			out[name] = projectValue(fv, style)
		}
		return out
	}
	return nil
}

func toString(v reflect.Value) string {
	b, _ := json.Marshal(v.Interface())
	return strings.Trim(string(b), `"`)
}

// FieldInfo describes one JSON-visible struct field.
type FieldInfo struct {
	Index        []int
	Camel, Snake string
	OmitEmpty    bool
}

var fieldCache sync.Map // reflect.Type → []FieldInfo

// StructFields lists the exported fields of struct type t as encoding/json
// would, flattening embedded structs; results are cached per type.
func StructFields(t reflect.Type) []FieldInfo {
	if f, ok := fieldCache.Load(t); ok {
		return f.([]FieldInfo)
	}
	var out []FieldInfo
	var walk func(t reflect.Type, index []int)
	walk = func(t reflect.Type, index []int) {
		for i := 0; i < t.NumField(); i++ {
			sf := t.Field(i)
			tag := sf.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, opts, _ := strings.Cut(tag, ",")
			idx := append(append([]int(nil), index...), i)
			if sf.Anonymous && name == "" {
				ft := sf.Type
				if ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				if ft.Kind() == reflect.Struct {
					walk(ft, idx)
					continue
				}
			}
			if !sf.IsExported() {
				continue
			}
			if name == "" {
				name = lowerFirst(sf.Name)
			}
			out = append(out, FieldInfo{Index: idx, Camel: name, Snake: SnakeName(name), OmitEmpty: strings.Contains(opts, "omitempty")})
		}
	}
	walk(t, nil)
	fieldCache.Store(t, out)
	return out
}

func lowerFirst(s string) string {
	if s == "" {
		return s
	}
	r := []rune(s)
	r[0] = unicode.ToLower(r[0])
	return string(r)
}

// SnakeName converts camelCase to snake_case: totalLines → total_lines,
// mimeType → mime_type, sha256 → sha256.
func SnakeName(s string) string {
	var b strings.Builder
	for i, r := range s {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte('_')
			}
			b.WriteRune(unicode.ToLower(r))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// CamelName converts snake_case to camelCase: start_line → startLine.
func CamelName(s string) string {
	if !strings.Contains(s, "_") {
		return s
	}
	var b strings.Builder
	up := false
	for _, r := range s {
		if r == '_' {
			up = true
			continue
		}
		if up {
			b.WriteRune(unicode.ToUpper(r))
			up = false
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}
