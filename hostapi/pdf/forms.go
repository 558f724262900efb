package pdf

import (
	"context"
	"sort"
	"strconv"

	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/model"
	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/types"

	"github.com/metaclaw/metaclaw/hostapi"
)

// Field flags (PDF 32000-1, 12.7.3 and 12.7.4).
const (
	ffReadOnly    = 1 << 0
	ffMultiline   = 1 << 12
	ffRadio       = 1 << 15
	ffPushbutton  = 1 << 16
	ffCombo       = 1 << 17
	ffEdit        = 1 << 18
	ffMultiSelect = 1 << 21
	ffComb        = 1 << 24
)

// field is one terminal AcroForm field with the attributes it inherits.
type field struct {
	name    string
	dict    types.Dict
	ft      string
	ff      int
	da      string
	q       int
	widgets []types.Dict
}

func (f *field) kind() string {
	switch f.ft {
	case "Tx":
		return "text"
	case "Btn":
		switch {
		case f.ff&ffPushbutton != 0:
			return "button"
		case f.ff&ffRadio != 0:
			return "radio"
		}
		return "checkbox"
	case "Ch":
		if f.ff&ffCombo != 0 {
			return "dropdown"
		}
		return "listbox"
	case "Sig":
		return "signature"
	}
	return "unknown"
}

// maxFieldDepth bounds the field tree walk; real forms nest a few levels.
const maxFieldDepth = 32

// formFields lists the terminal fields of doc's AcroForm in document order.
func formFields(x *model.XRefTable) []*field {
	if x.Form == nil {
		return nil
	}
	o, ok := x.Form.Find("Fields")
	if !ok {
		return nil
	}
	arr, err := x.DereferenceArray(o)
	if err != nil {
		return nil
	}
	var out []*field
	seen := map[int]bool{}
	var visit func(o types.Object, prefix string, inh field, depth int)
	visit = func(o types.Object, prefix string, inh field, depth int) {
		if depth > maxFieldDepth {
			return
		}
		if ir, ok := o.(types.IndirectRef); ok {
			if seen[ir.ObjectNumber.Value()] {
				return
			}
			seen[ir.ObjectNumber.Value()] = true
		}
		d, err := x.DereferenceDict(o)
		if err != nil || d == nil {
			return
		}
		name := prefix
		if t, err := dictText(x, d, "T"); err == nil && t != "" {
			if name != "" {
				name += "."
			}
			name += t
		}
		if n := d.NameEntry("FT"); n != nil {
			inh.ft = *n
		}
		if v, ok := dictInt(x, d, "Ff"); ok {
			inh.ff = v
		}
		if s, err := dictText(x, d, "DA"); err == nil && s != "" {
			inh.da = s
		}
		if v, ok := dictInt(x, d, "Q"); ok {
			inh.q = v
		}
		var kids types.Array
		if ko, ok := d.Find("Kids"); ok {
			kids, _ = x.DereferenceArray(ko)
		}
		var fieldKids, widgetKids []types.Dict
		var fieldKidObjs []types.Object
		for _, k := range kids {
			kd, err := x.DereferenceDict(k)
			if err != nil || kd == nil {
				continue
			}
			if _, hasT := kd.Find("T"); hasT || (kd.Subtype() == nil && kd.ArrayEntry("Kids") != nil) {
				fieldKids = append(fieldKids, kd)
				fieldKidObjs = append(fieldKidObjs, k)
				continue
			}
			widgetKids = append(widgetKids, kd)
		}
		if len(fieldKids) > 0 {
			for _, k := range fieldKidObjs {
				visit(k, name, inh, depth+1)
			}
			return
		}
		f := inh
		f.name = name
		f.dict = d
		f.widgets = widgetKids
		if len(f.widgets) == 0 {
			f.widgets = []types.Dict{d} // field and widget merged in one dict
		}
		out = append(out, &f)
	}
	for _, o := range arr {
		visit(o, "", field{}, 0)
	}
	return out
}

func hasFormFields(doc *model.Context) bool { return len(formFields(doc.XRefTable)) > 0 }

func dictText(x *model.XRefTable, d types.Dict, key string) (string, error) {
	o, ok := d.Find(key)
	if !ok || o == nil {
		return "", nil
	}
	return x.DereferenceText(o)
}

func dictInt(x *model.XRefTable, d types.Dict, key string) (int, bool) {
	o, ok := d.Find(key)
	if !ok || o == nil {
		return 0, false
	}
	i, err := x.DereferenceInteger(o)
	if err != nil || i == nil {
		return 0, false
	}
	return i.Value(), true
}

// inheritedValue finds V on the field or its ancestors.
func inheritedValue(x *model.XRefTable, d types.Dict) types.Object {
	for i := 0; d != nil && i < maxFieldDepth; i++ {
		if o, ok := d.Find("V"); ok && o != nil {
			v, err := x.Dereference(o)
			if err == nil {
				return v
			}
			return nil
		}
		p, ok := d.Find("Parent")
		if !ok {
			return nil
		}
		d, _ = x.DereferenceDict(p)
	}
	return nil
}

func objText(o types.Object) (string, bool) {
	switch v := o.(type) {
	case types.StringLiteral, types.HexLiteral:
		s, err := model.Text(v)
		return s, err == nil
	case types.Name:
		s, err := types.DecodeName(string(v))
		return s, err == nil
	}
	return "", false
}

// choiceOptions are a choice field's options: export values (what V holds)
// and the texts shown.
func choiceOptions(x *model.XRefTable, d types.Dict) (export, display []string) {
	for i := 0; d != nil && i < maxFieldDepth; i++ {
		if o, ok := d.Find("Opt"); ok {
			arr, err := x.DereferenceArray(o)
			if err != nil {
				return nil, nil
			}
			for _, e := range arr {
				e, _ = x.Dereference(e)
				if pair, ok := e.(types.Array); ok && len(pair) >= 2 {
					a, _ := x.Dereference(pair[0])
					b, _ := x.Dereference(pair[1])
					es, _ := objText(a)
					ds, _ := objText(b)
					export, display = append(export, es), append(display, ds)
					continue
				}
				s, _ := objText(e)
				export, display = append(export, s), append(display, s)
			}
			return export, display
		}
		p, ok := d.Find("Parent")
		if !ok {
			return nil, nil
		}
		d, _ = x.DereferenceDict(p)
	}
	return nil, nil
}

// onStates lists the appearance states of a button widget other than Off.
func onStates(x *model.XRefTable, w types.Dict) []string {
	ap, err := derefDict(x, w, "AP")
	if err != nil || ap == nil {
		return nil
	}
	var out []string
	for _, key := range []string{"N", "D"} {
		n, err := derefDict(x, ap, key)
		if err != nil || n == nil {
			continue
		}
		for k := range n {
			name, err := types.DecodeName(k)
			if err == nil && name != "Off" && !contains(out, name) {
				out = append(out, name)
			}
		}
		if len(out) > 0 {
			sort.Strings(out)
			return out
		}
	}
	return out
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func derefDict(x *model.XRefTable, d types.Dict, key string) (types.Dict, error) {
	o, ok := d.Find(key)
	if !ok || o == nil {
		return nil, nil
	}
	return x.DereferenceDict(o)
}

// radioOptions are the values a radio group (or a checkbox) can take: its
// /Opt export values when present, otherwise its widgets' on-states.
func radioOptions(x *model.XRefTable, f *field) []string {
	if export, _ := choiceOptions(x, f.dict); len(export) > 0 {
		var out []string
		for _, e := range export {
			if !contains(out, e) {
				out = append(out, e)
			}
		}
		return out
	}
	var out []string
	for _, w := range f.widgets {
		for _, s := range onStates(x, w) {
			if !contains(out, s) {
				out = append(out, s)
			}
		}
	}
	return out
}

// describeField reads a field's current value the way a user thinks of it.
func describeField(x *model.XRefTable, f *field) FormField {
	kind := f.kind()
	ff := FormField{Name: f.name, Type: kind}
	v := inheritedValue(x, f.dict)
	switch kind {
	case "text":
		s, _ := objText(v)
		ff.Value = s
	case "checkbox":
		s, ok := objText(v)
		ff.Value = ok && s != "" && s != "Off"
	case "radio":
		ff.Options = radioOptions(x, f)
		if s, ok := objText(v); ok && s != "" && s != "Off" {
			ff.Value = s
			// With /Opt the states are indices into it.
			if export, _ := choiceOptions(x, f.dict); len(export) > 0 {
				if i, err := strconv.Atoi(s); err == nil && i >= 0 && i < len(export) {
					ff.Value = export[i]
				}
			}
		}
	case "dropdown", "listbox":
		ff.Options, _ = choiceOptions(x, f.dict)
		var vals []string
		switch t := v.(type) {
		case types.Array:
			for _, e := range t {
				e, _ = x.Dereference(e)
				if s, ok := objText(e); ok {
					vals = append(vals, s)
				}
			}
		default:
			if s, ok := objText(v); ok {
				vals = append(vals, s)
			}
		}
		if kind == "listbox" {
			if vals == nil {
				vals = []string{}
			}
			ff.Value = vals
		} else if len(vals) > 0 {
			ff.Value = vals[0]
		}
	case "signature":
		ff.Value = v != nil
	}
	return ff
}

func (a *area) getFormFields(ctx context.Context, c *hostapi.Call) (any, error) {
	f, data, err := readPDF(ctx, c, c.Args.String("id"))
	if err != nil {
		return nil, err
	}
	return guard(ctx, f.Name, func() (FormFieldsResult, error) {
		doc, err := readDoc(f.Name, data, model.LISTFORMFIELDS)
		if err != nil {
			return FormFieldsResult{}, err
		}
		res := FormFieldsResult{Fields: []FormField{}}
		for _, fl := range formFields(doc.XRefTable) {
			res.Fields = append(res.Fields, describeField(doc.XRefTable, fl))
		}
		return res, nil
	})
}
