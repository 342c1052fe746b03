//go:build unix

package plannerapi_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/llm"
	"github.com/planexec/planexec/llm/scripted"
	"github.com/planexec/planexec/plannerapi"
	"github.com/planexec/planexec/store/memory"
)

// smallBuffers is a listener whose connections have small send buffers, so
// that a client that does not read holds up the server's writes soon.
type smallBuffers struct{ net.Listener }

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(4 << 10)
	}
	return c, err
}

// lastWord is a model whose answer, once rounds rounds ran, waits for
// open to be closed, or its call to be cancelled.
type lastWord struct {
	llm.Model
	rounds int
	open   chan struct{}
}

func (l lastWord) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	if strings.Count(req.Messages[0].Content, " ran (goal: ") >= l.rounds {
		select {
		case <-l.open:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return l.Model.Generate(ctx, req)
}

// wordyServer serves runs of many rounds of many steps, each shown at
// length: a stream with much to say. Only one run is served at a time, and
// the planner's answer waits until answer is closed or the run stops.
func wordyServer(t *testing.T, rounds int, writeTimeout time.Duration, answer chan struct{}) (*httptest.Server, <-chan struct{}) {
	t.Helper()
	tool := planexec.MustTool("search_flights", "Find flights.", func(ctx context.Context, s search) ([]string, error) {
		return []string{strings.Repeat("x", 250)}, nil
	})
	ex, err := planexec.NewExecutor(planexec.Config{Tools: []*planexec.Tool{tool}, Store: memory.New(), MaxRounds: rounds + 1})
	if err != nil {
		t.Fatal(err)
	}
	var steps []string
	for i := range 24 {
		steps = append(steps, fmt.Sprintf(`{"id":"s%d","tool":"search_flights","arguments":{"origin":"LHR","destination":"D%02d"},"intent":%q}`,
			i, i, strings.Repeat("i", 270)))
	}
	round := `{"goal":"search","steps":[` + strings.Join(steps, ",") + `],"answer":null,"question":null}`
	model := scripted.Respond(func(req *llm.Request) scripted.Reply {
		if strings.Count(req.Messages[0].Content, " ran (goal: ") < rounds {
			return scripted.Reply{Content: round}
		}
		return scripted.Reply{Content: `{"goal":"","steps":[],"answer":"Done.","question":null}`}
	})
	srv, err := plannerapi.New(plannerapi.Config{Executor: ex, Models: map[string]llm.Model{"planexec": lastWord{model, rounds, answer}},
		MaxRuns: 1, WriteTimeout: writeTimeout})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewUnstartedServer(srv)
	hs.Listener = smallBuffers{hs.Listener}
	// The first connection's end: the server is done with its request.
	firstGone := make(chan struct{})
	var once sync.Once
	var first net.Conn
	hs.Config.ConnState = func(c net.Conn, s http.ConnState) {
		once.Do(func() { first = c })
		if c == first && (s == http.StateClosed || s == http.StateHijacked) {
			close(firstGone)
		}
	}
	hs.Start()
	t.Cleanup(hs.Close)
	return hs, firstGone
}

// A client that reads a stream's headers and then nothing more loses its
// stream once a write has waited WriteTimeout, not the server's place for
// a run: its run stops (its answer cannot come before), another client's
// run is served, and the session resumes where it stopped.
func TestAClientThatStopsReadingLosesItsStreamNotItsRunSlot(t *testing.T) {
	answer := make(chan struct{})
	hs, firstGone := wordyServer(t, 10, 200*time.Millisecond, answer)
	// A small receive buffer from the start: the window the client offers
	// stays small.
	dialer := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4<<10) })
	}}
	conn, err := dialer.Dial("tcp", hs.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"model":"planexec","planner_mode":true,"stream":true,"messages":` + ask1 + `}`
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nX-Session-Id: s1\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("%d %v", resp.StatusCode, resp.Header)
	}
	// The client reads no more.
	select {
	case <-firstGone:
	case <-time.After(20 * time.Second):
		t.Fatal("the server still holds the stream of a client that stopped reading")
	}
	// The handler is done, so the run stopped: it could not answer yet.
	close(answer)
	if a := ask(t, hs.URL, "s2", ask1); a.status != http.StatusOK {
		t.Errorf("another session meanwhile: %d %+v, want it served", a.status, a.body)
	}
	if a := ask(t, hs.URL, "s1", ask1); a.status != http.StatusOK || *a.body.Choices[0].Message.Content != "Done." {
		t.Errorf("the session resumed: %d %+v", a.status, a.body)
	}
}
