package toolspec

import (
	"strings"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// OpenAI's strict mode (structured outputs for function calls) accepts a
// subset of JSON Schema: every object lists all its properties in
// "required" and sets "additionalProperties": false; an optional property
// is one whose type admits null (the host reads null as absent); only a
// few keywords are allowed; and a value must be describable, so free-form
// values (any JSON, an object of arbitrary keys) cannot be declared.
//
// Strict rewrites a tool's input schema into that subset:
//   - optional properties become nullable, and all are required;
//   - oneOf becomes anyOf; a list of types becomes anyOf of single types;
//   - unsupported keywords (minLength, maxLength, maxProperties,
//     propertyNames, …) are dropped: the host still checks them and
//     answers VALIDATION_FAILED with a message and an example;
//   - an array without an item schema holds scalars;
//   - a parameter whose value cannot be described (run_script's input, a
//     map of form fields) is offered as NAME_json, a string of JSON text,
//     which StrictArgs turns back into NAME when the call arrives.

// JSONSuffix marks a parameter offered as JSON text in strict schemas.
const JSONSuffix = "_json"

// keywords strict mode accepts, by the type they apply to.
var (
	stringKeywords = []string{"pattern", "format"}
	numberKeywords = []string{"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}
	arrayKeywords  = []string{"minItems", "maxItems"}
	stringFormats  = map[string]bool{"date-time": true, "time": true, "date": true, "duration": true, "email": true,
		"hostname": true, "ipv4": true, "ipv6": true, "uuid": true}
)

// Strict returns a tool input schema (an object schema) rewritten for
// OpenAI's strict mode.
func Strict(schema hostapi.Schema) hostapi.Schema {
	props, _ := schema["properties"].(map[string]any)
	required := map[string]bool{}
	for _, r := range toStrings(schema["required"]) {
		required[r] = true
	}
	out := hostapi.Schema{"type": "object", "additionalProperties": false}
	if d, ok := schema["description"].(string); ok {
		out["description"] = d
	}
	sp := map[string]any{}
	for _, name := range sortedKeys(props) {
		ps, _ := props[name].(map[string]any)
		node, ok := strictNode(ps, 0)
		if !ok {
			node = hostapi.Schema{"type": "string", "description": describe(ps, "Give it as JSON text, e.g. "+jsonHint(ps)+".")}
			name += JSONSuffix
		}
		if !required[strings.TrimSuffix(name, JSONSuffix)] {
			node = nullable(node)
		}
		sp[name] = node
	}
	out["properties"] = sp
	req := make([]any, 0, len(sp))
	for _, k := range sortedKeys(sp) {
		req = append(req, k)
	}
	out["required"] = req
	return out
}

func jsonHint(s map[string]any) string {
	switch s["type"] {
	case "object":
		return `{"key": "value"}`
	case "array":
		return `[1, 2]`
	}
	return `{"n": 5} or "text"`
}

// maxDepth bounds how deep a strict schema nests (strict mode allows a few
// levels; ours need three).
const maxDepth = 5

// strictNode rewrites one schema node; ok is false when the value it
// describes cannot be expressed in strict mode.
func strictNode(s map[string]any, depth int) (hostapi.Schema, bool) {
	if depth > maxDepth || s == nil {
		return nil, false
	}
	out := hostapi.Schema{}
	if d, ok := s["description"].(string); ok {
		out["description"] = d
	}
	for _, key := range []string{"oneOf", "anyOf"} {
		alts, ok := s[key].([]any)
		if !ok {
			continue
		}
		var keep []any
		for _, a := range alts {
			am, _ := a.(map[string]any)
			merged := map[string]any{}
			// An alternative without a type inherits the parent's.
			if t, ok := s["type"]; ok {
				merged["type"] = t
			}
			for k, v := range am {
				merged[k] = v
			}
			if n, ok := strictNode(merged, depth+1); ok {
				keep = append(keep, n)
			}
		}
		if len(keep) == 0 {
			return nil, false
		}
		if len(keep) == 1 {
			n := keep[0].(hostapi.Schema)
			if d, ok := out["description"]; ok {
				n["description"] = d
			}
			return n, true
		}
		out["anyOf"] = keep
		return out, true
	}
	if enum, ok := s["enum"]; ok {
		out["enum"] = enum
		if t, ok := s["type"].(string); ok {
			out["type"] = t
		}
		return out, true
	}
	if c, ok := s["const"]; ok {
		out["const"] = c
		return out, true
	}
	types := typesOf(s["type"])
	switch len(types) {
	case 0:
		return nil, false // any JSON value
	case 1:
		return typed(out, types[0], s, depth)
	}
	// Several types: one alternative each (null folds into nullable).
	var alts []any
	hasNull := false
	for _, t := range types {
		if t == "null" {
			hasNull = true
			continue
		}
		if n, ok := typed(hostapi.Schema{}, t, s, depth); ok {
			alts = append(alts, n)
		}
	}
	if len(alts) == 0 {
		return nil, false
	}
	var n hostapi.Schema
	if len(alts) == 1 {
		n = alts[0].(hostapi.Schema)
	} else {
		n = hostapi.Schema{"anyOf": alts}
	}
	if d, ok := out["description"]; ok {
		n["description"] = d
	}
	if hasNull {
		n = nullable(n)
	}
	return n, true
}

// typed renders s as a schema of the one type t into out.
func typed(out hostapi.Schema, t string, s map[string]any, depth int) (hostapi.Schema, bool) {
	out["type"] = t
	switch t {
	case "string":
		copyKeys(out, s, stringKeywords)
		if f, ok := out["format"].(string); ok && !stringFormats[f] {
			delete(out, "format")
		}
	case "number", "integer":
		copyKeys(out, s, numberKeywords)
	case "boolean", "null":
	case "array":
		copyKeys(out, s, arrayKeywords)
		items, _ := s["items"].(map[string]any)
		if items == nil {
			out["items"] = scalars()
			return out, true
		}
		n, ok := strictNode(items, depth+1)
		if !ok {
			if !describedType(items) {
				out["items"] = scalars()
				return out, true
			}
			return nil, false
		}
		out["items"] = n
	case "object":
		props, _ := s["properties"].(map[string]any)
		if len(props) == 0 {
			return nil, false // a map or a free-form object
		}
		inner := Strict(hostapi.Schema{"properties": props, "required": s["required"]})
		for k, v := range inner {
			if k != "description" {
				out[k] = v
			}
		}
		for k := range inner["properties"].(map[string]any) {
			if strings.HasSuffix(k, JSONSuffix) {
				return nil, false // JSON text is only offered for whole parameters
			}
		}
	default:
		return nil, false
	}
	return out, true
}

// describedType reports whether a schema names a type (an untyped array
// item is taken as a scalar; a typed one that cannot be expressed is not).
func describedType(s map[string]any) bool {
	_, ok := s["type"]
	return ok
}

// scalars is the item schema of an array that declares none.
func scalars() hostapi.Schema {
	return hostapi.Schema{"anyOf": []any{
		hostapi.Schema{"type": "string"}, hostapi.Schema{"type": "number"}, hostapi.Schema{"type": "boolean"}, hostapi.Schema{"type": "null"},
	}}
}

// nullable makes a node admit null.
func nullable(n hostapi.Schema) hostapi.Schema {
	switch t := n["type"].(type) {
	case string:
		if t != "null" {
			n["type"] = []any{t, "null"}
		}
		return n
	case []any:
		for _, x := range t {
			if x == "null" {
				return n
			}
		}
		n["type"] = append(append([]any{}, t...), "null")
		return n
	}
	if alts, ok := n["anyOf"].([]any); ok {
		n["anyOf"] = append(append([]any{}, alts...), hostapi.Schema{"type": "null"})
		return n
	}
	if enum, ok := n["enum"].([]any); ok {
		n["enum"] = append(append([]any{}, enum...), nil)
		return n
	}
	return hostapi.Schema{"anyOf": []any{n, hostapi.Schema{"type": "null"}}}
}

func typesOf(v any) []string {
	switch t := v.(type) {
	case string:
		return []string{t}
	case []any:
		return toStrings(t)
	case []string:
		return t
	}
	return nil
}

func toStrings(v any) []string {
	switch t := v.(type) {
	case []string:
		return t
	case []any:
		out := make([]string, 0, len(t))
		for _, x := range t {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

func copyKeys(dst hostapi.Schema, src map[string]any, keys []string) {
	for _, k := range keys {
		if v, ok := src[k]; ok {
			dst[k] = v
		}
	}
}

// HasJSONArgs reports whether args has a NAME_json key, so that callers
// can skip StrictArgs (and building the schema) for ordinary calls.
func HasJSONArgs(args map[string]any) bool {
	for k := range args {
		if strings.HasSuffix(k, JSONSuffix) {
			return true
		}
	}
	return false
}

// StrictArgs turns the arguments of a call made with strict schemas back
// into the tool's own: NAME_json (JSON text) becomes NAME. Nulls are left
// for the registry, which reads them as absent. schema is the tool's own
// input schema; a NAME_json that it declares itself is left alone.
func StrictArgs(args map[string]any, schema hostapi.Schema) (map[string]any, error) {
	if !HasJSONArgs(args) {
		return args, nil
	}
	props, _ := schema["properties"].(map[string]any)
	var out map[string]any
	for k, v := range args {
		base, ok := strings.CutSuffix(k, JSONSuffix)
		if !ok || props == nil {
			continue
		}
		if _, declared := props[k]; declared {
			continue
		}
		if _, known := props[base]; !known {
			continue
		}
		if out == nil {
			out = make(map[string]any, len(args))
			for k2, v2 := range args {
				out[k2] = v2
			}
		}
		delete(out, k)
		if v == nil {
			continue
		}
		if _, both := args[base]; both && args[base] != nil {
			return nil, apierr.New(apierr.ValidationFailed, "both %q and %q are given; give one", base, k)
		}
		text, isText := v.(string)
		if !isText {
			return nil, apierr.New(apierr.ValidationFailed, "argument %q: want JSON text (a string), e.g. %q", k, `{"n": 5}`)
		}
		parsed, err := hostapi.ParseValue([]byte(text))
		if err != nil {
			return nil, apierr.New(apierr.ValidationFailed, "argument %q is not JSON text: %s", k, apierr.Of(err).Message)
		}
		out[base] = parsed
	}
	if out == nil {
		return args, nil
	}
	return out, nil
}
