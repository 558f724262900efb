package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"runtime/debug"
	"time"

	"github.com/gorilla/mux"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// reqInfo travels with a request so that inner layers (router, auth) can
// tell the outer logging and metrics layer what they learnt.
type reqInfo struct {
	id        string
	route     string
	workspace string
	token     string
	principal principal // set by authed
}

type reqInfoKey struct{}

func info(r *http.Request) *reqInfo {
	if ri, ok := r.Context().Value(reqInfoKey{}).(*reqInfo); ok {
		return ri
	}
	return &reqInfo{}
}

// RequestID returns the id of the request ctx belongs to ("" outside one).
func RequestID(ctx context.Context) string {
	if ri, ok := ctx.Value(reqInfoKey{}).(*reqInfo); ok {
		return ri.id
	}
	return ""
}

var requestIDRE = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,64}$`)

func newRequestID() string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// recorder remembers a response's status and size. It passes Flush and
// ReadFrom (sendfile) through and unwraps for http.ResponseController.
type recorder struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (rw *recorder) WriteHeader(code int) {
	if rw.status == 0 {
		rw.status = code
	}
	rw.ResponseWriter.WriteHeader(code)
}

func (rw *recorder) Write(b []byte) (int, error) {
	if rw.status == 0 {
		rw.status = http.StatusOK
	}
	n, err := rw.ResponseWriter.Write(b)
	rw.bytes += int64(n)
	return n, err
}

func (rw *recorder) ReadFrom(src io.Reader) (int64, error) {
	if rw.status == 0 {
		rw.status = http.StatusOK
	}
	var n int64
	var err error
	if rf, ok := rw.ResponseWriter.(io.ReaderFrom); ok {
		n, err = rf.ReadFrom(src)
	} else {
		n, err = io.Copy(struct{ io.Writer }{rw.ResponseWriter}, src)
	}
	rw.bytes += n
	return n, err
}

func (rw *recorder) Flush() {
	if f, ok := rw.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (rw *recorder) Unwrap() http.ResponseWriter { return rw.ResponseWriter }

// middleware gives every request an id, recovers panics, logs one
// structured line per request and counts it in the metrics.
func (s *Server) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ri := &reqInfo{id: r.Header.Get("X-Request-Id")}
		if !requestIDRE.MatchString(ri.id) {
			ri.id = newRequestID()
		}
		w.Header().Set("X-Request-Id", ri.id)
		rw := &recorder{ResponseWriter: w}
		r = r.WithContext(context.WithValue(r.Context(), reqInfoKey{}, ri))
		s.rate.wrap(rw, r)
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				s.log.Error("handler panic", "request_id", ri.id, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
				if rw.status == 0 {
					s.writeError(rw, r, apierr.New(apierr.Internal, "the server failed unexpectedly handling this request (request id %s)", ri.id))
				}
			}
			status := rw.status
			if status == 0 {
				status = http.StatusOK
			}
			d := time.Since(start)
			route := ri.route
			if route == "" {
				route = "unmatched"
			}
			s.metrics.observeRequest(r.Method, route, status, d)
			level := slog.LevelInfo
			if route == "/healthz" || route == "/metrics" || route == "/static/{file}" {
				level = slog.LevelDebug
			}
			// The query is left out: it can hold a signed URL's signature.
			s.log.LogAttrs(r.Context(), level, "request",
				slog.String("request_id", ri.id), slog.String("method", r.Method), slog.String("path", r.URL.EscapedPath()),
				slog.String("route", route), slog.Int("status", status), slog.Int64("bytes", rw.bytes),
				slog.Float64("duration_ms", float64(d.Microseconds())/1000), slog.String("workspace", ri.workspace),
				slog.String("token", ri.token), slog.String("remote", r.RemoteAddr))
		}()
		next.ServeHTTP(rw, r)
	})
}

// routeName is a mux middleware that records the matched route template.
func routeName(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if cr := mux.CurrentRoute(r); cr != nil {
			if t, err := cr.GetPathTemplate(); err == nil {
				info(r).route = t
			}
		}
		next.ServeHTTP(w, r)
	})
}

// writeJSON answers v as JSON.
// Header values shared by every JSON response: assigned, not Set, they
// cost no allocation (a slice's capacity is its length, so a later Add
// copies rather than writes into it).
var (
	jsonContentType = []string{"application/json; charset=utf-8"}
	noSniff         = []string{"nosniff"}
)

func writeJSON(w http.ResponseWriter, status int, v any) {
	h := w.Header()
	h["Content-Type"] = jsonContentType
	h["X-Content-Type-Options"] = noSniff
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}

// errorBody is SPEC 7's error shape.
type errorBody struct {
	Error struct {
		Code    apierr.Code `json:"code"`
		Message string      `json:"message"`
	} `json:"error"`
}

// writeError answers a coded error with its SPEC 7 status.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	s.writeErrorStatus(w, r, err, 0)
}

func (s *Server) writeErrorStatus(w http.ResponseWriter, r *http.Request, err error, status int) {
	e := apierr.Of(err)
	if status == 0 {
		status = e.Code.HTTPStatus()
	}
	if e.Code == apierr.Internal {
		s.log.Error("internal error", "request_id", info(r).id, "error", err)
	}
	if e.Code == apierr.Busy {
		w.Header().Set("Retry-After", "1")
	}
	var b errorBody
	b.Error.Code, b.Error.Message = e.Code, s.redact.Message(e.Message)
	writeJSON(w, status, b)
}

// decodeJSON reads a JSON request body of at most limit bytes into v.
func decodeJSON(w http.ResponseWriter, r *http.Request, limit int64, v any, useNumber bool) error {
	body := http.MaxBytesReader(w, r.Body, limit)
	dec := json.NewDecoder(body)
	if useNumber {
		dec.UseNumber()
	}
	if err := dec.Decode(v); err != nil {
		if err == io.EOF {
			return apierr.New(apierr.ValidationFailed, "the request body is empty; send a JSON object")
		}
		var mbe *http.MaxBytesError
		if asMaxBytes(err, &mbe) {
			return apierr.New(apierr.TooLarge, "the request body is larger than %d bytes", limit)
		}
		return apierr.New(apierr.ValidationFailed, "the request body is not valid JSON: %v", err)
	}
	if dec.More() {
		return apierr.New(apierr.ValidationFailed, "the request body has data after the JSON value")
	}
	return nil
}
