// Package ts derives the TypeScript declarations of the sandbox API from the
// registry: one method per operation, argument types from the parameters'
// JSON Schemas, result types from the handlers' Go result types.
package ts

import (
	"context"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	jsbind "github.com/metaclaw/metaclaw/bindings/js"
	"github.com/metaclaw/metaclaw/hostapi"
)

// Declarations renders a .d.ts for reg's sandbox API (the compiled-in
// operations; WorkspaceDeclarations adds a workspace's saved tools).
func Declarations(reg *hostapi.Registry) string {
	return render(reg, nil)
}

// WorkspaceDeclarations renders the declarations as env's workspace sees
// them: tools.call gets one typed overload per saved and built-in script
// tool, with its input schema as the argument type.
func WorkspaceDeclarations(ctx context.Context, reg *hostapi.Registry, env *hostapi.Env) (string, error) {
	var dyn []hostapi.ToolInfo
	if reg.Dynamic != nil && env != nil {
		list, err := reg.Dynamic.ListTools(ctx, env)
		if err != nil {
			return "", err
		}
		dyn = list
		sort.Slice(dyn, func(i, j int) bool { return dyn[i].Name < dyn[j].Name })
	}
	return render(reg, dyn), nil
}

// preamble declares the globals that are not operations. console is an
// interface plus a var so that it merges with lib.dom's declaration of
// the same (TypeScript's default libraries include the DOM): a const
// would be a redeclaration (TS2451).
const preamble = `// metaclaw sandbox API — generated from the operation registry.
// A script is the body of an async function: top-level await and return
// work. To type-check one with tsc, wrap it the way CheckableScript does:
//   async function __script(): Promise<unknown> { ...script... }

/** A host error: every files.* / tools.* failure is thrown as one. */
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
interface Console {
  log(...data: any[]): void;
  info(...data: any[]): void;
  warn(...data: any[]): void;
  error(...data: any[]): void;
  debug(...data: any[]): void;
}
declare var console: Console;

`

func render(reg *hostapi.Registry, dyn []hostapi.ToolInfo) string {
	var b strings.Builder
	b.WriteString(preamble)
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
			if op.Name == "tools.call" {
				for _, t := range dyn {
					fmt.Fprintf(&b, "%s%s\n", indent, docComment(t.Description))
					fmt.Fprintf(&b, "%scall(name: %q, args%s: %s): Promise<any>;\n", indent, t.Name, optionalArgs(t.InputSchema), literalType(objectSchema(t.InputSchema), indent))
				}
			}
			fmt.Fprintf(&b, "%s%s\n", indent, docComment(op.Doc))
			fmt.Fprintf(&b, "%s%s;\n", indent, Method(op))
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

// Method is op's TypeScript method signature, e.g.
// `readText(id: string, options?: { startLine?: number; endLine?: number }): Promise<{ content: string; totalLines: number }>`.
func Method(op *hostapi.Op) string {
	return fmt.Sprintf("%s(%s): Promise<%s>", op.JSName(), params(op), goType(reflect.TypeOf(op.Result), "  "))
}

func docComment(doc string) string {
	return "/** " + strings.ReplaceAll(doc, "*/", "* /") + " */"
}

// objectSchema is a saved tool's input schema as an object schema (one
// may declare none).
func objectSchema(s hostapi.Schema) hostapi.Schema {
	if s == nil {
		return hostapi.Schema{"type": "object"}
	}
	if _, ok := s["type"]; !ok {
		c := hostapi.Schema{}
		for k, v := range s {
			c[k] = v
		}
		c["type"] = "object"
		return c
	}
	return s
}

// optionalArgs is "?" when a tool's input schema requires nothing.
func optionalArgs(s hostapi.Schema) string {
	if len(toSlice(s["required"])) == 0 {
		return "?"
	}
	return ""
}

// CheckableScript wraps a script (the body of an async function, with
// top-level await and return) into TypeScript that tsc can check beside
// the declarations. The wrapper opens on the script's first line and
// closes after its last, so line numbers in tsc's messages are the
// script's own.
func CheckableScript(code string) string {
	return "async function __metaclawScript(): Promise<unknown> { " + code + "\n}\n"
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

// schemaType renders a parameter's JSON Schema as a TypeScript type whose
// object keys are camelCase, as scripts write them.
func schemaType(s hostapi.Schema, indent string) string { return tsType(s, indent, true) }

// literalType renders a JSON Schema with its keys as they are (a saved
// tool gets its arguments exactly as given).
func literalType(s hostapi.Schema, indent string) string { return tsType(s, indent, false) }

func tsType(s hostapi.Schema, indent string, camel bool) string {
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
					ts = append(ts, tsType(m, indent, camel))
				}
			}
			return strings.Join(ts, " | ")
		}
	}
	switch t := s["type"].(type) {
	case string:
		return typeName(t, s, indent, camel)
	case []string:
		var ts []string
		for _, x := range t {
			ts = append(ts, typeName(x, s, indent, camel))
		}
		return strings.Join(ts, " | ")
	case []any:
		var ts []string
		for _, x := range t {
			ts = append(ts, typeName(fmt.Sprint(x), s, indent, camel))
		}
		return strings.Join(ts, " | ")
	}
	return "any"
}

func typeName(t string, s hostapi.Schema, indent string, camel bool) string {
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
		return "Array<" + tsType(item, indent, camel) + ">"
	case "object":
		props, _ := s["properties"].(hostapi.Schema)
		if len(props) == 0 {
			if ap, ok := s["additionalProperties"].(hostapi.Schema); ok {
				return "Record<string, " + tsType(ap, indent, camel) + ">"
			}
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
			name := k
			if camel {
				name = hostapi.CamelName(k)
			}
			if seen[name] {
				continue
			}
			seen[name] = true
			q := "?"
			if req[k] {
				q = ""
			}
			sub, _ := props[k].(hostapi.Schema)
			fields = append(fields, fmt.Sprintf("%s%s: %s", propertyName(name), q, tsType(sub, indent, camel)))
		}
		return "{ " + strings.Join(fields, "; ") + " }"
	}
	return "any"
}

var identifier = regexp.MustCompile(`^[A-Za-z_$][A-Za-z0-9_$]*$`)

// propertyName quotes a key that is not an identifier.
func propertyName(k string) string {
	if identifier.MatchString(k) {
		return k
	}
	return strconv.Quote(k)
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
			fields = append(fields, fmt.Sprintf("%s%s: %s", propertyName(f.Camel), q, goType(ft, indent)))
		}
		return "{ " + strings.Join(fields, "; ") + " }"
	}
	return "any"
}
