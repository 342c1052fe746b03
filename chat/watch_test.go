package chat_test

import (
	"context"
	"errors"
	"iter"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/planexec/planexec/chat"
	"github.com/planexec/planexec/llm"
	"github.com/planexec/planexec/llm/scripted"
	"github.com/planexec/planexec/store"
)

func TestASlowWatcherIsDroppedNeverStallsTheTurnAndResumesWithoutAGap(t *testing.T) {
	model := scripted.New(
		say("Hello."),
		say("one", call("list_items", `{}`), call("list_items", `{}`)),
		say("two", call("list_items", `{}`), call("list_items", `{}`)),
		say("three", call("list_items", `{}`), call("list_items", `{}`)),
		say("done"),
	)
	r := newRig(t, model, func(c *chat.Config) { c.WatchLag = 4 })
	s := r.session("s1")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	r.turn(ana(), s, "Hello")
	next, stop := iter.Pull2(r.chat.Watch(ctx, "acme", s, 0))
	defer stop()
	var first chat.Output
	for first.Kind != chat.KindDone { // caught up with the session
		var err error
		if first, err, _ = next(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.chat.Send(ctx, ana(), s, "Look three times"); err != nil {
		t.Fatal(err)
	}
	// The watcher reads nothing more; the turn ends all the same.
	deadline := time.Now().Add(5 * time.Second)
	for {
		sess, err := r.chat.Session(ctx, "acme", s)
		if err != nil {
			t.Fatal(err)
		}
		if !sess.Running && sess.Seq > first.Seq+10 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the turn stalled behind a watcher that reads nothing")
		}
		time.Sleep(5 * time.Millisecond)
	}
	last := first.Seq
	var dropped error
	for {
		o, err, ok := next()
		if !ok {
			break
		}
		if err != nil {
			dropped = err
			break
		}
		if o.Seq != last && o.Seq != last+1 {
			t.Fatalf("a gap: %d after %d", o.Seq, last)
		}
		last = o.Seq
	}
	if !errors.Is(dropped, chat.ErrWatcherDropped) {
		t.Fatalf("the slow watcher ended with %v, want ErrWatcherDropped", dropped)
	}
	// Watching again from the last seq seen goes on without a gap.
	for o, err := range r.chat.Watch(ctx, "acme", s, last) {
		if err != nil {
			t.Fatal(err)
		}
		if o.Seq != last && o.Seq != last+1 {
			t.Fatalf("a gap on resuming: %d after %d", o.Seq, last)
		}
		last = o.Seq
		if o.Kind == chat.KindDone {
			return
		}
	}
}

func TestAnotherProcessSeesTheTurnBusyAndItsCancelStopsIt(t *testing.T) {
	model := scripted.New(say("", call("list_items", `{}`), call("get_item", `{"id":"T-1"}`)), say("never"))
	r := newRig(t, model, func(c *chat.Config) { c.Lease = 300 * time.Millisecond })
	r.tracker.release = make(chan struct{}) // never released: only a cancel ends the call
	r.tracker.started = make(chan string, 2)
	// A second process over the same store.
	other, err := chat.New(chat.Config{Model: scripted.New(), Store: r.store, Reads: r.tracker.reads(), Engine: r.engine, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(context.Background())
	s := r.session("s1")
	ctx := context.Background()

	sent, err := r.chat.Send(ctx, ana(), s, "Look")
	if err != nil {
		t.Fatal(err)
	}
	<-r.tracker.started
	if _, err := other.Send(ctx, ben(), s, "me too"); !errors.Is(err, chat.ErrTurnBusy) {
		t.Fatalf("a send on another process: %v", err)
	}
	if sess, err := other.Session(ctx, "acme", s); err != nil || !sess.Running {
		t.Fatalf("another process sees %+v, %v", sess, err)
	}
	running, err := other.Cancel(ctx, ben(), s)
	if err != nil || !running {
		t.Fatalf("Cancel on another process = %v, %v", running, err)
	}
	out := r.until(s, sent.Seq-1, chat.KindDone)
	if got := out[len(out)-1].Done.Reason; got != chat.Cancelled {
		t.Fatalf("done: %s", got)
	}
	if r.tracker.called("get_item") != 0 || len(model.Requests()) != 1 {
		t.Fatal("the turn went on after a cancel from another process")
	}
	_ = llm.Usage{}
}

// countingStore counts the reads a watcher makes.
type countingStore struct {
	store.TranscriptStore
	transcripts, sessions atomic.Int64
	// read gets a value, when it has room, at each read of a session.
	read chan struct{}
}

func (s *countingStore) Transcript(ctx context.Context, tenant, session string, after int64, limit int) ([]store.TranscriptEntry, error) {
	s.transcripts.Add(1)
	return s.TranscriptStore.Transcript(ctx, tenant, session, after, limit)
}

func (s *countingStore) Session(ctx context.Context, tenant, id string) (store.SessionRecord, error) {
	s.sessions.Add(1)
	select {
	case s.read <- struct{}{}:
	default: // a wake-up is pending already
	}
	return s.TranscriptStore.Session(ctx, tenant, id)
}

// A watcher caught up with an idle session reads one record a poll, the
// session's, and its transcript only when the session has gone on.
func TestAnIdleWatcherReadsOnlyTheSessionsRecordEachPoll(t *testing.T) {
	var counted *countingStore
	r := newRig(t, scripted.New(say("Hello."), say("Again.")), func(c *chat.Config) {
		counted = &countingStore{TranscriptStore: c.Store, read: make(chan struct{}, 1)}
		c.Store, c.PollInterval = counted, 2*time.Millisecond
	})
	s := r.session("s1")
	r.turn(ana(), s, "Hello")
	sess, err := r.chat.Session(context.Background(), "acme", s)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// The watch ends with its context, which ends the goroutine reading it;
	// stop runs only then, as iter.Pull asks, however the test ends.
	wctx, endWatch := context.WithCancel(ctx)
	next, stop := iter.Pull2(r.chat.Watch(wctx, "acme", s, sess.Seq))
	got := make(chan chat.Output)
	reading := make(chan struct{})
	go func() {
		defer close(reading)
		for {
			o, err, ok := next()
			if !ok || err != nil {
				return
			}
			select {
			case got <- o:
			case <-wctx.Done():
				return
			}
		}
	}()
	defer func() {
		endWatch()
		<-reading
		stop()
	}()
	transcripts, sessions := counted.transcripts.Load(), counted.sessions.Load()
	for counted.sessions.Load() < sessions+20 { // twenty polls of an idle session
		select {
		case <-counted.read:
		case <-ctx.Done():
			t.Fatalf("the idle watcher polled %d times in 10s, want 20", counted.sessions.Load()-sessions)
		}
	}
	if n := counted.transcripts.Load() - transcripts; n > 1 {
		t.Errorf("the idle watcher read the transcript %d times in twenty polls, want at most once", n)
	}
	// The session goes on: the watcher reads it.
	r.turn(ana(), s, "Hello again")
	select {
	case o := <-got:
		if o.Seq != sess.Seq+1 {
			t.Errorf("the watcher's next output is %+v, want the next entry", o)
		}
	case <-ctx.Done():
		t.Fatal("the watcher never saw the session go on")
	}
}
