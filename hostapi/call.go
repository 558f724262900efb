package hostapi

import (
	"encoding/json"
	"math"

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
}

// Call is one invocation of an op, handed to its handler.
type Call struct {
	*Env
	Op   *Op
	Args Args
}

// Args are an op's validated arguments keyed by their snake_case names.
// The registry has already checked them against the op's schema, so the
// getters only convert; a mismatch here is a schema bug.
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
	case float32:
		return float64(v), true
	case int:
		return float64(v), true
	case int64:
		return float64(v), true
	case int32:
		return float64(v), true
	case uint64:
		return float64(v), true
	case json.Number:
		f, err := v.Float64()
		return f, err == nil
	}
	return 0, false
}

// Int returns an integer argument and whether it was given. Non-integral
// numbers are truncated toward zero; declare {"type":"integer"} to reject them.
func (a Args) Int(name string) (int64, bool) {
	f, ok := a.Float(name)
	if !ok {
		return 0, false
	}
	if f > math.MaxInt64 || f < math.MinInt64 {
		return 0, false
	}
	return int64(f), true
}

// IntOr returns an integer argument or def when it is absent.
func (a Args) IntOr(name string, def int64) int64 {
	if v, ok := a.Int(name); ok {
		return v
	}
	return def
}

// Raw returns an argument as decoded JSON (map[string]any, []any, …).
func (a Args) Raw(name string) any { return a[name] }

// Decode converts an argument into v (a pointer) through JSON, for
// structured arguments such as a spreadsheet's 2-D array of cells.
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
