package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/examples/internal/trip"
)

// A client that disconnects stops its run (the package's promise), and
// the server's upkeep leaves the run be, however often it ticks: with -yes
// nothing would stand between it and the booking. The client's next
// request with the same session id resumes it, and the booking is made
// then, once.
func TestADisconnectedSessionWaitsForItsClientToResumeIt(t *testing.T) {
	var attempts, booked atomic.Int32
	gaveUp := make(chan struct{})
	book := func(ctx context.Context, b trip.Booking) (string, error) {
		if attempts.Add(1) == 1 {
			<-ctx.Done() // under way when the client leaves
			close(gaveUp)
			return "", fmt.Errorf("booking not sent: %w: %w", ctx.Err(), planexec.ErrNotApplied)
		}
		booked.Add(1)
		return "PNR-" + b.Flight, nil
	}
	tidied := make(chan struct{}, 1)
	s := start(t, options{yes: true, book: book, every: 5 * time.Millisecond, tidied: func() {
		select {
		case tidied <- struct{}{}:
		default:
		}
	}}, "")

	ctx, leave := context.WithCancel(t.Context())
	defer leave()
	req, err := http.NewRequestWithContext(ctx, "POST", s.url+"/v1/chat/completions", strings.NewReader(tripRequest("")))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("x-session-id", "trip-r")
	req.Header.Set("Authorization", "Bearer "+anaKey)
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(resp.Body)
	for lines.Scan() && !strings.Contains(lines.Text(), `"s3":{"status":"running"`) {
	}
	leave()
	_ = resp.Body.Close()
	<-gaveUp

	// Once the request's execution has let the run go, two ticks of the
	// upkeep that began after it.
	for status(t, s.db, "ana", "trip-r") == planexec.RunRunning {
		<-tidied
	}
	<-tidied
	<-tidied
	if n := attempts.Load(); n != 1 {
		t.Errorf("the booking was attempted %d times with its client gone, want once (the attempt it left)", n)
	}
	if got := status(t, s.db, "ana", "trip-r"); got != planexec.RunInterrupted {
		t.Errorf("the session is %s with its client gone, want %s", got, planexec.RunInterrupted)
	}
	for _, e := range history(t, s.db, "ana", "trip-r") {
		if e.Kind == planexec.EventStepStarted && e.Tool == "send_itinerary" {
			t.Error("the itinerary was sent with the session's client gone")
		}
	}

	ev := s.stream(t, "trip-r", tripRequest(""))
	if got := ev.content(); !strings.HasPrefix(got, "Booked BA117") {
		t.Errorf("resumed by its client: %q\n%s", got, strings.Join(ev.lines, "\n"))
	}
	if n := booked.Load(); n != 1 {
		t.Errorf("booked %d times, want once", n)
	}
}
