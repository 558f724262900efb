// Package stubs builds the sandbox API (files.*, tools.*) inside a goja VM
// from a Spec, and moves values across the VM's edge: JS values out as JSON
// (with depth, size and cycle checks), JSON results in as plain JS values.
//
// It does not import the registry: a sandbox worker process receives the
// Spec over its channel and holds nothing else. bindings/js derives the
// Spec from the registry on the host side.
//
// Nothing a script can redefine takes part: values are read with the VM's
// own property access (no JSON.stringify, no JSON.parse) and host errors are
// built with the Error constructor captured before the script ran.
package stubs

import (
	"strings"
	"unicode"
)

// Spec is the shape of the sandbox API: every method a script can call and
// how its positional JS arguments become named tool arguments. It travels
// as JSON.
type Spec struct {
	Methods []Method `json:"methods"`
}

// Method is one stub. Its index in Spec.Methods identifies it in host calls.
type Method struct {
	// Path is the JS path below the globals: "files.spreadsheet.readRange".
	Path  string `json:"path"`
	Slots []Slot `json:"slots,omitempty"`
}

// Slot is one positional JS argument: a single parameter, or a group of
// parameters given as one options object.
type Slot struct {
	Param  *Field  `json:"param,omitempty"`
	Group  string  `json:"group,omitempty"`
	Fields []Field `json:"fields,omitempty"`
}

// Field is one tool argument.
type Field struct {
	// Name is the snake_case argument name ("start_line").
	Name string `json:"name"`
	// Key is how a script spells it inside an options object ("startLine").
	Key   string `json:"key,omitempty"`
	Shape *Shape `json:"shape,omitempty"`
}

// Shape is the part of an argument's JSON Schema that decides how a
// script's camelCase keys are renamed: objects with declared properties
// take snake_case keys; free-form objects keep their keys (they are data).
type Shape struct {
	Props map[string]*Shape `json:"p,omitempty"`
	Items *Shape            `json:"i,omitempty"`
	Extra *Shape            `json:"a,omitempty"`
}

// ShapeOf extracts the renaming shape of a JSON Schema held as plain maps;
// nil when nothing inside it is renamed.
func ShapeOf(schema map[string]any) *Shape {
	if schema == nil {
		return nil
	}
	s := &Shape{}
	if props, ok := schema["properties"].(map[string]any); ok {
		s.Props = make(map[string]*Shape, len(props))
		for k, v := range props {
			sub, _ := v.(map[string]any)
			s.Props[k] = ShapeOf(sub)
		}
	}
	if items, ok := schema["items"].(map[string]any); ok {
		s.Items = ShapeOf(items)
	}
	if extra, ok := schema["additionalProperties"].(map[string]any); ok {
		s.Extra = ShapeOf(extra)
	}
	if s.Props == nil && s.Items == nil && s.Extra == nil {
		return nil
	}
	return s
}

// member resolves a script's key k inside an object of shape s: the key
// written to JSON and the shape of its value.
func (s *Shape) member(k string) (string, *Shape) {
	if s == nil {
		return k, nil
	}
	if s.Props != nil {
		if sub, ok := s.Props[k]; ok {
			return k, sub
		}
		if sn := SnakeName(k); sn != k {
			if sub, ok := s.Props[sn]; ok {
				return sn, sub
			}
		}
	}
	return k, s.Extra
}

func (s *Shape) items() *Shape {
	if s == nil {
		return nil
	}
	return s.Items
}

// SnakeName converts camelCase to snake_case (startLine → start_line),
// exactly as the registry names arguments.
func SnakeName(s string) string {
	simple := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 'A' && c <= 'Z' || c >= 0x80 {
			simple = false
			break
		}
	}
	if simple {
		return s
	}
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
