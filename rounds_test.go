package planexec_test

// A run of rounds: plan, run, observe, plan again, until the planner
// answers or asks the person.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/llm"
	"github.com/planexec/planexec/llm/scripted"
	"github.com/planexec/planexec/store"
	"github.com/planexec/planexec/store/memory"
)

// script is a Planner that answers from a list of payloads and remembers
// what it was asked.
type script struct {
	mu       sync.Mutex
	payloads []string
	asked    []planexec.PlanRequest
}

func (s *script) Plan(_ context.Context, req planexec.PlanRequest) (*planexec.PlanResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.asked = append(s.asked, req)
	if len(s.asked) > len(s.payloads) {
		return nil, fmt.Errorf("script: asked %d times, has %d answers", len(s.asked), len(s.payloads))
	}
	return &planexec.PlanResponse{Payload: []byte(s.payloads[len(s.asked)-1]), Usage: llm.Usage{InputTokens: 100, OutputTokens: 10, Calls: 1}}, nil
}

func (s *script) requests() []planexec.PlanRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.asked)
}

func answer(text string) string {
	return fmt.Sprintf(`{"goal":"","steps":[],"answer":%q,"question":null}`, text)
}

func ask(text string) string {
	return fmt.Sprintf(`{"goal":"","steps":[],"answer":null,"question":%q}`, text)
}

const (
	searchRound = `{"goal":"find a flight","steps":[{"id":"s1","tool":"search_flights","arguments":{"origin":"LHR","destination":"JFK"}}]}`
	bookRound   = `{"goal":"book it","steps":[{"id":"s1","tool":"book_flight","arguments":{"flight":"BA117","seats":1}}]}`
)

func TestEachRoundIsToldWhatTheRoundsBeforeFound(t *testing.T) {
	r := &recorder{}
	run, _ := newExecutor(t, r, withStore(memory.New()))
	p := &script{payloads: []string{searchRound, bookRound, answer("Booked BA117.")}}
	res, err := run.Do(context.Background(), p, "get them to New York")
	if err != nil {
		t.Fatalf("Do: %v", err)
	}
	if res.Answer != "Booked BA117." || res.Round != 3 || !res.Complete || res.AtLimit {
		t.Fatalf("result %+v", res)
	}
	asked := p.requests()
	if len(asked) != 3 {
		t.Fatalf("asked %d times, want 3", len(asked))
	}
	for i, req := range asked {
		if req.Round != i+1 || req.Task != "get them to New York" || req.Final || len(req.History) != i {
			t.Errorf("request %d: round %d, history %d, final %v", i+1, req.Round, len(req.History), req.Final)
		}
	}
	h := asked[2].History
	if h[0].Number != 1 || h[0].Goal != "find a flight" || len(h[0].Observations) != 1 {
		t.Fatalf("round 1 as told: %+v", h[0])
	}
	o := h[0].Observations[0]
	if o.Step != "s1" || o.Tool != "search_flights" || o.Status != "done" || string(o.Outcome) != `["BA117","VS3"]` {
		t.Errorf("round 1's search as told: %+v", o)
	}
	if o := h[1].Observations[0]; o.Tool != "book_flight" || string(o.Outcome) != `"PNR-BA117"` {
		t.Errorf("round 2's booking as told: %+v", o)
	}
	// Step events carry their round; one step id serves in two rounds.
	rounds := map[int]string{}
	for _, e := range run.Events() {
		if e.Kind == planexec.EventStepExecuted {
			rounds[e.Round] = e.Tool
		}
	}
	if rounds[1] != "search_flights" || rounds[2] != "book_flight" {
		t.Errorf("steps executed by round: %v", rounds)
	}
}

func TestAFailureIsToldInFixedWordsAndTheRunGoesOn(t *testing.T) {
	r := &recorder{}
	failOnce(r, "book_flight", fmt.Errorf("upstream said: card 4111-1111 declined by db at 10.0.0.7: %w", planexec.ErrNotApplied))
	run, _ := newExecutor(t, r, nil)
	p := &script{payloads: []string{bookRound, answer("Could not book.")}}
	res, err := run.Do(context.Background(), p, "book it")
	if err != nil || res.Answer != "Could not book." {
		t.Fatalf("Do: %+v, %v", res, err)
	}
	o := p.requests()[1].History[0].Observations[0]
	if o.Status != "failed" || o.Error != "the tool failed" || o.Outcome != nil {
		t.Errorf("the failure as told: %+v", o)
	}
	told, _ := json.Marshal(p.requests()[1])
	if strings.Contains(string(told), "4111") || strings.Contains(string(told), "10.0.0.7") {
		t.Errorf("the planner was told the tool's error: %s", told)
	}
}

func TestAToolThatFailsTwiceIsNotOfferedAgain(t *testing.T) {
	r := &recorder{fail: func(tool string, _ any) error {
		if tool == "search_flights" {
			return errors.New("search is down")
		}
		return nil
	}}
	run, _ := newExecutor(t, r, nil)
	p := &script{payloads: []string{searchRound, searchRound, searchRound, answer("Search is down.")}}
	res, err := run.Do(context.Background(), p, "find a flight")
	if err != nil {
		t.Fatalf("Do: %v", err)
	}
	if n := callsOf(r, "search_flights"); n != 2 {
		t.Errorf("search_flights called %d times, want twice", n)
	}
	asked := p.requests()
	third := asked[2]
	if !slices.Equal(third.Barred, []string{"search_flights"}) || slices.ContainsFunc(third.Tools, func(s planexec.ToolSpec) bool { return s.Name == "search_flights" }) {
		t.Errorf("round 3 offered %v, barred %v", third.Tools, third.Barred)
	}
	// Round 3 named it all the same: refused, and asked again.
	if len(third.Refusals) != 0 || len(asked[3].Refusals) != 1 {
		t.Fatalf("refusals: %d then %d", len(third.Refusals), len(asked[3].Refusals))
	}
	ref := asked[3].Refusals[0]
	if ref.Reason != planexec.ReasonNotAllowed || ref.Tool != "search_flights" || !strings.Contains(ref.Violations[0].Why, "failed twice") {
		t.Errorf("refusal %+v", ref)
	}
	if res.Round != 3 {
		t.Errorf("answered in round %d, want 3 (the refused plan was a replan of it)", res.Round)
	}
}

func TestAtTheBoundThePlannerAnswersFromTheWorkDone(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edit  func(*setup)
		final int // the request that is final
	}{
		{"rounds", func(s *setup) { s.MaxRounds = 2 }, 3},
		{"tokens", func(s *setup) { s.TokenBudget = 150 }, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &recorder{}
			run, _ := newExecutor(t, r, tc.edit)
			p := &script{payloads: []string{searchRound, searchRound, answer("Found BA117 and VS3; nothing booked.")}}
			res, err := run.Do(context.Background(), p, "get them to New York")
			if err != nil {
				t.Fatalf("Do: %v", err)
			}
			if !res.AtLimit || !res.Complete || res.Answer == "" {
				t.Errorf("result %+v, want answered at the bound", res)
			}
			asked := p.requests()
			if len(asked) != tc.final {
				t.Fatalf("asked %d times, want %d", len(asked), tc.final)
			}
			last := asked[tc.final-1]
			if !last.Final || len(last.Tools) != 0 {
				t.Errorf("the last request: final %v, %d tools", last.Final, len(last.Tools))
			}
			if n := count(run.Events(), planexec.EventAnswered); n != 1 {
				t.Errorf("%d ANSWERED events", n)
			}
		})
	}
}

func TestAtTheBoundOnlyAnAnswerIsTaken(t *testing.T) {
	r := &recorder{}
	run, _ := newExecutor(t, r, func(s *setup) { s.MaxRounds = 1 })
	p := &script{payloads: []string{searchRound, searchRound, answer("Found two flights.")}}
	res, err := run.Do(context.Background(), p, "get them to New York")
	if err != nil {
		t.Fatalf("Do: %v", err)
	}
	if callsOf(r, "search_flights") != 1 || !res.AtLimit {
		t.Errorf("searched %d times, result %+v", callsOf(r, "search_flights"), res)
	}
	if refs := p.requests()[2].Refusals; len(refs) != 1 || refs[0].Reason != planexec.ReasonMalformed {
		t.Errorf("steps at the bound: refusals %v", refs)
	}
}

func TestAQuestionPausesTheRunUntilThePersonReplies(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	r := &recorder{}
	p := &script{payloads: []string{ask("Which day?"), searchRound, answer("Found flights on the 14th.")}}
	run, _ := newExecutor(t, r, withStore(st))
	_, err := run.Do(ctx, p, "get them to New York")
	var waiting *planexec.AwaitingReplyError
	if !errors.As(err, &waiting) || waiting.Question != "Which day?" || !waiting.Stored || waiting.Round != 1 {
		t.Fatalf("Do: %v, want a stored question", err)
	}
	if strings.Contains(err.Error(), "Which day") {
		t.Errorf("the error's message holds what the model wrote: %v", err)
	}
	if planexec.StatusOf(err) != planexec.RunAwaitingReply {
		t.Errorf("StatusOf = %s", planexec.StatusOf(err))
	}
	// Asked again, the run still waits, and nobody asks the planner.
	again, _ := newExecutor(t, r, withStore(st))
	if _, err := again.Do(ctx, p, "get them to New York"); !errors.As(err, &waiting) {
		t.Fatalf("second Do: %v", err)
	}
	if len(p.requests()) != 1 {
		t.Fatalf("the planner was asked again while the person had not replied")
	}
	res, err := again.Reply(ctx, p, "the 14th")
	if err != nil {
		t.Fatalf("Reply: %v", err)
	}
	if res.Answer == "" || callsOf(r, "search_flights") != 1 {
		t.Errorf("result %+v", res)
	}
	h := p.requests()[1].History
	if len(h) != 1 || h[0].Question != "Which day?" || h[0].Reply != "the 14th" || p.requests()[1].Round != 2 {
		t.Errorf("round 2 was told %+v", h)
	}
	if _, err := again.Reply(ctx, p, "again"); !errors.Is(err, planexec.ErrNotPending) {
		t.Errorf("a reply to an answered run: %v, want ErrNotPending", err)
	}
}

func TestAReadRunsAgainInALaterRoundAndAnEffectOnlyOnce(t *testing.T) {
	r := &recorder{}
	run, _ := newExecutor(t, r, withStore(memory.New()))
	both := `{"goal":"search and book","steps":[{"id":"s1","tool":"search_flights","arguments":{"origin":"LHR","destination":"JFK"}},` +
		`{"id":"s2","tool":"book_flight","arguments":{"flight":"BA117","seats":1},"depends_on":["s1"]}]}`
	p := &script{payloads: []string{both, both, answer("Booked once.")}}
	res, err := run.Do(context.Background(), p, "book BA117")
	if err != nil {
		t.Fatalf("Do: %v", err)
	}
	if n := callsOf(r, "search_flights"); n != 2 {
		t.Errorf("search_flights called %d times, want twice: a read runs again for fresh data", n)
	}
	if n := callsOf(r, "book_flight"); n != 1 {
		t.Errorf("book_flight called %d times, want once per run", n)
	}
	if res.Steps["s2"].Replayed != true {
		t.Errorf("round 2's booking %+v, want replayed", res.Steps["s2"])
	}
}

func TestARunOfRoundsGoesOnFromTheRoundItWasIn(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	stop, cancel := context.WithCancel(ctx)
	defer cancel()
	r := &recorder{}
	r.fail = func(tool string, _ any) error {
		if tool == "book_flight" && stop.Err() == nil {
			cancel() // the process stops mid-round 2
			return fmt.Errorf("not sent: %w: %w", context.Canceled, planexec.ErrNotApplied)
		}
		return nil
	}
	two := `{"goal":"hold and book","steps":[{"id":"a","tool":"search_flights","arguments":{"origin":"LHR","destination":"CDG"}},` +
		`{"id":"b","tool":"book_flight","arguments":{"flight":"BA117","seats":1},"depends_on":["a"]}]}`
	p := &script{payloads: []string{searchRound, two, answer("Booked.")}}
	first, _ := newExecutor(t, r, withStore(st))
	if _, err := first.Do(stop, p, "trip"); !errors.Is(err, context.Canceled) {
		t.Fatalf("first Do: %v, want cancelled", err)
	}
	page, err := mustExecutor(t, st).Runs(ctx, "acme", planexec.RunQuery{})
	if err != nil || len(page.Runs) != 1 || page.Runs[0].Status != planexec.RunInterrupted {
		t.Fatalf("stored: %+v, %v", page, err)
	}
	second, _ := newExecutor(t, r, withStore(st))
	res, err := second.Do(ctx, p, "trip")
	if err != nil {
		t.Fatalf("second Do: %v", err)
	}
	if n := len(p.requests()); n != 3 {
		t.Errorf("the planner was asked %d times, want 3: round 2's stored plan is not asked for again", n)
	}
	if got := toolNames(r.Calls()); !slices.Equal(got, []string{"search_flights", "search_flights", "book_flight", "book_flight"}) {
		t.Errorf("calls %v: round 2's search runs once, its booking again", got)
	}
	if res.Answer != "Booked." || res.Round != 3 {
		t.Errorf("result %+v", res)
	}
	h := p.requests()[2].History
	if len(h) != 2 || h[1].Observations[0].Status != "done" || h[1].Observations[1].Status != "done" {
		t.Errorf("round 3 was told %+v", h)
	}
}

func TestARunWhosePlannerFailedBetweenRoundsGoesOnWithoutRunningARoundAgain(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	r := &recorder{}
	down := scripted.New(scripted.Reply{Content: searchRound}, scripted.Reply{Err: errors.New("provider down")})
	first, _ := newExecutor(t, r, withStore(st))
	if _, err := first.Do(ctx, vAgentPlanner(t, down), "trip"); err == nil {
		t.Fatal("Do succeeded with the planner down")
	}
	page, err := mustExecutor(t, st).Runs(ctx, "acme", planexec.RunQuery{})
	if err != nil || page.Runs[0].Status != planexec.RunPlanning {
		t.Fatalf("stored: %+v, %v; want planning", page, err)
	}
	up := scripted.New(scripted.Reply{Content: answer("Two flights found.")})
	second, _ := newExecutor(t, r, withStore(st))
	res, err := second.Do(ctx, vAgentPlanner(t, up), "trip")
	if err != nil || res.Answer == "" || res.Round != 2 {
		t.Fatalf("second Do: %+v, %v", res, err)
	}
	if n := callsOf(r, "search_flights"); n != 1 {
		t.Errorf("search_flights called %d times, want once", n)
	}
	// The model was told round 1, and asked for round 2.
	req := up.Requests()[0]
	if !strings.Contains(req.Messages[0].Content, "Round 1 ran") || !strings.Contains(req.Messages[0].Content, `"BA117"`) {
		t.Errorf("the model was shown:\n%s", req.Messages[0].Content)
	}
	if !strings.Contains(req.System, "You work in rounds") || !strings.Contains(string(req.Output.Schema), `"question"`) {
		t.Errorf("a round's request: system %q, schema %s", req.System, req.Output.Schema)
	}
}

// mustExecutor is an executor with no tools over st: for listing.
func mustExecutor(t *testing.T, st store.Store) *planexec.Executor {
	t.Helper()
	ex, err := planexec.NewExecutor(planexec.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	return ex
}

func TestADenialAtClearanceGoesBackToThePlanner(t *testing.T) {
	r := &recorder{}
	run, gate := newExecutor(t, r, withStore(memory.New()))
	gate.answer = func(req planexec.ApprovalRequest) planexec.Decision { return req.Deny("dana", "not this week") }
	p := &script{payloads: []string{bookRound, answer("Not booked: it was not approved.")}}
	res, err := run.Do(context.Background(), p, "book BA117")
	if err != nil || res.Answer == "" {
		t.Fatalf("Do: %+v, %v", res, err)
	}
	h := p.requests()[1].History
	if len(h) != 1 || len(h[0].Observations) != 1 {
		t.Fatalf("round 2 was told %+v", h)
	}
	if o := h[0].Observations[0]; o.Status != "failed" || o.Error != "a person did not approve it" {
		t.Errorf("the denial as told: %+v", o)
	}
	if callsOf(r, "book_flight") != 0 {
		t.Error("the denied booking ran")
	}
}

// releaseFails is a memory store whose writes of a failed step fail.
type releaseFails struct{ *memory.Store }

func (releaseFails) ReleaseStep(context.Context, *store.StepWrite) error {
	return errors.New("database down")
}

func TestAStoreThatFailsStopsTheRounds(t *testing.T) {
	r := &recorder{}
	failOnce(r, "search_flights", fmt.Errorf("timeout: %w", planexec.ErrNotApplied))
	run, _ := newExecutor(t, r, withStore(releaseFails{memory.New()}))
	p := &script{payloads: []string{searchRound, answer("never asked")}}
	res, err := run.Do(context.Background(), p, "find a flight")
	if err == nil || !strings.Contains(err.Error(), "database down") {
		t.Fatalf("Do: %+v, %v; want the store's failure", res, err)
	}
	if n := len(p.requests()); n != 1 {
		t.Errorf("the planner was asked %d times: the run went on past a store that failed", n)
	}
}
