package chathttp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/chat"
)

// writeWait bounds the writing of one event, or heartbeat, to a client.
const writeWait = 30 * time.Second

// events streams the session's outputs as Server-Sent Events (see the
// package documentation), from the Last-Event-ID header when the client
// resumes, else from the after parameter.
func (h *handler) events(w http.ResponseWriter, r *http.Request, person planexec.Delegation) {
	from := r.Header.Get("Last-Event-ID")
	if from == "" {
		from = r.URL.Query().Get("after")
	}
	after, ok := number(strings.TrimSpace(from), 0)
	if !ok {
		writeProblem(w, problem{http.StatusBadRequest, "invalid_request", "after (or Last-Event-ID) must be a seq: a whole number, 0 or more."})
		return
	}
	id := r.PathValue("id")
	// A session that is not there is a 404, not an empty stream that
	// EventSource would reconnect to for ever.
	if _, err := h.chat.Session(r.Context(), person.Tenant, id); err != nil {
		h.fail(w, r, err)
		return
	}
	who := personKey{person.Tenant, person.User}
	if p, ok := h.streams.take(who, h.cfg.MaxStreams, h.cfg.MaxStreamsPerPerson); !ok {
		if p.status == http.StatusServiceUnavailable {
			w.Header().Set("Retry-After", "10")
		}
		writeProblem(w, p)
		return
	}
	defer h.streams.give(who)
	rc := http.NewResponseController(w)
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Accel-Buffering", "no") // nginx: pass each event on as it comes
	w.WriteHeader(http.StatusOK)
	if err := rc.Flush(); err != nil {
		h.cfg.Logger.LogAttrs(r.Context(), slog.LevelError, "chathttp: the response cannot stream", slog.Any("error", err))
		return
	}

	// The watch runs beside the writer, so that heartbeats go out while it
	// waits; the handler stops it and waits for it before it returns.
	ctx, stop := context.WithCancel(r.Context())
	type item struct {
		out chat.Output
		err error
	}
	items := make(chan item)
	watched := make(chan struct{})
	defer func() { stop(); <-watched }()
	go func() {
		defer close(watched)
		defer close(items)
		for out, err := range h.chat.WatchFor(ctx, person, id, after) {
			select {
			case items <- item{out, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()

	beat := time.NewTicker(h.cfg.Heartbeat)
	defer beat.Stop()
	for {
		var write func() error
		select {
		case <-ctx.Done():
			return
		case <-beat.C:
			write = func() error { _, err := fmt.Fprint(w, ": heartbeat\n\n"); return err }
		case it, open := <-items:
			switch {
			case !open:
				return
			case errors.Is(it.err, chat.ErrWatcherDropped):
				// EventSource reconnects by itself once the stream ends,
				// with the last id it saw: no gap.
				_ = send(rc, func() error { _, err := fmt.Fprint(w, dropped); return err })
				return
			case it.err != nil:
				if ctx.Err() == nil {
					h.cfg.Logger.LogAttrs(r.Context(), slog.LevelError, "chathttp: watching a session failed",
						slog.String("tenant", person.Tenant), slog.String("session", id), slog.Any("error", it.err))
				}
				return
			}
			write = func() error { return writeEvent(w, it.out) }
		}
		if send(rc, write) != nil {
			return // the client went
		}
	}
}

// dropped is the event that ends the stream of a watcher that fell behind.
const dropped = "event: dropped\ndata: {\"error\":{\"code\":\"dropped\",\"message\":\"The stream fell too far behind; reconnect with the last event id to go on.\"}}\n\n"

// send writes and flushes, within writeWait. Each write gets its own
// deadline rather than the server's WriteTimeout, which would end every
// stream at that age; a client that stops reading is let go. (A response
// that cannot set one streams without.)
func send(rc *http.ResponseController, write func() error) error {
	_ = rc.SetWriteDeadline(time.Now().Add(writeWait))
	if err := write(); err != nil {
		return err
	}
	return rc.Flush()
}

// writeEvent writes one output as an event. A text output carries no id:
// its seq is that of the message that follows it, and a client resuming
// from the text would never see the message.
func writeEvent(w http.ResponseWriter, out chat.Output) error {
	data, err := json.Marshal(out)
	if err != nil {
		return err
	}
	// Kinds are the chat's own words; data is one line, as JSON escapes
	// every line break in a string.
	if out.Kind == chat.KindText {
		_, err = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", out.Kind, data)
	} else {
		_, err = fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", out.Seq, out.Kind, data)
	}
	return err
}

// personKey is whose streams are counted together.
type personKey struct{ tenant, user string }

// streams counts the event streams open, in all and by person.
type streams struct {
	mu   sync.Mutex
	open int
	of   map[personKey]int
}

// take takes a place for a stream of k, and reports whether there was one:
// if not, the problem to answer.
func (s *streams) take(k personKey, max, perPerson int) (problem, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.of[k] >= perPerson:
		return problem{http.StatusTooManyRequests, "too_many_streams", "This person has " + strconv.Itoa(perPerson) + " event streams open, the most one may. Close one (another tab?) first."}, false
	case s.open >= max:
		return problem{http.StatusServiceUnavailable, "server_busy", "The service has as many event streams open as it may. Try again later."}, false
	}
	s.open++
	s.of[k]++
	return problem{}, true
}

// give gives back a place take took.
func (s *streams) give(k personKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.open--
	if s.of[k]--; s.of[k] == 0 {
		delete(s.of, k)
	}
}
