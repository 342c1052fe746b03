package chathttp_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/planexec/planexec/chat/chathttp"
)

// TestEventStreamsAreBounded: past Config.MaxStreamsPerPerson a person's
// next stream is 429 too_many_streams, and past Config.MaxStreams anyone's
// is 503 server_busy; a stream that ends gives its place back, and a
// refused one takes none.
func TestEventStreamsAreBounded(t *testing.T) {
	f := newFixture(t, options{config: func(c *chathttp.Config) { c.MaxStreams = 3; c.MaxStreamsPerPerson = 2 }})
	f.session("s1")
	first := f.events("s1", "")
	f.events("s1", "")
	status, body, _ := f.eventsAs("ana", "s1", "")
	checkError(t, status, body, http.StatusTooManyRequests, "too_many_streams")
	// An agent acting for ana is ana.
	status, body, _ = f.eventsAs("bot", "s1", "")
	checkError(t, status, body, http.StatusTooManyRequests, "too_many_streams")
	if status, body, _ := f.eventsAs("ben", "s1", ""); status != http.StatusOK {
		t.Fatalf("ben's stream: %d %s", status, body)
	}
	status, body, _ = f.eventsAs("dan", "s1", "")
	checkError(t, status, body, http.StatusServiceUnavailable, "server_busy")

	// The server learns that a client went when its connection closes:
	// dan's place comes once it has.
	first.close()
	f.eventually(func() bool {
		status, _, s := f.eventsAs("dan", "s1", "")
		if s != nil {
			s.close()
		}
		return status == http.StatusOK
	})
}

// eventually waits up to 5 seconds for cond, asking it every 10ms.
func (f *fixture) eventually(cond func() bool) {
	f.t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			f.t.Fatal("the condition did not come true within 5s")
		}
	}
}

// TestAStreamOutlivesTheServersTimeouts: a server's ReadTimeout and
// WriteTimeout bound requests, not event streams: a stream open for many
// times both still carries a turn's events to its done.
func TestAStreamOutlivesTheServersTimeouts(t *testing.T) {
	const timeout = 100 * time.Millisecond
	f := newFixture(t, options{heartbeat: 10 * time.Millisecond, server: func(s *http.Server) {
		s.ReadTimeout, s.WriteTimeout = timeout, timeout
	}})
	f.session("s1")
	s := f.events("s1", "")
	s.idleFor(4 * timeout)
	f.send("s1", "hello")
	s.until("done")
}

// idleFor reads heartbeats for d; anything else, or the stream's end, fails
// the test.
func (s *stream) idleFor(d time.Duration) {
	s.t.Helper()
	for start := time.Now(); time.Since(start) < d; {
		line, err := s.lines.ReadString('\n')
		if err == io.EOF {
			s.t.Fatalf("the stream ended after %v", time.Since(start))
		}
		if err != nil {
			s.t.Fatalf("after %v: %v", time.Since(start), err)
		}
		if line != "\n" && !strings.HasPrefix(line, ":") {
			s.t.Fatalf("the idle stream sent %q", line)
		}
	}
}
