package dashboard

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"
)

// retryMillis is how long EventSource waits before reconnecting after a
// stream ends.
const retryMillis = 2000

// serveEvents streams snapshots as server-sent events: a "retry" field,
// then one event per Options.Interval whose data is a Snapshot in JSON (on
// one line: JSON escapes newlines in strings). It returns when the client
// goes away, a write fails, or Options.Done is closed.
func (h *handler) serveEvents(w http.ResponseWriter, r *http.Request) {
	if h.streams.Add(1) > int64(h.opts.MaxStreams) {
		h.streams.Add(-1)
		w.Header().Set("Retry-After", "10")
		http.Error(w, "too many event streams; poll /api/stats", http.StatusServiceUnavailable)
		return
	}
	defer h.streams.Add(-1)

	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no") // tell proxies not to buffer
	w.WriteHeader(http.StatusOK)

	tick := time.NewTicker(h.opts.Interval)
	defer tick.Stop()
	first := true
	for {
		if err := h.sendSnapshot(w, rc, first); err != nil {
			return // the client is gone
		}
		first = false
		select {
		case <-r.Context().Done():
			return
		case <-h.opts.Done:
			return
		case <-tick.C:
		}
	}
}

func (h *handler) sendSnapshot(w http.ResponseWriter, rc *http.ResponseController, first bool) error {
	data, err := json.Marshal(h.snapshot())
	if err != nil {
		return err
	}
	// A server's WriteTimeout would cut a long stream: push the deadline
	// past the next write instead.
	err = rc.SetWriteDeadline(time.Now().Add(h.opts.Interval + 10*time.Second))
	if err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	buf := make([]byte, 0, len(data)+32)
	if first {
		buf = append(buf, "retry: "...)
		buf = strconv.AppendInt(buf, retryMillis, 10)
		buf = append(buf, '\n')
	}
	buf = append(buf, "data: "...)
	buf = append(buf, data...)
	buf = append(buf, "\n\n"...)
	if _, err := w.Write(buf); err != nil {
		return err
	}
	return rc.Flush()
}
