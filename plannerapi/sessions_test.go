package plannerapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
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
	"github.com/planexec/planexec/store/memory"
	"github.com/planexec/planexec/store/postgres"
)

type booking struct {
	Flight string `json:"flight"`
}

// desk is a service of two tools, a search and an irreversible booking
// whose approval a person gives later, planning with a stand-in model that
// plays the given rounds and then answers.
type desk struct {
	searches, bookings atomic.Int32
	hold               chan struct{} // when set, the search waits on it
	started            chan struct{} // a token each time a search starts, while there is room
	ex                 *planexec.Executor
	model              *scripted.Model // the model serve made, last
	clock              time.Time
	mu                 sync.Mutex
}

func newDesk(t *testing.T, st store.Store) *desk {
	t.Helper()
	d := &desk{clock: time.Date(2030, 1, 1, 9, 0, 0, 0, time.UTC), started: make(chan struct{}, 16)}
	tools := []*planexec.Tool{
		planexec.MustTool("search_flights", "Find flights.", func(ctx context.Context, s search) ([]string, error) {
			d.searches.Add(1)
			select {
			case d.started <- struct{}{}:
			default:
			}
			if d.hold != nil {
				select {
				case <-d.hold:
				case <-ctx.Done():
					return nil, fmt.Errorf("stopped: %w", ctx.Err())
				}
			}
			return []string{"BA117"}, nil
		}),
		planexec.MustTool("book_flight", "Book a flight.", func(ctx context.Context, b booking) (string, error) {
			d.bookings.Add(1)
			return "PNR-" + b.Flight, nil
		}, planexec.Irreversible()),
	}
	ex, err := planexec.NewExecutor(planexec.Config{Tools: tools, Store: st, Gate: planexec.DecideLater, Now: d.now})
	if err != nil {
		t.Fatal(err)
	}
	d.ex = ex
	return d
}

func (d *desk) now() time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.clock
}

func (d *desk) advance(by time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.clock = d.clock.Add(by)
}

// serve is an API over the desk whose model writes rounds, one payload a
// round, then answers; callers are their bearer tokens.
func (d *desk) serve(t *testing.T, rounds ...string) *httptest.Server {
	t.Helper()
	model := scripted.Respond(func(req *llm.Request) scripted.Reply {
		done := strings.Count(req.Messages[0].Content, " ran (goal") + strings.Count(req.Messages[0].Content, "you asked the person")
		if done < len(rounds) {
			return scripted.Reply{Content: rounds[done]}
		}
		return scripted.Reply{Content: `{"goal":"","steps":[],"answer":"Done.","question":null}`}
	})
	d.model = model
	srv, err := plannerapi.New(plannerapi.Config{Executor: d.ex, Models: map[string]llm.Model{"planexec": model}, SessionTTL: time.Hour, Now: d.now,
		Authenticate: func(r *http.Request) (string, error) {
			who, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if !ok || who == "" {
				return "", errors.New("no token")
			}
			return who, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return hs
}

const (
	bookRound   = `{"goal":"book","steps":[{"id":"b","tool":"book_flight","arguments":{"flight":"BA117"}}],"answer":null,"question":null}`
	searchRound = `{"goal":"search","steps":[{"id":"s","tool":"search_flights","arguments":{"origin":"LHR","destination":"JFK"}}],"answer":null,"question":null}`
	askRound    = `{"goal":"","steps":[],"answer":null,"question":"Which day?"}`
	clientRound = `{"goal":"confirm","steps":[{"id":"c","tool":"confirm","arguments":{"flight":"BA117"}}],"answer":null,"question":null}`
)

const confirmTools = `[{"type":"function","function":{"name":"confirm","parameters":{"type":"object","properties":{"flight":{"type":"string"}},"required":["flight"]}}}]`

type reply struct {
	status  int
	header  http.Header
	Choices []struct {
		Message struct {
			Content   *string `json:"content"`
			ToolCalls []struct {
				ID string `json:"id"`
			} `json:"tool_calls"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Metadata struct {
		PlanStatus string `json:"plan_status"`
		Approvals  []struct {
			Request string `json:"request"`
			Tool    string `json:"tool"`
		} `json:"approvals"`
	} `json:"metadata"`
	Error struct {
		Param *string `json:"param"`
	} `json:"error"`
}

// post sends a planner-mode request as caller for session with messages
// (and extra members), and reads the answer.
func post(t *testing.T, hs *httptest.Server, caller, session, messages, extra string) reply {
	t.Helper()
	body := `{"model":"planexec","planner_mode":true,"messages":` + messages + extra + `}`
	req, _ := http.NewRequest("POST", hs.URL+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("x-session-id", session)
	if caller != "" {
		req.Header.Set("Authorization", "Bearer "+caller)
	}
	resp, err := hs.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var r reply
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	r.status, r.header = resp.StatusCode, resp.Header
	return r
}

const ask1 = `[{"role":"user","content":"book BA117"}]`

func TestAnApprovalThePersonGivesLaterResumesTheSession(t *testing.T) {
	d := newDesk(t, memory.New())
	hs := d.serve(t, bookRound)
	first := post(t, hs, "alice", "s1", ask1, "")
	if first.status != 200 || first.Metadata.PlanStatus != "card_interaction_requested" || len(first.Metadata.Approvals) != 1 || first.Metadata.Approvals[0].Tool != "book_flight" {
		t.Fatalf("first: %+v", first)
	}
	if d.bookings.Load() != 0 {
		t.Fatal("booked before the approval")
	}
	bad := post(t, hs, "alice", "s1", ask1, `,"decisions":[{"request":"sha256:made-up","approved":true}]`)
	if bad.status != 400 || bad.Error.Param == nil || *bad.Error.Param != "decisions[0].request" {
		t.Errorf("a decision on no request: %+v", bad)
	}
	req := first.Metadata.Approvals[0].Request
	done := post(t, hs, "alice", "s1", ask1, fmt.Sprintf(`,"decisions":[{"request":%q,"approved":true,"by":"dana"}]`, req))
	if done.status != 200 || *done.Choices[0].Message.Content != "Done." || d.bookings.Load() != 1 {
		t.Errorf("after the approval: %+v, booked %d", done, d.bookings.Load())
	}
}

func TestAQuestionIsAnsweredByTheNextUserMessage(t *testing.T) {
	d := newDesk(t, memory.New())
	hs := d.serve(t, askRound, searchRound)
	first := post(t, hs, "alice", "s1", ask1, "")
	if first.Metadata.PlanStatus != "clarification_requested" || *first.Choices[0].Message.Content != "Which day?" {
		t.Fatalf("first: %+v", first)
	}
	done := post(t, hs, "alice", "s1", `[{"role":"user","content":"book BA117"},{"role":"assistant","content":"Which day?"},{"role":"user","content":"the 14th"}]`, "")
	if done.status != 200 || *done.Choices[0].Message.Content != "Done." || d.searches.Load() != 1 {
		t.Errorf("after the reply: %+v, searched %d", done, d.searches.Load())
	}
}

func TestOneCallerNeitherResumesNorReadsAnothersSession(t *testing.T) {
	d := newDesk(t, memory.New())
	hs := d.serve(t, clientRound)
	alice := post(t, hs, "alice", "shared", ask1, `,"tools":`+confirmTools)
	if alice.Choices[0].FinishReason != "tool_calls" {
		t.Fatalf("alice: %+v", alice)
	}
	call := alice.Choices[0].Message.ToolCalls[0].ID
	// Bob, with the same session id, has a session of his own: alice's
	// call is not his to answer.
	withResult := `[{"role":"user","content":"book BA117"},{"role":"assistant","content":null,"tool_calls":[{"id":"` + call +
		`","type":"function","function":{"name":"confirm","arguments":"{}"}}]},{"role":"tool","tool_call_id":"` + call + `","content":"yes"}]`
	bob := post(t, hs, "bob", "shared", withResult, `,"tools":`+confirmTools)
	if bob.status != 200 || bob.Choices[0].FinishReason != "tool_calls" {
		t.Errorf("bob: %+v: want a session of his own, paused on his own call", bob)
	}
	if anon := post(t, hs, "", "shared", ask1, ""); anon.status != 401 {
		t.Errorf("no token: %d", anon.status)
	}
	// Alice's session is as she left it.
	done := post(t, hs, "alice", "shared", withResult, `,"tools":`+confirmTools)
	if done.status != 200 || *done.Choices[0].Message.Content != "Done." {
		t.Errorf("alice resumes: %+v", done)
	}
}

func TestAPausedSessionExpiresAndStartsOverSayingSo(t *testing.T) {
	d := newDesk(t, memory.New())
	hs := d.serve(t, searchRound, clientRound)
	first := post(t, hs, "alice", "s1", ask1, `,"tools":`+confirmTools)
	if first.Choices[0].FinishReason != "tool_calls" || d.searches.Load() != 1 {
		t.Fatalf("first: %+v", first)
	}
	d.advance(2 * time.Hour)
	again := post(t, hs, "alice", "s1", ask1, `,"tools":`+confirmTools)
	if again.header.Get("X-Session-Status") != "restarted" || d.searches.Load() != 2 {
		t.Errorf("after the session expired: %+v (%v), searched %d", again, again.header, d.searches.Load())
	}
}

func TestAClientThatDisconnectsLosesNothingAndTheSessionResumes(t *testing.T) {
	d := newDesk(t, memory.New())
	d.hold = make(chan struct{})
	hs := d.serve(t, `{"goal":"two","steps":[{"id":"s","tool":"search_flights","arguments":{"origin":"LHR","destination":"JFK"}},`+
		`{"id":"t","tool":"search_flights","arguments":{"origin":"LHR","destination":"EWR"}}],"answer":null,"question":null}`)
	ctx, cancel := context.WithCancel(context.Background())
	body := `{"model":"planexec","planner_mode":true,"stream":true,"messages":` + ask1 + `}`
	req, _ := http.NewRequestWithContext(ctx, "POST", hs.URL+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("x-session-id", "s1")
	req.Header.Set("Authorization", "Bearer alice")
	resp, err := hs.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	for wait := time.Now().Add(5 * time.Second); d.searches.Load() < 2; time.Sleep(time.Millisecond) {
		if time.Now().After(wait) {
			t.Fatalf("%d searches started", d.searches.Load())
		}
	}
	cancel() // the client goes away while both searches run
	resp.Body.Close()
	// The server notices and stops the run; its record says interrupted.
	deadline := time.Now().Add(5 * time.Second)
	for {
		run, _ := d.ex.Run(planexec.Delegation{RunID: "s1", Tenant: "alice"})
		info, err := run.Info(context.Background())
		if err == nil && info.Status == planexec.RunInterrupted {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run is %+v, %v", info, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(d.hold)
	done := post(t, hs, "alice", "s1", ask1, "")
	if done.status != 200 || *done.Choices[0].Message.Content != "Done." {
		t.Errorf("resumed: %+v", done)
	}
	if n := d.searches.Load(); n != 4 {
		t.Errorf("%d searches, want 4: the two cut off ran again, nothing else", n)
	}
}

func TestTwoSessionsAtOnceStayApart(t *testing.T) {
	d := newDesk(t, memory.New())
	hs := d.serve(t, clientRound)
	var wg sync.WaitGroup
	calls := make([]string, 2)
	for i := range 2 {
		wg.Go(func() {
			r := post(t, hs, "alice", fmt.Sprintf("s%d", i), ask1, `,"tools":`+confirmTools)
			if len(r.Choices) == 1 && len(r.Choices[0].Message.ToolCalls) == 1 {
				calls[i] = r.Choices[0].Message.ToolCalls[0].ID
			}
		})
	}
	wg.Wait()
	if calls[0] == "" || calls[1] == "" || calls[0] == calls[1] {
		t.Fatalf("calls %q: want one each, apart", calls)
	}
	// Each session takes only its own call's result.
	cross := `[{"role":"user","content":"book BA117"},{"role":"tool","tool_call_id":"` + calls[1] + `","content":"yes"}]`
	if r := post(t, hs, "alice", "s0", cross, `,"tools":`+confirmTools); r.status != 400 {
		t.Errorf("session s0 took s1's result: %+v", r)
	}
}

func TestAnotherReplicaContinuesASession(t *testing.T) {
	dsn := os.Getenv("PLANEXEC_POSTGRES_URL")
	if dsn == "" {
		t.Skip("PLANEXEC_POSTGRES_URL is not set")
	}
	ctx := context.Background()
	schema := fmt.Sprintf("plannerapi_%d", time.Now().UnixNano())
	open := func() store.Store {
		st, err := postgres.Open(ctx, dsn, postgres.WithSchema(schema))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		return st
	}
	t.Cleanup(func() {
		conn, err := pgx.Connect(ctx, dsn)
		if err == nil {
			_, _ = conn.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
			conn.Close(ctx)
		}
	})
	one, two := newDesk(t, open()), newDesk(t, open())
	a, b := one.serve(t, searchRound, clientRound), two.serve(t, searchRound, clientRound)
	first := post(t, a, "alice", "s1", ask1, `,"tools":`+confirmTools)
	if first.Choices[0].FinishReason != "tool_calls" {
		t.Fatalf("replica one: %+v", first)
	}
	call := first.Choices[0].Message.ToolCalls[0].ID
	withResult := `[{"role":"user","content":"book BA117"},{"role":"tool","tool_call_id":"` + call + `","content":"yes"}]`
	done := post(t, b, "alice", "s1", withResult, `,"tools":`+confirmTools)
	if done.status != 200 || *done.Choices[0].Message.Content != "Done." {
		t.Fatalf("replica two: %+v", done)
	}
	if one.searches.Load()+two.searches.Load() != 1 {
		t.Errorf("searched %d + %d times, want once in all", one.searches.Load(), two.searches.Load())
	}
}

func TestAPlannerRunTakesTheTemperatureAndRefusesWhatItSetsItself(t *testing.T) {
	d := newDesk(t, memory.New())
	var temps []float64
	var mu sync.Mutex
	model := scripted.Respond(func(req *llm.Request) scripted.Reply {
		mu.Lock()
		defer mu.Unlock()
		if req.Temperature != nil {
			temps = append(temps, *req.Temperature)
		}
		if strings.Contains(req.Messages[0].Content, "Round 1 ran") {
			return scripted.Reply{Content: `{"goal":"","steps":[],"answer":"Done.","question":null}`}
		}
		return scripted.Reply{Content: searchRound}
	})
	srv, err := plannerapi.New(plannerapi.Config{Executor: d.ex, Models: map[string]llm.Model{"planexec": model}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	if r := post(t, hs, "", "s1", ask1, `,"temperature":0.3`); r.status != 200 {
		t.Fatalf("%+v", r)
	}
	if len(temps) != 2 || temps[0] != 0.3 || temps[1] != 0.3 {
		t.Errorf("the model calls were asked temperatures %v, want 0.3 each", temps)
	}
	for _, extra := range []string{`,"max_tokens":10`, `,"max_completion_tokens":10`, `,"response_format":{"type":"json_object"}`} {
		if r := post(t, hs, "", "s2", ask1, extra); r.status != 400 {
			t.Errorf("%s: %d, want 400", extra, r.status)
		}
	}
}

func TestAgentsNameToolGroupsAndAreBounded(t *testing.T) {
	d := newDesk(t, memory.New())
	model := scripted.Respond(func(req *llm.Request) scripted.Reply {
		if strings.Contains(req.Messages[0].Content, "Round 1 ran") {
			return scripted.Reply{Content: `{"goal":"","steps":[],"answer":"Done.","question":null}`}
		}
		return scripted.Reply{Content: bookRound}
	})
	srv, err := plannerapi.New(plannerapi.Config{Executor: d.ex, Models: map[string]llm.Model{"planexec": model},
		Agents: map[string][]string{"bookings": {"book_flight"}}, MaxAgents: 2})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	// Without the group, booking is not a tool the run may use: the plan
	// is refused (422) and nothing is booked.
	if r := post(t, hs, "", "s1", ask1, ""); r.status != http.StatusUnprocessableEntity || d.bookings.Load() != 0 {
		t.Errorf("without the agent: %d, booked %d", r.status, d.bookings.Load())
	}
	if r := post(t, hs, "", "s2", ask1, `,"agents":["bookings"]`); r.status != 200 || r.Metadata.PlanStatus != "card_interaction_requested" {
		t.Errorf("with the agent: %+v", r)
	}
	if r := post(t, hs, "", "s3", ask1, `,"agents":["mystery"]`); r.status != 400 || r.Error.Param == nil || *r.Error.Param != "agents" {
		t.Errorf("an unknown agent: %+v", r)
	}
	if r := post(t, hs, "", "s4", ask1, `,"agents":["bookings","bookings","bookings"]`); r.status != 400 {
		t.Errorf("past the cap: %d", r.status)
	}
}

func TestMoreRunsThanTheServerTakesAre429(t *testing.T) {
	d := newDesk(t, memory.New())
	d.hold = make(chan struct{})
	model := scripted.Respond(func(req *llm.Request) scripted.Reply {
		if strings.Contains(req.Messages[0].Content, "Round 1 ran") {
			return scripted.Reply{Content: `{"goal":"","steps":[],"answer":"Done.","question":null}`}
		}
		return scripted.Reply{Content: searchRound}
	})
	srv, err := plannerapi.New(plannerapi.Config{Executor: d.ex, Models: map[string]llm.Model{"planexec": model}, MaxRuns: 1})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	first := make(chan reply, 1)
	go func() { first <- post(t, hs, "", "s1", ask1, "") }()
	for wait := time.Now().Add(5 * time.Second); d.searches.Load() < 1; time.Sleep(time.Millisecond) {
		if time.Now().After(wait) {
			t.Fatal("the first run did not start")
		}
	}
	if r := post(t, hs, "", "s2", ask1, ""); r.status != http.StatusTooManyRequests {
		t.Errorf("a second run at once: %d, want 429", r.status)
	}
	close(d.hold)
	if r := <-first; r.status != 200 {
		t.Errorf("the first run: %+v", r)
	}
}

func TestARetriedRequestGetsTheSameAnswerAndANewTurnStartsOver(t *testing.T) {
	d := newDesk(t, memory.New())
	hs := d.serve(t, searchRound)
	first := post(t, hs, "alice", "s1", ask1, "")
	again := post(t, hs, "alice", "s1", ask1, "")
	if first.status != 200 || again.status != 200 || *again.Choices[0].Message.Content != "Done." || d.searches.Load() != 1 {
		t.Fatalf("a retry: %+v; searched %d, want once", again, d.searches.Load())
	}
	// The conversation goes on: a new run of the session, which searches.
	for turn := 2; turn <= 6; turn++ {
		next := post(t, hs, "alice", "s1", `[{"role":"user","content":"book BA117"},{"role":"assistant","content":"Done."},{"role":"user","content":"again"}]`, "")
		if next.status != 200 || int(d.searches.Load()) != turn {
			t.Fatalf("turn %d: %+v, searched %d", turn, next, d.searches.Load())
		}
	}
}

func TestARetryWhileAQuestionWaitsAsksItAgain(t *testing.T) {
	d := newDesk(t, memory.New())
	hs := d.serve(t, askRound, searchRound)
	post(t, hs, "alice", "s1", ask1, "")
	again := post(t, hs, "alice", "s1", ask1, "")
	if again.Metadata.PlanStatus != "clarification_requested" || *again.Choices[0].Message.Content != "Which day?" || d.searches.Load() != 0 {
		t.Errorf("a retry while the question waits: %+v", again)
	}
}

func TestAResultSentAgainAfterAFailedResumeIsTaken(t *testing.T) {
	d := newDesk(t, memory.New())
	hs := d.serve(t, clientRound)
	first := post(t, hs, "alice", "s1", ask1, `,"tools":`+confirmTools)
	call := first.Choices[0].Message.ToolCalls[0].ID
	withResult := `[{"role":"user","content":"book BA117"},{"role":"tool","tool_call_id":"` + call + `","content":"yes"}]`
	// Without its tools the resume fails after the result is recorded.
	if r := post(t, hs, "alice", "s1", withResult, ""); r.status == 200 {
		t.Fatalf("resumed without the client's tools: %+v", r)
	}
	if r := post(t, hs, "alice", "s1", withResult, `,"tools":`+confirmTools); r.status != 200 || *r.Choices[0].Message.Content != "Done." {
		t.Errorf("the same result again, with the tools: %+v", r)
	}
}

func TestSessionIdsAndToolNamesAreBounded(t *testing.T) {
	d := newDesk(t, memory.New())
	hs := d.serve(t, searchRound)
	for _, id := range []string{"job~2", strings.Repeat("x", 257)} {
		if r := post(t, hs, "alice", id, ask1, ""); r.status != 400 || r.Error.Param == nil || *r.Error.Param != "x-session-id" {
			t.Errorf("session %.20q: %+v", id, r)
		}
	}
	bad := `,"tools":[{"type":"function","function":{"name":"no spaces","parameters":{"type":"object"}}}]`
	if r := post(t, hs, "alice", "s1", ask1, bad); r.status != 400 {
		t.Errorf("a tool name OpenAI refuses: %d", r.status)
	}
}

// slow is a model that never answers before its context is done.
type slow struct{}

func (slow) Generate(ctx context.Context, _ *llm.Request) (*llm.Response, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func TestARunThatRunsOutOfTimeIs504(t *testing.T) {
	d := newDesk(t, memory.New())
	timed := llmTimeout{slow{}, 20 * time.Millisecond}
	srv, err := plannerapi.New(plannerapi.Config{Executor: d.ex, Models: map[string]llm.Model{"planexec": timed}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	if r := post(t, hs, "", "s1", ask1, ""); r.status != http.StatusGatewayTimeout {
		t.Errorf("a model past its deadline: %d, want 504", r.status)
	}
}

// llmTimeout bounds each call of a model, as a provider adapter's timeout
// does.
type llmTimeout struct {
	m llm.Model
	d time.Duration
}

func (l llmTimeout) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	ctx, cancel := context.WithTimeout(ctx, l.d)
	defer cancel()
	return l.m.Generate(ctx, req)
}

func TestAPlainCompletionTakesTheTemperature(t *testing.T) {
	d := newDesk(t, memory.New())
	var got *float64
	model := scripted.Respond(func(req *llm.Request) scripted.Reply {
		got = req.Temperature
		return scripted.Reply{Content: "Hello."}
	})
	srv, err := plannerapi.New(plannerapi.Config{Executor: d.ex, Models: map[string]llm.Model{"planexec": model}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	resp, err := http.Post(hs.URL+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"planexec","temperature":0.7,"logprobs":false,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || got == nil || *got != 0.7 {
		t.Errorf("status %d, temperature %v", resp.StatusCode, got)
	}
}
