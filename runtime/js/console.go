package js

import (
	"strconv"
	"strings"

	"github.com/dop251/goja"

	"github.com/metaclaw/metaclaw/hostapi"
)

// console builds the captured console object.
func (ru *run) console() *goja.Object {
	c := ru.vm.NewObject()
	for _, level := range []string{"log", "info", "warn", "error", "debug"} {
		level := level
		c.Set(level, func(fc goja.FunctionCall) goja.Value {
			ru.log(level, fc.Arguments)
			return goja.Undefined()
		})
	}
	return c
}

func (ru *run) log(level string, args []goja.Value) {
	if ru.logsCut {
		return
	}
	parts := make([]string, len(args))
	for i, a := range args {
		parts[i] = ru.format(a)
	}
	msg := strings.Join(parts, " ")
	if ru.logBytes+len(msg) > ru.lim.LogBytes {
		ru.logsCut = true
		ru.result.Logs = append(ru.result.Logs, hostapi.LogEntry{Level: "warn",
			Message: "console output truncated: the run's limit of " + humanSize(ru.lim.LogBytes) + " was reached"})
		return
	}
	ru.logBytes += len(msg)
	ru.result.Logs = append(ru.result.Logs, hostapi.LogEntry{Level: level, Message: msg})
}

// format renders one console argument the way node would show it, roughly:
// strings raw, errors with their name, other values as JSON.
func (ru *run) format(v goja.Value) string {
	if v == nil || goja.IsUndefined(v) {
		return "undefined"
	}
	if goja.IsNull(v) {
		return "null"
	}
	obj, ok := v.(*goja.Object)
	if !ok {
		return v.String()
	}
	if obj.ClassName() == "Error" {
		if st := obj.Get("stack"); st != nil && !goja.IsUndefined(st) {
			return shiftLines(st.String())
		}
		return v.String()
	}
	if obj.ClassName() == "Function" {
		return "[Function]"
	}
	stringify, _ := goja.AssertFunction(ru.vm.Get("JSON").ToObject(ru.vm).Get("stringify"))
	if s, err := stringify(goja.Undefined(), v); err == nil && !goja.IsUndefined(s) {
		return s.String()
	}
	return safeString(v)
}

func humanSize(n int) string {
	if n >= 1<<20 {
		return strconv.FormatFloat(float64(n)/(1<<20), 'f', -1, 64) + " MB"
	}
	return strconv.FormatFloat(float64(n)/1024, 'f', -1, 64) + " KB"
}
