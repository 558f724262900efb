package server

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/metaclaw/metaclaw/hostapi/apierr"
	"github.com/metaclaw/metaclaw/hostapi/store"
)

// handleEvents streams the workspace's file events as Server-Sent Events:
// "id: SEQ", "event: file:created|file:modified|file:deleted" and the
// seed-000 payload as data. A client that reconnects with Last-Event-ID
// (header, or ?last_event_id= for clients that cannot set headers) gets the
// events it missed while the bus still remembers them. A comment line is
// sent every Heartbeat so that proxies and clients see a live connection.
func (s *Server) handleEvents(w http.ResponseWriter, r *http.Request) {
	var after uint64
	last := r.Header.Get("Last-Event-ID")
	if last == "" {
		last = r.URL.Query().Get("last_event_id")
	}
	if last = strings.TrimSpace(last); last != "" {
		n, err := strconv.ParseUint(last, 10, 64)
		if err != nil {
			s.writeError(w, r, apierr.New(apierr.ValidationFailed, "Last-Event-ID %q is not an event id (a decimal number)", last))
			return
		}
		after = n
	}
	ws := principalOf(r).Workspace
	release, err := s.streams.acquire(ws)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer release()
	wm := s.metrics.ws(ws)
	wm.sseClients.Add(1)
	defer wm.sseClients.Add(-1)
	s.metrics.streams.Add(1)
	defer s.metrics.streams.Add(-1)
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	events, cancel := s.h.Store.Bus().Subscribe(ws, after)
	defer cancel()

	bw := bufio.NewWriterSize(w, 4096)
	bw.WriteString("retry: 2000\n: connected\n\n")
	if bw.Flush() != nil || rc.Flush() != nil {
		return
	}
	tick := time.NewTicker(s.cfg.Heartbeat)
	defer tick.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-s.closing:
			bw.WriteString("event: shutdown\ndata: {}\n\n")
			bw.Flush()
			rc.Flush()
			return
		case e, ok := <-events:
			if !ok {
				// The bus dropped a subscriber that fell behind; the client
				// reconnects with its Last-Event-ID and replays.
				return
			}
			writeEvent(bw, e)
			// Send what is already queued with the same flush.
			for more := true; more; {
				select {
				case e2, ok := <-events:
					if !ok {
						bw.Flush()
						rc.Flush()
						return
					}
					writeEvent(bw, e2)
				default:
					more = false
				}
			}
			if bw.Flush() != nil || rc.Flush() != nil {
				return
			}
		case <-tick.C:
			bw.WriteString(": ping\n\n")
			if bw.Flush() != nil || rc.Flush() != nil {
				return
			}
		}
	}
}

func writeEvent(bw *bufio.Writer, e store.Event) {
	data, err := json.Marshal(e.Data)
	if err != nil {
		return
	}
	bw.WriteString("id: ")
	bw.WriteString(strconv.FormatUint(e.Seq, 10))
	bw.WriteString("\nevent: ")
	bw.WriteString(e.Type)
	bw.WriteString("\ndata: ")
	bw.Write(data)
	bw.WriteString("\n\n")
}
