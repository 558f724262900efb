package table

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// The engine and its SQL workers (worker.go, workerproc.go) talk over the
// worker's stdin and stdout in frames: a 4-byte big-endian length, then a
// JSON document. The host sends a request and then, at most, a cancel for
// it; the worker answers with any number of progress frames (an ingest's
// map) and one final frame carrying a result or a coded error.

// maxFrame bounds one frame. Results are bounded well below it (rows by
// maxResultBytes), so a longer frame means a broken peer.
const maxFrame = 512 << 20

type request struct {
	ID uint64 `json:"id"`
	// Op names the operation (opIngest, …); empty with Cancel.
	Op string `json:"op,omitempty"`
	// Cancel asks the worker to stop request ID (the caller went away).
	Cancel bool `json:"cancel,omitempty"`
	// TimeoutMs is the time the operation may take; the worker interrupts
	// it then, and the host kills the worker shortly after.
	TimeoutMs int64 `json:"timeoutMs,omitempty"`
	// Drop lists databases the host deleted or replaced: the worker closes
	// its instances of them before running the operation.
	Drop []string        `json:"drop,omitempty"`
	Args json.RawMessage `json:"args,omitempty"`
}

type response struct {
	ID uint64 `json:"id"`
	// Ready is the first frame of a worker, before any request.
	Ready *workerReady `json:"ready,omitempty"`
	// Mapped is an ingest's map, sent as soon as it is known.
	Mapped *tableMeta       `json:"mapped,omitempty"`
	Result json.RawMessage  `json:"result,omitempty"`
	Error  *apierr.Error    `json:"error,omitempty"`
	Usage  *workerResources `json:"usage,omitempty"`
}

// workerReady describes a worker that has started.
type workerReady struct {
	PID int `json:"pid"`
	// DataLimit is the RLIMIT_DATA the worker set on itself.
	DataLimit int64           `json:"dataLimit"`
	Usage     workerResources `json:"usage"`
}

// workerResources is a worker's memory as the kernel counts it.
type workerResources struct {
	RSS    int64 `json:"rss"`              // resident bytes
	VmData int64 `json:"vmData,omitempty"` // private writable bytes (what RLIMIT_DATA bounds); at start only
}

const (
	opIngest   = "ingest"
	opMeta     = "meta"
	opDescribe = "describe"
	opStats    = "stats"
	opRows     = "rows"
	opQuery    = "query"
	opExport   = "export"
	opEvict    = "evict"
)

func writeFrame(w io.Writer, v any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if len(body) > maxFrame {
		return fmt.Errorf("frame of %d bytes is over the %d-byte limit", len(body), maxFrame)
	}
	buf := make([]byte, 4, 4+len(body))
	binary.BigEndian.PutUint32(buf, uint32(len(body)))
	_, err = w.Write(append(buf, body...))
	return err
}

// readFrame decodes the next frame into v; numbers inside `any` fields
// arrive as json.Number (see exactNumbers).
func readFrame(r *bufio.Reader, v any) error {
	var head [4]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return err
	}
	n := binary.BigEndian.Uint32(head[:])
	if n > maxFrame {
		return fmt.Errorf("frame of %d bytes is over the %d-byte limit", n, maxFrame)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return err
	}
	return decodeExact(body, v)
}

func decodeExact(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	return d.Decode(v)
}

// exactNumbers turns the json.Numbers of a decoded value back into what
// the worker had: int64 for integers, float64 for the rest. Integers
// beyond 2^53 stay exact.
func exactNumbers(v any) any {
	switch t := v.(type) {
	case json.Number:
		s := string(t)
		if !strings.ContainsAny(s, ".eE") {
			if i, err := strconv.ParseInt(s, 10, 64); err == nil {
				return i
			}
		}
		f, _ := t.Float64()
		return f
	case []any:
		for i, x := range t {
			t[i] = exactNumbers(x)
		}
		return t
	case map[string]any:
		for k, x := range t {
			t[k] = exactNumbers(x)
		}
		return t
	}
	return v
}

func exactRows(rows [][]any) {
	for _, r := range rows {
		for i, x := range r {
			r[i] = exactNumbers(x)
		}
	}
}
