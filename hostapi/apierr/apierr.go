// Package apierr holds the one coded error type every metaclaw door speaks
// (SPEC section 7). It is a leaf package so that the store, the format
// packages and the registry can all return the same type without cycles.
package apierr

import (
	"context"
	"errors"
	"fmt"
	"net/http"
)

// Code is a stable, machine-readable error code; scripts see it as err.code.
type Code string

const (
	ValidationFailed      Code = "VALIDATION_FAILED"
	NotFound              Code = "NOT_FOUND"
	AlreadyExists         Code = "ALREADY_EXISTS"
	TooLarge              Code = "TOO_LARGE"
	UnsupportedFormat     Code = "UNSUPPORTED_FORMAT"
	QuotaExceeded         Code = "QUOTA_EXCEEDED"
	SandboxViolation      Code = "SANDBOX_VIOLATION"
	Unauthorized          Code = "UNAUTHORIZED"
	Timeout               Code = "TIMEOUT"
	ResourceExhausted     Code = "RESOURCE_EXHAUSTED"
	Busy                  Code = "BUSY"
	FileReadFailed        Code = "FILE_READ_FAILED"
	FileWriteFailed       Code = "FILE_WRITE_FAILED"
	ToolWorkerUnavailable Code = "TOOL_WORKER_UNAVAILABLE"
	Internal              Code = "INTERNAL"
)

// HTTPStatus maps a code to the status SPEC section 7 gives it.
func (c Code) HTTPStatus() int {
	switch c {
	case ValidationFailed:
		return http.StatusBadRequest
	case NotFound:
		return http.StatusNotFound
	case AlreadyExists:
		return http.StatusConflict
	case TooLarge:
		return http.StatusRequestEntityTooLarge
	case UnsupportedFormat:
		return http.StatusUnsupportedMediaType
	case QuotaExceeded:
		return http.StatusInsufficientStorage
	case SandboxViolation:
		return http.StatusForbidden
	case Unauthorized:
		return http.StatusUnauthorized
	case Timeout:
		return http.StatusRequestTimeout
	case ResourceExhausted:
		return http.StatusTooManyRequests
	case Busy, ToolWorkerUnavailable:
		return http.StatusServiceUnavailable
	case FileReadFailed, FileWriteFailed:
		return http.StatusUnprocessableEntity
	default:
		return http.StatusInternalServerError
	}
}

// Error is a coded error. Message says what was wrong and what to do next.
type Error struct {
	Code    Code   `json:"code"`
	Message string `json:"message"`
	// cause is kept for logs and errors.Is; it is never shown to callers.
	cause error
}

func (e *Error) Error() string { return string(e.Code) + ": " + e.Message }

// Unwrap exposes the underlying cause to errors.Is / errors.As.
func (e *Error) Unwrap() error { return e.cause }

// New builds a coded error with a formatted message.
func New(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Wrap builds a coded error that keeps cause for logs.
func Wrap(code Code, cause error, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), cause: cause}
}

// From converts any error into a coded one: coded errors pass through,
// context expiry becomes TIMEOUT, everything else INTERNAL. It returns a
// plain error (nil for nil) so that it can be returned directly.
func From(err error) error {
	if err == nil {
		return nil
	}
	return Of(err)
}

// Of is the coded view of err (nil for nil).
func Of(err error) *Error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return Wrap(Timeout, err, "the time limit ran out; ask for less work per call or raise timeout_ms")
	}
	if errors.Is(err, context.Canceled) {
		return Wrap(Timeout, err, "the call was cancelled before it finished")
	}
	return Wrap(Internal, err, "%s", err.Error())
}

// CodeOf returns the code of err, or "" for nil.
func CodeOf(err error) Code {
	if err == nil {
		return ""
	}
	return Of(err).Code
}

// Is reports whether err carries code.
func Is(err error, code Code) bool { return err != nil && CodeOf(err) == code }
