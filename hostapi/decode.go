package hostapi

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// Arguments reach the registry from every door in one of two shapes: JSON
// bytes (HTTP, MCP, the CLI, a sandbox worker's channel, a WASM module) or
// Go values exported from a JS VM or written in a test. Both are decoded
// here, once, into one canonical form before the op's schema is checked:
//
//   - nil, bool, string, []any, map[string]any, and two number types:
//   - int64 for every integral number within ±2^53 (and, where the schema
//     asks for an integer, within the int64 range), float64 for the rest.
//
// A number is never rounded on the way: an integer literal that a float64
// cannot hold exactly is refused unless its parameter is an integer, NaN
// and ±Infinity are refused, and an integer parameter outside int64 is
// refused, each with a message naming the argument. A null given for an
// optional object property means the property is absent (OpenAI's strict
// function calling sends null for every optional field it does not use);
// nulls inside arrays and free-form values are data and stay.

// maxSafeInteger is 2^53, the largest integer every door (JSON, JS) carries exactly.
const maxSafeInteger = 1 << 53

// maxArgDepth bounds how deeply argument values may nest.
const maxArgDepth = 256

// ParseArgs reads a JSON object of arguments, keeping numbers exact for
// the canonical decoding that follows. Empty input and null mean no
// arguments.
func ParseArgs(raw []byte) (map[string]any, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, apierr.New(apierr.ValidationFailed, "the arguments are not valid JSON: %v", err)
	}
	if dec.More() {
		return nil, apierr.New(apierr.ValidationFailed, "the arguments have data after the JSON object")
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, apierr.New(apierr.ValidationFailed, "the arguments must be a JSON object, e.g. {\"id\": \"data.csv\"}")
	}
	return m, nil
}

// ParseValue reads one JSON value (a run's input, say) into the canonical
// form, numbers exact or refused.
func ParseValue(raw []byte) (any, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, apierr.New(apierr.ValidationFailed, "not valid JSON: %v", err)
	}
	if dec.More() {
		return nil, apierr.New(apierr.ValidationFailed, "data after the JSON value")
	}
	return Canonical(v, nil)
}

// Canonical converts v into the canonical argument form, following schema
// (nil for a free-form value).
func Canonical(v any, schema Schema) (any, error) {
	d := decoder{}
	out, err := d.value(v, schema, 0)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// canonicalArgs decodes an argument object against an object schema whose
// properties are the parameters.
func canonicalArgs(args map[string]any, schema Schema) (map[string]any, error) {
	d := decoder{}
	out, err := d.object(args, schema, 0)
	if err != nil {
		return nil, err
	}
	return out, nil
}

type decoder struct {
	path []string
}

func (d *decoder) fail(format string, a ...any) error {
	msg := fmt.Sprintf(format, a...)
	if len(d.path) == 0 {
		return apierr.New(apierr.ValidationFailed, "%s", msg)
	}
	return apierr.New(apierr.ValidationFailed, "argument %q: %s", d.where(), msg)
}

func (d *decoder) where() string {
	var b strings.Builder
	for i, p := range d.path {
		if strings.HasPrefix(p, "[") || i == 0 {
			b.WriteString(p)
			continue
		}
		b.WriteByte('.')
		b.WriteString(p)
	}
	return b.String()
}

func (d *decoder) push(p string) { d.path = append(d.path, p) }
func (d *decoder) pop()          { d.path = d.path[:len(d.path)-1] }

// wantsInteger reports whether schema declares an integer (or a union
// with an integer branch, such as a sheet's name-or-index).
func wantsInteger(schema Schema) bool {
	for _, key := range []string{"oneOf", "anyOf"} {
		if branches, ok := schema[key].([]any); ok {
			for _, b := range branches {
				if bs, ok := b.(Schema); ok && wantsInteger(bs) {
					return true
				}
			}
		}
	}
	switch t := schema["type"].(type) {
	case string:
		return t == "integer"
	case []any:
		for _, x := range t {
			if x == "integer" {
				return true
			}
		}
	case []string:
		for _, x := range t {
			if x == "integer" {
				return true
			}
		}
	}
	return false
}

func (d *decoder) value(v any, schema Schema, depth int) (any, error) {
	if depth > maxArgDepth {
		return nil, d.fail("nested more than %d levels deep", maxArgDepth)
	}
	switch t := v.(type) {
	case nil, bool, string:
		return t, nil
	case json.Number:
		return d.number(string(t), schema)
	case int64:
		return d.integer(t, schema)
	case int:
		return d.integer(int64(t), schema)
	case int32:
		return d.integer(int64(t), schema)
	case float64:
		return d.float(t, schema)
	case float32:
		return d.float(float64(t), schema)
	case map[string]any:
		return d.object(t, schema, depth)
	case []any:
		items, _ := schema["items"].(Schema)
		for i, x := range t {
			d.push("[" + strconv.Itoa(i) + "]")
			c, err := d.value(x, items, depth+1)
			d.pop()
			if err != nil {
				return nil, err
			}
			t[i] = c
		}
		return t, nil
	case time.Time:
		return t.UTC().Format(time.RFC3339Nano), nil
	case []byte:
		return base64.StdEncoding.EncodeToString(t), nil
	case json.RawMessage:
		var x any
		dec := json.NewDecoder(bytes.NewReader(t))
		dec.UseNumber()
		if err := dec.Decode(&x); err != nil {
			return nil, d.fail("not valid JSON: %v", err)
		}
		return d.value(x, schema, depth)
	}
	return d.reflected(reflect.ValueOf(v), schema, depth)
}

// reflected converts the Go values tests and embedders pass (typed slices,
// maps, unsigned integers) into the canonical form.
func (d *decoder) reflected(rv reflect.Value, schema Schema, depth int) (any, error) {
	switch rv.Kind() {
	case reflect.Pointer, reflect.Interface:
		if rv.IsNil() {
			return nil, nil
		}
		return d.value(rv.Elem().Interface(), schema, depth)
	case reflect.Bool:
		return rv.Bool(), nil
	case reflect.String:
		return rv.String(), nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return d.integer(rv.Int(), schema)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		u := rv.Uint()
		if u > math.MaxInt64 {
			return nil, d.fail("%d is out of range", u)
		}
		return d.integer(int64(u), schema)
	case reflect.Float32, reflect.Float64:
		return d.float(rv.Float(), schema)
	case reflect.Slice, reflect.Array:
		if rv.Kind() == reflect.Slice && rv.IsNil() {
			return nil, nil
		}
		out := make([]any, rv.Len())
		for i := range out {
			out[i] = rv.Index(i).Interface()
		}
		return d.value(out, schema, depth)
	case reflect.Map:
		if rv.IsNil() {
			return nil, nil
		}
		if rv.Type().Key().Kind() != reflect.String {
			return nil, d.fail("an object's keys must be strings")
		}
		out := make(map[string]any, rv.Len())
		it := rv.MapRange()
		for it.Next() {
			out[it.Key().String()] = it.Value().Interface()
		}
		return d.object(out, schema, depth)
	case reflect.Struct:
		return d.value(Project(rv.Interface(), SnakeCase), schema, depth)
	}
	return nil, d.fail("a %s cannot be passed as an argument", rv.Type())
}

// object decodes an object's values; null values of optional declared
// properties are dropped (null means absent).
func (d *decoder) object(m map[string]any, schema Schema, depth int) (map[string]any, error) {
	props, _ := schema["properties"].(Schema)
	addl, _ := schema["additionalProperties"].(Schema)
	var required map[string]bool
	if props != nil {
		required = requiredSet(schema)
	}
	out := make(map[string]any, len(m))
	// In key order, so that of several bad arguments the same one is named
	// on every call and through every door.
	for _, k := range slices.Sorted(maps.Keys(m)) {
		x := m[k]
		var sub Schema
		declared := false
		if props != nil {
			sub, declared = props[k].(Schema)
		}
		if x == nil && declared && !required[k] && !allowsNull(sub) {
			continue
		}
		if sub == nil {
			sub = addl
		}
		d.push(k)
		c, err := d.value(x, sub, depth+1)
		d.pop()
		if err != nil {
			return nil, err
		}
		out[k] = c
	}
	return out, nil
}

func requiredSet(schema Schema) map[string]bool {
	set := map[string]bool{}
	switch r := schema["required"].(type) {
	case []any:
		for _, x := range r {
			if s, ok := x.(string); ok {
				set[s] = true
			}
		}
	case []string:
		for _, s := range r {
			set[s] = true
		}
	}
	return set
}

// allowsNull reports whether schema declares null as a value of its own
// (then null is data, not absence).
func allowsNull(schema Schema) bool {
	switch t := schema["type"].(type) {
	case string:
		return t == "null"
	case []any:
		for _, x := range t {
			if x == "null" {
				return true
			}
		}
	case []string:
		for _, x := range t {
			if x == "null" {
				return true
			}
		}
	}
	return false
}

// number decodes a JSON number literal exactly.
func (d *decoder) number(s string, schema Schema) (any, error) {
	if !strings.ContainsAny(s, ".eE") {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			if wantsInteger(schema) {
				return nil, d.fail("%s is out of range for an integer", s)
			}
			return nil, d.fail("%s cannot be carried exactly as a number (beyond 2^53); pass it as a string", s)
		}
		return d.integer(n, schema)
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return nil, d.fail("%s is out of range for a number", s)
	}
	return d.float(f, schema)
}

func (d *decoder) integer(n int64, schema Schema) (any, error) {
	if (n > maxSafeInteger || n < -maxSafeInteger) && !wantsInteger(schema) {
		return nil, d.fail("%d cannot be carried exactly as a number (beyond 2^53); pass it as a string", n)
	}
	return n, nil
}

func (d *decoder) float(f float64, schema Schema) (any, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil, d.fail("%v is not a number that can be stored; pass a finite number", f)
	}
	if f == math.Trunc(f) && f >= -maxSafeInteger && f <= maxSafeInteger {
		return int64(f), nil
	}
	if wantsInteger(schema) && f == math.Trunc(f) {
		return nil, d.fail("%v is out of range for an integer (at most 2^53 in magnitude)", f)
	}
	return f, nil
}
