package wasm

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/metaclaw/metaclaw/hostapi"
)

var errOutputFull = errors.New("output limit reached")

// resultWriter collects stdout, the run's result, up to limit bytes. The
// first write past it calls over, which stops the module: output that can
// no longer become a result is not worth the time of producing it.
type resultWriter struct {
	buf   bytes.Buffer
	limit int
	over  func()
	full  bool
}

func (w *resultWriter) Write(p []byte) (int, error) {
	if w.full || w.buf.Len()+len(p) > w.limit {
		if !w.full {
			w.full = true
			w.over()
		}
		return 0, errOutputFull
	}
	return w.buf.Write(p)
}

// logWriter turns stderr into log entries, one per line, at level "log",
// and keeps the last few KB aside for the message of a failed run. Past the
// log limit it drops lines and says so once, as the sandbox console does;
// the module carries on.
type logWriter struct {
	logs    *[]hostapi.LogEntry
	limit   int
	used    int
	cut     bool
	partial []byte
	tail    []byte // the last tailBytes of stderr, whatever the limit
}

// tailBytes is how much of stderr a failed run's message may draw on.
const tailBytes = 4 << 10

// maxLineBytes bounds a line kept waiting for its newline.
const maxLineBytes = 64 << 10

func (w *logWriter) Write(p []byte) (int, error) {
	w.keepTail(p)
	rest := p
	for len(rest) > 0 {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			w.partial = append(w.partial, rest...)
			if len(w.partial) > maxLineBytes {
				w.emit(w.partial)
				w.partial = w.partial[:0]
			}
			break
		}
		if len(w.partial) > 0 {
			w.partial = append(w.partial, rest[:i]...)
			w.emit(w.partial)
			w.partial = w.partial[:0]
		} else {
			w.emit(rest[:i])
		}
		rest = rest[i+1:]
	}
	return len(p), nil
}

func (w *logWriter) keepTail(p []byte) {
	if len(p) >= tailBytes {
		w.tail = append(w.tail[:0], p[len(p)-tailBytes:]...)
		return
	}
	if over := len(w.tail) + len(p) - tailBytes; over > 0 {
		w.tail = append(w.tail[:0], w.tail[over:]...)
	}
	w.tail = append(w.tail, p...)
}

// flush emits a last line that had no newline.
func (w *logWriter) flush() {
	if len(w.partial) > 0 {
		w.emit(w.partial)
		w.partial = w.partial[:0]
	}
}

func (w *logWriter) emit(line []byte) {
	w.add("log", string(bytes.ToValidUTF8(bytes.TrimSuffix(line, []byte("\r")), []byte("\uFFFD"))))
}

// add appends one entry within the log limit; the log function of the
// host module comes here too.
func (w *logWriter) add(level, msg string) {
	if w.cut {
		return
	}
	if w.used+len(msg) > w.limit {
		w.cut = true
		*w.logs = append(*w.logs, hostapi.LogEntry{Level: "warn",
			Message: "log output truncated: the run's limit of " + humanSize(w.limit) + " was reached"})
		return
	}
	w.used += len(msg)
	*w.logs = append(*w.logs, hostapi.LogEntry{Level: level, Message: msg})
}

// failure picks the line of stderr that says why a module failed: Go's
// "panic: …" or "fatal error: …", Rust's "thread 'main' panicked at …",
// else the last line. It returns that line and the stderr tail from it on.
func (w *logWriter) failure() (line, stack string) {
	tail := string(bytes.ToValidUTF8(w.tail, []byte("\uFFFD")))
	lines := strings.Split(strings.TrimRight(tail, "\r\n"), "\n")
	if len(w.tail) == tailBytes && len(lines) > 1 {
		lines = lines[1:] // the first line is cut
	}
	at := -1
	for i, l := range lines {
		if strings.HasPrefix(l, "panic: ") || strings.HasPrefix(l, "fatal error: ") || strings.Contains(l, "panicked at") {
			at = i
			break
		}
	}
	if at < 0 {
		for i := len(lines) - 1; i >= 0; i-- {
			if strings.TrimSpace(lines[i]) != "" {
				return strings.TrimSpace(lines[i]), ""
			}
		}
		return "", ""
	}
	return strings.TrimSpace(lines[at]), strings.Join(lines[at:], "\n")
}

func humanSize(n int) string {
	if n >= 1<<20 {
		return strconv.FormatFloat(float64(n)/(1<<20), 'f', -1, 64) + " MB"
	}
	if n >= 1<<10 {
		return strconv.FormatFloat(float64(n)/1024, 'f', -1, 64) + " KB"
	}
	return strconv.Itoa(n) + " bytes"
}

// clipString shortens s to about n bytes on a rune boundary.
func clipString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
