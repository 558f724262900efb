package pdf

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/model"
	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/types"

	"github.com/metaclaw/metaclaw/hostapi"
	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// Filling validates every value against its field first, so that one bad
// value changes nothing, then sets the values and regenerates appearances.
// pdfcpu's own form filler is not used: it panics on some forms and draws
// non-ASCII values with a broken font.

func (a *area) fillForm(ctx context.Context, c *hostapi.Call) (any, error) {
	var values map[string]any
	if err := c.Args.Decode("fields", &values); err != nil {
		return nil, err
	}
	res := FillFormResult{Filled: []string{}, NotFound: []string{}}
	err := editPDF(ctx, c, model.FILLFORMFIELDS, func(name string, doc *model.Context) error {
		filled, notFound, err := a.fill(doc.XRefTable, name, values)
		res.Filled, res.NotFound = filled, notFound
		return err
	})
	if err != nil && !errors.Is(err, errNothingToFill) {
		return nil, err
	}
	return res, nil
}

// errNothingToFill aborts the rewrite when no named field exists, so the
// file (and its backup) stay as they are.
var errNothingToFill = errors.New("no field to fill")

// fillPlan is one validated field assignment.
type fillPlan struct {
	f      *field
	text   string   // text, dropdown
	on     bool     // checkbox
	state  string   // radio, checkbox: appearance state to select
	choice []string // listbox
}

// fill validates every value first (so that a bad one changes nothing) and
// then writes the values and their appearance streams.
func (a *area) fill(x *model.XRefTable, name string, values map[string]any) (filled, notFound []string, err error) {
	byName := map[string]*field{}
	var names []string
	for _, f := range formFields(x) {
		if _, dup := byName[f.name]; !dup {
			byName[f.name] = f
			names = append(names, f.name)
		}
	}
	keys := make([]string, 0, len(values))
	for k := range values {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	filled, notFound = []string{}, []string{}
	var plans []fillPlan
	for _, k := range keys {
		f, ok := byName[k]
		if !ok {
			notFound = append(notFound, k)
			continue
		}
		p, err := planFill(x, f, values[k])
		if err != nil {
			return nil, nil, err
		}
		plans = append(plans, p)
		filled = append(filled, k)
	}
	if len(plans) == 0 {
		return filled, notFound, errNothingToFill
	}
	for _, p := range plans {
		if err := a.applyFill(x, p); err != nil {
			return nil, nil, apierr.Wrap(apierr.FileWriteFailed, err, "could not fill field %q of %q: %v", p.f.name, name, err)
		}
	}
	// XFA data would override the AcroForm values in viewers that read it.
	x.Form.Delete("XFA")
	return filled, notFound, nil
}

func fieldValueError(f *field, format string, args ...any) error {
	return apierr.New(apierr.ValidationFailed, "field %q (%s): %s", f.name, f.kind(), fmt.Sprintf(format, args...))
}

func planFill(x *model.XRefTable, f *field, v any) (fillPlan, error) {
	p := fillPlan{f: f}
	switch f.kind() {
	case "text":
		s, ok := scalarText(v)
		if !ok {
			return p, fieldValueError(f, "expects a string, got %s", jsonKind(v))
		}
		p.text = s
	case "checkbox":
		states := radioOptions(x, f)
		switch t := v.(type) {
		case bool:
			p.on = t
		case nil:
		case string:
			switch {
			case t == "" || strings.EqualFold(t, "off") || strings.EqualFold(t, "false"):
			case contains(states, t):
				p.on, p.state = true, t
			case strings.EqualFold(t, "yes") || strings.EqualFold(t, "on") || strings.EqualFold(t, "true"):
				p.on = true
			default:
				return p, fieldValueError(f, "expects true or false, got %q", t)
			}
		default:
			return p, fieldValueError(f, "expects true or false, got %s", jsonKind(v))
		}
	case "radio":
		opts := radioOptions(x, f)
		switch t := v.(type) {
		case nil:
		case string:
			if t != "" && t != "Off" {
				if !contains(opts, t) {
					return p, fieldValueError(f, "%q is not one of its options: %s", t, quoteList(opts))
				}
				p.state = t
			}
		default:
			return p, fieldValueError(f, "expects one of %s, got %s", quoteList(opts), jsonKind(v))
		}
	case "dropdown":
		export, display := choiceOptions(x, f.dict)
		s, ok := scalarText(v)
		if !ok {
			return p, fieldValueError(f, "expects one of %s, got %s", quoteList(export), jsonKind(v))
		}
		if s != "" && f.ff&ffEdit == 0 {
			e, ok := matchOption(s, export, display)
			if !ok {
				return p, fieldValueError(f, "%q is not one of its options: %s", s, quoteList(export))
			}
			s = e
		}
		p.text = s
	case "listbox":
		export, display := choiceOptions(x, f.dict)
		var vals []string
		switch t := v.(type) {
		case nil:
		case []any:
			for _, e := range t {
				s, ok := scalarText(e)
				if !ok {
					return p, fieldValueError(f, "expects strings from %s", quoteList(export))
				}
				vals = append(vals, s)
			}
		default:
			s, ok := scalarText(v)
			if !ok {
				return p, fieldValueError(f, "expects one of %s or a list of them, got %s", quoteList(export), jsonKind(v))
			}
			vals = []string{s}
		}
		if len(vals) > 1 && f.ff&ffMultiSelect == 0 {
			return p, fieldValueError(f, "allows one selection, got %d", len(vals))
		}
		for i, s := range vals {
			e, ok := matchOption(s, export, display)
			if !ok {
				return p, fieldValueError(f, "%q is not one of its options: %s", s, quoteList(export))
			}
			vals[i] = e
		}
		p.choice = vals
	default:
		return p, fieldValueError(f, "this kind of field cannot be filled; only text, checkbox, radio, dropdown and listbox fields can")
	}
	return p, nil
}

func matchOption(s string, export, display []string) (string, bool) {
	for i, e := range export {
		if e == s {
			return export[i], true
		}
	}
	for i, d := range display {
		if d == s {
			return export[i], true
		}
	}
	return "", false
}

func scalarText(v any) (string, bool) {
	switch t := v.(type) {
	case nil:
		return "", true
	case string:
		return t, true
	case bool:
		return strconv.FormatBool(t), true
	case float64:
		return strconv.FormatFloat(t, 'f', -1, 64), true
	case int:
		return strconv.Itoa(t), true
	case int64:
		return strconv.FormatInt(t, 10), true
	}
	return "", false
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case float64, int, int64:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

func quoteList(ss []string) string {
	if len(ss) == 0 {
		return "(none)"
	}
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, ", ")
}

// pdfText encodes s as a PDF text string (UTF-16BE when not ASCII).
func pdfText(s string) types.StringLiteral {
	ascii := true
	for _, r := range s {
		if r >= 0x80 {
			ascii = false
			break
		}
	}
	var e *string
	if ascii {
		e, _ = types.Escape(s)
	} else {
		e, _ = types.EscapedUTF16String(s)
	}
	return types.StringLiteral(*e)
}

func (a *area) applyFill(x *model.XRefTable, p fillPlan) error {
	f := p.f
	switch f.kind() {
	case "text":
		f.dict["V"] = pdfText(p.text)
		return a.textAppearances(x, f, p.text)
	case "dropdown":
		export, display := choiceOptions(x, f.dict)
		shown := p.text
		f.dict.Delete("I")
		if p.text == "" {
			f.dict.Delete("V")
		} else {
			f.dict["V"] = pdfText(p.text)
			for i, e := range export {
				if e == p.text {
					f.dict["I"] = types.Array{types.Integer(i)}
					shown = display[i]
					break
				}
			}
		}
		return a.textAppearances(x, f, shown)
	case "listbox":
		export, display := choiceOptions(x, f.dict)
		var idx types.Array
		selected := map[int]bool{}
		for i, e := range export {
			if contains(p.choice, e) {
				idx = append(idx, types.Integer(i))
				selected[i] = true
			}
		}
		switch len(p.choice) {
		case 0:
			f.dict.Delete("V")
			f.dict.Delete("I")
		case 1:
			f.dict["V"] = pdfText(p.choice[0])
			f.dict["I"] = idx
		default:
			arr := types.Array{}
			for _, s := range p.choice {
				arr = append(arr, pdfText(s))
			}
			f.dict["V"] = arr
			f.dict["I"] = idx
		}
		return a.listAppearances(x, f, display, selected)
	case "checkbox":
		state := "Off"
		if p.on {
			state = p.state
			if state == "" {
				if states := radioOptions(x, f); len(states) > 0 {
					state = states[0]
				} else {
					state = "Yes"
				}
			}
		}
		return setButtonState(x, f, state, "4")
	case "radio":
		state := p.state
		if state == "" {
			state = "Off"
		} else if export, _ := choiceOptions(x, f.dict); len(export) > 0 {
			// With /Opt, widgets may name their states by index.
			if !widgetHasState(x, f, state) {
				for i, e := range export {
					if e == state && widgetHasState(x, f, strconv.Itoa(i)) {
						state = strconv.Itoa(i)
						break
					}
				}
			}
		}
		return setButtonState(x, f, state, "l")
	}
	return nil
}

func widgetHasState(x *model.XRefTable, f *field, state string) bool {
	for _, w := range f.widgets {
		if contains(onStates(x, w), state) {
			return true
		}
	}
	return false
}

// setButtonState selects state on a checkbox or radio group: V on the
// field and the matching appearance state (AS) on every widget. Widgets
// without appearances get a ZapfDingbats glyph (✔ or ●) so the choice
// shows.
func setButtonState(x *model.XRefTable, f *field, state, glyph string) error {
	f.dict["V"] = types.Name(types.EncodeName(state))
	for _, w := range f.widgets {
		states := onStates(x, w)
		if len(states) == 0 && state != "Off" {
			if err := buttonAppearance(x, w, state, glyph); err != nil {
				return err
			}
			states = []string{state}
		}
		if contains(states, state) {
			w["AS"] = types.Name(types.EncodeName(state))
		} else {
			w["AS"] = types.Name("Off")
		}
	}
	return nil
}
