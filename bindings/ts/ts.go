// Package ts derives the TypeScript declarations of the sandbox API from the
// registry: one method per operation, argument types from the parameters'
// JSON Schemas, result types from the handlers' Go result types.
package ts

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"

	jsbind "github.com/metaclaw/metaclaw/bindings/js"
	"github.com/metaclaw/metaclaw/hostapi"
)

// Declarations renders a .d.ts for reg's sandbox API.
func Declarations(reg *hostapi.Registry) string {
	var b strings.Builder
	b.WriteString("// metaclaw sandbox API — generated from the operation registry by `metaclaw types`.\n")
	b.WriteString("// Scripts run as the body of an async function: top-level await and return work.\n\n")
	b.WriteString(`/** A host error: every files.* / tools.* failure is thrown as one. */
interface MetaclawError extends Error {
  code: "VALIDATION_FAILED" | "NOT_FOUND" | "ALREADY_EXISTS" | "TOO_LARGE" | "UNSUPPORTED_FORMAT" | "QUOTA_EXCEEDED" |
    "SANDBOX_VIOLATION" | "UNAUTHORIZED" | "TIMEOUT" | "RESOURCE_EXHAUSTED" | "BUSY" | "FILE_READ_FAILED" |
    "FILE_WRITE_FAILED" | "TOOL_WORKER_UNAVAILABLE" | "INTERNAL";
}

/** The caller's JSON input (for a saved tool: its validated arguments). */
declare const input: any;
/** The session the run belongs to (provenance only). */
declare const session: { readonly id: string };
/** Captured console: output is returned in the run result's logs. */
declare const console: {
  log(...args: any[]): void;
  info(...args: any[]): void;
  warn(...args: any[]): void;
  error(...args: any[]): void;
  debug(...args: any[]): void;
};

`)
	type node struct {
		methods  []*hostapi.Op
		children map[string]*node
	}
	root := &node{children: map[string]*node{}}
	var order []string
	for _, op := range reg.Ops() {
		if op.Name == "" {
			continue
		}
		n := root
		for _, part := range strings.Split(op.Namespace(), ".") {
			c := n.children[part]
			if c == nil {
				c = &node{children: map[string]*node{}}
				n.children[part] = c
				if n == root {
					order = append(order, part)
				}
			}
			n = c
		}
		n.methods = append(n.methods, op)
	}
	var write func(n *node, indent string)
	write = func(n *node, indent string) {
		for _, op := range n.methods {
			fmt.Fprintf(&b, "%s/** %s */\n", indent, strings.ReplaceAll(op.Doc, "*/", "* /"))
			fmt.Fprintf(&b, "%s%s(%s): Promise<%s>;\n", indent, op.JSName(), params(op), goType(reflect.TypeOf(op.Result), indent))
		}
		names := make([]string, 0, len(n.children))
		for k := range n.children {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			fmt.Fprintf(&b, "%sreadonly %s: {\n", indent, k)
			write(n.children[k], indent+"  ")
			fmt.Fprintf(&b, "%s};\n", indent)
		}
	}
	for _, name := range order {
		fmt.Fprintf(&b, "declare const %s: {\n", name)
		write(root.children[name], "  ")
		b.WriteString("};\n\n")
	}
	return b.String()
}

func params(op *hostapi.Op) string {
	slots := jsbind.SlotInfos(op)
	// A positional argument may only be optional when all after it are.
	optional := make([]bool, len(slots))
	tailOptional := true
	for i := len(slots) - 1; i >= 0; i-- {
		s := slots[i]
		req := false
		if s.Param != nil {
			req = s.Param.Required
		} else {
			for _, f := range s.Fields {
				req = req || f.Required
			}
		}
		optional[i] = !req && tailOptional
		tailOptional = optional[i]
	}
	var parts []string
	for i, s := range slots {
		q := ""
		if optional[i] {
			q = "?"
		}
		if s.Param != nil {
			t := schemaType(s.Param.Schema, "  ")
			if !s.Param.Required && !optional[i] {
				t += " | null | undefined"
			}
			parts = append(parts, fmt.Sprintf("%s%s: %s", hostapi.CamelName(s.Param.Name), q, t))
			continue
		}
		var fields []string
		for _, f := range s.Fields {
			fq := "?"
			if f.Required {
				fq = ""
			}
			fields = append(fields, fmt.Sprintf("%s%s: %s", hostapi.CamelName(f.Name), fq, schemaType(f.Schema, "  ")))
		}
		parts = append(parts, fmt.Sprintf("%s%s: { %s }", s.Group, q, strings.Join(fields, "; ")))
	}
	return strings.Join(parts, ", ")
}

// schemaType renders a JSON Schema as a TypeScript type.
func schemaType(s hostapi.Schema, indent string) string {
	if s == nil {
		return "any"
	}
	if enum, ok := s["enum"]; ok {
		var lits []string
		for _, v := range toSlice(enum) {
			lits = append(lits, fmt.Sprintf("%q", v))
		}
		return strings.Join(lits, " | ")
	}
	for _, key := range []string{"oneOf", "anyOf"} {
		if alts, ok := s[key]; ok {
			var ts []string
			for _, a := range toSlice(alts) {
				if m, ok := a.(hostapi.Schema); ok {
					ts = append(ts, schemaType(m, indent))
				}
			}
			return strings.Join(ts, " | ")
		}
	}
	switch t := s["type"].(type) {
	case string:
		return typeName(t, s, indent)
	case []string:
		var ts []string
		for _, x := range t {
			ts = append(ts, typeName(x, s, indent))
		}
		return strings.Join(ts, " | ")
	case []any:
		var ts []string
		for _, x := range t {
			ts = append(ts, typeName(fmt.Sprint(x), s, indent))
		}
		return strings.Join(ts, " | ")
	}
	return "any"
}

func typeName(t string, s hostapi.Schema, indent string) string {
	switch t {
	case "string":
		return "string"
	case "integer", "number":
		return "number"
	case "boolean":
		return "boolean"
	case "null":
		return "null"
	case "array":
		item, _ := s["items"].(hostapi.Schema)
		return "Array<" + schemaType(item, indent) + ">"
	case "object":
		props, _ := s["properties"].(hostapi.Schema)
		if len(props) == 0 {
			return "Record<string, any>"
		}
		req := map[string]bool{}
		for _, r := range toSlice(s["required"]) {
			req[fmt.Sprint(r)] = true
		}
		keys := make([]string, 0, len(props))
		for k := range props {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var fields []string
		seen := map[string]bool{}
		for _, k := range keys {
			// A schema may accept both spellings of a key (number_format
			// and numberFormat); scripts write the camelCase one.
			name := hostapi.CamelName(k)
			if seen[name] {
				continue
			}
			seen[name] = true
			q := "?"
			if req[k] {
				q = ""
			}
			sub, _ := props[k].(hostapi.Schema)
			fields = append(fields, fmt.Sprintf("%s%s: %s", name, q, schemaType(sub, indent)))
		}
		return "{ " + strings.Join(fields, "; ") + " }"
	}
	return "any"
}

func toSlice(v any) []any {
	switch t := v.(type) {
	case []any:
		return t
	case []string:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = x
		}
		return out
	}
	return nil
}

var timeType = reflect.TypeFor[time.Time]()

// goType renders a Go result type as the TypeScript type of its camelCase
// JSON projection.
func goType(t reflect.Type, indent string) string {
	if t == nil {
		return "any"
	}
	if t == timeType {
		return "string"
	}
	switch t.Kind() {
	case reflect.Pointer:
		return goType(t.Elem(), indent) + " | null"
	case reflect.Interface:
		return "any"
	case reflect.Bool:
		return "boolean"
	case reflect.String:
		return "string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return "string"
		}
		return "Array<" + goType(t.Elem(), indent) + ">"
	case reflect.Map:
		return "Record<string, " + goType(t.Elem(), indent) + ">"
	case reflect.Struct:
		var fields []string
		for _, f := range hostapi.StructFields(t) {
			ft := t.FieldByIndex(f.Index).Type
			q := ""
			if f.OmitEmpty {
				q = "?"
			}
			fields = append(fields, fmt.Sprintf("%s%s: %s", f.Camel, q, goType(ft, indent)))
		}
		return "{ " + strings.Join(fields, "; ") + " }"
	}
	return "any"
}
