package stubs

import (
	"strings"

	"github.com/dop251/goja"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// Plan is a Spec prepared for installing into many VMs.
type Plan struct {
	spec  *Spec
	roots []*nsPlan
}

type nsPlan struct {
	name     string
	keys     []string // methods, then child namespaces, in declaration order
	known    map[string]bool
	methods  map[string]int
	children map[string]*nsPlan
}

// NewPlan prepares spec.
func NewPlan(spec *Spec) *Plan {
	p := &Plan{spec: spec}
	index := map[string]*nsPlan{}
	var ensure func(path string) *nsPlan
	ensure = func(path string) *nsPlan {
		if ns := index[path]; ns != nil {
			return ns
		}
		ns := &nsPlan{name: path[strings.LastIndexByte(path, '.')+1:], methods: map[string]int{}, children: map[string]*nsPlan{}}
		index[path] = ns
		if i := strings.LastIndexByte(path, '.'); i >= 0 {
			parent := ensure(path[:i])
			parent.children[ns.name] = ns
			parent.keys = append(parent.keys, ns.name)
		} else {
			p.roots = append(p.roots, ns)
		}
		return ns
	}
	for i, m := range spec.Methods {
		dot := strings.LastIndexByte(m.Path, '.')
		if dot <= 0 {
			continue
		}
		ns := ensure(m.Path[:dot])
		name := m.Path[dot+1:]
		if _, dup := ns.methods[name]; !dup {
			ns.keys = append(ns.keys, name)
		}
		ns.methods[name] = i
	}
	for _, ns := range index {
		ns.known = nameSet(ns.keys)
	}
	return p
}

// Spec is the spec the plan was made from.
func (p *Plan) Spec() *Spec { return p.spec }

// CallFunc starts a host call of method (an index into Spec.Methods) with
// its arguments as a JSON object, and returns the Promise the script
// awaits. It runs on the VM goroutine.
type CallFunc func(method int, args []byte) goja.Value

// Options tune an installed API.
type Options struct {
	// MaxArgBytes bounds one host call's arguments as JSON (TOO_LARGE beyond).
	MaxArgBytes int
	// Stopped is polled while long arguments are copied.
	Stopped func() bool
}

// Sandbox is the API installed in one VM.
type Sandbox struct {
	vm        *goja.Runtime
	plan      *Plan
	call      CallFunc
	opts      Options
	errorCtor goja.Value
	enc       *Encoder
}

// Install defines the plan's root namespaces (files, tools) as globals of
// vm. Namespaces are built lazily: a method's function object is made the
// first time a script reads it, so a fresh VM costs the same whatever the
// size of the API.
func (p *Plan) Install(vm *goja.Runtime, call CallFunc, opts Options) (*Sandbox, error) {
	s := &Sandbox{vm: vm, plan: p, call: call, opts: opts, errorCtor: vm.Get("Error")}
	for _, ns := range p.roots {
		if err := vm.Set(ns.name, s.namespace(ns)); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// SetMaxArgBytes bounds each host call's arguments as JSON.
func (s *Sandbox) SetMaxArgBytes(n int) { s.opts.MaxArgBytes = n }

// Error builds the JS Error a host error is thrown as: its message, and a
// code property with the SPEC 7 code. It uses the Error constructor as it
// was before the script ran.
func (s *Sandbox) Error(e *apierr.Error) *goja.Object {
	return NewError(s.vm, s.errorCtor, e)
}

// NewError builds an Error through ctor (the intrinsic Error captured
// before a script ran) with a code property.
func NewError(vm *goja.Runtime, ctor goja.Value, e *apierr.Error) *goja.Object {
	var obj *goja.Object
	if c, ok := ctor.(*goja.Object); ok {
		obj, _ = vm.New(c, vm.ToValue(e.Message))
	}
	if obj == nil {
		obj = vm.NewObject()
		obj.Set("message", e.Message)
	}
	obj.Set("code", string(e.Code))
	return obj
}

// rejected returns a promise rejected with err.
func (s *Sandbox) rejected(err *apierr.Error) goja.Value {
	p, _, reject := s.vm.NewPromise()
	reject(s.Error(err))
	return s.vm.ToValue(p)
}

// LazyObject is a plain-looking JS object whose properties are made the
// first time they are read (a goja DynamicObject with Object.prototype).
// The script may overwrite, add and delete properties as on any object.
type LazyObject struct {
	names   []string
	build   func(name string) goja.Value
	made    map[string]goja.Value
	deleted map[string]bool
	extra   []string // keys the script added, in order
	known   map[string]bool
}

// NewLazyObject returns a JS object with the given property names whose
// values make builds on first read.
func NewLazyObject(vm *goja.Runtime, names []string, build func(name string) goja.Value) *goja.Object {
	return vm.NewDynamicObject(&LazyObject{names: names, build: build, known: nameSet(names)})
}

func nameSet(names []string) map[string]bool {
	known := make(map[string]bool, len(names))
	for _, n := range names {
		known[n] = true
	}
	return known
}

// Get implements goja.DynamicObject.
func (n *LazyObject) Get(key string) goja.Value {
	if v, ok := n.made[key]; ok {
		return v
	}
	if !n.planned(key) {
		return nil
	}
	v := n.build(key)
	if n.made == nil {
		n.made = map[string]goja.Value{}
	}
	n.made[key] = v
	return v
}

// Set implements goja.DynamicObject.
func (n *LazyObject) Set(key string, val goja.Value) bool {
	if n.made == nil {
		n.made = map[string]goja.Value{}
	}
	if _, had := n.made[key]; !had && !n.planned(key) {
		n.extra = append(n.extra, key)
	}
	n.made[key] = val
	delete(n.deleted, key)
	return true
}

func (n *LazyObject) planned(key string) bool { return n.known[key] && !n.deleted[key] }

// Has implements goja.DynamicObject.
func (n *LazyObject) Has(key string) bool {
	if _, ok := n.made[key]; ok {
		return true
	}
	return n.planned(key)
}

// Delete implements goja.DynamicObject.
func (n *LazyObject) Delete(key string) bool {
	delete(n.made, key)
	if n.known[key] {
		if n.deleted == nil {
			n.deleted = map[string]bool{}
		}
		n.deleted[key] = true
	}
	for i, k := range n.extra {
		if k == key {
			n.extra = append(n.extra[:i], n.extra[i+1:]...)
			break
		}
	}
	return true
}

// Keys implements goja.DynamicObject.
func (n *LazyObject) Keys() []string {
	keys := make([]string, 0, len(n.names)+len(n.extra))
	for _, k := range n.names {
		if !n.deleted[k] {
			keys = append(keys, k)
		}
	}
	return append(keys, n.extra...)
}

// namespace builds the lazy object of a namespace: its methods and child
// namespaces.
func (s *Sandbox) namespace(ns *nsPlan) *goja.Object {
	return s.vm.NewDynamicObject(&LazyObject{names: ns.keys, known: ns.known, build: func(key string) goja.Value {
		if idx, ok := ns.methods[key]; ok {
			return s.stub(idx)
		}
		return s.namespace(ns.children[key])
	}})
}

// stub makes the function object of method idx.
func (s *Sandbox) stub(idx int) goja.Value {
	m := &s.plan.spec.Methods[idx]
	return NamedFunc(s.vm, m.Path[strings.LastIndexByte(m.Path, '.')+1:], func(fc goja.FunctionCall) goja.Value {
		args, err := s.args(m, fc.Arguments)
		if err != nil {
			// Bad arguments reject the promise like any host error, so
			// that .catch() and try/await see them the same way.
			return s.rejected(err)
		}
		return s.call(idx, args)
	})
}

// NamedFunc makes a native function whose name (in stack traces and
// f.name) is name rather than the Go symbol goja would give it.
func NamedFunc(vm *goja.Runtime, name string, f func(goja.FunctionCall) goja.Value) goja.Value {
	fn := vm.ToValue(f).(*goja.Object)
	fn.DefineDataProperty("name", vm.ToValue(name), goja.FLAG_FALSE, goja.FLAG_TRUE, goja.FLAG_FALSE)
	return fn
}

// args turns positional JS arguments into the method's JSON object of
// snake_case arguments.
func (s *Sandbox) args(m *Method, in []goja.Value) ([]byte, *apierr.Error) {
	if len(in) > len(m.Slots) {
		// Trailing undefined arguments are harmless.
		n := len(in)
		for n > len(m.Slots) && goja.IsUndefined(in[n-1]) {
			n--
		}
		if n > len(m.Slots) {
			return nil, apierr.New(apierr.ValidationFailed, "%s takes at most %d arguments (%s), got %d",
				m.Path, len(m.Slots), signature(m), len(in))
		}
		in = in[:n]
	}
	if s.enc == nil {
		s.enc = NewEncoder(s.vm, ForArgs, 0)
		s.enc.SetStop(s.opts.Stopped)
		s.enc.SetTooBig(func(limit int) *apierr.Error {
			return apierr.New(apierr.TooLarge, "%s: the arguments are more than %d MB as JSON; pass less per call (write big content in parts, e.g. files.appendBytes)", m.Path, limit>>20)
		})
	}
	e := s.enc
	e.Reset(s.opts.MaxArgBytes)
	e.WriteRaw("{")
	first := true
	member := func(name string, v goja.Value, shape *Shape) *apierr.Error {
		mark := e.Len()
		if !first {
			e.WriteRaw(",")
		}
		e.WriteKey(name)
		wrote, err := e.Encode(v, name, shape)
		if err != nil {
			return prefixed(m.Path, err)
		}
		if !wrote {
			e.buf = e.buf[:mark]
			return nil
		}
		first = false
		return nil
	}
	for i, v := range in {
		if goja.IsUndefined(v) || goja.IsNull(v) {
			continue
		}
		slot := &m.Slots[i]
		if slot.Param != nil {
			if err := member(slot.Param.Name, v, slot.Param.Shape); err != nil {
				return nil, err
			}
			continue
		}
		obj, ok := v.(*goja.Object)
		if _, isFn := goja.AssertFunction(v); !ok || isFn || obj.ClassName() == "Array" {
			return nil, apierr.New(apierr.ValidationFailed, "%s: argument %d must be an object {%s}", m.Path, i+1, fieldList(slot.Fields))
		}
		var keys []string
		if ex := s.vm.Try(func() { keys = obj.Keys() }); ex != nil {
			return nil, apierr.New(apierr.ValidationFailed, "%s: reading argument %d threw %s", m.Path, i+1, oneLine(ex.Error()))
		}
		for _, k := range keys {
			var fv goja.Value
			if ex := s.vm.Try(func() { fv = obj.Get(k) }); ex != nil {
				return nil, apierr.New(apierr.ValidationFailed, "%s: reading option %q threw %s", m.Path, k, oneLine(ex.Error()))
			}
			if fv == nil || goja.IsUndefined(fv) {
				continue
			}
			name := SnakeName(k)
			var field *Field
			for j := range slot.Fields {
				if slot.Fields[j].Name == name {
					field = &slot.Fields[j]
					break
				}
			}
			if field == nil {
				return nil, apierr.New(apierr.ValidationFailed, "%s: unknown option %q; the options are: %s", m.Path, k, fieldList(slot.Fields))
			}
			if err := member(field.Name, fv, field.Shape); err != nil {
				return nil, err
			}
		}
	}
	e.WriteRaw("}")
	return e.Take(), nil
}

func prefixed(path string, err *apierr.Error) *apierr.Error {
	if err.Code == apierr.Timeout {
		return err
	}
	return &apierr.Error{Code: err.Code, Message: path + ": " + err.Message}
}

func signature(m *Method) string {
	var parts []string
	for _, s := range m.Slots {
		if s.Param != nil {
			parts = append(parts, keyOf(*s.Param))
		} else {
			parts = append(parts, "{"+fieldList(s.Fields)+"}")
		}
	}
	return strings.Join(parts, ", ")
}

func keyOf(f Field) string {
	if f.Key != "" {
		return f.Key
	}
	return f.Name
}

func fieldList(fs []Field) string {
	names := make([]string, len(fs))
	for i, f := range fs {
		names[i] = keyOf(f)
	}
	return strings.Join(names, ", ")
}
