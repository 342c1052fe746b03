package chat_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/chat"
	"github.com/planexec/planexec/llm"
	"github.com/planexec/planexec/llm/scripted"
	"github.com/planexec/planexec/store"
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

	// Applying the same again is the one run's outcome: nothing twice,
	// nothing recorded again.
	if _, err := r.chat.Apply(context.Background(), ana(), s, p.ID, []string{"s1", "s2"}); err != nil {
		t.Fatal(err)
	}
	if r.tracker.called("create_item") != 1 || r.tracker.called("update_item") != 1 {
		t.Fatalf("a second apply ran steps again: create_item %d, update_item %d", r.tracker.called("create_item"), r.tracker.called("update_item"))
	}
	// Applying the rest runs only what was not applied: s3.
	res, err = r.chat.Apply(context.Background(), ana(), s, p.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.tracker.called("create_item") != 2 || r.tracker.called("update_item") != 1 || !res.Steps["s1"].Replayed || res.Steps["s3"].Replayed {
		t.Fatalf("applying the rest: create_item %d, update_item %d; %+v", r.tracker.called("create_item"), r.tracker.called("update_item"), res.Steps)
	}
	all := r.transcript(s)
	if got := kinds(of(all, chat.KindApplying, chat.KindApplied)); got != "applying applied applying applied" {
		t.Fatalf("the decisions on record: %s", got)
	}
	applied := of(all, chat.KindApplied)[0].Decision
	if applied.Status != string(planexec.RunCompleted) || !slices.Equal(applied.Steps, []string{"s1", "s2"}) || len(applied.Results) != 2 || applied.Run != "chat:s1:"+p.ID {
		t.Fatalf("applied = %+v", applied)
	}
	if !strings.Contains(string(applied.Results[0].Output), `"title":"Docs"`) {
		t.Fatalf("the applied step's output: %s", applied.Results[0].Output)
	}
	if rest := of(all, chat.KindApplied)[1].Decision; !slices.Equal(rest.Steps, []string{"s1", "s2", "s3"}) || rest.Status != string(planexec.RunCompleted) {
		t.Fatalf("the rest applied = %+v", rest)
	}

	// The planner hears of it in its next turn.
	r.turn(ana(), s, "What happened?")
	reqs := model.Requests()
	if got := lastUser(&reqs[len(reqs)-2]); !strings.Contains(got, "ana applied proposal "+p.ID+" (steps s1, s2): the run is completed") ||
		!strings.Contains(got, "ana applied proposal "+p.ID+" (steps s1, s2, s3): the run is completed") {
		t.Fatalf("the planner was not told of the apply:\n%s", got)
	}
}

func TestRejectingLeavesNothingAndAnAppliedOrRejectedProposalIsDecided(t *testing.T) {
	r := newRig(t, proposer(threeSteps))
	s := r.session("s1")
	p := r.proposed(ana(), s)
	ctx := context.Background()

	// Deciding takes the authority to apply: ben may only read.
	var pve *planexec.PlanValidationError
	if err := r.chat.Reject(ctx, ben(), s, p.ID, "not now"); !errors.As(err, &pve) || pve.Reason != planexec.ReasonNotAllowed {
		t.Fatalf("ben rejecting: %v, want not_allowed", err)
	}
	if err := r.chat.Reject(ctx, ana(), s, p.ID, "not now"); err != nil {
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
	if _, err := r.chat.Apply(ctx, ana(), s, p2.ID, []string{"s9"}); !errors.Is(err, chat.ErrNoStep) {
		t.Fatalf("applying more of an applied proposal, naming a step it does not hold: %v", err)
	}
	if _, err := r.chat.Apply(ctx, ana(), s, p2.ID, []string{}); !errors.Is(err, chat.ErrNoStep) {
		t.Fatalf("applying no step: %v", err)
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
	all := r.transcript(s)
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
	all := r.transcript(s)
	var statuses []string
	for _, o := range of(all, chat.KindApplied) {
		statuses = append(statuses, o.Decision.Status)
	}
	if !slices.Equal(statuses, []string{"awaiting_approval", "completed"}) { // the third apply recorded nothing
		t.Fatalf("applied entries: %v", statuses)
	}
}

// deciding is a store whose next conditional append, the write of a
// decision, first lets another decision in: as if a person on another
// replica decided between this decision's reading and its writing.
type deciding struct {
	store.TranscriptStore
	mu      sync.Mutex
	between func() // the other decision; it makes its own conditional append
}

func (d *deciding) AppendEntriesAfter(ctx context.Context, tenant, session string, last int64, entries []json.RawMessage) (int64, error) {
	d.mu.Lock()
	between := d.between
	d.between = nil
	d.mu.Unlock()
	if between != nil {
		between()
	}
	return d.TranscriptStore.AppendEntriesAfter(ctx, tenant, session, last, entries)
}

func TestTheFirstDecisionOnAProposalStandsWhenAnApplyAndARejectMeet(t *testing.T) {
	ctx := context.Background()
	t.Run("a rejection between an apply's reading and its writing: the apply is refused and nothing runs", func(t *testing.T) {
		var r *rig
		var rejectErr error
		st := &deciding{}
		r = newRig(t, proposer(threeSteps), func(c *chat.Config) { st.TranscriptStore = c.Store; c.Store = st })
		s := r.session("s1")
		p := r.proposed(ana(), s)
		st.between = func() { rejectErr = r.chat.Reject(ctx, ana(), s, p.ID, "not now") }

		if _, err := r.chat.Apply(ctx, ana(), s, p.ID, nil); !errors.Is(err, chat.ErrDecided) {
			t.Fatalf("the apply that came second: %v, want ErrDecided", err)
		}
		if rejectErr != nil {
			t.Fatalf("the rejection that came first: %v", rejectErr)
		}
		if n := r.tracker.called("create_item") + r.tracker.called("update_item"); n != 0 {
			t.Fatalf("%d steps ran after the rejection", n)
		}
		all := r.transcript(s)
		if got := kinds(of(all, chat.KindApplying, chat.KindApplied, chat.KindRejected)); got != "rejected" {
			t.Fatalf("the decisions on record: %s, want the rejection alone", got)
		}
	})
	t.Run("an apply between a rejection's reading and its writing: the rejection is refused and the apply stands", func(t *testing.T) {
		var r *rig
		var applyErr error
		st := &deciding{}
		r = newRig(t, proposer(threeSteps), func(c *chat.Config) { st.TranscriptStore = c.Store; c.Store = st })
		s := r.session("s1")
		p := r.proposed(ana(), s)
		st.between = func() { _, applyErr = r.chat.Apply(ctx, ana(), s, p.ID, []string{"s3"}) }

		if err := r.chat.Reject(ctx, ana(), s, p.ID, "not now"); !errors.Is(err, chat.ErrDecided) {
			t.Fatalf("the rejection that came second: %v, want ErrDecided", err)
		}
		if applyErr != nil || r.tracker.called("create_item") != 1 {
			t.Fatalf("the apply that came first: %v; create_item ran %d times", applyErr, r.tracker.called("create_item"))
		}
		all := r.transcript(s)
		if got := kinds(of(all, chat.KindApplying, chat.KindApplied, chat.KindRejected)); got != "applying applied" {
			t.Fatalf("the decisions on record: %s, want the apply alone", got)
		}
	})
}

func TestAnApplyGoesOnWhenItsCallerGoesAway(t *testing.T) {
	r := newRig(t, proposer(threeSteps))
	s := r.session("s1")
	p := r.proposed(ana(), s)
	r.tracker.created = make(chan struct{})
	r.tracker.started = make(chan string, 8)

	ctx, cancel := context.WithCancel(context.Background())
	type applied struct {
		res *planexec.Result
		err error
	}
	done := make(chan applied, 1)
	go func() {
		res, err := r.chat.Apply(ctx, ana(), s, p.ID, []string{"s3"})
		done <- applied{res, err}
	}()
	if tool := <-r.tracker.started; tool != "create_item" {
		t.Fatalf("%s started, want create_item", tool)
	}
	cancel() // the request goes away while the step runs
	close(r.tracker.created)
	got := <-done
	if got.err != nil || got.res == nil || got.res.Steps["s3"].Status != planexec.StepDone {
		t.Fatalf("Apply = %+v, %v; want s3 done", got.res, got.err)
	}
	all := r.transcript(s)
	if d := of(all, chat.KindApplied); len(d) != 1 || d[0].Decision.Status != string(planexec.RunCompleted) {
		t.Fatalf("applied on record: %s", mustJSON(d))
	}
}

func TestAfterCloseAPersonsCallsAreErrClosedAndReadsStillWork(t *testing.T) {
	r := newRig(t, proposer(threeSteps))
	s := r.session("s1")
	p := r.proposed(ana(), s)
	ctx := context.Background()
	if err := r.chat.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := r.chat.Create(ctx, ana(), chat.SessionOptions{ID: "s2"}); !errors.Is(err, chat.ErrClosed) {
		t.Errorf("Create: %v", err)
	}
	if _, err := r.chat.Send(ctx, ana(), s, "hello"); !errors.Is(err, chat.ErrClosed) {
		t.Errorf("Send: %v", err)
	}
	if _, err := r.chat.Cancel(ctx, ana(), s); !errors.Is(err, chat.ErrClosed) {
		t.Errorf("Cancel: %v", err)
	}
	if _, err := r.chat.Apply(ctx, ana(), s, p.ID, nil); !errors.Is(err, chat.ErrClosed) {
		t.Errorf("Apply: %v", err)
	}
	if err := r.chat.Reject(ctx, ana(), s, p.ID, ""); !errors.Is(err, chat.ErrClosed) {
		t.Errorf("Reject: %v", err)
	}
	if n := r.tracker.called("create_item") + r.tracker.called("update_item"); n != 0 {
		t.Errorf("%d steps ran after Close", n)
	}
	if _, err := r.chat.Session(ctx, "acme", s); err != nil {
		t.Errorf("Session after Close: %v", err)
	}
	if _, err := r.chat.Transcript(ctx, "acme", s, 0, 0); err != nil {
		t.Errorf("Transcript after Close: %v", err)
	}
}

func TestTheEnginesAuthorizerIsAskedWhenAPlanIsProposed(t *testing.T) {
	var asked []planexec.Delegation
	r := newRig(t, proposer(threeSteps), func(c *chat.Config) {
		tr := newTracker()
		engine, err := planexec.NewExecutor(planexec.Config{Tools: tr.writes(), Store: memory.New(),
			Authorizer: planexec.AuthorizerFunc(func(_ context.Context, d planexec.Delegation, s planexec.Step) error {
				asked = append(asked, d)
				if s.Tool == "update_item" {
					return errors.New("policy 7: the README item is frozen (internal)")
				}
				return nil
			})})
		if err != nil {
			t.Fatal(err)
		}
		c.Engine = engine
	})
	s := r.session("s1")
	out := r.turn(ana(), s, "Tidy up the tracker")
	if len(of(out, chat.KindProposal)) != 0 {
		t.Fatalf("a plan the engine's authorizer refuses was proposed: %s", kinds(out))
	}
	res := of(out, chat.KindToolResult)[0].Result
	if res.Status != chat.CallFailed || res.Error.Code != "forbidden" || !strings.Contains(res.Error.Message, `"update_item"`) {
		t.Fatalf("the proposal's result: %+v", res)
	}
	if strings.Contains(mustJSON(out), "policy 7") {
		t.Fatal("the authorizer's own words reached the transcript")
	}
	if len(asked) == 0 || asked[0].User != "ana" || asked[0].Agent != "" {
		t.Fatalf("the authorizer saw %+v, want ana herself: the plan would run as her", asked)
	}
}

func TestTwoAppliesAtOnceOnOneProcessRunOneAfterTheOtherAndTheOneThatRanRecordsIt(t *testing.T) {
	r := newRig(t, proposer(threeSteps))
	s := r.session("s1")
	p := r.proposed(ana(), s)
	r.tracker.created = make(chan struct{})
	r.tracker.started = make(chan string, 8)
	release := sync.OnceFunc(func() { close(r.tracker.created) })
	t.Cleanup(release) // before the Chat's Close, which waits for the applies
	ctx := context.Background()
	first := make(chan error, 1)
	go func() { _, err := r.chat.Apply(ctx, ana(), s, p.ID, []string{"s3"}); first <- err }()
	<-r.tracker.started // s3 runs for the first apply
	type outcome struct {
		res *planexec.Result
		err error
	}
	second := make(chan outcome, 1)
	go func() { res, err := r.chat.Apply(ctx, dee(), s, p.ID, []string{"s3"}); second <- outcome{res, err} }()
	// The second waits for the first; a caller that stops waiting is let go.
	gone, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := r.chat.Apply(gone, ana(), s, p.ID, []string{"s3"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("an apply whose caller left while another ran: %v", err)
	}
	release()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	out := <-second
	if out.err != nil || !out.res.Complete || !out.res.Steps["s3"].Replayed || out.res.Steps["s3"].Status != planexec.StepDone {
		t.Fatalf("the apply that came second: %+v, %v; want the first's outcome", out.res, out.err)
	}
	if n := r.tracker.called("create_item"); n != 1 {
		t.Fatalf("create_item ran %d times", n)
	}
	all := r.transcript(s)
	d := of(all, chat.KindApplying, chat.KindApplied)
	if kinds(d) != "applying applied" || d[1].Decision.Status != string(planexec.RunCompleted) || d[1].By != "ana" {
		t.Fatalf("on record: %s", mustJSON(d))
	}
}

func TestAnApplyRefusedAsThingsStandRecordsNoDecisionAndTheProposalCanStillBeRejected(t *testing.T) {
	r := newRig(t, proposer(threeSteps))
	s := r.session("s1")
	p := r.proposed(ana(), s)
	ctx := context.Background()
	var pve *planexec.PlanValidationError
	if _, err := r.chat.Apply(ctx, ben(), s, p.ID, nil); !errors.As(err, &pve) || pve.Reason != planexec.ReasonNotAllowed {
		t.Fatalf("ben applying: %v, want not_allowed", err)
	}
	all := r.transcript(s)
	if d := of(all, chat.KindApplying, chat.KindApplied); len(d) != 0 {
		t.Fatalf("a refused apply went on record: %s", kinds(d))
	}
	if err := r.chat.Reject(ctx, ana(), s, p.ID, "not this"); err != nil {
		t.Fatalf("rejecting after a refused apply: %v", err)
	}
	if n := r.tracker.called("create_item") + r.tracker.called("update_item"); n != 0 {
		t.Fatalf("%d steps ran", n)
	}
}

// plansDown is an engine's store whose plans cannot be saved while down
// is set; its claims and decisions are kept as ever.
type plansDown struct {
	*memory.Store
	down atomic.Bool
}

func (p *plansDown) SavePlan(ctx context.Context, rec *store.PlanRecord) error {
	if p.down.Load() {
		return errors.New("the database is down")
	}
	return p.Store.SavePlan(ctx, rec)
}

func TestAnApplyCutShortIsFinishedByTheNextWhateverTheEngineKeptOfTheRun(t *testing.T) {
	tr := newTracker()
	plans := &plansDown{Store: memory.New()}
	engine, err := planexec.NewExecutor(planexec.Config{Tools: tr.writes(), Store: plans})
	if err != nil {
		t.Fatal(err)
	}
	r := newRigOn(t, tr, proposer(threeSteps), func(c *chat.Config) { c.Engine = engine })
	s := r.session("s1")
	p := r.proposed(ana(), s)
	ctx := context.Background()

	if _, err := r.chat.Apply(ctx, ana(), s, p.ID, []string{"s3"}); err != nil {
		t.Fatal(err)
	}
	// The decision to apply the rest goes on record; the run of it does
	// not start: the engine keeps the run of s3 alone.
	plans.down.Store(true)
	if _, err := r.chat.Apply(ctx, ana(), s, p.ID, nil); err == nil {
		t.Fatal("an apply with the engine's store down did not fail")
	}
	plans.down.Store(false)
	res, err := r.chat.Apply(ctx, ana(), s, p.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if tr.called("create_item") != 2 || tr.called("update_item") != 1 || len(res.Steps) != 3 || !res.Steps["s3"].Replayed {
		t.Fatalf("applying again: create_item %d, update_item %d; %+v", tr.called("create_item"), tr.called("update_item"), res.Steps)
	}
	all := r.transcript(s)
	last := of(all, chat.KindApplied)
	if d := last[len(last)-1].Decision; d.Status != string(planexec.RunCompleted) || len(d.Results) != 3 {
		t.Fatalf("the last apply on record: %+v", d)
	}
}

func TestRejectingTakesWhatApplyingTakes(t *testing.T) {
	tr := newTracker()
	engine, err := planexec.NewExecutor(planexec.Config{Tools: tr.writes(), Store: memory.New(),
		Authorizer: planexec.AuthorizerFunc(func(_ context.Context, d planexec.Delegation, _ planexec.Step) error {
			if d.User == "cara" {
				return errors.New("cara is on leave")
			}
			return nil
		})})
	if err != nil {
		t.Fatal(err)
	}
	r := newRigOn(t, tr, proposer(threeSteps), func(c *chat.Config) { c.Engine = engine })
	s := r.session("s1")
	p := r.proposed(ana(), s)
	ctx := context.Background()
	cara := planexec.Delegation{Tenant: "acme", User: "cara", Scope: writeScope}
	dan := planexec.Delegation{Tenant: "acme", User: "dan", Scope: writeScope, Expires: time.Now().Add(-time.Minute)}
	for _, who := range []planexec.Delegation{cara, dan} {
		var de *planexec.DelegationError
		if err := r.chat.Reject(ctx, who, s, p.ID, "no"); !errors.As(err, &de) {
			t.Errorf("%s rejecting: %v, want a *DelegationError", who.User, err)
		}
	}
	if _, err := r.chat.Apply(ctx, ana(), s, p.ID, []string{"s3"}); err != nil {
		t.Fatalf("ana applying after the refused rejections: %v", err)
	}
}

// heeding is a store of transcripts that refuses a write whose context is
// done, as a database's would.
type heeding struct{ store.TranscriptStore }

func (h heeding) AppendEntries(ctx context.Context, tenant, session string, entries []json.RawMessage) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	return h.TranscriptStore.AppendEntries(ctx, tenant, session, entries)
}

func TestWhatAnApplyDidIsOnRecordWhenCloseStopsIt(t *testing.T) {
	r := newRig(t, proposer(threeSteps), func(c *chat.Config) { c.Store = heeding{c.Store} })
	s := r.session("s1")
	p := r.proposed(ana(), s)
	r.tracker.drained = true // s1 and s3 finish only once Close has stopped the apply
	r.tracker.started = make(chan string, 8)
	ctx := context.Background()
	applied := make(chan error, 1)
	go func() { _, err := r.chat.Apply(ctx, ana(), s, p.ID, nil); applied <- err }()
	<-r.tracker.started
	if err := r.chat.Close(ctx); err != nil {
		t.Fatal(err)
	}
	<-applied
	all := r.transcript(s)
	d := of(all, chat.KindApplied)
	if len(d) != 1 || d[0].Decision.Status != string(planexec.RunInterrupted) || len(d[0].Decision.Results) == 0 || d[0].Decision.Results[0].Status != "done" {
		t.Fatalf("on record after Close: %s", mustJSON(of(all, chat.KindApplying, chat.KindApplied)))
	}
	if r.tracker.called("update_item") != 0 {
		t.Fatal("a step after the one Close interrupted ran")
	}
}

// createThenClose proposes: s1 creates an item, s2 closes the item s1
// created, reading its id from s1's outcome.
const createThenClose = `{"goal":"ship","steps":[
	{"id":"s1","tool":"create_item","arguments":{"title":"Docs"},"depends_on":[],"intent":"a docs item"},
	{"id":"s2","tool":"update_item","arguments":{"id":{"$from":"s1","path":"/id"},"state":"done","version":1},"depends_on":["s1"],"intent":"close it"}]}`

// dee may do what ana may.
func dee() planexec.Delegation {
	return planexec.Delegation{Tenant: "acme", User: "dee", Scope: writeScope}
}

func TestTwoPeopleApplyingOneProposalAtOnceRunEveryStepOnceAndTheRecordSaysWhatRan(t *testing.T) {
	for _, sto := range testStores {
		t.Run(sto.name, func(t *testing.T) {
			for _, processes := range []int{1, 2} {
				t.Run(fmt.Sprintf("%d processes", processes), func(t *testing.T) {
					tr := newTracker()
					cs := replicas(t, sto.open(t), tr, proposer(createThenClose), processes)
					ctx := context.Background()
					busy := 0
					defer func() { t.Logf("%d of 24 applies were answered ErrApplying", busy) }()
					for i := range 12 {
						s := fmt.Sprintf("s%d", i)
						if _, err := cs[0].Create(ctx, ana(), chat.SessionOptions{ID: s}); err != nil {
							t.Fatal(err)
						}
						sent, err := cs[0].Send(ctx, ana(), s, "Ship the docs")
						if err != nil {
							t.Fatal(err)
						}
						var p *chat.Proposal
						for o, err := range cs[0].Watch(ctx, "acme", s, sent.Seq-1) {
							if err != nil {
								t.Fatal(err)
							}
							if o.Kind == chat.KindProposal {
								p = o.Proposal
							}
							if o.Kind == chat.KindDone {
								break
							}
						}
						creates, updates := tr.called("create_item"), tr.called("update_item")

						start := make(chan struct{})
						errs := make([]error, 2)
						results := make([]*planexec.Result, 2)
						var wg sync.WaitGroup
						for j, who := range []planexec.Delegation{ana(), dee()} {
							wg.Go(func() {
								<-start
								results[j], errs[j] = cs[j%processes].Apply(ctx, who, s, p.ID, nil)
							})
						}
						close(start)
						wg.Wait()

						complete := 0
						for j, err := range errs {
							switch {
							case err == nil && results[j].Complete:
								complete++
							case errors.Is(err, chat.ErrApplying):
								busy++
							default:
								t.Fatalf("round %d: apply %d: %+v, %v; want complete or ErrApplying", i, j, results[j], err)
							}
						}
						if complete == 0 {
							t.Fatalf("round %d: neither apply completed: %v", i, errs)
						}
						if tr.called("create_item") != creates+1 || tr.called("update_item") != updates+1 {
							t.Fatalf("round %d: create_item ran %d times, update_item %d", i, tr.called("create_item")-creates, tr.called("update_item")-updates)
						}
						all, err := cs[0].Transcript(ctx, "acme", s, 0, 0)
						if err != nil {
							t.Fatal(err)
						}
						d := of(all, chat.KindApplying, chat.KindApplied)
						if kinds(d) != "applying applied" || d[1].Decision.Status != string(planexec.RunCompleted) ||
							!slices.Equal(d[1].Decision.Steps, []string{"s1", "s2"}) || len(d[1].Decision.Results) != 2 {
							t.Fatalf("round %d: on record: %s", i, mustJSON(d))
						}
						// A later apply goes on with that run: done, nothing more.
						res, err := cs[processes-1].Apply(ctx, dee(), s, p.ID, nil)
						if err != nil || !res.Complete || len(res.Steps) != 2 {
							t.Fatalf("round %d: a later apply: %+v, %v", i, res, err)
						}
						if after, _ := cs[0].Transcript(ctx, "acme", s, 0, 0); len(after) != len(all) {
							t.Fatalf("round %d: a later apply of the completed run recorded %s", i, kinds(after[len(all):]))
						}
					}
				})
			}
		})
	}
}

func TestApplyingAgainAProposalWhoseRunCompletedReturnsItsOutcomeAndRecordsNothing(t *testing.T) {
	r := newRig(t, proposer(threeSteps))
	s := r.session("s1")
	p := r.proposed(ana(), s)
	ctx := context.Background()
	first, err := r.chat.Apply(ctx, ana(), s, p.ID, nil)
	if err != nil || !first.Complete {
		t.Fatalf("the first apply: %+v, %v", first, err)
	}
	before := r.transcript(s)
	for _, steps := range [][]string{nil, nil, {"s2"}, {"s3"}} {
		res, err := r.chat.Apply(ctx, dee(), s, p.ID, steps)
		if err != nil || !res.Complete || res.RunID != first.RunID || len(res.Steps) != 3 {
			t.Fatalf("applying %v again: %+v, %v", steps, res, err)
		}
		for id, sr := range first.Steps {
			if got := res.Steps[id]; !got.Replayed || got.Status != planexec.StepDone || got.Tool != sr.Tool || string(got.Outcome) != string(sr.Outcome) {
				t.Fatalf("applying %v again, step %s: %+v, want the outcome on record %s", steps, id, got, sr.Outcome)
			}
		}
	}
	// The outcome is the person's only if they could apply the proposal.
	var pve *planexec.PlanValidationError
	if res, err := r.chat.Apply(ctx, ben(), s, p.ID, nil); !errors.As(err, &pve) || pve.Reason != planexec.ReasonNotAllowed || res != nil {
		t.Fatalf("ben, who may only read, applying again: %+v, %v; want not_allowed", res, err)
	}
	if after := r.transcript(s); len(after) != len(before) {
		t.Fatalf("applying again recorded %s", kinds(after[len(before):]))
	}
	if r.tracker.called("create_item") != 2 || r.tracker.called("update_item") != 1 {
		t.Fatalf("create_item ran %d times, update_item %d", r.tracker.called("create_item"), r.tracker.called("update_item"))
	}
}

func TestAToolsErrorMessageIsBoundedAsItsOutputIs(t *testing.T) {
	long := strings.Repeat("é", 1<<19) // 1 MiB
	fail := func(ctx context.Context, a struct{}) (string, error) {
		return "", &chat.ToolError{Code: "conflict", Message: long}
	}
	loud := planexec.MustTool("loud", "Fails at length.", fail)
	louder := planexec.MustTool("louder", "Fails at length, as a step.", fail)
	model := scripted.Respond(func(req *llm.Request) scripted.Reply {
		switch u := lastUser(req); {
		case strings.HasPrefix(u, "Results"):
			return say("It failed.")
		case strings.HasSuffix(u, "Read"):
			return say("", call("loud", `{}`))
		}
		return say("", call("propose_plan", `{"goal":"fail","steps":[{"id":"s1","tool":"louder","arguments":{},"depends_on":[],"intent":""}]}`))
	})
	tr := newTracker()
	engine, err := planexec.NewExecutor(planexec.Config{Tools: []*planexec.Tool{louder}, Store: memory.New()})
	if err != nil {
		t.Fatal(err)
	}
	r := newRigOn(t, tr, model, func(c *chat.Config) { c.Reads, c.Engine = append(c.Reads, loud), engine })
	s := r.session("s1")
	person := ana()
	person.Scope = nil
	bounded := func(what, msg string) {
		t.Helper()
		if len(msg) > chat.DefaultMaxResultBytes || !utf8.ValidString(msg) || !strings.HasPrefix(msg, "éé") || !strings.HasSuffix(msg, "(truncated)") {
			t.Fatalf("%s: %d bytes, valid UTF-8 %v, ends %q; want at most %d, cut on a rune and marked", what, len(msg), utf8.ValidString(msg), msg[max(0, len(msg)-20):], chat.DefaultMaxResultBytes)
		}
	}
	out := r.turn(person, s, "Read")
	res := of(out, chat.KindToolResult)[0].Result
	if res.Error == nil || res.Error.Code != "conflict" {
		t.Fatalf("the read's result: %+v", res)
	}
	bounded("the read's error", res.Error.Message)

	p := of(r.turn(person, s, "Propose"), chat.KindProposal)[0].Proposal
	if _, err := r.chat.Apply(context.Background(), person, s, p.ID, nil); err == nil {
		t.Fatal("a failing step applied without error")
	}
	applied := of(r.transcript(s), chat.KindApplied)
	if len(applied) != 1 || len(applied[0].Decision.Results) != 1 {
		t.Fatalf("on record: %s", mustJSON(applied))
	}
	bounded("the applied step's error", applied[0].Decision.Results[0].Error)
}
