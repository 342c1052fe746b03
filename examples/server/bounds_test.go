package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/planexec/planexec/examples/internal/trip"
)

// openFiles counts the process's open descriptors.
func openFiles(t *testing.T) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(fds)
}

// errLeftOpen is a connection the server kept open past the test's bound.
var errLeftOpen = errors.New("the server kept the connection open")

// dribble sends a request on c a byte at a time, its body (after a whole
// header) or its header, until the server closes c, and reports whether
// it did before until. It closes c.
func dribble(c net.Conn, body bool, until time.Time) error {
	defer c.Close()
	start, each := "POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\n", "X-Slow: 1\r\n"
	if body {
		start += "Authorization: Bearer " + anaKey + "\r\nx-session-id: slow\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"
		each = " "
	}
	if _, err := io.WriteString(c, start); err != nil {
		return nil // closed already
	}
	buf := make([]byte, 4096)
	for {
		if time.Now().After(until) {
			return errLeftOpen
		}
		_ = c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		_, err := c.Read(buf) // the server's refusal (400, 408), if any, then its close
		var ne net.Error
		switch {
		case errors.As(err, &ne) && ne.Timeout():
			if _, err := io.WriteString(c, each); err != nil {
				return nil // the server closed it
			}
		case err == io.EOF, errors.Is(err, syscall.ECONNRESET):
			return nil
		case err != nil:
			return fmt.Errorf("reading: %w", err)
		}
	}
}

// A flood of connections that send their header or body a byte at a time:
// each is closed once its read timeout passes, no more than the cap are
// open in the server at once, the descriptors they held are given back,
// and a planner request sent meanwhile (a stream longer than the read
// timeout) is served.
func TestSlowConnectionsAreClosedAndCappedWhileARequestIsServed(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("counts descriptors in /proc/self/fd")
	}
	const conns, maxConns, slack = 200, 20, 10
	timeout := 300 * time.Millisecond
	book := func(ctx context.Context, b trip.Booking) (string, error) {
		return "PNR-" + b.Flight, trip.Work(ctx, 3*timeout) // the stream outlives the read timeout
	}
	s := start(t, options{yes: true, book: book, maxConns: maxConns,
		readHeaderTimeout: timeout, readTimeout: timeout, idleTimeout: timeout}, "")
	addr := strings.TrimPrefix(s.url, "http://")
	before := openFiles(t)

	until := time.Now().Add(60 * time.Second) // far past any wait in line for the cap
	closed := make(chan error, conns)
	for i := range conns {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("dialling connection %d: %v", i, err)
		}
		go func() { closed <- dribble(c, i%2 == 0, until) }()
	}
	// By the first close, the server has had a read timeout to accept
	// every connection it would.
	results := []error{<-closed}
	if open := openFiles(t) - before; open > conns+maxConns+slack {
		t.Errorf("%d descriptors open for %d connections: the server holds more than %d", open, conns, maxConns)
	}

	ev := s.stream(t, "trip-meanwhile", tripRequest(""))
	if got := ev.content(); !strings.HasPrefix(got, "Booked BA117") {
		t.Errorf("the request sent during the flood: %q", got)
	}
	for len(results) < conns {
		results = append(results, <-closed)
	}
	left := 0
	for _, err := range results {
		if err != nil {
			left++
			if !errors.Is(err, errLeftOpen) {
				t.Error(err)
			}
		}
	}
	if left > 0 {
		t.Errorf("%d of %d slow connections were left open", left, conns)
	}
	s.client.CloseIdleConnections()
	if open := openFiles(t) - before; open > slack {
		t.Errorf("%d more descriptors open after the flood than before it", open)
	}
}

// A kept-alive connection is closed once idle for the idle timeout, and a
// header past maxHeaderBytes is refused.
func TestIdleConnectionsAreClosedAndHeadersAreBounded(t *testing.T) {
	s := start(t, options{idleTimeout: 200 * time.Millisecond}, "")
	c, err := net.Dial("tcp", strings.TrimPrefix(s.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	ask := func(header string) *http.Response {
		t.Helper()
		req := "GET /v1/models HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer " + anaKey + "\r\n" + header + "\r\n"
		if _, err := io.WriteString(c, req); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return resp
	}
	if resp := ask(""); resp.StatusCode != http.StatusOK || resp.Close {
		t.Fatalf("%s (close: %v), want 200 on a kept-alive connection", resp.Status, resp.Close)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second)) // short of the read timeout's default
	if _, err := r.ReadByte(); err != io.EOF && !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("reading the idle connection: %v, want it closed by the server", err)
	}

	c2, err := net.Dial("tcp", strings.TrimPrefix(s.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	c, r = c2, bufio.NewReader(c2)
	if resp := ask("X-Big: " + strings.Repeat("a", 2*maxHeaderBytes) + "\r\n"); resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("a header of %d bytes: %s, want 431", 2*maxHeaderBytes, resp.Status)
	}
}
