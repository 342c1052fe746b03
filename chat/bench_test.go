package chat_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/chat"
	"github.com/planexec/planexec/llm"
	"github.com/planexec/planexec/store"
	"github.com/planexec/planexec/store/memory"
	"github.com/planexec/planexec/store/sqlite"
)

// benchStore keeps both the engine's runs and the chat's transcripts, as a
// service's one store does.
type benchStore interface {
	store.Store
	store.TranscriptStore
}

// benchStores are the stores a benchmark runs over: in memory, and a fresh
// SQLite file at its default (synchronous=FULL).
var benchStores = []struct {
	name string
	open func(b *testing.B) benchStore
}{
	{"memory", func(b *testing.B) benchStore { return memory.New() }},
	{"sqlite", func(b *testing.B) benchStore {
		st, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "chat.db"))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { st.Close() })
		return st
	}},
}

// noLeaks fails b when goroutines started during it are still running once
// its cleanups (the Chat's Close among them) have run. Call it first, so
// that its check runs last.
func noLeaks(b *testing.B) {
	before := runtime.NumGoroutine()
	b.Cleanup(func() {
		deadline := time.Now().Add(5 * time.Second)
		for runtime.NumGoroutine() > before {
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<20)
				b.Errorf("%d goroutines outlive the benchmark, %d ran before it:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
				return
			}
			time.Sleep(time.Millisecond)
		}
	})
}

// benchTracker is the fixtures' tracker with 20 items, half of them open,
// so that a list reads as long as a small project's.
func benchTracker() *tracker {
	tr := newTracker()
	for i := 2; i <= 20; i++ {
		state := "open"
		if i%2 == 0 {
			state = "done"
		}
		id := fmt.Sprintf("T-%d", i)
		tr.items[id] = &item{ID: id, Title: fmt.Sprintf("Item %d: review the release notes and the migration guide", i), State: state, Version: 1}
	}
	tr.next = 21
	return tr
}

// benchChat is a Chat over a benchTracker and st, its transcripts kept
// through transcripts (st when nil), with the defaults of Config but the
// logger; it is closed when b ends.
func benchChat(b *testing.B, st benchStore, transcripts store.TranscriptStore, model llm.Model, tune ...func(*chat.Config)) *chat.Chat {
	b.Helper()
	tr := benchTracker()
	engine, err := planexec.NewExecutor(planexec.Config{Tools: append(tr.reads(), tr.writes()...), Store: st})
	if err != nil {
		b.Fatal(err)
	}
	if transcripts == nil {
		transcripts = st
	}
	cfg := chat.Config{Model: model, Store: transcripts, Reads: tr.reads(), Engine: engine, Logger: slog.New(slog.DiscardHandler)}
	for _, f := range tune {
		f(&cfg)
	}
	c, err := chat.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.Close(ctx); err != nil {
			b.Errorf("closing the chat: %v", err)
		}
		// testing keeps a finished run's cleanups while the next -count
		// runs: let go of the chat, or its store counts in their heap.
		c = nil
	})
	return c
}

// createSessions creates ana's sessions prefix0 … prefix(n-1).
func createSessions(b *testing.B, c *chat.Chat, prefix string, n int) []string {
	b.Helper()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = prefix + fmt.Sprint(i)
		if _, err := c.Create(context.Background(), ana(), chat.SessionOptions{ID: ids[i]}); err != nil {
			b.Fatal(err)
		}
	}
	return ids
}

// The answers of the instant model: two reads a round, then a text.
var (
	roundAnswers = []string{
		say("Let me look.", call("list_items", `{}`), call("get_item", `{"id":"T-1"}`)).Content,
		say("And the open ones.", call("list_items", `{"state":"open"}`), call("get_item", `{"id":"T-3"}`)).Content,
	}
	finalAnswer = say("Ten items are open, T-1 (Write the README) and T-3 among them; T-2 is done.").Content
)

const question = "What is still open before the release, and what does T-1 need?"

// instant is a planner model that answers at once by what each request
// shows, so that a benchmark measures the chat and not a model: rounds
// rounds of two reads a turn, then a text; a summary when asked for one.
// Unlike scripted.Model it keeps no requests, so a long benchmark does not
// grow with them.
type instant struct {
	rounds atomic.Int64
	// firstUsage, when set, is the input tokens the first answer of a turn
	// reports, to start a compaction before the turn's second call.
	firstUsage atomic.Int64
	// hold, when set, keeps each turn at its first call.
	hold atomic.Pointer[hold]
	// summarised is told of each summary request as it arrives.
	summarised func(req *llm.Request)
}

// hold keeps turns at their first model call until release is closed, so
// that a benchmark can look at them all mid-turn; each says so on arrived.
type hold struct {
	arrived chan struct{}
	release chan struct{}
}

func newInstant(rounds int) *instant {
	m := &instant{}
	m.rounds.Store(int64(rounds))
	return m
}

func (m *instant) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	summary := summarising(req)
	if summary && m.summarised != nil {
		m.summarised(req) // first: it times the request's arrival
	}
	usage := llm.Usage{InputTokens: (requestBytes(req) + 3) / 4, OutputTokens: 40, Calls: 1}
	if summary {
		return &llm.Response{Content: "SUMMARY: ana asked what is open before the release; ten items are, T-1 and T-3 among them.", FinishReason: "stop", Usage: usage, Model: "instant"}, nil
	}
	round := roundOf(req)
	answer := finalAnswer
	if round < int(m.rounds.Load()) {
		answer = roundAnswers[round%len(roundAnswers)]
	}
	if round == 0 {
		if h := m.hold.Load(); h != nil {
			h.arrived <- struct{}{}
			select {
			case <-h.release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			runtime.KeepAlive(req) // held, as a provider's call holds its request
		}
		if u := m.firstUsage.Load(); u > 0 {
			usage.InputTokens = u
		}
	}
	return &llm.Response{Content: answer, FinishReason: "stop", Usage: usage, Model: "instant"}, nil
}

// roundOf is how many rounds of calls the request's turn has run: the
// results told since the person's latest message.
func roundOf(req *llm.Request) int {
	n := 0
	for i := len(req.Messages) - 1; i >= 0; i-- {
		m := &req.Messages[i]
		if m.Role != llm.RoleUser {
			continue
		}
		if !strings.HasPrefix(m.Content, "Results of your tool calls") {
			break
		}
		n++
	}
	return n
}

// requestBytes is the size of what a request sends: system prompt,
// messages and the answer's schema.
func requestBytes(req *llm.Request) int64 {
	n := len(req.System)
	for _, m := range req.Messages {
		n += len(m.Content)
	}
	if req.Output != nil {
		n += len(req.Output.Schema)
	}
	return int64(n)
}

// turnCheck follows one turn's outputs and says whether it ended as a
// benchmark's turn must: end_turn after the rounds asked for, each of
// their two calls answered ok.
type turnCheck struct {
	rounds, ok int
	done       *chat.Done
	compacted  []*chat.Compaction
}

// see takes the next output and reports whether the turn is done.
func (tc *turnCheck) see(o *chat.Output) bool {
	switch o.Kind {
	case chat.KindToolResult:
		if o.Result.Status == chat.CallOK {
			tc.ok++
		}
	case chat.KindCompacted:
		tc.compacted = append(tc.compacted, o.Compaction)
	case chat.KindDone:
		tc.done = o.Done
		return true
	}
	return false
}

func (tc *turnCheck) err(session string) error {
	switch {
	case tc.done == nil:
		return fmt.Errorf("session %s: the turn has no done", session)
	case tc.done.Reason != chat.EndTurn:
		return fmt.Errorf("session %s: the turn ended with %s, want %s", session, tc.done.Reason, chat.EndTurn)
	case tc.done.Rounds != tc.rounds || tc.ok != 2*tc.rounds:
		return fmt.Errorf("session %s: the turn ran %d rounds with %d calls ok, want %d and %d", session, tc.done.Rounds, tc.ok, tc.rounds, 2*tc.rounds)
	}
	return nil
}

// watchedTurn sends the question to session and watches the turn to its
// done, as a client following it would.
func watchedTurn(c *chat.Chat, session string, rounds int) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sent, err := c.Send(ctx, ana(), session, question)
	if err != nil {
		return err
	}
	tc := turnCheck{rounds: rounds}
	for o, err := range c.Watch(ctx, "acme", session, sent.Seq-1) {
		if err != nil {
			return fmt.Errorf("watching session %s: %w", session, err)
		}
		if tc.see(&o) {
			break
		}
	}
	return tc.err(session)
}

// checkTranscript checks the turn of session stored after seq after.
func checkTranscript(c *chat.Chat, session string, after int64, rounds int) (*turnCheck, error) {
	out, err := c.Transcript(context.Background(), "acme", session, after, 0)
	if err != nil {
		return nil, err
	}
	tc := &turnCheck{rounds: rounds}
	for i := range out {
		if tc.see(&out[i]) && i != len(out)-1 {
			return nil, fmt.Errorf("session %s: entries after the turn's done", session)
		}
	}
	return tc, tc.err(session)
}

// observed is a transcript store that tells when a turn's writes return: a
// benchmark waits on ended for a turn's last write instead of watching it,
// and reads the instants around a compaction.
type observed struct {
	store.TranscriptStore
	ended chan struct{}

	mu        sync.Mutex
	written   time.Time // the latest write but a compaction's
	compacted time.Time // the latest compaction's write
}

func observe(st store.TranscriptStore) *observed {
	return &observed{TranscriptStore: st, ended: make(chan struct{}, 1)}
}

func (o *observed) WriteTurn(ctx context.Context, w *store.TurnWrite) (store.TurnResult, error) {
	res, err := o.TranscriptStore.WriteTurn(ctx, w)
	now := time.Now()
	o.mu.Lock()
	if len(w.Entries) == 1 && bytes.Contains(w.Entries[0], []byte(`"kind":"compacted"`)) {
		o.compacted = now
	} else {
		o.written = now
	}
	o.mu.Unlock()
	if err == nil && w.End {
		select { // one turn at a time: never full unless a benchmark gave up
		case o.ended <- struct{}{}:
		default:
		}
	}
	return res, err
}

// unwatchedTurn sends the question to session and waits for the turn's
// last write.
func unwatchedTurn(c *chat.Chat, obs *observed, session string) error {
	if _, err := c.Send(context.Background(), ana(), session, question); err != nil {
		return err
	}
	select {
	case <-obs.ended:
		return nil
	case <-time.After(time.Minute):
		return fmt.Errorf("session %s: the turn did not end in a minute", session)
	}
}

// BenchmarkTurnOverhead is the chat's own cost of one turn, the model
// answering at once: the person's message, two rounds of two reads, and the
// answer that ends the turn (three model calls, four tool calls, nine
// writes), each turn the first of a fresh session. "watched" follows each
// turn with Watch to its done, as a client would; "unwatched" waits for the
// turn's last write, so the watcher's share shows. It reports µs/turn, and
// µs, allocations and bytes per model call.
func BenchmarkTurnOverhead(b *testing.B) {
	const rounds = 2
	const callsPerTurn = rounds + 1
	for _, st := range benchStores {
		for _, watched := range []bool{true, false} {
			name := st.name + "/unwatched"
			if watched {
				name = st.name + "/watched"
			}
			b.Run(name, func(b *testing.B) {
				noLeaks(b)
				s := st.open(b)
				obs := observe(s)
				c := benchChat(b, s, obs, newInstant(rounds))
				ids := createSessions(b, c, "s", b.N)
				calls := c.Stats().ModelCalls
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				b.ReportAllocs()
				b.ResetTimer()
				for _, id := range ids {
					var err error
					if watched {
						err = watchedTurn(c, id, rounds)
					} else {
						err = unwatchedTurn(c, obs, id)
					}
					if err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				runtime.ReadMemStats(&after)
				calls = c.Stats().ModelCalls - calls
				if calls != int64(callsPerTurn*b.N) {
					b.Fatalf("%d model calls for %d turns, want %d each", calls, b.N, callsPerTurn)
				}
				if !watched {
					for _, id := range ids {
						if _, err := checkTranscript(c, id, 0, rounds); err != nil {
							b.Fatal(err)
						}
					}
				}
				us := float64(b.Elapsed().Nanoseconds()) / 1e3
				b.ReportMetric(us/float64(b.N), "µs/turn")
				b.ReportMetric(us/float64(calls), "µs/call")
				b.ReportMetric(float64(after.Mallocs-before.Mallocs)/float64(calls), "allocs/call")
				b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(calls), "B/call")
			})
		}
	}
}

// BenchmarkCompaction200 is the cost of compacting a conversation of 200
// entries (25 turns of one round of two reads) in memory, the model
// summarising at once: the turn after them has its first answer report more
// tokens than Config.CompactAtTokens, so that before its second call the
// 200 entries before the person's message are summarised. It reports the
// compaction step from the turn's last write before it to its compacted
// entry stored (µs/compaction), in two parts: render-µs, the estimate and
// the rendering of the summary request, up to its arrival at the model;
// write-µs, from there to the compaction stored (the model's instant
// answer, the meter and the write). It reports too the bytes of the summary
// request and of the 200 entries as stored. ns/op is the whole turn.
func BenchmarkCompaction200(b *testing.B) {
	const limit, turns, entries = 500_000, 25, 200
	noLeaks(b)
	ctx := context.Background()
	mem := memory.New()
	obs := observe(mem)
	model := newInstant(1)
	var asked, before time.Time
	var requestSize int64
	model.summarised = func(req *llm.Request) {
		now := time.Now()
		obs.mu.Lock()
		asked, before, requestSize = now, obs.written, requestBytes(req)
		obs.mu.Unlock()
	}
	c := benchChat(b, mem, obs, model, func(cfg *chat.Config) { cfg.CompactAtTokens = limit })
	createSessions(b, c, "template", 1)
	for range turns {
		if err := unwatchedTurn(c, obs, "template0"); err != nil {
			b.Fatal(err)
		}
	}
	tmpl, err := mem.Session(ctx, "acme", "template0")
	if err != nil || tmpl.Seq != entries {
		b.Fatalf("the conversation to compact has %d entries (%v), want %d", tmpl.Seq, err, entries)
	}
	stored, err := mem.Transcript(ctx, "acme", "template0", 0, entries)
	if err != nil {
		b.Fatal(err)
	}
	raw := make([]json.RawMessage, len(stored))
	var storedBytes int
	for i, e := range stored {
		raw[i] = e.Entry
		storedBytes += len(e.Entry)
	}
	model.firstUsage.Store(2 * limit)

	var render, write time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		id := fmt.Sprint("c", i)
		if err := mem.CreateSession(ctx, store.SessionRecord{Tenant: "acme", ID: id, Doc: tmpl.Doc}); err != nil {
			b.Fatal(err)
		}
		if _, err := mem.AppendEntries(ctx, "acme", id, raw); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if err := unwatchedTurn(c, obs, id); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		tc, err := checkTranscript(c, id, entries, 1)
		if err != nil {
			b.Fatal(err)
		}
		if len(tc.compacted) != 1 || tc.compacted[0].UpTo != entries {
			b.Fatalf("session %s: compactions %+v, want one up to %d", id, tc.compacted, entries)
		}
		obs.mu.Lock()
		render += asked.Sub(before)
		write += obs.compacted.Sub(asked)
		obs.mu.Unlock()
		b.StartTimer()
	}
	b.StopTimer()
	if st := c.Stats(); st.Compactions != int64(b.N) || st.CompactionFailures != 0 {
		b.Fatalf("stats %+v after %d turns, want a compaction each", st, b.N)
	}
	n := float64(b.N)
	b.ReportMetric(float64((render+write).Nanoseconds())/1e3/n, "µs/compaction")
	b.ReportMetric(float64(render.Nanoseconds())/1e3/n, "render-µs")
	b.ReportMetric(float64(write.Nanoseconds())/1e3/n, "write-µs")
	b.ReportMetric(float64(requestSize), "summary-req-B")
	b.ReportMetric(float64(storedBytes), "transcript-B")
}

// BenchmarkConcurrentSessions100 runs a turn (as BenchmarkTurnOverhead's)
// on each of 100 fresh sessions at once, each sent and watched to its done
// by a goroutine of its own. It reports turns/s, the 50th and 99th
// percentiles of a turn's latency from Send to the done watched, and, from
// a round before the timed ones whose turns are all held at their first
// model call (each holding its request), the live heap after a collection
// then (heap-MB) and, above the heap and stacks before the round, what
// each turn in flight with its watcher holds (heap-KB/turn, stack-KB/turn).
func BenchmarkConcurrentSessions100(b *testing.B) {
	const n, rounds = 100, 2
	for _, st := range benchStores {
		b.Run(st.name, func(b *testing.B) {
			noLeaks(b)
			model := newInstant(rounds)
			c := benchChat(b, st.open(b), nil, model)

			// All n turns in flight, held at their first call.
			ids := createSessions(b, c, "held", n)
			h := &hold{arrived: make(chan struct{}, n), release: make(chan struct{})}
			model.hold.Store(h)
			var base, mid runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&base)
			var wg sync.WaitGroup
			for _, id := range ids {
				wg.Go(func() {
					if err := watchedTurn(c, id, rounds); err != nil {
						b.Error(err)
					}
				})
			}
			timeout := time.After(time.Minute)
			for range n {
				select {
				case <-h.arrived:
				case <-timeout:
					b.Error("the turns did not all reach their first call in a minute")
				}
				if b.Failed() {
					break
				}
			}
			if !b.Failed() {
				runtime.GC()
				runtime.ReadMemStats(&mid)
			}
			close(h.release)
			wg.Wait()
			model.hold.Store(nil)
			if b.Failed() {
				b.FailNow()
			}

			var latencies []time.Duration
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				ids := createSessions(b, c, fmt.Sprintf("r%d-", i), n)
				took := make([]time.Duration, n)
				b.StartTimer()
				var wg sync.WaitGroup
				for j, id := range ids {
					wg.Go(func() {
						start := time.Now()
						if err := watchedTurn(c, id, rounds); err != nil {
							b.Error(err)
						}
						took[j] = time.Since(start)
					})
				}
				wg.Wait()
				b.StopTimer()
				if b.Failed() {
					b.FailNow()
				}
				latencies = append(latencies, took...)
				b.StartTimer()
			}
			b.StopTimer()
			slices.Sort(latencies)
			ms := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }
			b.ReportMetric(float64(len(latencies))/b.Elapsed().Seconds(), "turns/s")
			b.ReportMetric(ms(latencies[len(latencies)/2]), "ms-p50")
			b.ReportMetric(ms(latencies[min(len(latencies)-1, len(latencies)*99/100)]), "ms-p99")
			b.ReportMetric(float64(mid.HeapAlloc)/(1<<20), "heap-MB")
			b.ReportMetric((float64(mid.HeapAlloc)-float64(base.HeapAlloc))/n/1024, "heap-KB/turn")
			b.ReportMetric((float64(mid.StackInuse)-float64(base.StackInuse))/n/1024, "stack-KB/turn")
		})
	}
}
