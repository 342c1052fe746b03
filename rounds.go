package planexec

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/planexec/planexec/internal/lease"
	"github.com/planexec/planexec/llm"
	"github.com/planexec/planexec/store"
)

// defaultMaxRounds is how many rounds a run of rounds takes at most when
// Config.MaxRounds is not set.
const defaultMaxRounds = 15

// maxObservationBytes bounds the outcome of one step as its planner is told
// it in a later round: a longer one is cut (Observation.Truncated).
const maxObservationBytes = 2048

// roundsState is a run of rounds as the run's stored document keeps it,
// beside the plan of its current round (member "rounds"): the task, what
// each round before found, which tools failed, and what planning cost.
type roundsState struct {
	Task     string         `json:"task"`
	Past     []Round        `json:"past,omitempty"`
	Failures map[string]int `json:"failures,omitempty"`
	Usage    llm.Usage      `json:"usage"`
	AtLimit  bool           `json:"at_limit,omitempty"`
}

// barred lists the tools that failed twice in the run, sorted.
func (st *roundsState) barred() []string {
	if st == nil {
		return nil
	}
	var out []string
	for tool, n := range st.Failures {
		if n >= 2 {
			out = append(out, tool)
		}
	}
	slices.Sort(out)
	return out
}

// decodeRun decodes a stored run: its plan, and its rounds when it is a run
// of rounds (nil otherwise).
func decodeRun(rec *store.PlanRecord) (Plan, *roundsState, error) {
	plan, err := decodeStored(rec)
	if err != nil {
		return Plan{}, nil, err
	}
	var doc struct {
		Rounds *roundsState `json:"rounds"`
	}
	if err := json.Unmarshal(rec.Plan, &doc); err != nil {
		return Plan{}, nil, &store.Error{Op: "load plan", Err: fmt.Errorf("the rounds of run %s: %w: %v", quote(rec.RunID), store.ErrCorruptRecord, err)}
	}
	return plan, doc.Rounds, nil
}

// Do finishes the job task names, in rounds: the planner writes the steps
// that can run now, they are validated, cleared and run like any plan, and
// their outcomes go back to the planner (Observation), which plans the next
// round, until it answers (Result.Answer). At most Config.MaxRounds rounds
// run; at the bound, or once Config.TokenBudget is spent, the planner is
// asked once more, with no tools, to answer from the work done
// (Result.AtLimit). A planner may also ask the person a question: the run
// stops, stored, with an *AwaitingReplyError, and Reply goes on with their
// answer.
//
// A step that failed, was denied or refused does not end the run: the
// planner is told, in words that carry no internal error's text, and plans
// around it; a tool that failed twice is not offered again in the run. What
// stops the run stops it as Execute would: a person yet to decide (an
// *ApprovalPendingError), an effect in doubt, a cancelled context, a store
// that failed, a planner that failed or kept writing plans that are refused.
//
// Every round is in the store: its plan (with what the rounds before found,
// in the same write), its steps' records, its answer or question. Do is
// what a service calls on every request for a job, first or repeated: with
// a stored run it goes on from where the run stands (replaying the steps
// that finished, never asking the planner again for a plan it stored), and
// for an answered run it returns the answer. A run stored by Execute alone
// is resumed as Resume would. While a call plans and runs its rounds it holds
// the run (a lease in the store, with a store that recovers runs): a Do
// meanwhile, on any replica, is ErrRunBusy before it asks its planner
// anything, so no round is planned twice, even of a run not yet stored. A
// first round whose planning failed leaves nothing stored.
//
// Idempotency across rounds, with a store that keeps claims (every store of
// this module does): an irreversible effect (the same tool with the same
// key arguments) is done at most once per run, whichever round asks for
// it; a reversible one asked for again in a later round runs again, so a
// read gets fresh data. Without a store nothing is deduplicated, across
// rounds as within a plan.
func (r *Run) Do(ctx context.Context, planner Planner, task string) (_ *Result, err error) {
	if !r.start() {
		return nil, ErrRunBusy
	}
	defer r.busy.Store(false)
	defer r.j.store(ctx, &err)
	r.planning = r.ex.st.recoverer != nil
	defer r.letGo(ctx)
	rec, d, err := r.adopt(ctx, acting)
	switch {
	case err == nil:
		r.rev = rec.Rev
		return r.goOn(ctx, planner, rec, d)
	case !errors.Is(err, ErrNoRecord):
		return nil, err
	}
	return r.rounds(ctx, planner, &roundsState{Task: task}, 1, nil, &r.d, false)
}

// Reply goes on with a run whose planner asked the person a question (an
// *AwaitingReplyError), with their reply: the reply is stored, and the
// planner, told the question and the reply, plans the next round, as Do
// does. A run that awaits no reply is ErrNotPending, and nothing is
// recorded.
func (r *Run) Reply(ctx context.Context, planner Planner, reply string) (_ *Result, err error) {
	if !r.start() {
		return nil, ErrRunBusy
	}
	defer r.busy.Store(false)
	defer r.j.store(ctx, &err)
	if !utf8.ValidString(reply) || len(reply) > r.ex.cfg.Limits.MaxPlanBytes {
		return nil, fmt.Errorf("planexec: a reply must be valid UTF-8 of at most %d bytes: %w", r.ex.cfg.Limits.MaxPlanBytes, ErrInvalidDecision)
	}
	r.planning = r.ex.st.recoverer != nil
	defer r.letGo(ctx)
	rec, d, err := r.adopt(ctx, acting)
	if err != nil {
		return nil, err
	}
	r.rev = rec.Rev
	plan, st, err := decodeRun(rec)
	if err != nil {
		return nil, err
	}
	if st == nil || plan.Question == "" || rec.Status != store.RunAwaitingReply {
		return nil, fmt.Errorf("planexec: run %s is %s, awaiting no reply: %w", quote(r.d.RunID), rec.Status, ErrNotPending)
	}
	st.Past = append(st.Past, Round{Number: plan.Round, Goal: plan.Goal, Question: plan.Question, Reply: reply})
	r.j.emit(&Event{Kind: EventReplied, RunID: d.RunID, Tenant: d.Tenant, PlanID: plan.ID, Revision: plan.Revision, Round: plan.Round})
	// The reply is stored before the planner hears it: the run goes on
	// from it whatever happens next.
	plan.Question = ""
	if err := r.savePlan(ctx, &vplan{plan: plan, rounds: st, update: true}, d, store.RunPlanning, nil); err != nil {
		return nil, err
	}
	return r.rounds(ctx, planner, st, plan.Round+1, nil, d, true)
}

// goOn continues a stored run: a run of rounds from where it stands, a plan
// on its own as Resume would.
func (r *Run) goOn(ctx context.Context, planner Planner, rec *store.PlanRecord, d *Delegation) (*Result, error) {
	plan, st, err := decodeRun(rec)
	switch {
	case err != nil:
		return nil, err
	case st == nil:
		return r.resume(ctx, rec, d, plan, nil)
	case plan.Answer != "" || plan.Question != "":
		return storedRound(rec, plan, st)
	case rec.Status == store.RunPlanning:
		r.saved = &vplan{plan: plan, rounds: st, update: true}
		return r.rounds(ctx, planner, st, plan.Round+1, nil, d, true)
	}
	// A round was under way: it is finished first.
	res, err := r.resume(ctx, rec, d, plan, st)
	if !continuable(err) || ctx.Err() != nil {
		return res, stopped(ctx, err)
	}
	return r.rounds(ctx, planner, st, plan.Round+1, res, d, true)
}

// storedRound is what a stored run of rounds that has nothing to run says: its
// answer, its question, or (between rounds) the steps of its last round.
func storedRound(rec *store.PlanRecord, plan Plan, st *roundsState) (*Result, error) {
	if plan.Question != "" {
		return nil, &AwaitingReplyError{RunID: rec.RunID, Tenant: rec.Tenant, Round: plan.Round, Question: plan.Question, Stored: true}
	}
	res := &Result{RunID: rec.RunID, PlanID: plan.ID, Revision: plan.Revision, Round: plan.Round, Steps: map[string]StepResult{},
		Answer: plan.Answer, AtLimit: st.AtLimit, Complete: plan.Answer != ""}
	for id, s := range rec.Steps {
		if s.PlanID == plan.ID {
			res.Steps[id] = StepResult{Tool: s.Tool, Status: s.Status, Outcome: s.Outcome, Replayed: true, ApprovedBy: s.ApprovedBy,
				Grant: s.Grant, Key: Key{Tenant: rec.Tenant, Digest: s.Key}}
		}
	}
	return res, nil
}

// rounds plans and runs rounds from round on, under d, until the planner
// answers or asks, or something stops the run. last is the result of the
// round before, if this call ran it; update is true when the run's record
// was read or written by this call already.
func (r *Run) rounds(ctx context.Context, planner Planner, st *roundsState, round int, last *Result, d *Delegation, update bool) (*Result, error) {
	if err := r.hold(ctx, st, d); err != nil {
		return last, err
	}
	update = update || r.held
	// The lease is moved on while the call plans, clears and runs its
	// rounds, until it lets the run go (a save that stops it ends it).
	stopLease := r.keepHeld(ctx, d)
	defer stopLease()
	for ; ; round++ {
		budget := r.ex.cfg.TokenBudget
		final := round > r.ex.cfg.MaxRounds || (budget > 0 && st.Usage.Total() >= budget)
		detail := ""
		if final {
			detail = "at the bound: an answer from the work done"
		}
		r.j.emit(&Event{Kind: EventRoundStarted, RunID: d.RunID, Tenant: d.Tenant, Round: round, Detail: detail})
		before := r.Usage()
		plan, err := (&planning{r: r, d: d, planner: planner, req: PlanRequest{Task: st.Task, Round: round, History: st.Past, Barred: st.barred(), Final: final}}).run(ctx)
		st.Usage = st.Usage.Add(spent(before, r.Usage()))
		if err != nil {
			return last, err
		}
		switch {
		case plan.Answer != "":
			st.AtLimit = final
			if err := r.savePlan(ctx, &vplan{plan: plan, rounds: st, update: update}, d, store.RunCompleted, nil); err != nil {
				return nil, err
			}
			r.j.emit(&Event{Kind: EventAnswered, RunID: d.RunID, Tenant: d.Tenant, PlanID: plan.ID, Revision: plan.Revision, Round: round, Detail: detail})
			res := &Result{RunID: d.RunID, PlanID: plan.ID, Revision: plan.Revision, Round: round, Answer: plan.Answer, AtLimit: final, Complete: true}
			if last != nil {
				res.Steps = last.Steps
			}
			return res, nil
		case plan.Question != "":
			if err := r.savePlan(ctx, &vplan{plan: plan, rounds: st, update: update}, d, store.RunAwaitingReply, nil); err != nil {
				return nil, err
			}
			r.j.emit(&Event{Kind: EventQuestionAsked, RunID: d.RunID, Tenant: d.Tenant, PlanID: plan.ID, Revision: plan.Revision, Round: round})
			return nil, &AwaitingReplyError{RunID: d.RunID, Tenant: d.Tenant, Round: round, Question: plan.Question, Stored: true}
		}
		res, err := r.executePlan(ctx, plan, st, d, update)
		if !continuable(err) || ctx.Err() != nil {
			return res, stopped(ctx, err)
		}
		last, update = res, true
	}
}

// stopped is why a run of rounds stops after a round that ended in err:
// err, or the context's end when the round's steps all finished as it
// ended (the run is left planning, not answered).
func stopped(ctx context.Context, err error) error {
	if err == nil {
		return ctx.Err()
	}
	return err
}

// hold takes the run for the call before its next round is planned, unless
// the call's last save holds it already: the run is saved as planning,
// under a lease the call moves on while it works (keepHeld), so another
// execution's Do meanwhile is ErrRunBusy and no round is planned twice. A
// run not yet stored is created so: of calls creating one run at once, one
// does and the others are ErrRunBusy.
func (r *Run) hold(ctx context.Context, st *roundsState, d *Delegation) error {
	if !r.planning || r.held {
		return nil
	}
	v := r.saved
	if v == nil {
		v = &vplan{plan: Plan{ID: roundPlanID(d, 0), Revision: 1}, rounds: st, create: true}
	}
	err := r.savePlan(ctx, v, d, store.RunPlanning, nil)
	if v.update && errors.Is(err, store.ErrNoRecord) {
		// Read as another execution made it, and forgotten by it since
		// (its first round was never planned): busy, as it was then.
		return fmt.Errorf("planexec: run %s was let go by another execution as it was read: %w", quote(d.RunID), ErrRunBusy)
	}
	return err
}

// keepHeld moves the lease of a run held for its rounds on, every third of
// a lease, until the returned stop, or until the run is no longer held
// (answered, paused, taken over).
func (r *Run) keepHeld(ctx context.Context, d *Delegation) (stop func()) {
	rc, ttl := r.ex.st.recoverer, r.ex.cfg.Lease
	if !r.held || rc == nil {
		return func() {}
	}
	ref, holder := store.RunRef{Tenant: d.Tenant, RunID: d.RunID}, r.holder
	var k lease.Keeper
	k.Keep(ctx, ttl/3, func(ctx context.Context) bool {
		err := rc.ExtendRun(ctx, ref, holder, r.ex.now().Add(ttl))
		return !errors.Is(err, store.ErrFenced) && !errors.Is(err, store.ErrNoRecord)
	})
	return k.Stop
}

// letGo ends the call's hold on a run it left planning (a planner that
// failed, a context cancelled between rounds), so the next call need not
// wait for the lease to run out. A run whose first round was never planned
// holds nothing worth keeping: it is forgotten, while still held, so
// nothing is left planning for ever. A hold it cannot end runs out.
func (r *Run) letGo(ctx context.Context) {
	if !r.held {
		return
	}
	r.held = false
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.ex.cfg.Lease/3)
	defer cancel()
	ref, rc := store.RunRef{Tenant: r.d.Tenant, RunID: r.d.RunID}, r.ex.st.recoverer
	if v := r.saved; v != nil && v.plan.ID == roundPlanID(&r.d, 0) {
		// Still the call's (the lease moved on first), it goes.
		if rc.ExtendRun(ctx, ref, r.holder, r.ex.now().Add(r.ex.cfg.Lease)) == nil && r.ex.st.Forget(ctx, ref.Tenant, ref.RunID) == nil {
			return
		}
	}
	_ = rc.ExtendRun(ctx, ref, r.holder, r.ex.now())
}

// joined is the errors err joins (errors.Join, at any depth), or err alone.
func joined(err error) []error {
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return []error{err}
	}
	var out []error
	for _, e := range j.Unwrap() {
		out = append(out, joined(e)...)
	}
	return out
}

// spent is what planning cost between two readings of a run's usage.
func spent(before, after llm.Usage) llm.Usage {
	return llm.Usage{InputTokens: after.InputTokens - before.InputTokens, OutputTokens: after.OutputTokens - before.OutputTokens,
		Calls: after.Calls - before.Calls}
}

// continuable reports whether a run of rounds goes on after a round that
// ended in err: it does when the round's errors are all steps that failed,
// were denied by a person or refused by the ladder (the planner is told and
// plans around them); it stops for anything else (a person yet to decide,
// an effect in doubt, a store that failed). A cancelled context stops it
// too: the callers check it, since a step it stopped fails like any other.
func continuable(err error) bool {
	if err == nil {
		return true
	}
	for _, e := range joined(err) {
		var (
			step    *StepError
			denied  *ApprovalDeniedError
			refused *AutonomyRefusedError
			doubt   *IndeterminateOutcomeError
		)
		switch {
		case e == nil:
		case errors.As(e, &doubt):
			return false
		case errors.As(e, &step), errors.As(e, &denied), errors.As(e, &refused):
		default:
			return false
		}
	}
	return true
}

// endRound records, once a round's steps ended (in res and err), what they
// did as the planner will be told it, counts the tools that failed, and
// stores the run as planning: its next round is to be planned.
//
// res holds what finished, replayed ones too; cleared says whether the
// round got past its clearance (if not, a step not on record did not run
// because the plan was not cleared).
func (g *gate) endRound(res *Result, err error, cleared bool) error {
	v := g.v
	st := v.rounds
	obs := observe(v, res, err, cleared)
	finished := 0
	for _, o := range obs {
		switch {
		case o.Status == string(StepDone):
			finished++
		case o.Error == toolFailed:
			if st.Failures == nil {
				st.Failures = map[string]int{}
			}
			st.Failures[o.Tool]++
		}
	}
	st.Past = append(st.Past, Round{Number: v.plan.Round, Goal: v.plan.Goal, Observations: obs})
	g.ev(Event{Kind: EventRoundCompleted, Detail: fmt.Sprintf("%d of %d steps finished", finished, len(v.steps))})
	return g.save(store.RunPlanning, nil)
}

// The accounts of a step that did not finish, as its planner is told: fixed
// words, never an internal error's text.
const (
	toolFailed      = "the tool failed"
	notApproved     = "a person did not approve it"
	refusedByPolicy = "the autonomy policy refused it"
	notRun          = "not run: a step before it failed or was stopped"
	notCleared      = "not run: the plan was not cleared"
)

// observe is what each step of v did, in the plan's order.
func observe(v *vplan, res *Result, err error, cleared bool) []Observation {
	out := make([]Observation, 0, len(v.steps))
	for _, s := range v.steps {
		id, tool := s.step.ID, s.step.Tool
		o := Observation{Step: id, Tool: tool, Status: "not_run", Error: notRun}
		if !cleared {
			o.Error = notCleared
		}
		if sr, ok := res.step(id); ok {
			o.Status, o.Error = string(sr.Status), ""
			switch sr.Status {
			case StepDone:
				o.Outcome, o.Excerpt, o.Truncated = bounded(sr.Outcome)
			default:
				o.Error = accountOf(sr.Err)
			}
		} else if why := stepAccount(err, id); why != "" {
			o.Status, o.Error = string(StepFailed), why
		}
		out = append(out, o)
	}
	return out
}

// step is the result of step id, if there is one.
func (r *Result) step(id string) (StepResult, bool) {
	if r == nil {
		return StepResult{}, false
	}
	s, ok := r.Steps[id]
	return s, ok
}

// bounded is an outcome as a planner is shown it: whole when short, else
// its start.
func bounded(outcome json.RawMessage) (json.RawMessage, string, bool) {
	if len(outcome) <= maxObservationBytes {
		return outcome, "", false
	}
	cut := maxObservationBytes
	for cut > 0 && !utf8.RuneStart(outcome[cut]) {
		cut--
	}
	return nil, string(outcome[:cut]), true
}

// accountOf is why a step that ran did not finish, in fixed words: the
// contract's violations (paths and rules, never values) when its resolved
// arguments broke it, else that the tool failed.
func accountOf(err error) string {
	var perr *PlanValidationError
	if errors.As(err, &perr) && perr.Reason == ReasonPrecondition {
		return "not run: its precondition is unmet: " + perr.Violations[0].Why
	}
	if errors.As(err, &perr) {
		vs := make([]string, 0, 3)
		for _, v := range perr.Violations[:min(3, len(perr.Violations))] {
			vs = append(vs, v.String())
		}
		return "its arguments, once resolved, broke the contract: " + strings.Join(vs, "; ")
	}
	return toolFailed
}

// stepAccount is why step id, which has no result, did not run, from the
// round's errors: a person's denial or the ladder's refusal.
func stepAccount(err error, id string) string {
	for _, e := range joined(err) {
		var (
			denied  *ApprovalDeniedError
			refused *AutonomyRefusedError
		)
		switch {
		case errors.As(e, &denied) && denied.Step == id:
			return notApproved
		case errors.As(e, &refused) && refused.Step == id:
			return refusedByPolicy
		}
	}
	return ""
}
