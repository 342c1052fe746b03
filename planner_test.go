package planexec_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/llm"
	"github.com/planexec/planexec/llm/scripted"
)

// ---- helpers ----

// The answers a planning model gives in these tests.
const (
	vValidTrip = `{"goal":"get them to New York","steps":[` +
		`{"id":"s1","tool":"search_flights","arguments":{"origin":"LHR","destination":"JFK"},"depends_on":[],"intent":"find a flight"},` +
		`{"id":"s2","tool":"book_flight","arguments":{"flight":"BA117","seats":1},"depends_on":["s1"],"intent":"hold the seat"}]}`
	vUnknownToolTrip = `{"goal":"get them to New York","steps":[` +
		`{"id":"s1","tool":"teleport","arguments":{"to":"JFK"},"depends_on":[],"intent":"skip the queue"}]}`
	vBadSeatsTrip = `{"goal":"get them to New York","steps":[` +
		`{"id":"s1","tool":"search_flights","arguments":{"origin":"LHR","destination":"JFK"},"depends_on":[],"intent":""},` +
		`{"id":"s2","tool":"book_flight","arguments":{"flight":"BA117","seats":"1"},"depends_on":["s1"],"intent":""}]}`
	vOutsideAllowlistTrip = `{"goal":"money back","steps":[` +
		`{"id":"s1","tool":"refund","arguments":{"order":"A1","amount":10,"currency":"EUR"},"depends_on":[],"intent":""}]}`
)

// plannerRun is a run whose delegation covers searching and booking but
// not refunding (the executor has a refund tool all the same).
func plannerRun(t *testing.T, r *recorder, edit func(*setup)) *planexec.Run {
	t.Helper()
	run, _ := newExecutor(t, r, func(s *setup) {
		withScope("search_flights", "book_flight")(s)
		if edit != nil {
			edit(s)
		}
	})
	return run
}

// plannerContracts are the trip's tools' contracts, by tool name.
func plannerContracts() map[string]*planexec.Contract {
	out := map[string]*planexec.Contract{}
	for _, tool := range (&recorder{}).tools() {
		out[tool.Name()] = tool.Contract()
	}
	return out
}

func vAgentPlanner(t *testing.T, m llm.Model) *planexec.AgentPlanner {
	t.Helper()
	p, err := planexec.NewAgentPlanner(m, planexec.Agent{Name: "planner", Instructions: "Prefer the morning flight."})
	if err != nil {
		t.Fatalf("NewAgentPlanner: %v", err)
	}
	return p
}

// vCatalogShown decodes the tool list the first user message shows the model.
func vCatalogShown(t *testing.T, content string) []planexec.ToolSpec {
	t.Helper()
	_, after, ok := strings.Cut(content, "Tools:")
	if !ok {
		t.Fatalf("the task message lists no tools: %q", content)
	}
	i := strings.IndexByte(after, '[')
	if i < 0 {
		t.Fatalf("no tool list in %q", after)
	}
	var specs []planexec.ToolSpec
	if err := json.NewDecoder(strings.NewReader(after[i:])).Decode(&specs); err != nil {
		t.Fatalf("the tool list is not JSON: %v", err)
	}
	return specs
}

func vJSONEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	return reflect.DeepEqual(x, y)
}

// vPlannerFunc is a Planner that answers with payloads in turn and remembers
// what it was asked.
type vPlannerFunc struct {
	mu       sync.Mutex
	payloads []string
	asked    []planexec.PlanRequest
}

func (p *vPlannerFunc) Plan(_ context.Context, req planexec.PlanRequest) (*planexec.PlanResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.asked = append(p.asked, req)
	n := len(p.asked)
	if n > len(p.payloads) {
		return nil, errors.New("no answer left")
	}
	return &planexec.PlanResponse{Payload: []byte(p.payloads[n-1]), Usage: llm.Usage{InputTokens: 1, OutputTokens: 1, Calls: 1}}, nil
}

// ---- NewAgentPlanner ----

func TestAPlanningAgentIsAccepted(t *testing.T) {
	for name, agent := range map[string]planexec.Agent{
		"the zero agent":             {},
		"a named agent with framing": {Name: "planner", Instructions: "Prefer the morning flight."},
	} {
		t.Run(name, func(t *testing.T) {
			p, err := planexec.NewAgentPlanner(scripted.New(), agent)
			if err != nil || p == nil {
				t.Fatalf("NewAgentPlanner = %v, %v", p, err)
			}
		})
	}
}

func TestAPlannerWithoutAModelIsRefusedAtConstruction(t *testing.T) {
	_, err := planexec.NewAgentPlanner(nil, planexec.Agent{Name: "planner"})
	var ce *planexec.ConfigurationError
	if !errors.As(err, &ce) {
		t.Fatalf("want a *ConfigurationError, got %T: %v", err, err)
	}
}

// ---- what the model is shown ----

func TestTheModelIsShownTheTaskTheInstructionsAndOnlyTheAllowedTools(t *testing.T) {
	model := scripted.New(scripted.Reply{Content: vValidTrip})
	run := plannerRun(t, &recorder{}, nil)
	if _, err := run.Plan(context.Background(), vAgentPlanner(t, model), "get them to New York"); err != nil {
		t.Fatalf("Plan: %v", err)
	}
	reqs := model.Requests()
	if len(reqs) != 1 {
		t.Fatalf("the model was called %d times, want once", len(reqs))
	}
	req := reqs[0]
	if !strings.Contains(req.System, "Prefer the morning flight.") {
		t.Errorf("the agent's instructions are not in the system prompt: %q", req.System)
	}
	if len(req.Messages) != 1 || req.Messages[0].Role != llm.RoleUser {
		t.Fatalf("messages = %+v, want one user message", req.Messages)
	}
	content := req.Messages[0].Content
	if !strings.Contains(content, "get them to New York") {
		t.Errorf("the task is not in the message: %q", content)
	}
	shown := vCatalogShown(t, content)
	want := map[string]struct {
		desc         string
		irreversible bool
		schema       json.RawMessage
	}{
		"search_flights": {"Find flights.", false, plannerContracts()["search_flights"].Schema()},
		"book_flight":    {"Book a flight.", true, plannerContracts()["book_flight"].Schema()},
	}
	if len(shown) != len(want) {
		t.Fatalf("the model was shown %d tools, want %d: %+v", len(shown), len(want), shown)
	}
	for _, s := range shown {
		w, ok := want[s.Name]
		if !ok {
			t.Errorf("the model was shown %q, which the delegation does not cover", s.Name)
			continue
		}
		if s.Description != w.desc || s.Irreversible != w.irreversible {
			t.Errorf("%s shown as %q irreversible=%v, want %q irreversible=%v", s.Name, s.Description, s.Irreversible, w.desc, w.irreversible)
		}
		if !vJSONEqual(t, s.Schema, w.schema) {
			t.Errorf("%s shown with schema %s, want its contract's %s", s.Name, s.Schema, w.schema)
		}
	}
	// Nothing anywhere in the request mentions the tool outside the scope.
	all := req.System + string(req.Output.Schema)
	for _, m := range req.Messages {
		all += m.Content
	}
	if strings.Contains(all, "refund") {
		t.Error("the request mentions refund, which the delegation does not cover")
	}
}

func TestTheModelMustAnswerInAUnionWithOneBranchPerAllowedTool(t *testing.T) {
	model := scripted.New(scripted.Reply{Content: vValidTrip})
	run := plannerRun(t, &recorder{}, nil)
	if _, err := run.Plan(context.Background(), vAgentPlanner(t, model), "get them to New York"); err != nil {
		t.Fatalf("Plan: %v", err)
	}
	out := model.Requests()[0].Output
	if out == nil {
		t.Fatal("the request asks for no structured output")
	}
	if !out.Strict {
		t.Error("the output schema is not asked for strictly")
	}
	if !vJSONEqual(t, out.Schema, planexec.PlanSchema(run.Catalog())) {
		t.Errorf("the output schema is not PlanSchema of the catalog: %s", out.Schema)
	}
	s := vDecodeSchema(t, out.Schema)
	vSchemaWalk(t, s, s, "#")
	steps := vProp(t, s, "steps")
	items, _ := steps["items"].(map[string]any)
	branches, _ := items["anyOf"].([]any)
	contracts := plannerContracts()
	delete(contracts, "refund")
	var names []string
	for _, b := range branches {
		bm := b.(map[string]any)
		tool := vProp(t, bm, "tool")
		enum, _ := tool["enum"].([]any)
		if len(enum) != 1 {
			t.Errorf("branch tool %v: want an enum of exactly one name", tool)
			continue
		}
		name, _ := enum[0].(string)
		names = append(names, name)
		c, ok := contracts[name]
		if !ok {
			t.Errorf("a branch for %q, which the delegation does not cover", name)
			continue
		}
		// Every member admits a reference beside the contract's own
		// schema; without the references, it is the contract's schema.
		argSchema := vProp(t, bm, "arguments")
		props, _ := argSchema["properties"].(map[string]any)
		for member, p := range props {
			if !admitsRef(p) {
				t.Errorf("branch %s: member %s admits no reference: %v", name, member, p)
			}
		}
		args, err := json.Marshal(withoutRefs(argSchema))
		if err != nil {
			t.Fatal(err)
		}
		if !vJSONEqual(t, args, c.Schema()) {
			t.Errorf("branch %s: arguments schema without references %s, want the contract's %s", name, args, c.Schema())
		}
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"book_flight", "search_flights"}) {
		t.Errorf("branches for %v, want one per allowed tool", names)
	}
}

// ---- replanning ----

func TestARefusedFirstAnswerIsReplannedIntoRevisionTwoOfTheSamePlan(t *testing.T) {
	model := scripted.New(
		scripted.Reply{Content: vUnknownToolTrip, Usage: llm.Usage{InputTokens: 100, OutputTokens: 10}},
		scripted.Reply{Content: vValidTrip, Usage: llm.Usage{InputTokens: 200, OutputTokens: 20}},
	)
	run := plannerRun(t, &recorder{}, nil)
	plan, err := run.Plan(context.Background(), vAgentPlanner(t, model), "get them to New York")
	if err != nil {
		t.Fatalf("Plan: %v", err)
	}
	if plan.Revision != 2 {
		t.Errorf("Revision = %d, want 2", plan.Revision)
	}
	if plan.ID == "" {
		t.Fatal("the plan has no id")
	}
	if len(plan.Steps) != 2 || plan.Steps[1].Tool != "book_flight" || plan.Goal != "get them to New York" {
		t.Errorf("plan = %+v, want the second answer", plan)
	}
	es := run.Events()
	want := []planexec.EventKind{planexec.EventPlanRefused, planexec.EventReplanned, planexec.EventPlanned}
	if got := kinds(es); !slices.Equal(got, want) {
		t.Fatalf("events = %v, want %v", got, want)
	}
	for i, e := range es {
		if e.PlanID != plan.ID {
			t.Errorf("event %d (%s) is for plan %q, want %q", i, e.Kind, e.PlanID, plan.ID)
		}
		if e.RunID != "run-1" || e.Tenant != "acme" {
			t.Errorf("event %d (%s) run %q tenant %q", i, e.Kind, e.RunID, e.Tenant)
		}
	}
	refused, replanned, planned := es[0], es[1], es[2]
	if refused.Attempt != 1 || refused.Revision != 1 || refused.Reason != planexec.ReasonUnknownTool || refused.Tool != "teleport" || refused.StepID != "s1" {
		t.Errorf("PLAN_REFUSED = %+v", refused)
	}
	if refused.Usage == nil || refused.Usage.InputTokens != 100 || refused.Usage.OutputTokens != 10 {
		t.Errorf("PLAN_REFUSED usage = %+v, want the first call's", refused.Usage)
	}
	if replanned.Attempt != 2 || replanned.Revision != 2 || replanned.Reason != planexec.ReasonUnknownTool {
		t.Errorf("REPLANNED = %+v", replanned)
	}
	if planned.Attempt != 2 || planned.Revision != 2 {
		t.Errorf("PLANNED = %+v", planned)
	}
	if planned.Usage == nil || planned.Usage.InputTokens != 200 || planned.Usage.OutputTokens != 20 {
		t.Errorf("PLANNED usage = %+v, want the second call's", planned.Usage)
	}
	if !(es[0].Seq < es[1].Seq && es[1].Seq < es[2].Seq) {
		t.Errorf("events are not numbered in order: %d %d %d", es[0].Seq, es[1].Seq, es[2].Seq)
	}
}

func TestTheReplanRequestCarriesTheRefusalAfterTheModelsOwnAnswer(t *testing.T) {
	model := scripted.New(scripted.Reply{Content: vBadSeatsTrip}, scripted.Reply{Content: vValidTrip})
	run := plannerRun(t, &recorder{}, nil)
	if _, err := run.Plan(context.Background(), vAgentPlanner(t, model), "get them to New York"); err != nil {
		t.Fatalf("Plan: %v", err)
	}
	reqs := model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("the model was called %d times, want twice", len(reqs))
	}
	first, second := reqs[0].Messages, reqs[1].Messages
	if len(second) != 3 {
		t.Fatalf("the second request has %d messages, want task, answer, feedback: %+v", len(second), second)
	}
	if !reflect.DeepEqual(second[0], first[0]) {
		t.Errorf("the task message changed between attempts")
	}
	if second[1].Role != llm.RoleAssistant || second[1].Content != vBadSeatsTrip {
		t.Errorf("message 2 = %+v, want the model's own first answer as the assistant", second[1])
	}
	fb := second[2]
	if fb.Role != llm.RoleUser {
		t.Errorf("the feedback comes from %q, want the user", fb.Role)
	}
	for _, want := range []string{"arguments", `"s2"`, "book_flight", "/seats", "expected integer, got string"} {
		if !strings.Contains(fb.Content, want) {
			t.Errorf("the feedback does not mention %q: %q", want, fb.Content)
		}
	}
}

func TestPlanTellsAnyPlannerItsAttemptAndEarlierRefusals(t *testing.T) {
	p := &vPlannerFunc{payloads: []string{vUnknownToolTrip, "not a plan", vValidTrip}}
	run := plannerRun(t, &recorder{}, nil)
	plan, err := run.Plan(context.Background(), p, "get them to New York")
	if err != nil {
		t.Fatalf("Plan: %v", err)
	}
	if plan.Revision != 3 {
		t.Errorf("Revision = %d, want 3", plan.Revision)
	}
	if len(p.asked) != 3 {
		t.Fatalf("asked %d times", len(p.asked))
	}
	for i, req := range p.asked {
		if req.Attempt != i+1 || len(req.Refusals) != i || req.Task != "get them to New York" {
			t.Errorf("request %d: attempt %d, %d refusals, task %q", i+1, req.Attempt, len(req.Refusals), req.Task)
		}
		if len(req.Tools) != 2 {
			t.Errorf("request %d offers %d tools, want 2", i+1, len(req.Tools))
		}
	}
	last := p.asked[2].Refusals
	if last[0].Reason != planexec.ReasonUnknownTool || string(last[0].Payload) != vUnknownToolTrip || last[0].Revision != 1 {
		t.Errorf("first refusal = %+v", last[0])
	}
	if last[1].Reason != planexec.ReasonMalformed || string(last[1].Payload) != "not a plan" || last[1].Revision != 2 {
		t.Errorf("second refusal = %+v", last[1])
	}
	if last[0].PlanID != plan.ID || last[1].PlanID != plan.ID {
		t.Errorf("refusals are for plans %q and %q, want %q", last[0].PlanID, last[1].PlanID, plan.ID)
	}
}

func TestMalformedOutputCountsAsAPlanningAttempt(t *testing.T) {
	model := scripted.New(
		scripted.Reply{Content: "Sure! Here is your plan: book BA117."},
		scripted.Reply{Content: vValidTrip},
	)
	run := plannerRun(t, &recorder{}, nil)
	plan, err := run.Plan(context.Background(), vAgentPlanner(t, model), "get them to New York")
	if err != nil {
		t.Fatalf("Plan: %v", err)
	}
	if plan.Revision != 2 {
		t.Errorf("Revision = %d, want 2: the malformed answer was attempt 1", plan.Revision)
	}
	es := run.Events()
	if len(es) == 0 || es[0].Kind != planexec.EventPlanRefused || es[0].Reason != planexec.ReasonMalformed || es[0].Attempt != 1 {
		t.Fatalf("events = %+v, want a malformed refusal first", es)
	}
	// With no replans allowed, malformed output alone exhausts the allowance.
	model = scripted.New(scripted.Reply{Content: `{"steps":[{"id":"s1"}]}`}, scripted.Reply{Content: vValidTrip})
	run = plannerRun(t, &recorder{}, func(s *setup) { s.MaxReplans = planexec.NoReplans })
	_, err = run.Plan(context.Background(), vAgentPlanner(t, model), "get them to New York")
	pv := vRefusal(t, err, planexec.ReasonReplan)
	if pv.Attempts != 1 || !errors.Is(err, planexec.ReasonMalformed) {
		t.Errorf("attempts %d, last refusal %v", pv.Attempts, errors.Unwrap(err))
	}
	if n := len(model.Requests()); n != 1 {
		t.Errorf("the model was asked %d times, want once", n)
	}
}

func TestAnEmptyAnswerIsRefusedAsEmptyAndReplanned(t *testing.T) {
	model := scripted.New(scripted.Reply{Content: ""}, scripted.Reply{Content: `{"goal":"x","steps":[]}`}, scripted.Reply{Content: vValidTrip})
	run := plannerRun(t, &recorder{}, nil)
	plan, err := run.Plan(context.Background(), vAgentPlanner(t, model), "get them to New York")
	if err != nil {
		t.Fatalf("Plan: %v", err)
	}
	if plan.Revision != 3 {
		t.Errorf("Revision = %d, want 3", plan.Revision)
	}
	var reasons []planexec.Reason
	for _, e := range run.Events() {
		if e.Kind == planexec.EventPlanRefused {
			reasons = append(reasons, e.Reason)
		}
	}
	if !slices.Equal(reasons, []planexec.Reason{planexec.ReasonEmpty, planexec.ReasonEmpty}) {
		t.Errorf("refusals = %v, want two empty ones", reasons)
	}
}

func TestPlanningGivesUpPastMaxReplansAndWrapsTheLastRefusal(t *testing.T) {
	model := scripted.New(
		scripted.Reply{Content: vBadSeatsTrip},
		scripted.Reply{Content: "not json"},
		scripted.Reply{Content: vUnknownToolTrip},
		scripted.Reply{Content: vValidTrip}, // never asked for
	)
	r := &recorder{}
	run := plannerRun(t, r, nil)
	plan, err := run.Plan(context.Background(), vAgentPlanner(t, model), "get them to New York")
	pv := vRefusal(t, err, planexec.ReasonReplan)
	if len(plan.Steps) != 0 {
		t.Errorf("a plan came back with the refusal: %+v", plan)
	}
	if pv.Attempts != 3 {
		t.Errorf("Attempts = %d, want 3 (one plan and two replans)", pv.Attempts)
	}
	if n := len(model.Requests()); n != 3 {
		t.Errorf("the model was asked %d times, want 3", n)
	}
	if !strings.Contains(pv.Error(), "after 3 attempts") || !strings.Contains(pv.Error(), "unknown_tool") {
		t.Errorf("message = %q, want the attempts and the last reason", pv.Error())
	}
	var last *planexec.PlanValidationError
	if !errors.As(errors.Unwrap(err), &last) {
		t.Fatalf("the replan refusal wraps %T, want the last *PlanValidationError", errors.Unwrap(err))
	}
	if last.Reason != planexec.ReasonUnknownTool || last.Step != "s1" || last.Tool != "teleport" || last.Attempts != 3 {
		t.Errorf("last refusal = %+v", last)
	}
	if !bytes.Equal(last.Payload, []byte(vUnknownToolTrip)) || !bytes.Equal(pv.Payload, []byte(vUnknownToolTrip)) {
		t.Error("the last payload does not ride on the refusal")
	}
	if !errors.Is(err, planexec.ReasonUnknownTool) {
		t.Error("errors.Is does not reach the last refusal's reason")
	}
	if errors.Is(err, planexec.ReasonArguments) {
		t.Error("errors.Is matches an earlier refusal's reason; only the last is wrapped")
	}
	es := run.Events()
	if count(es, planexec.EventPlanRefused) != 3 || count(es, planexec.EventReplanned) != 2 || count(es, planexec.EventPlanned) != 0 {
		t.Errorf("events = %v", kinds(es))
	}
	if len(r.Calls()) != 0 {
		t.Errorf("tools ran while planning: %v", toolNames(r.Calls()))
	}
}

func TestWithNoReplansThePlannerIsAskedOnce(t *testing.T) {
	model := scripted.New(scripted.Reply{Content: vOutsideAllowlistTrip}, scripted.Reply{Content: vValidTrip})
	run := plannerRun(t, &recorder{}, func(s *setup) { s.MaxReplans = planexec.NoReplans })
	_, err := run.Plan(context.Background(), vAgentPlanner(t, model), "money back")
	pv := vRefusal(t, err, planexec.ReasonReplan)
	if pv.Attempts != 1 {
		t.Errorf("Attempts = %d, want 1", pv.Attempts)
	}
	if !errors.Is(err, planexec.ReasonNotAllowed) {
		t.Errorf("the last refusal is not the not_allowed one: %v", err)
	}
	if n := len(model.Requests()); n != 1 {
		t.Errorf("the model was asked %d times, want once", n)
	}
	if got := kinds(run.Events()); !slices.Equal(got, []planexec.EventKind{planexec.EventPlanRefused}) {
		t.Errorf("events = %v, want just PLAN_REFUSED", got)
	}
}

func TestMaxReplansBoundsTheAttempts(t *testing.T) {
	model := scripted.New(scripted.Reply{Content: "x"}, scripted.Reply{Content: "y"}, scripted.Reply{Content: vValidTrip})
	run := plannerRun(t, &recorder{}, func(s *setup) { s.MaxReplans = 1 })
	_, err := run.Plan(context.Background(), vAgentPlanner(t, model), "get them to New York")
	pv := vRefusal(t, err, planexec.ReasonReplan)
	if pv.Attempts != 2 || len(model.Requests()) != 2 {
		t.Errorf("attempts %d, requests %d; want 2 and 2", pv.Attempts, len(model.Requests()))
	}
}

func TestAModelErrorIsReturnedWrappedNotAsARefusal(t *testing.T) {
	outage := errors.New("provider is down")
	model := scripted.New(scripted.Reply{Err: outage})
	run := plannerRun(t, &recorder{}, nil)
	_, err := run.Plan(context.Background(), vAgentPlanner(t, model), "get them to New York")
	if !errors.Is(err, outage) {
		t.Fatalf("err = %v, want it to wrap the model's error", err)
	}
	var pv *planexec.PlanValidationError
	if errors.As(err, &pv) {
		t.Errorf("a model error came back as a refusal: %v", pv)
	}
	if n := len(model.Requests()); n != 1 {
		t.Errorf("the model was asked %d times after failing, want once", n)
	}
	if count(run.Events(), planexec.EventPlanRefused) != 0 || count(run.Events(), planexec.EventReplanned) != 0 {
		t.Errorf("a model error was recorded as a refusal: %v", kinds(run.Events()))
	}

	// An outage after a refusal is returned the same way.
	model = scripted.New(scripted.Reply{Content: vUnknownToolTrip}, scripted.Reply{Err: outage})
	run = plannerRun(t, &recorder{}, nil)
	_, err = run.Plan(context.Background(), vAgentPlanner(t, model), "get them to New York")
	if !errors.Is(err, outage) || errors.As(err, &pv) {
		t.Errorf("err = %v, want the outage, not a refusal", err)
	}
}

func TestPlanningStopsWhenTheContextIsDone(t *testing.T) {
	model := scripted.New(scripted.Reply{Content: vValidTrip})
	run := plannerRun(t, &recorder{}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := run.Plan(ctx, vAgentPlanner(t, model), "get them to New York")
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	if n := len(model.Requests()); n != 0 {
		t.Errorf("the model was asked %d times under a done context", n)
	}
}

func TestUsageIsSummedAcrossPlanningAttempts(t *testing.T) {
	model := scripted.New(
		scripted.Reply{Content: "nope", Usage: llm.Usage{InputTokens: 100, OutputTokens: 10}},
		scripted.Reply{Content: vBadSeatsTrip, Usage: llm.Usage{InputTokens: 150, OutputTokens: 15}},
		scripted.Reply{Content: vValidTrip, Usage: llm.Usage{InputTokens: 200, OutputTokens: 20}},
	)
	run := plannerRun(t, &recorder{}, nil)
	if u := run.Usage(); u != (llm.Usage{}) {
		t.Errorf("usage before planning = %+v", u)
	}
	if _, err := run.Plan(context.Background(), vAgentPlanner(t, model), "get them to New York"); err != nil {
		t.Fatalf("Plan: %v", err)
	}
	want := llm.Usage{InputTokens: 450, OutputTokens: 45, Calls: 3}
	if u := run.Usage(); u != want {
		t.Errorf("Usage() = %+v, want %+v", u, want)
	}
}

func TestAPlannedPlanRunsUnderItsIDAndRevision(t *testing.T) {
	model := scripted.New(scripted.Reply{Content: vUnknownToolTrip}, scripted.Reply{Content: vValidTrip})
	r := &recorder{}
	run := plannerRun(t, r, nil)
	plan, err := run.Plan(context.Background(), vAgentPlanner(t, model), "get them to New York")
	if err != nil {
		t.Fatalf("Plan: %v", err)
	}
	res, err := run.Execute(context.Background(), plan)
	if err != nil {
		t.Fatalf("Execute: %v", err)
	}
	if res.PlanID != plan.ID || res.Revision != 2 || !res.Complete {
		t.Errorf("result = %+v, want plan %q revision 2 complete", res, plan.ID)
	}
	var pnr string
	if err := res.Outcome("s2", &pnr); err != nil || pnr != "PNR-BA117" {
		t.Errorf("Outcome(s2) = %q, %v", pnr, err)
	}
	if got := toolNames(r.Calls()); !slices.Equal(got, []string{"search_flights", "book_flight"}) {
		t.Errorf("calls = %v", got)
	}
	for _, e := range run.Events() {
		if e.PlanID != plan.ID {
			t.Errorf("%s is for plan %q, want %q", e.Kind, e.PlanID, plan.ID)
		}
	}
}

func TestFeedbackNamesTheReasonStepToolAndEveryViolation(t *testing.T) {
	fb := planexec.Feedback(&planexec.PlanValidationError{
		Reason: planexec.ReasonArguments, Step: "s2", Tool: "book_flight",
		Violations: []planexec.Violation{{Path: "/seats", Why: "expected integer, got string"}, {Path: "/class", Why: "unknown key"}},
		Payload:    []byte(`{"seats":"` + vSecret + `"}`),
	})
	for _, want := range []string{"arguments", `"s2"`, `"book_flight"`, "/seats: expected integer, got string", "/class: unknown key"} {
		if !strings.Contains(fb, want) {
			t.Errorf("feedback %q does not mention %q", fb, want)
		}
	}
}

func TestTheOutputSchemaResolvesEveryReferenceOfARecursiveTool(t *testing.T) {
	r := &recorder{}
	ex, err := planexec.NewExecutor(planexec.Config{
		Tools: []*planexec.Tool{
			planexec.MustTool("outline", "Write an outline.", func(ctx context.Context, n vNode) (string, error) {
				return "ok", r.record(ctx, "outline", n)
			}),
		},
	})
	if err != nil {
		t.Fatalf("NewExecutor: %v", err)
	}
	run, err := ex.Run(planexec.Delegation{RunID: "run-1", Tenant: "acme", User: "dana", Agent: "writer"})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	model := scripted.New(scripted.Reply{Content: `{"goal":"g","steps":[{"id":"o1","tool":"outline","arguments":{"name":"root","children":[{"name":"leaf"}]},"depends_on":[],"intent":""}]}`})
	if _, err := run.Plan(context.Background(), vAgentPlanner(t, model), "outline it"); err != nil {
		t.Fatalf("Plan: %v", err)
	}
	s := vDecodeSchema(t, model.Requests()[0].Output.Schema)
	vSchemaWalk(t, s, s, "#")
}

func TestTheModelIsNotShownToolsOutsideTheDelegatedScope(t *testing.T) {
	model := scripted.New(scripted.Reply{Content: vValidTrip}, scripted.Reply{Content: vPlanJSON(vStepJSON("s1", "search_flights", `{"origin":"LHR","destination":"JFK"}`))})
	run := plannerRun(t, &recorder{}, func(s *setup) { s.Delegation.Scope = []string{"search_flights"} })
	plan, err := run.Plan(context.Background(), vAgentPlanner(t, model), "get them to New York")
	if err != nil {
		t.Fatalf("Plan: %v", err)
	}
	if plan.Revision != 2 {
		t.Errorf("Revision = %d: the booking outside the scope should have been refused first", plan.Revision)
	}
	if es := run.Events(); len(es) == 0 || es[0].Reason != planexec.ReasonNotAllowed {
		t.Errorf("events = %+v, want a not_allowed refusal first", es)
	}
	req := model.Requests()[0]
	shown := vCatalogShown(t, req.Messages[0].Content)
	if len(shown) != 1 || shown[0].Name != "search_flights" {
		t.Errorf("the model was shown %+v, want only search_flights", shown)
	}
	if strings.Contains(string(req.Output.Schema), "book_flight") {
		t.Error("the output schema offers book_flight, which the delegation does not cover")
	}
}

func TestPlanningEventsNameTheModelAndTheProvidersRequest(t *testing.T) {
	model := scripted.New(
		scripted.Reply{Content: `{"goal":"g","steps":[{"id":"s1","tool":"charter_jet","arguments":{}}]}`},
		scripted.Reply{Content: `{"goal":"g","steps":[{"id":"s1","tool":"search_flights","arguments":{"origin":"LHR","destination":"JFK"}}]}`},
	)
	model.Name = "planner-large"
	planner, err := planexec.NewAgentPlanner(model, planexec.Agent{Name: "planner"})
	if err != nil {
		t.Fatal(err)
	}
	run, _ := newExecutor(t, &recorder{}, nil)
	if _, err := run.Plan(context.Background(), planner, "fly"); err != nil {
		t.Fatal(err)
	}
	want := map[planexec.EventKind]string{planexec.EventPlanRefused: "scripted-1", planexec.EventPlanned: "scripted-2"}
	for _, e := range run.Events() {
		id, ok := want[e.Kind]
		if !ok {
			continue
		}
		if e.Model != "planner-large" || e.RequestID != id {
			t.Errorf("%s names model %q request %q, want planner-large %s", e.Kind, e.Model, e.RequestID, id)
		}
		delete(want, e.Kind)
	}
	if len(want) != 0 {
		t.Errorf("missing events: %v", want)
	}
}

// truncating answers every call with a cut-off document and an error.
type truncating struct{}

func (truncating) Generate(context.Context, *llm.Request) (*llm.Response, error) {
	return &llm.Response{Content: `{"goal":"g","st`, FinishReason: "length", Usage: llm.Usage{InputTokens: 700, OutputTokens: 4096, Calls: 1}},
		&llm.ProviderError{Provider: "test", Err: llm.ErrTruncated}
}

func TestATruncatedAnswerIsAnErrorAndStillCountsItsTokens(t *testing.T) {
	planner, err := planexec.NewAgentPlanner(truncating{}, planexec.Agent{Name: "planner"})
	if err != nil {
		t.Fatal(err)
	}
	run, _ := newExecutor(t, &recorder{}, nil)
	_, err = run.Plan(context.Background(), planner, "fly")
	if !errors.Is(err, llm.ErrTruncated) {
		t.Fatalf("err = %v, want ErrTruncated", err)
	}
	if u := run.Usage(); u.OutputTokens != 4096 || u.Calls != 1 {
		t.Errorf("usage = %+v, want the truncated call's tokens counted", u)
	}
}

// ---- refused plans as the model is shown them again ----

// plannerHuge is a plan of about size bytes whose goal is written in a
// three-byte character, so a cut at a round number of bytes falls inside a
// character. Its one step calls tool.
func plannerHuge(size int, tool string) string {
	head := `{"goal":"`
	tail := `","steps":[` + vStepJSON("s1", tool, `{"origin":"LHR","destination":"JFK"}`) + `]}`
	return head + strings.Repeat("€", (size-len(head)-len(tail))/3) + tail
}

func TestARefusedLargePlanIsShownToTheModelAgainOnlyInPart(t *testing.T) {
	const shown = 16 << 10 // what the model may be shown of one refused plan
	for _, tc := range []struct {
		name    string
		payload string
		reason  planexec.Reason
		limits  planexec.Limits
	}{
		{"larger than the plan limit", plannerHuge(400<<10, "search_flights"), planexec.ReasonMalformed, planexec.Limits{MaxPlanBytes: 128 << 10}},
		{"within the limits but refused", plannerHuge(400<<10, "teleport"), planexec.ReasonUnknownTool, planexec.Limits{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			model := scripted.New(scripted.Reply{Content: tc.payload}, scripted.Reply{Content: tc.payload}, scripted.Reply{Content: vValidTrip})
			run := plannerRun(t, &recorder{}, func(s *setup) { s.Limits = tc.limits })
			if _, err := run.Plan(context.Background(), vAgentPlanner(t, model), "get them to New York"); err != nil {
				t.Fatalf("Plan: %v", err)
			}
			es := run.Events()
			if count(es, planexec.EventPlanRefused) != 2 || es[0].Reason != tc.reason {
				t.Fatalf("events = %+v, want two %s refusals", kinds(es), tc.reason)
			}
			reqs := model.Requests()
			if len(reqs) != 3 {
				t.Fatalf("the model was asked %d times, want 3", len(reqs))
			}
			last := reqs[2].Messages
			if len(last) != 5 {
				t.Fatalf("the third request has %d messages, want task and two answers with their feedback", len(last))
			}
			total := 0
			for _, m := range last {
				total += len(m.Content)
			}
			if total > 4*shown {
				t.Errorf("the third request carries %d bytes of messages for two refusals of %d bytes each", total, len(tc.payload))
			}
			for _, i := range []int{1, 3} {
				m := last[i]
				if m.Role != llm.RoleAssistant {
					t.Fatalf("message %d comes from %q, want the model's own answer", i, m.Role)
				}
				// The answer's start, cut on a character, then a marker that
				// says how much was left out.
				k := 0
				for k < len(m.Content) && k < len(tc.payload) && m.Content[k] == tc.payload[k] {
					k++
				}
				for k > 0 && k < len(tc.payload) && !utf8.RuneStart(tc.payload[k]) {
					k--
				}
				if k > shown || k < shown-utf8.UTFMax {
					t.Errorf("message %d repeats %d bytes of the %d-byte answer, want about %d", i, k, len(tc.payload), shown)
				}
				marker := m.Content[k:]
				if marker == "" || len(marker) > 256 || strings.Contains(tc.payload[k:], marker) {
					t.Errorf("message %d ends %q after the excerpt, want a short marker", i, plannerClip(marker))
				}
				if !strings.Contains(marker, strconv.Itoa(len(tc.payload)-k)) {
					t.Errorf("the marker %q does not say that %d bytes were left out", plannerClip(marker), len(tc.payload)-k)
				}
				if !utf8.ValidString(m.Content) {
					t.Errorf("message %d is not valid UTF-8: the cut split a character", i)
				}
			}
		})
	}
}

// plannerClip keeps a failure message short.
func plannerClip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// ---- planning with no tool ----

func TestPlanningWithNoToolInScopeOrAnExpiredDelegationIsADelegationErrorAndAsksNoModel(t *testing.T) {
	for name, edit := range map[string]func(*setup){
		"an empty scope":                          func(s *setup) { s.Delegation.Scope = []string{} },
		"a scope of tools the executor lacks":     func(s *setup) { s.Delegation.Scope = []string{"charter_jet"} },
		"an executor with no tools, and no scope": func(s *setup) { s.Tools = nil },
		"an expired delegation": func(s *setup) {
			now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
			s.Now = func() time.Time { return now }
			s.Delegation.Expires = now
		},
	} {
		t.Run(name, func(t *testing.T) {
			model := scripted.New(scripted.Reply{Content: vValidTrip})
			run, _ := newExecutor(t, &recorder{}, edit)
			plan, err := run.Plan(context.Background(), vAgentPlanner(t, model), "get them to New York")
			var de *planexec.DelegationError
			if !errors.As(err, &de) {
				t.Fatalf("err = %v, want *DelegationError", err)
			}
			if de.RunID != "run-1" {
				t.Errorf("the error names run %q, want run-1", de.RunID)
			}
			if plan.ID != "" || len(plan.Steps) != 0 {
				t.Errorf("a plan came back with the error: %+v", plan)
			}
			if n := len(model.Requests()); n != 0 {
				t.Errorf("the model was asked %d times with no tool to plan with", n)
			}
			if u := run.Usage(); u != (llm.Usage{}) {
				t.Errorf("usage = %+v, want none", u)
			}
			if es := run.Events(); len(es) != 0 {
				t.Errorf("events = %v, want none", kinds(es))
			}
		})
	}
}

// admitsRef reports whether a member's schema is a union holding the
// reference definition.
func admitsRef(schema any) bool {
	m, _ := schema.(map[string]any)
	anyOf, _ := m["anyOf"].([]any)
	for _, b := range anyOf {
		if bm, _ := b.(map[string]any); bm["$ref"] == "#/$defs/reference" {
			return true
		}
	}
	return false
}

// withoutRefs takes the reference branches out of schema, and a union left
// with one branch back to that branch.
func withoutRefs(schema any) any {
	switch n := schema.(type) {
	case map[string]any:
		if anyOf, ok := n["anyOf"].([]any); ok {
			var kept []any
			for _, b := range anyOf {
				if bm, _ := b.(map[string]any); bm["$ref"] == "#/$defs/reference" {
					continue
				}
				kept = append(kept, withoutRefs(b))
			}
			if len(kept) == 1 && len(n) == 1 {
				return kept[0]
			}
			n["anyOf"] = kept
		}
		for k, v := range n {
			if k != "anyOf" {
				n[k] = withoutRefs(v)
			}
		}
	case []any:
		for i, v := range n {
			n[i] = withoutRefs(v)
		}
	}
	return schema
}
