package server

import (
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
)

// maxRanges is how many byte ranges one download may ask for. Each part of
// a multipart/byteranges answer carries its own headers, so many tiny
// ranges (2,000 one-byte ranges of a 28 KB file) would turn a small file
// into a large response.
const maxRanges = 16

// checkRanges refuses a Range header that asks for more than maxRanges
// ranges, or whose ranges add up to more than the file (overlapping
// ranges). A header it cannot parse is left to http.ServeContent, which
// answers 416 itself.
func checkRanges(header string, size int64) error {
	spec, ok := strings.CutPrefix(strings.TrimSpace(header), "bytes=")
	if !ok {
		return nil
	}
	parts := strings.Split(spec, ",")
	if len(parts) > maxRanges {
		return apierr.New(apierr.ValidationFailed, "the Range header asks for %d ranges; at most %d are served per request", len(parts), maxRanges)
	}
	var total int64
	for _, p := range parts {
		first, last, ok := strings.Cut(strings.TrimSpace(p), "-")
		if !ok {
			return nil
		}
		var n int64
		switch {
		case first == "":
			suffix, err := strconv.ParseInt(last, 10, 64)
			if err != nil {
				return nil
			}
			n = min(suffix, size)
		default:
			start, err := strconv.ParseInt(first, 10, 64)
			if err != nil {
				return nil
			}
			end := size - 1
			if last != "" {
				if end, err = strconv.ParseInt(last, 10, 64); err != nil {
					return nil
				}
				end = min(end, size-1)
			}
			if start > end {
				continue
			}
			n = end - start + 1
		}
		total += n
	}
	if total > size {
		return apierr.New(apierr.ValidationFailed, "the Range header asks for %d bytes of a %d-byte file (overlapping ranges); ask for each byte once", total, size)
	}
	return nil
}

// bodyRate bounds how slowly a request body may arrive: after a grace
// period the body must keep up an average of minRate bytes a second, and
// no read may wait longer than idle. A client that trickles (1 byte every
// 5 s) is cut off with TIMEOUT instead of holding a goroutine, a
// connection and a spool for as long as it likes.
type bodyRate struct {
	minRate int64
	grace   time.Duration
	idle    time.Duration
}

func (b bodyRate) wrap(w http.ResponseWriter, r *http.Request) {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 || b.minRate <= 0 {
		return
	}
	r.Body = &rateBody{ReadCloser: r.Body, rc: http.NewResponseController(w), rate: b, start: time.Now()}
}

type rateBody struct {
	io.ReadCloser
	rc       *http.ResponseController
	rate     bodyRate
	start    time.Time
	n        int64
	deadline time.Time
	err      error
}

func (b *rateBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	now := time.Now()
	due := now.Add(b.rate.idle)
	if need := b.start.Add(b.rate.grace + time.Duration(float64(b.n+1)/float64(b.rate.minRate)*float64(time.Second))); need.Before(due) {
		due = need
	}
	// Moving the deadline costs a timer update: do it when it must come
	// closer, or has drifted by more than a second.
	if b.deadline.IsZero() || due.Before(b.deadline) || due.Sub(b.deadline) > time.Second {
		if err := b.rc.SetReadDeadline(due); err == nil {
			b.deadline = due
		}
	}
	n, err := b.ReadCloser.Read(p)
	b.n += int64(n)
	if err != nil && isTimeout(err) {
		elapsed := time.Since(b.start).Round(100 * time.Millisecond)
		b.err = apierr.Wrap(apierr.Timeout, err, "the request body arrived too slowly (%d bytes in %s; at least %d bytes a second are needed, with no pause over %s); nothing was stored",
			b.n, elapsed, b.rate.minRate, b.rate.idle)
		return n, b.err
	}
	return n, err
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}
