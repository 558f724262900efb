package runfeed

import (
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Host calls: each operation a script calls (files.readText,
// files.spreadsheet.writeRange, …) streams inside the run's message as its
// own tool_use/tool_result pair, marked host_call, so that the page shows
// what a script did step by step. A run lists at most MaxHostCalls of
// them; the rest are counted. Arguments and results are summarised (short
// strings, the first items of lists, sizes of bytes), never whole file
// contents.
const (
	// MaxHostCalls bounds the host calls one run streams.
	MaxHostCalls = 100
	// summary budgets: a string's bytes, a list's items, an object's keys,
	// the nesting shown, and the whole summary's JSON.
	sumString = 160
	sumItems  = 5
	sumKeys   = 16
	sumDepth  = 4
	sumBytes  = 1024
)

// limits are one pass's budgets; a summary over sumBytes is made again
// with the tighter ones.
type limits struct{ str, items, keys int }

var passes = []limits{{sumString, sumItems, sumKeys}, {48, 2, 8}, {16, 1, 4}}

// HostCall is one finished operation of a run.
type HostCall struct {
	// Name is the operation as the script called it (files.readText), or
	// its meta-tool name when it has no script name.
	Name       string
	Args       any
	Result     any
	Error      *ErrorInfo
	DurationMs float64
}

// HostCall streams one finished host call of the run as a tool_use block
// and its tool_result; beyond MaxHostCalls it is only counted. The call's
// arguments and result are summarised here, not by the caller, so that
// nothing is summarised for calls past the cap.
func (h *Handle) HostCall(c HostCall) {
	f := h.f
	f.mu.Lock()
	r := h.run
	if r.Status != "running" {
		f.mu.Unlock()
		return
	}
	r.HostCalls++
	if r.HostCalls > MaxHostCalls {
		r.MoreHostCalls++
		f.mu.Unlock()
		return
	}
	f.mu.Unlock()
	// Summarise outside the lock: results can be big.
	input, result := Summarize(c.Args), Summarize(c.Result)
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.Status != "running" {
		return
	}
	w := f.workspace(h.ws)
	id := f.newID("toolu")
	f.block(w, r, map[string]any{"type": "tool_use", "id": id, "name": c.Name, "input": input, "host_call": true, "parent_id": r.toolUseID})
	res := map[string]any{"type": "tool_result", "tool_use_id": id, "name": c.Name, "host_call": true, "duration_ms": c.DurationMs}
	if c.Error != nil {
		res["status"], res["error"] = "error", c.Error
	} else {
		res["status"], res["content"] = "success", result
	}
	f.block(w, r, res)
}

// Summarize describes v in at most about 1 KB of JSON: strings longer than
// 160 bytes are cut (with their size), lists show their first items and
// their length, objects their first keys, bytes only their size. It walks
// Go values (a handler's result structs) by their JSON names without
// marshalling them whole, so a 100,000-row result costs what its first
// rows cost.
func Summarize(v any) any {
	if v == nil {
		return nil
	}
	var s any
	for _, l := range passes {
		s = l.summarize(reflect.ValueOf(v), 0)
		b, err := json.Marshal(s)
		if err != nil {
			return "(unprintable)"
		}
		if len(b) <= sumBytes {
			return s
		}
	}
	return clipValue(s, sumBytes)
}

var (
	timeType     = reflect.TypeFor[time.Time]()
	rawType      = reflect.TypeFor[json.RawMessage]()
	textMarshal  = reflect.TypeFor[encoding.TextMarshaler]()
	errorType    = reflect.TypeFor[error]()
	bytesElemKnd = reflect.Uint8
)

func (l limits) summarize(v reflect.Value, depth int) any {
	for v.Kind() == reflect.Interface || v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return nil
		}
		if v.Type().Implements(errorType) {
			return v.Interface().(error).Error()
		}
		v = v.Elem()
	}
	if !v.IsValid() {
		return nil
	}
	switch v.Type() {
	case timeType:
		return v.Interface().(time.Time).UTC().Format(time.RFC3339Nano)
	case rawType:
		raw := v.Bytes()
		if len(raw) <= sumString {
			var x any
			if json.Unmarshal(raw, &x) == nil {
				return x
			}
		}
		return "(" + strconv.Itoa(len(raw)) + " bytes of JSON)"
	}
	switch v.Kind() {
	case reflect.Bool:
		return v.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return v.Int()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return v.Uint()
	case reflect.Float32, reflect.Float64:
		return v.Float()
	case reflect.String:
		return l.cut(v.String())
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == bytesElemKnd {
			return "(" + strconv.Itoa(v.Len()) + " bytes)"
		}
		if depth >= sumDepth {
			return "(" + strconv.Itoa(v.Len()) + " items)"
		}
		n := min(v.Len(), l.items)
		out := make([]any, 0, n+1)
		for i := range n {
			out = append(out, l.summarize(v.Index(i), depth+1))
		}
		if v.Len() > n {
			out = append(out, "… ("+strconv.Itoa(v.Len())+" items)")
		}
		return out
	case reflect.Map:
		if depth >= sumDepth {
			return "(" + strconv.Itoa(v.Len()) + " keys)"
		}
		keys := make([]string, 0, v.Len())
		byKey := make(map[string]reflect.Value, v.Len())
		for it := v.MapRange(); it.Next(); {
			k := fmt.Sprint(it.Key().Interface())
			keys = append(keys, k)
			byKey[k] = it.Value()
		}
		slices.Sort(keys)
		out := make(map[string]any, min(len(keys), l.keys)+1)
		for i, k := range keys {
			if i == l.keys {
				out["…"] = strconv.Itoa(len(keys)-l.keys) + " more keys"
				break
			}
			out[k] = l.summarize(byKey[k], depth+1)
		}
		return out
	case reflect.Struct:
		if depth >= sumDepth {
			return "(" + v.Type().Name() + ")"
		}
		if v.Type().Implements(textMarshal) {
			if b, err := v.Interface().(encoding.TextMarshaler).MarshalText(); err == nil {
				return l.cut(string(b))
			}
		}
		out := map[string]any{}
		l.structFields(v, depth, out)
		return out
	}
	return "(" + v.Type().String() + ")"
}

// structFields adds v's exported fields under their JSON names (embedded
// structs flattened, "-" and empty omitempty fields left out).
func (l limits) structFields(v reflect.Value, depth int, out map[string]any) {
	t := v.Type()
	for i := range t.NumField() {
		sf := t.Field(i)
		if !sf.IsExported() && !sf.Anonymous {
			continue
		}
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		fv := v.Field(i)
		if sf.Anonymous && name == "" {
			for fv.Kind() == reflect.Pointer {
				if fv.IsNil() {
					break
				}
				fv = fv.Elem()
			}
			if fv.Kind() == reflect.Struct {
				l.structFields(fv, depth, out)
				continue
			}
			if !sf.IsExported() {
				continue
			}
		}
		if name == "" {
			name = sf.Name
		}
		if strings.Contains(opts, "omitempty") && fv.IsZero() {
			continue
		}
		if len(out) == l.keys {
			out["…"] = "more fields"
			return
		}
		out[name] = l.summarize(fv, depth+1)
	}
}

func (l limits) cut(s string) string {
	if len(s) <= l.str {
		return s
	}
	cut := l.str
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "… (" + strconv.Itoa(len(s)) + " bytes)"
}
