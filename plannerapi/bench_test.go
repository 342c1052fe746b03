package plannerapi_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/llm"
	"github.com/planexec/planexec/llm/scripted"
	"github.com/planexec/planexec/plannerapi"
	"github.com/planexec/planexec/store"
	"github.com/planexec/planexec/store/memory"
	"github.com/planexec/planexec/store/postgres"
	"github.com/planexec/planexec/store/sqlite"
)

// fiveSteps is a round of five searches, two of them waiting on others.
const fiveSteps = `{"goal":"five","steps":[` +
	`{"id":"a","tool":"search_flights","arguments":{"origin":"LHR","destination":"JFK"}},` +
	`{"id":"b","tool":"search_flights","arguments":{"origin":"LHR","destination":"EWR"}},` +
	`{"id":"c","tool":"search_flights","arguments":{"origin":"LGW","destination":"JFK"}},` +
	`{"id":"d","tool":"search_flights","arguments":{"origin":"LHR","destination":"BOS"},"depends_on":["a"]},` +
	`{"id":"e","tool":"search_flights","arguments":{"origin":"LHR","destination":"IAD"},"depends_on":["b","c"]}],"answer":null,"question":null}`

// benchServer serves a five-step session over st, with a scripted model
// (no model time) and a search that waits on gate when it is not nil.
func benchServer(b *testing.B, st store.Store, gate chan struct{}) *httptest.Server {
	b.Helper()
	tool := planexec.MustTool("search_flights", "Find flights.", func(ctx context.Context, s search) ([]string, error) {
		if gate != nil {
			select {
			case <-gate:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return []string{"BA117"}, nil
	})
	ex, err := planexec.NewExecutor(planexec.Config{Tools: []*planexec.Tool{tool}, Store: st})
	if err != nil {
		b.Fatal(err)
	}
	model := scripted.Respond(func(req *llm.Request) scripted.Reply {
		if strings.Contains(req.Messages[0].Content, "Round 1 ran") {
			return scripted.Reply{Content: `{"goal":"","steps":[],"answer":"Five found.","question":null}`}
		}
		return scripted.Reply{Content: fiveSteps}
	})
	srv, err := plannerapi.New(plannerapi.Config{Executor: ex, Models: map[string]llm.Model{"planexec": model}, MaxRuns: 1000})
	if err != nil {
		b.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	b.Cleanup(hs.Close)
	hs.Client().Transport.(*http.Transport).MaxIdleConnsPerHost = 1000
	return hs
}

// session streams one planner session and returns when its first
// plan_state came and when it ended.
func session(hs *httptest.Server, id string) (first, total time.Duration, err error) {
	start := time.Now()
	body := `{"model":"planexec","planner_mode":true,"stream":true,"messages":[{"role":"user","content":"five searches"}]}`
	req, _ := http.NewRequest("POST", hs.URL+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("x-session-id", id)
	resp, err := hs.Client().Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
	done := false
	for lines.Scan() {
		line := lines.Text()
		if first == 0 && strings.Contains(line, `"plan_state"`) {
			first = time.Since(start)
		}
		done = done || line == "data: [DONE]"
	}
	if !done {
		return 0, 0, fmt.Errorf("session %s: the stream did not end with [DONE]", id)
	}
	return first, time.Since(start), nil
}

// BenchmarkPlannerSession streams one five-step session at a time over the
// memory store: the handler's own cost per session (two planning calls of
// a scripted model, five steps, the stream), and the time to its first
// plan_state chunk.
func BenchmarkPlannerSession(b *testing.B) {
	hs := benchServer(b, memory.New(), nil)
	var firsts []time.Duration
	n := 0
	b.ReportAllocs()
	for b.Loop() {
		n++
		first, _, err := session(hs, fmt.Sprintf("s%d", n))
		if err != nil {
			b.Fatal(err)
		}
		firsts = append(firsts, first)
	}
	slices.Sort(firsts)
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/session")
	b.ReportMetric(float64(firsts[len(firsts)/2].Microseconds()), "µs-to-first-plan_state(p50)")
}

// BenchmarkConcurrentSessions streams 200 five-step sessions at once, over
// SQLite and Postgres: sessions a second, the p99 of a session's time, and
// the heap each open session holds while all 200 are mid-step.
func BenchmarkConcurrentSessions(b *testing.B) {
	const sessions = 200
	stores := map[string]func(b *testing.B) store.Store{
		"sqlite": func(b *testing.B) store.Store {
			st, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "sessions.db"))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = st.Close() })
			return st
		},
		"postgres": func(b *testing.B) store.Store {
			dsn := os.Getenv("PLANEXEC_POSTGRES_URL")
			if dsn == "" {
				b.Skip("PLANEXEC_POSTGRES_URL is not set")
			}
			schema := fmt.Sprintf("bench_sessions_%d", time.Now().UnixNano())
			st, err := postgres.Open(context.Background(), dsn, postgres.WithSchema(schema))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() {
				_ = st.Close()
				if conn, err := pgx.Connect(context.Background(), dsn); err == nil {
					_, _ = conn.Exec(context.Background(), "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
					conn.Close(context.Background())
				}
			})
			return st
		},
	}
	for _, name := range []string{"sqlite", "postgres"} {
		b.Run(name, func(b *testing.B) {
			var totals []time.Duration
			for b.Loop() {
				totals = append(totals, runSessions(b, benchServer(b, stores[name](b), nil), sessions, nil)...)
			}
			elapsed := b.Elapsed()
			slices.Sort(totals)
			b.ReportMetric(float64(sessions*b.N)/elapsed.Seconds(), "sessions/s")
			b.ReportMetric(float64(totals[len(totals)*99/100].Milliseconds()), "p99-ms")
			// The heap the sessions hold while all are open, their first
			// steps waiting.
			gate := make(chan struct{})
			hs := benchServer(b, stores[name](b), gate)
			var before runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			var perSession float64
			runSessions(b, hs, sessions, func() {
				var during runtime.MemStats
				runtime.ReadMemStats(&during)
				perSession = float64(during.HeapAlloc-before.HeapAlloc) / sessions
				close(gate)
			})
			b.ReportMetric(perSession/1024, "KiB/open-session")
		})
	}
}

// runSessions streams n sessions at once and returns their times; open,
// when set, is called once all have had time to open.
func runSessions(b *testing.B, hs *httptest.Server, n int, open func()) []time.Duration {
	var mu sync.Mutex
	var wg sync.WaitGroup
	var totals []time.Duration
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			_, total, err := session(hs, fmt.Sprintf("c%d", i))
			if err != nil {
				errs <- err
				return
			}
			mu.Lock()
			totals = append(totals, total)
			mu.Unlock()
		})
	}
	if open != nil {
		time.Sleep(500 * time.Millisecond)
		open()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	return totals
}
