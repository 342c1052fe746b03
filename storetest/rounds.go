package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/store"
)

// scriptedPlanner is a deterministic Planner of a run of rounds: asked for
// round n, it answers with the n-th payload of its script, and it remembers
// every request. before, when set, sees each request first; its error is
// the planner's.
type scriptedPlanner struct {
	script []string
	before func(planexec.PlanRequest) error

	mu    sync.Mutex
	asked []planexec.PlanRequest
}

func (p *scriptedPlanner) Plan(_ context.Context, req planexec.PlanRequest) (*planexec.PlanResponse, error) {
	p.mu.Lock()
	p.asked = append(p.asked, req)
	p.mu.Unlock()
	if p.before != nil {
		if err := p.before(req); err != nil {
			return nil, err
		}
	}
	if req.Round < 1 || req.Round > len(p.script) {
		return nil, fmt.Errorf("the script has no round %d", req.Round)
	}
	return &planexec.PlanResponse{Payload: []byte(p.script[req.Round-1])}, nil
}

// requests are the requests the planner was asked, in order.
func (p *scriptedPlanner) requests() []planexec.PlanRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.asked)
}

// rounds are the rounds the planner was asked for, in order.
func (p *scriptedPlanner) rounds() []int {
	var out []int
	for _, req := range p.requests() {
		out = append(out, req.Round)
	}
	return out
}

// roundPayload is a round's steps as a planner writes them.
func roundPayload(goal string, steps ...planexec.Step) string {
	b, _ := json.Marshal(struct {
		Goal  string          `json:"goal"`
		Steps []planexec.Step `json:"steps"`
	}{goal, steps})
	return string(b)
}

// answerPayload ends a run of rounds with text; questionPayload asks the
// person text.
func answerPayload(text string) string {
	b, _ := json.Marshal(text)
	return `{"goal":"","steps":[],"answer":` + string(b) + `,"question":null}`
}

func questionPayload(text string) string {
	b, _ := json.Marshal(text)
	return `{"goal":"","steps":[],"answer":null,"question":` + string(b) + `}`
}

// shelfArgs is what the tools of a run of rounds take.
type shelfArgs struct {
	Item string `json:"item"`
}

// stock is what a look at the shelf finds.
type stock struct {
	Item  string `json:"item"`
	Count int    `json:"count"`
}

// shop is the tools of a run of rounds: look, a read, and order,
// irreversible. They count their calls and their effects by tool and item;
// before, when set, may fail a call before the tool acts.
type shop struct {
	mu      sync.Mutex
	calls   map[string]int
	effects map[string]int
	before  func(tool, item string) error
}

func newShop() *shop { return &shop{calls: map[string]int{}, effects: map[string]int{}} }

func (s *shop) tools() []*planexec.Tool {
	act := func(tool string) func(string) error {
		return func(item string) error {
			s.mu.Lock()
			s.calls[tool+":"+item]++
			before := s.before
			s.mu.Unlock()
			if before != nil {
				if err := before(tool, item); err != nil {
					return err
				}
			}
			s.mu.Lock()
			s.effects[tool+":"+item]++
			s.mu.Unlock()
			return nil
		}
	}
	look, order := act("look"), act("order")
	return []*planexec.Tool{
		planexec.MustTool("look", "Look at the shelf.", func(_ context.Context, a shelfArgs) (stock, error) {
			if err := look(a.Item); err != nil {
				return stock{}, err
			}
			return lookOutcome(a.Item), nil
		}),
		planexec.MustTool("order", "Order an item.", func(_ context.Context, a shelfArgs) (string, error) {
			if err := order(a.Item); err != nil {
				return "", err
			}
			return "ordered " + a.Item, nil
		}, planexec.Irreversible()),
	}
}

func lookOutcome(item string) stock {
	return stock{Item: item, Count: len(item)}
}

// tally is how often each tool was called, or acted, by tool and item.
func (s *shop) tally() (calls, effects map[string]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.calls), maps.Clone(s.effects)
}

// The rounds the suite's runs of rounds are scripted from: a look at the
// shelf; a second look and an order that waits on it (one step id serves
// in both rounds, for another step); an answer.
var (
	lookRound = roundPayload("see what is on the shelf",
		planexec.Step{ID: "s1", Tool: "look", Arguments: json.RawMessage(`{"item":"shelf"}`)})
	orderRound = roundPayload("order the tea",
		planexec.Step{ID: "s1", Tool: "look", Arguments: json.RawMessage(`{"item":"tea"}`)},
		planexec.Step{ID: "s2", Tool: "order", Arguments: json.RawMessage(`{"item":"tea"}`), DependsOn: []string{"s1"}})
	orderedAnswer = "Ordered the tea."
)

const roundsTask = "keep the shelf stocked"

// roundsExecutor builds a new executor over the kit's stores, with tools and
// a person who approves every step, and its run-r.
func roundsExecutor(t *testing.T, k kit, tools *shop) *planexec.Run {
	t.Helper()
	ex, err := planexec.NewExecutor(planexec.Config{
		Tools: tools.tools(),
		Gate: planexec.ApprovalGateFunc(func(_ context.Context, req planexec.ApprovalRequest) (planexec.Decision, error) {
			return req.Approve("dana"), nil
		}),
		Store: k.store(),
		Lease: lease,
		Now:   k.clk.Now,
	})
	if err != nil {
		t.Fatalf("NewExecutor: %v", err)
	}
	run, err := ex.Run(planexec.Delegation{RunID: "run-r", Tenant: "acme", User: "dana", Agent: "clerk"})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return run
}

// status is the stored run's status.
func (k kit) status(t *testing.T, run string) store.RunStatus {
	t.Helper()
	rec, err := k.Plans.LoadPlan(k.ctx, "acme", run)
	if err != nil {
		t.Fatalf("LoadPlan %s: %v", run, err)
	}
	return rec.Status
}

// told checks what the rounds before a request were, as the planner was
// told them: round i's observations are want[i], each step done with the
// outcome its tool returned.
func told(t *testing.T, req planexec.PlanRequest, want ...[]planexec.Observation) {
	t.Helper()
	if req.Task != roundsTask || len(req.History) != len(want) {
		t.Fatalf("the request for round %d: task %q and %d rounds before it, want %q and %d", req.Round, req.Task, len(req.History), roundsTask, len(want))
	}
	for i, h := range req.History {
		if h.Number != i+1 || len(h.Observations) != len(want[i]) {
			t.Fatalf("round %d as told for round %d: number %d with %d observations, want %d", i+1, req.Round, h.Number, len(h.Observations), len(want[i]))
		}
		for j, o := range h.Observations {
			w := want[i][j]
			if o.Step != w.Step || o.Tool != w.Tool || o.Status != "done" || !jsonEqual(o.Outcome, w.Outcome) || o.Error != "" {
				t.Errorf("round %d as told for round %d, observation %d: %+v, want step %s of %s done with %s", i+1, req.Round, j, o, w.Step, w.Tool, w.Outcome)
			}
		}
	}
}

// seen is the observation of a step done with outcome.
func seen(step, tool string, outcome any) planexec.Observation {
	b, _ := json.Marshal(outcome)
	return planexec.Observation{Step: step, Tool: tool, Status: "done", Outcome: b}
}

var (
	seenShelf = []planexec.Observation{seen("s1", "look", lookOutcome("shelf"))}
	seenOrder = []planexec.Observation{seen("s1", "look", lookOutcome("tea")), seen("s2", "order", "ordered tea")}
)

// sameTally checks how often each tool was called and acted, by tool and
// item.
func sameTally(t *testing.T, tools *shop, calls, effects map[string]int) {
	t.Helper()
	c, e := tools.tally()
	if !maps.Equal(c, calls) || !maps.Equal(e, effects) {
		t.Errorf("tools called %v and acted %v, want called %v and acted %v", c, e, calls, effects)
	}
}

func runRounds(t *testing.T, open Open) {
	t.Run("A run of rounds answers, each round told what the steps of the rounds before it returned", func(t *testing.T) {
		k := setup(t, open)
		tools := newShop()
		p := &scriptedPlanner{script: []string{lookRound, orderRound, answerPayload(orderedAnswer)}}
		res, err := roundsExecutor(t, k, tools).Do(k.ctx, p, roundsTask)
		if err != nil {
			t.Fatalf("Do: %v", err)
		}
		if res.Answer != orderedAnswer || res.Round != 3 || !res.Complete || res.AtLimit {
			t.Errorf("Do = %+v, want answered in round 3", res)
		}
		if got := p.rounds(); !slices.Equal(got, []int{1, 2, 3}) {
			t.Fatalf("the planner was asked for rounds %v, want 1, 2, 3", got)
		}
		asked := p.requests()
		told(t, asked[0])
		told(t, asked[1], seenShelf)
		told(t, asked[2], seenShelf, seenOrder)
		once := map[string]int{"look:shelf": 1, "look:tea": 1, "order:tea": 1}
		sameTally(t, tools, once, once)
		if st := k.status(t, "run-r"); st != store.RunCompleted {
			t.Errorf("the run is stored as %s, want completed", st)
		}
	})

	t.Run("A run stopped in round 2 goes on in round 2 with new executors, running no finished step again and not asking for the round again", func(t *testing.T) {
		k := setup(t, open)
		tools := newShop()
		stop, cancel := context.WithCancel(k.ctx)
		defer cancel()
		tools.before = func(tool, _ string) error {
			if tool == "order" && stop.Err() == nil {
				cancel() // the process stops as the order is about to go out
				return fmt.Errorf("not sent: %w: %w", context.Canceled, planexec.ErrNotApplied)
			}
			return nil
		}
		first := &scriptedPlanner{script: []string{lookRound, orderRound, answerPayload(orderedAnswer)}}
		if _, err := roundsExecutor(t, k, tools).Do(stop, first, roundsTask); !errors.Is(err, context.Canceled) {
			t.Fatalf("Do cancelled in round 2: %v, want context.Canceled", err)
		}
		if got := first.rounds(); !slices.Equal(got, []int{1, 2}) {
			t.Fatalf("before the stop the planner was asked for rounds %v, want 1 and 2", got)
		}
		if st := k.status(t, "run-r"); st != store.RunInterrupted {
			t.Errorf("the stopped run is stored as %s, want interrupted", st)
		}
		if _, ok := k.lister(); ok {
			ex, err := planexec.NewExecutor(planexec.Config{Store: k.Store, Now: k.clk.Now})
			if err != nil {
				t.Fatalf("NewExecutor: %v", err)
			}
			page, err := ex.Runs(k.ctx, "acme", planexec.RunQuery{Status: []planexec.RunStatus{planexec.RunInterrupted}})
			if err != nil || len(page.Runs) != 1 || page.Runs[0].ID != "run-r" {
				t.Errorf("interrupted runs listed: %+v, %v; want run-r", page, err)
			}
		}

		second := &scriptedPlanner{script: []string{lookRound, orderRound, answerPayload(orderedAnswer)}}
		res, err := roundsExecutor(t, k, tools).Do(k.ctx, second, roundsTask)
		if err != nil {
			t.Fatalf("Do after the stop: %v", err)
		}
		if res.Answer != orderedAnswer || res.Round != 3 {
			t.Errorf("Do after the stop = %+v, want answered in round 3", res)
		}
		if got := second.rounds(); !slices.Equal(got, []int{3}) {
			t.Fatalf("after the stop the planner was asked for rounds %v, want only 3: round 2's plan is stored", got)
		}
		told(t, second.requests()[0], seenShelf, seenOrder)
		sameTally(t, tools, map[string]int{"look:shelf": 1, "look:tea": 1, "order:tea": 2}, map[string]int{"look:shelf": 1, "look:tea": 1, "order:tea": 1})
		if st := k.status(t, "run-r"); st != store.RunCompleted {
			t.Errorf("the run is stored as %s, want completed", st)
		}
	})

	t.Run("A planner that fails between rounds leaves the run planning, and the next Do asks only for the next round", func(t *testing.T) {
		k := setup(t, open)
		tools := newShop()
		errDown := errors.New("the provider is down")
		down := &scriptedPlanner{script: []string{lookRound}, before: func(req planexec.PlanRequest) error {
			if req.Round == 2 {
				return errDown
			}
			return nil
		}}
		if _, err := roundsExecutor(t, k, tools).Do(k.ctx, down, roundsTask); !errors.Is(err, errDown) {
			t.Fatalf("Do with the planner down in round 2: %v, want its error", err)
		}
		if st := k.status(t, "run-r"); st != store.RunPlanning {
			t.Errorf("the run is stored as %s, want planning", st)
		}
		up := &scriptedPlanner{script: []string{lookRound, answerPayload("The shelf is full.")}}
		res, err := roundsExecutor(t, k, tools).Do(k.ctx, up, roundsTask)
		if err != nil || res.Answer != "The shelf is full." || res.Round != 2 {
			t.Fatalf("Do with the planner up: %+v, %v; want answered in round 2", res, err)
		}
		if got := up.rounds(); !slices.Equal(got, []int{2}) {
			t.Fatalf("the planner was asked for rounds %v, want only 2", got)
		}
		told(t, up.requests()[0], seenShelf)
		sameTally(t, tools, map[string]int{"look:shelf": 1}, map[string]int{"look:shelf": 1})
	})

	t.Run("An answered run gives its stored answer again, asking no planner and calling no tool", func(t *testing.T) {
		k := setup(t, open)
		tools := newShop()
		p := &scriptedPlanner{script: []string{lookRound, orderRound, answerPayload(orderedAnswer)}}
		first, err := roundsExecutor(t, k, tools).Do(k.ctx, p, roundsTask)
		if err != nil {
			t.Fatalf("Do: %v", err)
		}
		never := &scriptedPlanner{}
		again, err := roundsExecutor(t, k, tools).Do(k.ctx, never, roundsTask)
		if err != nil {
			t.Fatalf("Do of the answered run: %v", err)
		}
		if again.Answer != orderedAnswer || again.Round != 3 || !again.Complete || again.PlanID != first.PlanID {
			t.Errorf("Do of the answered run = %+v, want the answer of plan %s, round 3", again, first.PlanID)
		}
		if n := len(never.requests()); n != 0 {
			t.Errorf("the planner was asked %d times for an answered run", n)
		}
		once := map[string]int{"look:shelf": 1, "look:tea": 1, "order:tea": 1}
		sameTally(t, tools, once, once)
	})

	t.Run("A question leaves the run awaiting a reply, and a reply on a new run goes on with it", func(t *testing.T) {
		k := setup(t, open)
		tools := newShop()
		script := []string{lookRound, questionPayload("Which tea?"), orderRound, answerPayload(orderedAnswer)}
		first := &scriptedPlanner{script: script}
		_, err := roundsExecutor(t, k, tools).Do(k.ctx, first, roundsTask)
		var waiting *planexec.AwaitingReplyError
		if !errors.As(err, &waiting) || waiting.Question != "Which tea?" || waiting.Round != 2 || !waiting.Stored {
			t.Fatalf("Do: %v, want the question of round 2, stored", err)
		}
		if st := k.status(t, "run-r"); st != store.RunAwaitingReply {
			t.Errorf("the run is stored as %s, want awaiting a reply", st)
		}
		again := &scriptedPlanner{script: script}
		if _, err := roundsExecutor(t, k, tools).Do(k.ctx, again, roundsTask); !errors.As(err, &waiting) || waiting.Question != "Which tea?" {
			t.Fatalf("Do of the run awaiting a reply: %v, want its question again", err)
		}
		if n := len(again.requests()); n != 0 {
			t.Errorf("the planner was asked %d times while the person had not replied", n)
		}

		replied := &scriptedPlanner{script: script}
		res, err := roundsExecutor(t, k, tools).Reply(k.ctx, replied, "green")
		if err != nil {
			t.Fatalf("Reply: %v", err)
		}
		if res.Answer != orderedAnswer || res.Round != 4 {
			t.Errorf("Reply = %+v, want answered in round 4", res)
		}
		if got := replied.rounds(); !slices.Equal(got, []int{3, 4}) {
			t.Fatalf("after the reply the planner was asked for rounds %v, want 3 and 4", got)
		}
		h := replied.requests()[0].History
		if len(h) != 2 || h[1].Number != 2 || h[1].Question != "Which tea?" || h[1].Reply != "green" || len(h[1].Observations) != 0 {
			t.Errorf("round 3 was told %+v, want round 2's question and the reply", h)
		}
		told(t, replied.requests()[1], seenShelf, nil, seenOrder)
		once := map[string]int{"look:shelf": 1, "look:tea": 1, "order:tea": 1}
		sameTally(t, tools, once, once)
		if st := k.status(t, "run-r"); st != store.RunCompleted {
			t.Errorf("the run is stored as %s, want completed", st)
		}
	})

	t.Run("A reply is stored before the planner hears it, so a planner that fails leaves the run planning and Do goes on with the reply", func(t *testing.T) {
		k := setup(t, open)
		tools := newShop()
		script := []string{lookRound, questionPayload("Which tea?"), orderRound, answerPayload(orderedAnswer)}
		var waiting *planexec.AwaitingReplyError
		if _, err := roundsExecutor(t, k, tools).Do(k.ctx, &scriptedPlanner{script: script}, roundsTask); !errors.As(err, &waiting) {
			t.Fatalf("Do: %v, want the question of round 2", err)
		}
		errDown := errors.New("the provider is down")
		down := &scriptedPlanner{script: script, before: func(planexec.PlanRequest) error { return errDown }}
		if _, err := roundsExecutor(t, k, tools).Reply(k.ctx, down, "green"); !errors.Is(err, errDown) {
			t.Fatalf("Reply with the planner down: %v, want its error", err)
		}
		if st := k.status(t, "run-r"); st != store.RunPlanning {
			t.Errorf("the run is stored as %s, want planning", st)
		}
		up := &scriptedPlanner{script: script}
		res, err := roundsExecutor(t, k, tools).Do(k.ctx, up, roundsTask)
		if err != nil || res.Answer != orderedAnswer || res.Round != 4 {
			t.Fatalf("Do with the planner up: %+v, %v; want answered in round 4", res, err)
		}
		if got := up.rounds(); !slices.Equal(got, []int{3, 4}) {
			t.Fatalf("the planner was asked for rounds %v, want 3 and 4", got)
		}
		if h := up.requests()[0].History; len(h) != 2 || h[1].Question != "Which tea?" || h[1].Reply != "green" {
			t.Errorf("round 3 was told %+v, want round 2's question and the reply", h)
		}
		once := map[string]int{"look:shelf": 1, "look:tea": 1, "order:tea": 1}
		sameTally(t, tools, once, once)
	})
}
