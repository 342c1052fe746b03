package chat_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/chat"
	"github.com/planexec/planexec/llm"
	"github.com/planexec/planexec/llm/scripted"
	"github.com/planexec/planexec/store/memory"
)

// threeSteps proposes: s1 creates an item, s2 closes T-1 after s1, s3
// creates another item on its own.
const threeSteps = `{"goal":"tidy up","steps":[
	{"id":"s1","tool":"create_item","arguments":{"title":"Docs"},"depends_on":[],"intent":"a docs item"},
	{"id":"s2","tool":"update_item","arguments":{"id":"T-1","state":"done","version":1},"depends_on":["s1"],"intent":"close the README item"},
	{"id":"s3","tool":"create_item","arguments":{"title":"Tests"},"depends_on":null,"intent":null}]}`

// proposer proposes plan on a person's message, and answers in words once
// it hears back.
func proposer(plan string) *scripted.Model {
	return scripted.Respond(func(req *llm.Request) scripted.Reply {
		if strings.HasPrefix(lastUser(req), "Results") {
			return say("Proposed; apply it when ready.")
		}
		return say("Here is a plan.", call("propose_plan", plan))
	})
}

// proposed runs a turn that proposes and returns the proposal.
func (r *rig) proposed(person planexec.Delegation, session string) *chat.Proposal {
	r.t.Helper()
	out := r.turn(person, session, "Tidy up the tracker")
	ps := of(out, chat.KindProposal)
	if len(ps) != 1 {
		r.t.Fatalf("no proposal: %s %s", kinds(out), mustJSON(of(out, chat.KindToolResult)))
	}
	return ps[0].Proposal
}

func TestApplyingASubsetRunsOnlyThoseStepsAndWhatTheyDependOnOnce(t *testing.T) {
	model := proposer(threeSteps)
	r := newRig(t, model)
	s := r.session("s1")
	p := r.proposed(ana(), s)
	if n := r.tracker.called("create_item") + r.tracker.called("update_item"); n != 0 {
		t.Fatalf("proposing ran %d steps", n)
	}

	res, err := r.chat.Apply(context.Background(), ana(), s, p.ID, []string{"s2"})
	if err != nil {
		t.Fatal(err)
	}
	ran := slices.Sorted(func(yield func(string) bool) {
		for id := range res.Steps {
			yield(id)
		}
	})
	if !slices.Equal(ran, []string{"s1", "s2"}) || r.tracker.called("create_item") != 1 || r.tracker.called("update_item") != 1 {
		t.Fatalf("ran %v; create_item %d, update_item %d times", ran, r.tracker.called("create_item"), r.tracker.called("update_item"))
	}

	// Applying again, even asking for more, resumes the one run: nothing twice.
	if _, err := r.chat.Apply(context.Background(), ana(), s, p.ID, nil); err != nil {
		t.Fatal(err)
	}
	if r.tracker.called("create_item") != 1 || r.tracker.called("update_item") != 1 {
		t.Fatalf("a second apply ran steps again: create_item %d, update_item %d", r.tracker.called("create_item"), r.tracker.called("update_item"))
	}
	applied := of(r.until(s, 0, chat.KindApplied), chat.KindApplied)[0].Decision
	if applied.Status != string(planexec.RunCompleted) || !slices.Equal(applied.Steps, []string{"s1", "s2"}) || len(applied.Results) != 2 || applied.Run != "chat:s1:"+p.ID {
		t.Fatalf("applied = %+v", applied)
	}
	if !strings.Contains(string(applied.Results[0].Output), `"title":"Docs"`) {
		t.Fatalf("the applied step's output: %s", applied.Results[0].Output)
	}

	// The planner hears of it in its next turn.
	r.turn(ana(), s, "What happened?")
	reqs := model.Requests()
	if got := lastUser(&reqs[len(reqs)-2]); !strings.Contains(got, "ana applied proposal "+p.ID+" (steps s1, s2): the run is completed") {
		t.Fatalf("the planner was not told of the apply:\n%s", got)
	}
}

func TestRejectingLeavesNothingAndAnAppliedOrRejectedProposalIsDecided(t *testing.T) {
	r := newRig(t, proposer(threeSteps))
	s := r.session("s1")
	p := r.proposed(ana(), s)
	ctx := context.Background()

	if err := r.chat.Reject(ctx, ben(), s, p.ID, "not now"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.chat.Apply(ctx, ana(), s, p.ID, nil); !errors.Is(err, chat.ErrDecided) {
		t.Fatalf("applying a rejected proposal: %v", err)
	}
	if err := r.chat.Reject(ctx, ana(), s, p.ID, "again"); !errors.Is(err, chat.ErrDecided) {
		t.Fatalf("rejecting twice: %v", err)
	}
	if n := r.tracker.called("create_item") + r.tracker.called("update_item"); n != 0 {
		t.Fatalf("%d steps ran after a rejection", n)
	}

	p2 := r.proposed(ana(), s)
	if _, err := r.chat.Apply(ctx, ana(), s, p2.ID, []string{"s3"}); err != nil {
		t.Fatal(err)
	}
	if err := r.chat.Reject(ctx, ana(), s, p2.ID, "too late"); !errors.Is(err, chat.ErrDecided) {
		t.Fatalf("rejecting an applied proposal: %v", err)
	}
	if _, err := r.chat.Apply(ctx, ana(), s, "t9r9c9", nil); !errors.Is(err, chat.ErrNoProposal) {
		t.Fatalf("an unknown proposal: %v", err)
	}
	if _, err := r.chat.Apply(ctx, ana(), s, p2.ID, []string{"s9"}); err != nil {
		t.Fatalf("a second apply of an applied proposal resumes whatever it names: %v", err)
	}
	p3 := r.proposed(ana(), s)
	if _, err := r.chat.Apply(ctx, ana(), s, p3.ID, []string{"s9"}); !errors.Is(err, chat.ErrNoStep) {
		t.Fatalf("a step the proposal does not hold: %v", err)
	}
	agent := ana()
	agent.Agent = "planner:s1"
	if _, err := r.chat.Apply(ctx, agent, s, p3.ID, nil); !errors.Is(err, chat.ErrNotPerson) {
		t.Fatalf("the planner applying its own proposal: %v", err)
	}
	if err := r.chat.Reject(ctx, agent, s, p3.ID, ""); !errors.Is(err, chat.ErrNotPerson) {
		t.Fatalf("the planner rejecting: %v", err)
	}
}

func TestApplyingAProposalThatNoLongerFitsIsRefusedAndNothingRuns(t *testing.T) {
	r := newRig(t, proposer(threeSteps))
	s := r.session("s1")
	p := r.proposed(ana(), s)

	// Ben may only read: the proposal does not fit his authority now.
	_, err := r.chat.Apply(context.Background(), ben(), s, p.ID, nil)
	var pve *planexec.PlanValidationError
	if !errors.As(err, &pve) || pve.Reason != planexec.ReasonNotAllowed {
		t.Fatalf("applying beyond the person's scope: %v", err)
	}
	if n := r.tracker.called("create_item") + r.tracker.called("update_item"); n != 0 {
		t.Fatalf("%d steps ran", n)
	}
	all, err := r.chat.Transcript(context.Background(), "acme", s, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(of(all, chat.KindApplied)); n != 0 {
		t.Fatalf("%d applied entries for a refused apply", n)
	}
	// It can still be applied by someone it fits.
	if _, err := r.chat.Apply(context.Background(), ana(), s, p.ID, nil); err != nil {
		t.Fatal(err)
	}
}

func TestAProposalIsValidatedWhenProposedAndARefusalGoesBackToTheModel(t *testing.T) {
	bad := []string{
		// An unknown argument.
		`{"goal":"g","steps":[{"id":"s1","tool":"create_item","arguments":{"title":"x","owner":"me"},"depends_on":[],"intent":""}]}`,
		// Execution policy is not the planner's to set.
		`{"goal":"g","steps":[{"id":"s1","tool":"create_item","arguments":{"title":"x"},"depends_on":[],"intent":""}],"grants":[{"class":"all"}]}`,
		// A dependency on a step nobody planned.
		`{"goal":"g","steps":[{"id":"s1","tool":"create_item","arguments":{"title":"x"},"depends_on":["s0"],"intent":""}]}`,
	}
	for _, plan := range bad {
		calls := 0
		model := scripted.Respond(func(req *llm.Request) scripted.Reply {
			calls++
			if calls == 1 {
				return say("", call("propose_plan", plan))
			}
			return say("I will fix it.")
		})
		r := newRig(t, model)
		s := r.session("s1")
		out := r.turn(ana(), s, "Plan it")
		res := of(out, chat.KindToolResult)[0].Result
		if res.Status != chat.CallFailed || res.Error.Code != "invalid_plan" || len(of(out, chat.KindProposal)) != 0 {
			t.Fatalf("%s: %+v %+v", plan, res, res.Error)
		}
		if !strings.Contains(lastUser(&model.Requests()[1]), "invalid_plan") {
			t.Fatal("the refusal did not go back to the model")
		}
	}

	// A person who may only read cannot have the planner propose writes.
	r := newRig(t, proposer(threeSteps))
	s := r.session("s2")
	out := r.turn(ben(), s, "Tidy up")
	if res := of(out, chat.KindToolResult)[0].Result; res.Error == nil || res.Error.Code != "forbidden" || len(of(out, chat.KindProposal)) != 0 {
		t.Fatalf("ben's proposal: %+v", res)
	}
}

func TestAProposalThatNeedsApprovalWaitsForThePersonAndRunsOnceApproved(t *testing.T) {
	tr := newTracker()
	st := memory.New()
	gated := planexec.MustTool("close_item", "Close an item for good.", func(ctx context.Context, a getArgs) (string, error) {
		tr.count("close_item")
		return "closed " + a.ID, nil
	}, planexec.Irreversible())
	gate := planexec.ApprovalGateFunc(func(ctx context.Context, req planexec.ApprovalRequest) (planexec.Decision, error) {
		return req.Defer(), nil // a person decides later
	})
	engine, err := planexec.NewExecutor(planexec.Config{Tools: []*planexec.Tool{gated}, Store: st, Gate: gate})
	if err != nil {
		t.Fatal(err)
	}
	plan := `{"goal":"close","steps":[{"id":"s1","tool":"close_item","arguments":{"id":"T-1"},"depends_on":[],"intent":""}]}`
	r := newRig(t, proposer(plan), func(c *chat.Config) { c.Store, c.Engine = st, engine })
	s := r.session("s1")
	person := ana()
	person.Scope = nil
	out := r.turn(person, s, "Close T-1")
	p := of(out, chat.KindProposal)[0].Proposal
	if !slices.Equal(p.Irreversible, []string{"s1"}) {
		t.Fatalf("irreversible steps: %v", p.Irreversible)
	}

	_, err = r.chat.Apply(context.Background(), person, s, p.ID, nil)
	var pending *planexec.ApprovalPendingError
	if !errors.As(err, &pending) || tr.called("close_item") != 0 {
		t.Fatalf("apply: %v; close_item ran %d times", err, tr.called("close_item"))
	}
	run, err := r.chat.AppliedRun(person, s, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := run.Decide(context.Background(), pending.Requests[0].Approve("ana")); err != nil {
		t.Fatal(err)
	}
	if _, err := r.chat.Apply(context.Background(), person, s, p.ID, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := r.chat.Apply(context.Background(), person, s, p.ID, nil); err != nil {
		t.Fatal(err)
	}
	if n := tr.called("close_item"); n != 1 {
		t.Fatalf("close_item ran %d times, want once", n)
	}
	all, err := r.chat.Transcript(context.Background(), "acme", s, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var statuses []string
	for _, o := range of(all, chat.KindApplied) {
		statuses = append(statuses, o.Decision.Status)
	}
	if !slices.Equal(statuses, []string{"awaiting_approval", "completed", "completed"}) {
		t.Fatalf("applied entries: %v", statuses)
	}
}
