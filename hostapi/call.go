package hostapi

import (
	"encoding/json"
	"time"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/store"
)

// Env is who is calling and where: one per run or per direct tool call.
type Env struct {
	Host    *Host
	WS      *store.Workspace
	Session string
	// Depth counts nested tool calls (a saved tool calling another).
	Depth int
	// Record collects the files a run created, modified or deleted.
	Record func(f store.File, action string)
	// OnCall, when set, hears of every operation called with this env
	// (a run's host calls, a door's tool call) once it has finished: the
	// op, its canonical arguments (nil when they did not decode), its
	// result or error and how long it took. The live run feed uses it.
	OnCall func(op *Op, args map[string]any, res any, err error, d time.Duration)
}

// Call is one invocation of an op, handed to its handler.
type Call struct {
	*Env
	Op   *Op
	Args Args
}

// Args are an op's arguments keyed by their snake_case names, in the
// canonical form of decode.go (numbers are int64 or float64, nothing else)
// and already checked against the op's schema, so the getters only read.
type Args map[string]any

// Has reports whether name was given (and is not null).
func (a Args) Has(name string) bool { return a[name] != nil }

// String returns a string argument ("" when absent).
func (a Args) String(name string) string {
	s, _ := a[name].(string)
	return s
}

// Bool returns a boolean argument (false when absent).
func (a Args) Bool(name string) bool {
	b, _ := a[name].(bool)
	return b
}

// Float returns a numeric argument and whether it was given.
func (a Args) Float(name string) (float64, bool) {
	switch v := a[name].(type) {
	case float64:
		return v, true
	case int64:
		return float64(v), true
	}
	return 0, false
}

// Int returns an integer argument and whether it was given. The decoder
// has refused integers outside int64 and the schema non-integral numbers,
// so a given integer argument is always exact here.
func (a Args) Int(name string) (int64, bool) {
	v, ok := a[name].(int64)
	return v, ok
}

// IntOr returns an integer argument or def when it is absent.
func (a Args) IntOr(name string, def int64) int64 {
	if v, ok := a.Int(name); ok {
		return v
	}
	return def
}

// IntOrString reads a name-or-index argument (a sheet, say): isInt tells
// which of n and s holds it; both are zero when it is absent.
func (a Args) IntOrString(name string) (n int64, s string, isInt bool) {
	switch v := a[name].(type) {
	case int64:
		return v, "", true
	case string:
		return 0, v, false
	}
	return 0, "", false
}

// Raw returns an argument in the canonical form (map[string]any, []any, …).
func (a Args) Raw(name string) any { return a[name] }

// Decode converts an argument into v (a pointer) through JSON, for
// structured arguments such as a PDF's form values.
func (a Args) Decode(name string, v any) error {
	b, err := json.Marshal(a[name])
	if err != nil {
		return apierr.New(apierr.ValidationFailed, "argument %q: %v", name, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return apierr.New(apierr.ValidationFailed, "argument %q: %v", name, err)
	}
	return nil
}

// Strings returns an array-of-strings argument.
func (a Args) Strings(name string) []string {
	arr, _ := a[name].([]any)
	out := make([]string, 0, len(arr))
	for _, x := range arr {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}
