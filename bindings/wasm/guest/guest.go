//go:build wasip1

package guest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"unsafe"
)

// Error codes a host call may fail with (the host's SPEC 7 codes).
const (
	ValidationFailed      = "VALIDATION_FAILED"
	NotFound              = "NOT_FOUND"
	AlreadyExists         = "ALREADY_EXISTS"
	TooLarge              = "TOO_LARGE"
	UnsupportedFormat     = "UNSUPPORTED_FORMAT"
	QuotaExceeded         = "QUOTA_EXCEEDED"
	SandboxViolation      = "SANDBOX_VIOLATION"
	Unauthorized          = "UNAUTHORIZED"
	Timeout               = "TIMEOUT"
	ResourceExhausted     = "RESOURCE_EXHAUSTED"
	Busy                  = "BUSY"
	FileReadFailed        = "FILE_READ_FAILED"
	FileWriteFailed       = "FILE_WRITE_FAILED"
	ToolWorkerUnavailable = "TOOL_WORKER_UNAVAILABLE"
	Internal              = "INTERNAL"
)

// Error is a coded error from the host, or one the module reports as its
// own result through Run or Fail.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Is makes errors.Is(err, &guest.Error{Code: guest.NotFound}) match by code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code && (t.Message == "" || t.Message == e.Message)
}

// CodeOf returns the code of a host error in err's chain, or "".
func CodeOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// buf receives responses; most fit, and the rest are taken in one more
// call into a buffer of their exact size. Modules are single-threaded, so
// one buffer serves every call.
var buf = make([]byte, 64<<10)

// CallRaw runs the operation op with args, a JSON object of its meta-tool
// arguments, and returns its JSON result. op is a meta-tool name
// ("file_read_text", a saved tool's name) or a JS name ("files.readText").
// A failed call returns an *Error with the host's code.
func CallRaw(op string, args []byte) ([]byte, error) {
	if args == nil {
		args = []byte("{}")
	}
	r := hostCall(unsafe.Pointer(unsafe.StringData(op)), uint32(len(op)),
		unsafe.Pointer(unsafe.SliceData(args)), uint32(len(args)),
		unsafe.Pointer(unsafe.SliceData(buf)), uint32(len(buf)))
	runtime.KeepAlive(op)
	runtime.KeepAlive(args)
	status, n := uint32(r>>32), int(uint32(r))
	var body []byte
	if n <= len(buf) {
		body = bytes.Clone(buf[:n])
	} else {
		body = make([]byte, n)
		if got := hostTake(unsafe.Pointer(unsafe.SliceData(body)), uint32(n)); got != int32(n) {
			return nil, &Error{Code: Internal, Message: fmt.Sprintf("the host did not hand over the %d-byte response of %s (take answered %d)", n, op, got)}
		}
	}
	if status != 0 {
		e := &Error{}
		if err := json.Unmarshal(body, e); err != nil || e.Code == "" {
			return nil, &Error{Code: Internal, Message: fmt.Sprintf("%s failed with an unreadable error: %.200s", op, body)}
		}
		return nil, e
	}
	return body, nil
}

// Call runs the operation op with args (a map or a struct whose JSON
// field names are the meta-tool's snake_case arguments; nil for none) and
// decodes its snake_case JSON result into out (a pointer; nil discards).
func Call(op string, args any, out any) error {
	var raw []byte
	if args != nil {
		var err error
		if raw, err = json.Marshal(args); err != nil {
			return &Error{Code: ValidationFailed, Message: fmt.Sprintf("the arguments of %s could not be encoded as JSON: %v", op, err)}
		}
	}
	body, err := CallRaw(op, raw)
	if err != nil {
		return err
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(body, out); err != nil {
		return &Error{Code: Internal, Message: fmt.Sprintf("the result of %s does not fit %T: %v", op, out, err)}
	}
	return nil
}

// Log levels, as the sandbox console's.
const (
	LevelDebug = iota
	LevelInfo
	LevelLog
	LevelWarn
	LevelError
)

// Log adds one entry to the run's logs at level (LevelInfo …). Lines written
// to stderr become logs too, at level "log".
func Log(level int, msg string) {
	hostLog(uint32(level), unsafe.Pointer(unsafe.StringData(msg)), uint32(len(msg)))
	runtime.KeepAlive(msg)
}

// Logf formats a log entry at level "log".
func Logf(format string, args ...any) { Log(LevelLog, fmt.Sprintf(format, args...)) }

// Input decodes the run's JSON input (stdin) into v. A run without input
// reads null, which leaves v as it is.
func Input(v any) error {
	raw, err := io.ReadAll(os.Stdin)
	if err != nil {
		return &Error{Code: Internal, Message: "reading the input: " + err.Error()}
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return &Error{Code: ValidationFailed, Message: fmt.Sprintf("the input does not fit %T: %v", v, err)}
	}
	return nil
}

// Output writes v as the run's result (JSON on stdout).
func Output(v any) error {
	enc := json.NewEncoder(os.Stdout)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// Fail ends the run with a coded error: err's code when it is (or wraps) an
// *Error, VALIDATION_FAILED otherwise. It writes {"error":{code,message}}
// as the last line of stdout and exits with status 1, which the host reads
// as the run's error.
func Fail(err error) {
	var e *Error
	if !errors.As(err, &e) {
		e = &Error{Code: ValidationFailed, Message: err.Error()}
	} else if e.Error() != err.Error() {
		// Keep the context the module wrapped around the host's error.
		e = &Error{Code: e.Code, Message: err.Error()}
	}
	// A newline first, so that the envelope is a line of its own after any
	// output the module wrote before it failed.
	os.Stdout.WriteString("\n")
	Output(struct {
		Error *Error `json:"error"`
	}{e})
	os.Exit(1)
}

// Run is a module's whole main: it decodes the input into In, calls fn and
// writes its result, or ends the run with fn's error (see Fail).
//
//	func main() {
//		guest.Run(func(in struct{ Path string `json:"path"` }) (any, error) {
//			return guest.Files.ReadText(in.Path, nil)
//		})
//	}
func Run[In, Out any](fn func(in In) (Out, error)) {
	var in In
	if err := Input(&in); err != nil {
		Fail(err)
	}
	out, err := fn(in)
	if err != nil {
		Fail(err)
	}
	if err := Output(out); err != nil {
		Fail(&Error{Code: ValidationFailed, Message: fmt.Sprintf("the result could not be encoded as JSON: %v", err)})
	}
}

// Ptr returns a pointer to v, for the optional fields of the Options
// structs (Start: guest.Ptr(int64(10))).
func Ptr[T any](v T) *T { return &v }
