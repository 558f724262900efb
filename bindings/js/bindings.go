// Package js projects the operation registry into the JavaScript sandbox:
// the Spec a VM's files.* and tools.* stubs are built from (bindings/js/stubs
// builds them, in the host or in a worker process), and the camelCase JSON
// a host result travels back in. Every stub comes from a registry
// declaration; nothing here names an operation.
package js

import (
	"github.com/metaclaw/metaclaw/bindings/js/stubs"
	"github.com/metaclaw/metaclaw/hostapi"
)

// Spec derives the sandbox API from reg: one method per op with a JS name,
// in registration order. ops[i] is the op behind Spec.Methods[i].
func Spec(reg *hostapi.Registry) (spec *stubs.Spec, ops []*hostapi.Op) {
	spec = &stubs.Spec{}
	for _, op := range reg.Ops() {
		if op.Name == "" {
			continue
		}
		m := stubs.Method{Path: op.Name}
		for _, s := range Slots(op) {
			if s.param != nil {
				f := field(s.param)
				m.Slots = append(m.Slots, stubs.Slot{Param: &f})
				continue
			}
			slot := stubs.Slot{Group: s.group}
			for _, p := range s.fields {
				slot.Fields = append(slot.Fields, field(p))
			}
			m.Slots = append(m.Slots, slot)
		}
		spec.Methods = append(spec.Methods, m)
		ops = append(ops, op)
	}
	return spec, ops
}

func field(p *hostapi.Param) stubs.Field {
	return stubs.Field{Name: p.Name, Key: hostapi.CamelName(p.Name), Shape: stubs.ShapeOf(p.Schema)}
}

// slot is one positional JS argument: a single parameter, or a group object.
type slot struct {
	param  *hostapi.Param   // when single
	group  string           // when a group
	fields []*hostapi.Param // the group's parameters
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
