package plannerapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/llm"
	"github.com/planexec/planexec/llm/scripted"
	"github.com/planexec/planexec/plannerapi"
	"github.com/planexec/planexec/store"
	"github.com/planexec/planexec/store/postgres"
	"github.com/planexec/planexec/store/sqlite"
)

// durable opens the stores a session may live in, each as many times as
// a test has replicas: every store opened for one test is the same
// database.
var durable = map[string]func(tb testing.TB) func() store.Store{
	"sqlite": func(tb testing.TB) func() store.Store {
		path := filepath.Join(tb.TempDir(), "sessions.db")
		return func() store.Store {
			st, err := sqlite.Open(context.Background(), path)
			if err != nil {
				tb.Fatal(err)
			}
			tb.Cleanup(func() { _ = st.Close() })
			return st
		}
	},
	"postgres": func(tb testing.TB) func() store.Store {
		dsn := os.Getenv("PLANEXEC_POSTGRES_URL")
		if dsn == "" {
			tb.Skip("PLANEXEC_POSTGRES_URL is not set")
		}
		schema := fmt.Sprintf("plannerapi_%d", time.Now().UnixNano())
		tb.Cleanup(func() {
			if conn, err := pgx.Connect(context.Background(), dsn); err == nil {
				_, _ = conn.Exec(context.Background(), "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
				conn.Close(context.Background())
			}
		})
		return func() store.Store {
			st, err := postgres.Open(context.Background(), dsn, postgres.WithSchema(schema))
			if err != nil {
				tb.Fatal(err)
			}
			tb.Cleanup(func() { _ = st.Close() })
			return st
		}
	},
}

// heldModel plans a search and then answers; every call sends a token on
// called, while there is room, and waits for open to be closed, and the
// calls that plan round 1 are counted.
type heldModel struct {
	open     chan struct{}
	called   chan struct{}
	roundOne atomic.Int32
	m        *scripted.Model
}

func newHeldModel() *heldModel {
	h := &heldModel{open: make(chan struct{}), called: make(chan struct{}, 1)}
	h.m = scripted.Respond(func(req *llm.Request) scripted.Reply {
		if strings.Contains(req.Messages[0].Content, "Round 1 ran") {
			return scripted.Reply{Content: `{"goal":"","steps":[],"answer":"Done.","question":null}`}
		}
		return scripted.Reply{Content: searchRound}
	})
	return h
}

func (h *heldModel) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	if !strings.Contains(req.Messages[0].Content, "Round 1 ran") {
		h.roundOne.Add(1)
	}
	select {
	case h.called <- struct{}{}:
	default:
	}
	select {
	case <-h.open:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return h.m.Generate(ctx, req)
}

// arrivals counts the requests a server has begun reading.
type arrivals struct {
	mu   sync.Mutex
	n    int
	want int
	all  chan struct{}
}

func (a *arrivals) connState(_ net.Conn, s http.ConnState) {
	if s != http.StateActive {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.n++; a.n == a.want {
		close(a.all)
	}
}

type answer struct {
	status int
	body   struct {
		Choices []struct {
			Message struct {
				Content *string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
		Error struct {
			Code     *string        `json:"code"`
			Metadata map[string]any `json:"metadata"`
		} `json:"error"`
	}
}

// ask sends a planner request on a connection of its own.
func ask(t *testing.T, url, session, messages string) answer {
	t.Helper()
	body := `{"model":"planexec","planner_mode":true,"messages":` + messages + `}`
	req, _ := http.NewRequest("POST", url+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("x-session-id", session)
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 30 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		t.Error(err)
		return answer{}
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	a := answer{status: resp.StatusCode}
	if err := json.Unmarshal(raw, &a.body); err != nil {
		t.Errorf("%d %s: %v", resp.StatusCode, raw, err)
	}
	return a
}

// Eight identical requests at once on one session, as a client retrying
// eagerly sends them, to one server or spread over two replicas of one
// database: the session runs once (round 1 planned once, the search run
// once), each request is answered, with the answer or, from a replica
// that found the session running elsewhere, 409 session_busy saying where
// the session stands, and the session ends completed.
func TestIdenticalRequestsAtOnceOnASessionRunItOnce(t *testing.T) {
	const requests = 8
	for _, name := range []string{"sqlite", "postgres"} {
		for _, replicas := range []int{1, 2} {
			t.Run(fmt.Sprintf("%s/%d replicas", name, replicas), func(t *testing.T) {
				open := durable[name](t)
				model := newHeldModel()
				arrived := &arrivals{want: requests, all: make(chan struct{})}
				var searches atomic.Int32
				var urls []string
				var exs []*planexec.Executor
				for range replicas {
					tool := planexec.MustTool("search_flights", "Find flights.", func(ctx context.Context, s search) ([]string, error) {
						searches.Add(1)
						return []string{"BA117"}, nil
					})
					ex, err := planexec.NewExecutor(planexec.Config{Tools: []*planexec.Tool{tool}, Store: open()})
					if err != nil {
						t.Fatal(err)
					}
					srv, err := plannerapi.New(plannerapi.Config{Executor: ex, Models: map[string]llm.Model{"planexec": model}})
					if err != nil {
						t.Fatal(err)
					}
					hs := httptest.NewUnstartedServer(srv)
					hs.Config.ConnState = arrived.connState
					hs.Start()
					t.Cleanup(hs.Close)
					urls, exs = append(urls, hs.URL), append(exs, ex)
				}
				answers := make([]answer, requests)
				var wg sync.WaitGroup
				for i := range requests {
					wg.Go(func() { answers[i] = ask(t, urls[i%replicas], "s1", ask1) })
				}
				select {
				case <-arrived.all:
				case <-time.After(10 * time.Second):
					t.Fatal("the requests did not all arrive")
				}
				close(model.open) // every request is in: the model may answer
				wg.Wait()

				done := 0
				for i, a := range answers {
					switch {
					case a.status == http.StatusOK && len(a.body.Choices) == 1 && a.body.Choices[0].Message.Content != nil && *a.body.Choices[0].Message.Content == "Done.":
						done++
					case a.status == http.StatusConflict && replicas > 1 && a.body.Error.Code != nil && *a.body.Error.Code == "session_busy":
						if a.body.Error.Metadata["session_status"] == nil {
							t.Errorf("request %d: 409 without the session's status: %+v", i, a.body.Error)
						}
					default:
						t.Errorf("request %d: %d %+v", i, a.status, a.body)
					}
				}
				if done == 0 {
					t.Error("no request got the answer")
				}
				t.Logf("%d of %d requests answered, the others 409", done, requests)
				if n := model.roundOne.Load(); n != 1 {
					t.Errorf("round 1 was planned %d times, want once", n)
				}
				if n := searches.Load(); n != 1 {
					t.Errorf("the search ran %d times, want once", n)
				}
				run, _ := exs[0].Run(planexec.Delegation{RunID: "s1", Tenant: "anonymous"})
				info, err := run.Info(context.Background())
				if err != nil || info.Status != planexec.RunCompleted {
					t.Errorf("the session is %s (%v), want completed", info.Status, err)
				}
				// Whatever the 409s said, the session answers.
				if a := ask(t, urls[len(urls)-1], "s1", ask1); a.status != http.StatusOK {
					t.Errorf("after: %d %+v", a.status, a.body)
				}
			})
		}
	}
}

// A server keeps at most 16 requests waiting for one session; past them a
// request is 409 session_busy at once, saying where the session stands.
func TestPastSixteenWaitingARequestForASessionIsBusy(t *testing.T) {
	const requests, admitted = 20, 1 + 16
	model := newHeldModel()
	d := newDesk(t, durable["sqlite"](t)())
	srv, err := plannerapi.New(plannerapi.Config{Executor: d.ex, Models: map[string]llm.Model{"planexec": model}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	answers := make(chan answer, requests)
	go func() { answers <- ask(t, hs.URL, "s1", ask1) }()
	<-model.called // the first plans, holding the session
	for range requests - 1 {
		go func() { answers <- ask(t, hs.URL, "s1", ask1) }()
	}
	// While the first request plans, the ones past those waiting are
	// answered.
	for range requests - admitted {
		a := <-answers
		if a.status != http.StatusConflict || a.body.Error.Code == nil || *a.body.Error.Code != "session_busy" || a.body.Error.Metadata["session_status"] != "planning" {
			t.Errorf("past the waiting: %d %+v", a.status, a.body)
		}
	}
	close(model.open)
	for range admitted {
		if a := <-answers; a.status != http.StatusOK || *a.body.Choices[0].Message.Content != "Done." {
			t.Errorf("a request admitted: %d %+v", a.status, a.body)
		}
	}
	if n := model.roundOne.Load(); n != 1 {
		t.Errorf("round 1 was planned %d times, want once", n)
	}
}
