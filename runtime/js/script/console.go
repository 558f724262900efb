package script

import (
	"strings"

	"github.com/dop251/goja"

	"github.com/metaclaw/metaclaw/bindings/js/stubs"
)

// consoleLevels are the console methods a script can call.
var consoleLevels = []string{"log", "info", "warn", "error", "debug"}

// entryOverhead is what one entry adds to the run result around its
// quoted message and its level: {"level":"","message":}, and a comma.
const entryOverhead = 24

// newConsole builds the captured console object.
func (r *Run) newConsole() *goja.Object {
	return stubs.NewLazyObject(r.vm, consoleLevels, func(level string) goja.Value {
		return stubs.NamedFunc(r.vm, level, func(fc goja.FunctionCall) goja.Value {
			r.log(level, fc.Arguments)
			return goja.Undefined()
		})
	})
}

// log appends one entry, charging its size in the result; once the
// budget is spent a single warning says so and later calls cost nothing.
func (r *Run) log(level string, args []goja.Value) {
	r.logMu.Lock()
	cut := r.logsCut
	remaining := r.req.Limits.LogBytes - r.logBytes
	r.logMu.Unlock()
	if cut {
		return
	}
	msg := r.format(args, remaining)
	cost := stubs.StringJSONLen(msg) + len(level) + entryOverhead
	r.logMu.Lock()
	if r.logBytes+cost > r.req.Limits.LogBytes {
		r.logsCut = true
		r.logs = append(r.logs, LogEntry{Level: "warn",
			Message: "console output truncated: the run's limit of " + HumanSize(r.req.Limits.LogBytes) + " was reached"})
		r.logMu.Unlock()
		return
	}
	r.logBytes += cost
	r.logs = append(r.logs, LogEntry{Level: level, Message: msg})
	r.unflushed += cost
	var batch []LogEntry
	if r.flushLogs != nil && r.unflushed >= flushEvery {
		batch = r.logs[r.flushed:]
		r.flushed, r.unflushed = len(r.logs), 0
	}
	r.logMu.Unlock()
	if batch != nil {
		r.flushLogs(batch)
	}
}

// flushEvery is how many bytes of console output a worker gathers before
// it sends them to its parent.
const flushEvery = 16 << 10

// format renders console arguments roughly as node shows them: strings
// raw, errors with their stack, other objects as JSON; it stops once the
// text is longer than limit (the entry will not fit anyway).
func (r *Run) format(args []goja.Value, limit int) string {
	var b strings.Builder
	for i, a := range args {
		if b.Len() > limit {
			break
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(r.formatOne(a, limit-b.Len()))
	}
	return b.String()
}

func (r *Run) formatOne(v goja.Value, limit int) string {
	if limit < 0 {
		limit = 0
	}
	switch {
	case v == nil || goja.IsUndefined(v):
		return "undefined"
	case goja.IsNull(v):
		return "null"
	}
	if s, ok := v.(goja.String); ok {
		if s.Length() > limit+1 {
			return s.Substring(0, limit+1).String()
		}
		return s.String()
	}
	obj, ok := v.(*goja.Object)
	if !ok {
		return v.String()
	}
	if obj.ClassName() == "Error" {
		var text string
		if ex := r.vm.Try(func() {
			if st := obj.Get("stack"); st != nil && goja.IsString(st) {
				text = ShiftLines(st.String())
				return
			}
			text = r.plain(obj)
		}); ex != nil {
			text = "[an error that cannot be printed]"
		}
		return text
	}
	if _, isFn := goja.AssertFunction(obj); isFn {
		return "[Function]"
	}
	if r.logEnc == nil {
		r.logEnc = stubs.NewEncoder(r.vm, stubs.ForLog, 0)
	}
	r.logEnc.Reset(limit + 1)
	r.logEnc.SetStop(r.isStopped)
	if _, err := r.logEnc.Encode(v, "the value", nil); err != nil && r.logEnc.Len() <= limit {
		return "[a value that cannot be printed]"
	}
	return string(r.logEnc.Bytes())
}

// snapshotLogs copies the entries not yet flushed (another goroutine may
// report them while the VM is stuck).
func (r *Run) snapshotLogs() []LogEntry {
	r.logMu.Lock()
	defer r.logMu.Unlock()
	return append([]LogEntry{}, r.logs[r.flushed:]...)
}
