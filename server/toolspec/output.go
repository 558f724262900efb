package toolspec

import (
	"encoding/json"
	"reflect"
	"time"

	"github.com/metaclaw/metaclaw/hostapi"
)

// OutputSchema is the JSON Schema of op's meta-tool result, derived from
// its Go result type the way hostapi.Project writes it (snake_case keys,
// nil slices as [], nil pointers and maps as null). MCP wants an object:
// when the result is not one (a number, an array, any value), the schema
// describes {"result": value} and wrapped is true; the caller then sends
// structured content in that wrapping.
func OutputSchema(op *hostapi.Op) (schema hostapi.Schema, wrapped bool) {
	t := resultType(op)
	s := goSchema(t, map[reflect.Type]bool{})
	if s["type"] == "object" {
		return s, false
	}
	return Wrap(s), true
}

// Wrap is the object schema {"result": s}.
func Wrap(s hostapi.Schema) hostapi.Schema {
	return hostapi.Schema{"type": "object", "properties": hostapi.Schema{"result": s}, "required": []any{"result"}}
}

// resultType is the Go type of op's meta-tool result: its Result, or what
// its ToolResult reshapes a zero Result into.
func resultType(op *hostapi.Op) (t reflect.Type) {
	t = reflect.TypeOf(op.Result)
	if op.ToolResult == nil {
		return t
	}
	defer func() {
		if recover() != nil {
			t = nil // a reshaper that cannot take a zero value: any result
		}
	}()
	if v := op.ToolResult(op.Result); v != nil {
		return reflect.TypeOf(v)
	}
	return nil
}

var (
	timeType = reflect.TypeFor[time.Time]()
	rawType  = reflect.TypeFor[json.RawMessage]()
)

// goSchema renders a Go type as the schema of its snake_case projection.
func goSchema(t reflect.Type, seen map[reflect.Type]bool) hostapi.Schema {
	if t == nil || t == rawType {
		return hostapi.Schema{}
	}
	if t == timeType {
		return hostapi.Schema{"type": "string", "format": "date-time"}
	}
	switch t.Kind() {
	case reflect.Pointer:
		return nullable(goSchema(t.Elem(), seen))
	case reflect.Interface:
		return hostapi.Schema{}
	case reflect.Bool:
		return hostapi.Schema{"type": "boolean"}
	case reflect.String:
		return hostapi.Schema{"type": "string"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return hostapi.Schema{"type": "integer"}
	case reflect.Float32, reflect.Float64:
		return hostapi.Schema{"type": "number"}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return hostapi.Schema{"type": "string", "contentEncoding": "base64"}
		}
		return hostapi.Schema{"type": "array", "items": goSchema(t.Elem(), seen)}
	case reflect.Map:
		return hostapi.Schema{"type": []any{"object", "null"}, "additionalProperties": goSchema(t.Elem(), seen)}
	case reflect.Struct:
		if seen[t] {
			return hostapi.Schema{"type": "object"} // a recursive type: its shape once is enough
		}
		seen[t] = true
		defer delete(seen, t)
		props := hostapi.Schema{}
		required := []any{}
		for _, f := range hostapi.StructFields(t) {
			props[f.Snake] = goSchema(t.FieldByIndex(f.Index).Type, seen)
			if !f.OmitEmpty {
				required = append(required, f.Snake)
			}
		}
		return hostapi.Schema{"type": "object", "properties": props, "required": required}
	}
	return hostapi.Schema{}
}
