package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/planexec/planexec"
)

func TestTheTripIsReplannedRunsTogetherAndBooksOnceApproved(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), strings.NewReader(""), &out, options{yes: true}); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	text := out.String()
	order := []string{"PLAN_REFUSED", "REPLANNED", "PLANNED", "AUTONOMY_CLEARED", "APPROVAL_REQUIRED", "APPROVAL_GRANTED", "PLAN_COMPLETED", "booked: PNR-BA117-"}
	at := 0
	for _, want := range order {
		i := strings.Index(text[at:], want)
		if i < 0 {
			t.Fatalf("%q missing or out of order in:\n%s", want, text)
		}
		at += i
	}
	// The search and the room hold do not depend on each other: both start
	// before either finishes.
	lines := strings.Split(text, "\n")
	started, executed := map[string]int{}, map[string]int{}
	for n, l := range lines {
		for _, id := range []string{"s1", "s2"} {
			if strings.Contains(l, "STEP_STARTED") && strings.Contains(l, " "+id+" ") {
				started[id] = n
			}
			if strings.Contains(l, "STEP_EXECUTED") && strings.Contains(l, " "+id+" ") {
				executed[id] = n
			}
		}
	}
	if len(started) != 2 || len(executed) != 2 {
		t.Fatalf("s1 and s2 did not both run:\n%s", text)
	}
	if max(started["s1"], started["s2"]) > min(executed["s1"], executed["s2"]) {
		t.Errorf("s1 and s2 did not run together:\n%s", text)
	}
}

func TestWithoutATerminalOrYesTheBookingIsDeniedAndNothingRuns(t *testing.T) {
	var out bytes.Buffer
	err := run(context.Background(), strings.NewReader("y\n"), &out, options{})
	var denied *planexec.ApprovalDeniedError
	if !errors.As(err, &denied) || denied.Tool != "book_flight" {
		t.Fatalf("err = %v, want the booking denied", err)
	}
	if strings.Contains(out.String(), "STEP_STARTED") {
		t.Errorf("a step ran although the plan was not cleared:\n%s", out.String())
	}
}

// cancelOn cancels when a line containing marker is written.
type cancelOn struct {
	bytes.Buffer
	marker string
	cancel context.CancelFunc
}

func (w *cancelOn) Write(p []byte) (int, error) {
	if strings.Contains(string(p), w.marker) {
		w.cancel()
	}
	return w.Buffer.Write(p)
}

func TestAnInterruptedRunIsResumedFromItsStoreWithoutRedoingWhatFinished(t *testing.T) {
	store := "sqlite:" + t.TempDir() + "/trip.db"
	ctx, cancel := context.WithCancel(context.Background())
	first := &cancelOn{marker: "STEP_EXECUTED", cancel: cancel}
	err := run(ctx, strings.NewReader(""), first, options{yes: true, store: store, run: "trip-1"})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("the interrupted run returned %v, want context.Canceled\n%s", err, first.String())
	}
	var second bytes.Buffer
	if err := run(context.Background(), strings.NewReader(""), &second, options{yes: true, store: store, run: "trip-1"}); err != nil {
		t.Fatalf("resume: %v\n%s", err, second.String())
	}
	text := second.String()
	for _, want := range []string{"PLAN_RESUMED", "(replayed)", "PLAN_COMPLETED", "resumed run trip-1", "booked: PNR-BA117-"} {
		if !strings.Contains(text, want) {
			t.Errorf("the resumed run does not show %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "PLANNED") {
		t.Errorf("the resumed run planned again:\n%s", text)
	}
}
