// Package js projects the operation registry into a goja VM: it builds the
// files.* and tools.* objects whose methods are host calls, converts JS
// arguments into validated tool arguments and host results back into plain
// JS values. Every stub comes from a registry declaration; nothing here
// names an operation.
//
// Only closures and plain JS values cross into the VM (never Go objects
// wrapped by reflection), so a script cannot reach host state through them.
package js

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/dop251/goja"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// Plan is the precomputed shape of the sandbox API for one registry: which
// namespaces hold which methods and how each method's JS arguments map to
// tool arguments. Build it once per registry and install it into many VMs.
type Plan struct {
	roots []*nsPlan
}

type nsPlan struct {
	name     string
	methods  []*methodPlan
	children []*nsPlan
}

type methodPlan struct {
	op    *hostapi.Op
	name  string
	slots []slot
}

// slot is one positional JS argument: a single parameter, or a group object.
type slot struct {
	param  *hostapi.Param   // when single
	group  string           // when a group
	fields []*hostapi.Param // the group's parameters
}

// NewPlan derives the sandbox API from reg.
func NewPlan(reg *hostapi.Registry) *Plan {
	p := &Plan{}
	index := map[string]*nsPlan{}
	var ensure func(path string) *nsPlan
	ensure = func(path string) *nsPlan {
		if ns := index[path]; ns != nil {
			return ns
		}
		ns := &nsPlan{name: path[strings.LastIndexByte(path, '.')+1:]}
		index[path] = ns
		if i := strings.LastIndexByte(path, '.'); i >= 0 {
			parent := ensure(path[:i])
			parent.children = append(parent.children, ns)
		} else {
			p.roots = append(p.roots, ns)
		}
		return ns
	}
	for _, op := range reg.Ops() {
		if op.Name == "" {
			continue
		}
		ns := ensure(op.Namespace())
		ns.methods = append(ns.methods, &methodPlan{op: op, name: op.JSName(), slots: Slots(op)})
	}
	return p
}

// Slots groups an op's parameters into its positional JS arguments.
func Slots(op *hostapi.Op) []slot {
	var slots []slot
	groups := map[string]int{}
	for i := range op.Params {
		prm := &op.Params[i]
		if prm.Group == "" {
			slots = append(slots, slot{param: prm})
			continue
		}
		if k, ok := groups[prm.Group]; ok {
			slots[k].fields = append(slots[k].fields, prm)
			continue
		}
		groups[prm.Group] = len(slots)
		slots = append(slots, slot{group: prm.Group, fields: []*hostapi.Param{prm}})
	}
	return slots
}

// SlotInfo is the exported view of a slot (for the TypeScript generator).
type SlotInfo struct {
	Param  *hostapi.Param
	Group  string
	Fields []*hostapi.Param
}

// SlotInfos lists op's positional JS arguments.
func SlotInfos(op *hostapi.Op) []SlotInfo {
	var out []SlotInfo
	for _, s := range Slots(op) {
		out = append(out, SlotInfo{Param: s.param, Group: s.group, Fields: s.fields})
	}
	return out
}

// CallFunc starts a host call and returns the Promise the script awaits.
// It runs on the VM goroutine.
type CallFunc func(op *hostapi.Op, args map[string]any) goja.Value

// Install defines the plan's root namespaces (files, tools) as globals of vm.
func (p *Plan) Install(vm *goja.Runtime, call CallFunc) error {
	for _, ns := range p.roots {
		if err := vm.Set(ns.name, buildNamespace(vm, ns, call)); err != nil {
			return err
		}
	}
	return nil
}

func buildNamespace(vm *goja.Runtime, ns *nsPlan, call CallFunc) *goja.Object {
	obj := vm.NewObject()
	for _, m := range ns.methods {
		m := m
		obj.Set(m.name, func(fc goja.FunctionCall) goja.Value {
			args, err := m.args(vm, fc.Arguments)
			if err != nil {
				// Bad arguments reject the promise like any host error, so
				// that .catch() and try/await see them the same way.
				p, _, reject := vm.NewPromise()
				reject(ThrowError(vm, apierr.Of(err)))
				return vm.ToValue(p)
			}
			return call(m.op, args)
		})
	}
	for _, child := range ns.children {
		obj.Set(child.name, buildNamespace(vm, child, call))
	}
	return obj
}

// args turns positional JS arguments into the op's flat snake_case arguments.
func (m *methodPlan) args(vm *goja.Runtime, in []goja.Value) (map[string]any, error) {
	out := make(map[string]any, len(m.op.Params))
	if len(in) > len(m.slots) {
		return nil, apierr.New(apierr.ValidationFailed, "%s takes at most %d arguments (%s), got %d",
			m.op.Name, len(m.slots), m.signature(), len(in))
	}
	for i, v := range in {
		if goja.IsUndefined(v) || goja.IsNull(v) {
			continue
		}
		s := m.slots[i]
		if s.param != nil {
			out[s.param.Name] = FromJS(v.Export(), s.param.Schema)
			continue
		}
		obj, ok := v.(*goja.Object)
		if !ok || obj.ClassName() == "Array" || obj.ClassName() == "Function" {
			return nil, apierr.New(apierr.ValidationFailed, "%s: argument %d must be an object {%s}", m.op.Name, i+1, fieldList(s.fields))
		}
		for _, k := range obj.Keys() {
			fv := obj.Get(k)
			if goja.IsUndefined(fv) {
				continue
			}
			name := hostapi.SnakeName(k)
			var schema hostapi.Schema
			for _, f := range s.fields {
				if f.Name == name {
					schema = f.Schema
				}
			}
			if schema == nil {
				return nil, apierr.New(apierr.ValidationFailed, "%s: unknown option %q; the options are: %s", m.op.Name, k, fieldList(s.fields))
			}
			out[name] = FromJS(fv.Export(), schema)
		}
	}
	return out, nil
}

func (m *methodPlan) signature() string {
	var parts []string
	for _, s := range m.slots {
		if s.param != nil {
			parts = append(parts, hostapi.CamelName(s.param.Name))
		} else {
			parts = append(parts, "{"+fieldList(s.fields)+"}")
		}
	}
	return strings.Join(parts, ", ")
}

func fieldList(fs []*hostapi.Param) string {
	names := make([]string, len(fs))
	for i, f := range fs {
		names[i] = hostapi.CamelName(f.Name)
	}
	return strings.Join(names, ", ")
}

// FromJS normalises an exported JS value into decoded-JSON shapes, renaming
// camelCase keys of objects whose schema declares snake_case properties
// (so {numberFormat} in JS is {number_format} for the tool). Free-form
// objects (no declared properties) keep their keys: they are data.
func FromJS(v any, schema hostapi.Schema) any {
	switch t := v.(type) {
	case map[string]any:
		props, _ := schema["properties"].(hostapi.Schema)
		addl, _ := schema["additionalProperties"].(hostapi.Schema)
		out := make(map[string]any, len(t))
		for k, x := range t {
			key := k
			var sub hostapi.Schema
			if props != nil {
				if s, ok := props[k].(hostapi.Schema); ok {
					sub = s
				} else if s, ok := props[hostapi.SnakeName(k)].(hostapi.Schema); ok {
					key, sub = hostapi.SnakeName(k), s
				}
			}
			if sub == nil {
				sub = addl
			}
			out[key] = FromJS(x, sub)
		}
		return out
	case []any:
		items, _ := schema["items"].(hostapi.Schema)
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = FromJS(x, items)
		}
		return out
	case time.Time:
		return t.UTC().Format(time.RFC3339Nano)
	case []byte:
		return base64.StdEncoding.EncodeToString(t)
	}
	return v
}

// ToJS converts a host result into plain JS values with camelCase keys.
// Struct fields keep their declaration order; map keys are sorted so that
// output is deterministic.
func ToJS(vm *goja.Runtime, v any) goja.Value {
	switch t := v.(type) {
	case nil:
		return goja.Null()
	case string:
		return vm.ToValue(t)
	case bool:
		return vm.ToValue(t)
	case int:
		return vm.ToValue(t)
	case int64:
		return vm.ToValue(t)
	case float64:
		return vm.ToValue(t)
	case []any:
		items := make([]any, len(t))
		for i, x := range t {
			items[i] = ToJS(vm, x)
		}
		return vm.NewArray(items...)
	case [][]any:
		items := make([]any, len(t))
		for i, x := range t {
			items[i] = ToJS(vm, x)
		}
		return vm.NewArray(items...)
	case map[string]any:
		obj := vm.NewObject()
		for _, k := range sortedKeys(t) {
			obj.Set(k, ToJS(vm, t[k]))
		}
		return obj
	case time.Time:
		return vm.ToValue(t.UTC().Format(time.RFC3339Nano))
	case json.RawMessage:
		var x any
		if len(t) == 0 || json.Unmarshal(t, &x) != nil {
			return goja.Null()
		}
		return ToJS(vm, x)
	}
	return toJSReflect(vm, reflect.ValueOf(v))
}

func toJSReflect(vm *goja.Runtime, rv reflect.Value) goja.Value {
	if !rv.IsValid() {
		return goja.Null()
	}
	switch rv.Kind() {
	case reflect.Pointer, reflect.Interface:
		if rv.IsNil() {
			return goja.Null()
		}
		return ToJS(vm, rv.Elem().Interface())
	case reflect.Struct:
		if rv.Type() == reflect.TypeFor[time.Time]() {
			return ToJS(vm, rv.Interface())
		}
		obj := vm.NewObject()
		for _, f := range hostapi.StructFields(rv.Type()) {
			fv := rv.FieldByIndex(f.Index)
			if f.OmitEmpty && fv.IsZero() {
				continue
			}
			obj.Set(f.Camel, ToJS(vm, fv.Interface()))
		}
		return obj
	case reflect.Slice, reflect.Array:
		if rv.Kind() == reflect.Slice && rv.Type().Elem().Kind() == reflect.Uint8 {
			return vm.ToValue(base64.StdEncoding.EncodeToString(rv.Bytes()))
		}
		items := make([]any, rv.Len())
		for i := range items {
			items[i] = ToJS(vm, rv.Index(i).Interface())
		}
		return vm.NewArray(items...)
	case reflect.Map:
		if rv.IsNil() {
			return goja.Null()
		}
		keys := rv.MapKeys()
		sort.Slice(keys, func(i, j int) bool { return fmt.Sprint(keys[i]) < fmt.Sprint(keys[j]) })
		obj := vm.NewObject()
		for _, k := range keys {
			obj.Set(fmt.Sprint(k.Interface()), ToJS(vm, rv.MapIndex(k).Interface()))
		}
		return obj
	case reflect.Bool:
		return vm.ToValue(rv.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return vm.ToValue(rv.Int())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return vm.ToValue(float64(rv.Uint()))
	case reflect.Float32, reflect.Float64:
		return vm.ToValue(rv.Float())
	case reflect.String:
		return vm.ToValue(rv.String())
	}
	return goja.Undefined()
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// ThrowError builds the JS Error a host error is thrown as: message, and a
// code property with the SPEC 7 code.
func ThrowError(vm *goja.Runtime, e *apierr.Error) *goja.Object {
	obj, _ := vm.New(vm.Get("Error"), vm.ToValue(e.Message))
	obj.Set("code", string(e.Code))
	return obj
}
