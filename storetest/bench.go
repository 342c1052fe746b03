package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/store"
)

// ConcurrentRuns measures a store under a service's load: runs runs of a
// five-step plan (one step, three after it side by side, one after those),
// all started at once on one executor over the store that open returns for
// each iteration. It reports runs per second, allocations per run and the
// 99th percentile of a run's latency (from its start to Execute's return).
func ConcurrentRuns(b *testing.B, runs int, open func(b *testing.B) store.Store) {
	tool := planexec.MustTool("errand", "Run an errand.", func(ctx context.Context, a errand) (string, error) {
		return "done " + a.Item, nil
	})
	plan := planexec.Plan{Goal: "five errands", Steps: []planexec.Step{
		{ID: "s0", Tool: "errand", Arguments: json.RawMessage(`{"item":"0"}`)},
		{ID: "s1", Tool: "errand", Arguments: json.RawMessage(`{"item":"1"}`), DependsOn: []string{"s0"}},
		{ID: "s2", Tool: "errand", Arguments: json.RawMessage(`{"item":"2"}`), DependsOn: []string{"s0"}},
		{ID: "s3", Tool: "errand", Arguments: json.RawMessage(`{"item":"3"}`), DependsOn: []string{"s0"}},
		{ID: "s4", Tool: "errand", Arguments: json.RawMessage(`{"item":"4"}`), DependsOn: []string{"s1", "s2", "s3"}},
	}}
	var (
		mu        sync.Mutex
		latencies []time.Duration
		mallocs   uint64
	)
	iteration := 0
	for b.Loop() {
		iteration++
		b.StopTimer()
		ex, err := planexec.NewExecutor(planexec.Config{Tools: []*planexec.Tool{tool}, Store: open(b)})
		if err != nil {
			b.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		b.StartTimer()
		var wg sync.WaitGroup
		for i := range runs {
			wg.Go(func() {
				start := time.Now()
				run, err := ex.Run(planexec.Delegation{RunID: fmt.Sprintf("run-%d-%d", iteration, i), Tenant: "bench"})
				if err != nil {
					b.Error(err)
					return
				}
				res, err := run.Execute(context.Background(), plan)
				took := time.Since(start)
				if err != nil || !res.Complete {
					b.Errorf("run %d: %v", i, err)
					return
				}
				mu.Lock()
				latencies = append(latencies, took)
				mu.Unlock()
			})
		}
		wg.Wait()
		b.StopTimer()
		runtime.ReadMemStats(&after)
		mallocs += after.Mallocs - before.Mallocs
		b.StartTimer()
	}
	total := float64(b.N * runs)
	b.ReportMetric(total/b.Elapsed().Seconds(), "runs/s")
	b.ReportMetric(float64(mallocs)/total, "allocs/run")
	slices.Sort(latencies)
	if len(latencies) > 0 {
		b.ReportMetric(float64(latencies[min(len(latencies)-1, len(latencies)*99/100)].Milliseconds()), "ms-p99/run")
	}
}

// TranscriptLoad measures loading a conversation of 10,000 entries (of
// about 300 bytes each, mixed) whole from ts, in pages of 1,000, as a
// client reading it from the start would. It writes session "c1" of tenant
// "acme" first, so ts should be fresh. It reports ms/load, entries/s and the
// bytes of an entry as written (B/entry).
func TranscriptLoad(b *testing.B, ts store.TranscriptStore) {
	ctx := context.Background()
	if err := ts.CreateSession(ctx, store.SessionRecord{Tenant: "acme", ID: "c1", Doc: json.RawMessage(`{"title":"New York"}`)}); err != nil {
		b.Fatal(err)
	}
	const total, page = 10_000, 1_000
	var stored int
	for from := 0; from < total; from += page {
		entries, size := transcriptEntries(from, from+page)
		stored += size
		if _, err := ts.AppendEntries(ctx, "acme", "c1", entries); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		var after int64
		for {
			got, err := ts.Transcript(ctx, "acme", "c1", after, page)
			if err != nil {
				b.Fatal(err)
			}
			if len(got) == 0 {
				break
			}
			after = got[len(got)-1].Seq
		}
		if after != total {
			b.Fatalf("loaded %d entries, want %d", after, total)
		}
	}
	perLoad := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(perLoad*1e3, "ms/load")
	b.ReportMetric(total/perLoad, "entries/s")
	b.ReportMetric(float64(stored)/total, "B/entry")
}

// TurnWrite measures one WriteTurn on ts of a running turn appending one
// entry (about 300 bytes) and renewing its lease. It writes session "c1"
// of tenant "acme", so ts should be fresh. It reports µs/op.
func TurnWrite(b *testing.B, ts store.TranscriptStore) {
	ctx := context.Background()
	if err := ts.CreateSession(ctx, store.SessionRecord{Tenant: "acme", ID: "c1", Doc: json.RawMessage(`{"title":"New York"}`)}); err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	turn, err := ts.TakeTurn(ctx, &store.TurnWrite{Tenant: "acme", Session: "c1", Holder: "bench", Now: now, Until: now.Add(time.Hour)})
	if err != nil {
		b.Fatal(err)
	}
	entries, _ := transcriptEntries(0, 1024)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		w := &store.TurnWrite{Tenant: "acme", Session: "c1", Epoch: turn.Epoch, Holder: "bench", Now: now, Until: now.Add(time.Hour),
			Entries: entries[i%len(entries) : i%len(entries)+1]}
		if res, err := ts.WriteTurn(ctx, w); err != nil || res.Seq != int64(i+1) {
			b.Fatalf("WriteTurn = %+v, %v", res, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/1e3/float64(b.N), "µs/op")
}

// transcriptEntry is the i-th entry of a conversation as package chat might
// write it, about 300 bytes on average: a person's message, the model's
// reply, a tool call and its result, in turn.
func transcriptEntry(i int) json.RawMessage {
	text := strings.Repeat("Find me a flight to New York under $450, leaving Friday morning. ", 3+i%3)
	var doc string
	switch i % 4 {
	case 0:
		doc = fmt.Sprintf(`{"kind":"message","role":"user","turn":%d,"text":%q}`, i/4, text)
	case 1:
		doc = fmt.Sprintf(`{"kind":"message","role":"assistant","turn":%d,"text":%q,"usage":{"in":1843,"out":212}}`, i/4, "I found three: BA117 at $412.50 — shall I book it? "+text)
	case 2:
		doc = fmt.Sprintf(`{"kind":"tool_call","turn":%d,"id":"call_%06d","tool":"search_flights","arguments":{"to":"JFK","from":"LHR","max":450.00,"date":"2030-03-08","passengers":2,"cabin":"economy","flexible":true}}`, i/4, i)
	default:
		doc = fmt.Sprintf(`{"kind":"tool_result","turn":%d,"id":"call_%06d","result":{"flights":[{"flight":"BA117","dep":"08:25","fare":"412.50"},{"flight":"VS3","dep":"09:10","fare":"431.00"},{"flight":"AA101","dep":"10:05","fare":"447.20"}],"currency":"USD"}}`, i/4, i-1)
	}
	return json.RawMessage(doc)
}

// transcriptEntries are entries from to to-1 of a conversation, and their
// size in bytes.
func transcriptEntries(from, to int) ([]json.RawMessage, int) {
	out, size := make([]json.RawMessage, 0, to-from), 0
	for i := from; i < to; i++ {
		out = append(out, transcriptEntry(i))
		size += len(out[len(out)-1])
	}
	return out, size
}
