package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/store"
)

// The points of a run of rounds, beside those of its steps.
const (
	roundAsked point = "round-asked" // the planner is asked for a round ("round2")
	beforeSave point = "before-save" // a plan record is about to be saved ("round2-running")
	afterSave  point = "after-save"  // it was saved
)

// roundLabel names round n at roundAsked; saveLabel names a save of round
// n's plan record in status.
func roundLabel(n int) string { return fmt.Sprintf("round%d", n) }

func saveLabel(n int, status store.RunStatus) string {
	return fmt.Sprintf("round%d-%s", n, status)
}

// markSave marks the points around save, a save of rec, named by the round
// its plan is of and the status it stores.
func markSave(at func(point, string), rec *store.PlanRecord, save func() error) error {
	var doc struct {
		Round int `json:"round"`
	}
	_ = json.Unmarshal(rec.Plan, &doc)
	label := saveLabel(doc.Round, rec.Status)
	at(beforeSave, label)
	if err := save(); err != nil {
		return err
	}
	at(afterSave, label)
	return nil
}

// The run of rounds: round 1 of six steps in two lanes joined by the last,
// three of them irreversible; round 2 of six more, among them a read of
// round 1 asked for again (it runs again) and an effect of round 1 asked
// for again (it is replayed, never done twice); round 3 an answer.
const (
	crashRoundsTask   = "survive being killed between rounds and in them"
	crashRoundsAnswer = "Every effect was done once."
	crashRepeated     = "b02" // round 2's read of what a02 read in round 1
	crashReplayed     = "b03" // round 2's request for a03's effect
	crashRoundOneLast = "a06"
)

// crashRounds are the steps of each round with steps.
func crashRounds() [][]planexec.Step {
	step := func(id, tool, arg string, deps ...string) planexec.Step {
		args, _ := json.Marshal(crashArgs{Step: arg})
		return planexec.Step{ID: id, Tool: tool, Arguments: args, DependsOn: deps}
	}
	return [][]planexec.Step{{
		step("a01", crashReversible, "a01"),
		step("a02", crashReversible, "a02"),
		step("a03", crashIrreversible, "a03", "a01"),
		step("a04", crashIrreversible, "a04", "a02"),
		step("a05", crashReversible, "a05", "a03"),
		step(crashRoundOneLast, crashIrreversible, crashRoundOneLast, "a04", "a05"),
	}, {
		step("b01", crashReversible, "b01"),
		step(crashRepeated, crashReversible, "a02"),
		step(crashReplayed, crashIrreversible, "a03"),
		step("b04", crashIrreversible, "b04", "b01", crashRepeated),
		step("b05", crashReversible, "b05", crashReplayed),
		step("b06", crashIrreversible, "b06", "b04", "b05"),
	}}
}

// crashRoundsScript is what the planner writes for each round.
func crashRoundsScript() []string {
	var script []string
	for i, steps := range crashRounds() {
		script = append(script, roundPayload(fmt.Sprintf("round %d", i+1), steps...))
	}
	return append(script, answerPayload(crashRoundsAnswer))
}

// storedAt is the save after which round n's plan is stored: the planner
// is not asked for it again.
func storedAt(n int) stepPoint {
	if n > len(crashRounds()) {
		return stepPoint{saveLabel(n, store.RunCompleted), afterSave}
	}
	return stepPoint{saveLabel(n, store.RunRunning), afterSave}
}

// crashRoundsTargets are the kill points of a run of rounds, in the order
// the child reaches them: round 1's last step recorded; round 1 ended;
// the planner asked for round 2; round 2's plan stored; every point of
// every step of round 2; round 2 ended; the planner asked for round 3;
// the answer stored.
func crashRoundsTargets(sh shape) []stepPoint {
	targets := []stepPoint{
		{crashRoundOneLast, afterRecord},
		{saveLabel(1, store.RunPlanning), beforeSave},
		{saveLabel(1, store.RunPlanning), afterSave},
		{roundLabel(2), roundAsked},
		{saveLabel(2, store.RunRunning), beforeSave},
		{saveLabel(2, store.RunRunning), afterSave},
	}
	for _, s := range crashRounds()[1] {
		points := sh.points
		if s.ID == crashReplayed {
			points = sh.replay
		}
		for _, p := range points {
			targets = append(targets, stepPoint{s.ID, p})
		}
	}
	return append(targets,
		stepPoint{saveLabel(2, store.RunPlanning), beforeSave},
		stepPoint{saveLabel(2, store.RunPlanning), afterSave},
		stepPoint{roundLabel(3), roundAsked},
		stepPoint{saveLabel(3, store.RunCompleted), beforeSave},
		stepPoint{saveLabel(3, store.RunCompleted), afterSave},
	)
}

// toldRounds checks what a request says the rounds before it found: every
// step of each done, in the plan's order, with the outcome its tool
// returned (a replayed step: the outcome of the effect it replays).
func toldRounds(run string, req planexec.PlanRequest) error {
	rounds := crashRounds()
	if req.Task != crashRoundsTask || req.Round < 1 || req.Round > len(rounds)+1 || len(req.History) != req.Round-1 {
		return fmt.Errorf("the planner was asked for round %d of %q with %d rounds before it", req.Round, req.Task, len(req.History))
	}
	for i, h := range req.History {
		steps := rounds[i]
		if h.Number != i+1 || len(h.Observations) != len(steps) {
			return fmt.Errorf("round %d was told as round %d with %d observations, want %d", i+1, h.Number, len(h.Observations), len(steps))
		}
		for j, o := range h.Observations {
			var a crashArgs
			_ = json.Unmarshal(steps[j].Arguments, &a)
			want, _ := json.Marshal(crashOutcome(run, a.Step))
			if o.Step != steps[j].ID || o.Tool != steps[j].Tool || o.Status != "done" || !jsonEqual(o.Outcome, want) {
				return fmt.Errorf("round %d's step %s was told as %+v, want done with %s", i+1, steps[j].ID, o, want)
			}
		}
	}
	return nil
}

// CrashAnywhereInRounds is CrashAnywhere for a run of rounds (Run.Do): it
// kills a process running one over d at kills points, one after another,
// and checks that Do in a new executor after each kill goes on from where
// the run stands, neither losing nor repeating an effect nor asking the
// planner again for a round it stored.
//
// The child opens d and runs Do with a planner scripted for three rounds.
// Round 1 has six steps, reversible and irreversible, in two lanes joined
// by the last. Round 2 has six more: among them a reversible step with the
// same tool and arguments as one of round 1, which must run again, and an
// irreversible one with the same tool and arguments as one of round 1,
// which must be replayed and never done twice. Round 3 answers. The
// kill points are round 1's last step recorded, the saves of the run's
// record between rounds (before and after), each request to the planner
// after round 1, and every point of every step of round 2 (as
// CrashAnywhere has them): 42 when the stores write a step's claim and
// record in one transaction, 49 when they write them apart. Fewer kills
// are spread over the points; more cycle through them again.
//
// After each kill the parent calls Do with new executors until the run
// answers, waiting out the dead child's leases and settling each step in
// doubt by what Effects shows, as CrashAnywhere does. It fails the test if
// an effect is recorded twice or never (an irreversible one once per run,
// a reversible one once per step of any round), if a step runs again whose
// completion the child wrote or that round 1's effect should replay, if an
// irreversible step the child left claimed does not surface in doubt, if
// the planner is asked for a round whose plan the child stored or not
// asked for one it did not, if a request does not tell every step of the
// rounds before it done with its outcome, if a person is asked again for a
// decision on record, or if the run does not end answered, its answer
// given again by a further Do that plans nothing and calls no tool.
//
// As with CrashAnywhere, the test that calls it is run again in each
// child: call it from a test of its own, not from one that calls
// CrashAnywhere too.
func CrashAnywhereInRounds(t *testing.T, d Durable, kills int) {
	stores, effects, sh, parent := crashStart(t, d, kills, "CrashAnywhereInRounds", crashRoundsChild)
	if !parent {
		return
	}
	ctx := t.Context()
	total := killAt(t, "rounds", kills, crashRoundsTargets(sh), func(run string, log childLog) ([]string, crashStats) {
		r := newRoundsRecovery(stores, effects, sh, run, log)
		r.finish(ctx)
		return r.problems, r.stats
	})
	t.Logf("%d kills: %d steps surfaced in doubt (%d resolved applied, %d not applied), %d attempts waited for a dead holder's lease",
		kills, total.applied+total.notApplied, total.applied, total.notApplied, total.waits)
}

// crashRoundsChild runs the run of rounds as the child, stopping at each
// point until the parent says go on, and exits the process.
func crashRoundsChild(t *testing.T, d Durable, run string) {
	c := newChildTalk()
	stores, effects := c.open(t, d, true)
	called := func(step string) {
		if step == crashReplayed {
			c.end(1, "step "+step+" called its tool: the effect it asks for was done in round 1")
		}
	}
	ex, err := crashExecutor(run, "child", stores, crashTools(effects, c.at, called), approveAll())
	if err != nil {
		c.end(1, err.Error())
	}
	planner := &scriptedPlanner{script: crashRoundsScript(), before: func(req planexec.PlanRequest) error {
		c.at(roundAsked, roundLabel(req.Round))
		return toldRounds(run, req)
	}}
	res, err := ex.Do(context.Background(), planner, crashRoundsTask)
	if err != nil {
		c.end(1, err.Error())
	}
	if res.Answer != crashRoundsAnswer {
		c.end(1, fmt.Sprintf("the run ended without an error but with the answer %q", res.Answer))
	}
	c.end(0, "complete")
}

// roundsRecovery finishes one killed run of rounds and checks it.
type roundsRecovery struct {
	*recovery
	planner *scriptedPlanner
	gated   map[string]int // how often each step was put to a person; under recovery.mu
}

func newRoundsRecovery(stores Stores, effects Effects, sh shape, run string, log childLog) *roundsRecovery {
	r := &roundsRecovery{recovery: newRecovery(stores, effects, sh, run, log, slices.Concat(crashRounds()...)), gated: map[string]int{}}
	r.planner = &scriptedPlanner{script: crashRoundsScript(), before: func(req planexec.PlanRequest) error {
		if err := toldRounds(run, req); err != nil {
			r.problem("%v", err)
			return err
		}
		return nil
	}}
	return r
}

// called checks that the executor may run step again; the replayed step
// never runs.
func (r *roundsRecovery) called(step string) {
	if step == crashReplayed {
		r.problem("step %s called its tool: the effect it asks for was done in round 1", step)
	}
	r.recovery.called(step)
}

// gate is the parent's approval gate: a step of round 2 may be put to a
// person once when the child was killed before it cleared round 2; every
// other decision is on record.
func (r *roundsRecovery) gate() planexec.ApprovalGate {
	cleared := r.log.reached[stepPoint{saveLabel(2, store.RunRunning), beforeSave}]
	second := map[string]bool{}
	for _, s := range crashRounds()[1] {
		second[s.ID] = true
	}
	return planexec.ApprovalGateFunc(func(_ context.Context, req planexec.ApprovalRequest) (planexec.Decision, error) {
		r.mu.Lock()
		r.gated[req.StepID]++
		n := r.gated[req.StepID]
		r.mu.Unlock()
		switch {
		case cleared || !second[req.StepID]:
			r.problem("step %s was put to a person again: the decision the child stored is lost", req.StepID)
		case n > 1:
			r.problem("step %s was put to a person %d times", req.StepID, n)
		}
		return req.Approve("harness"), nil
	})
}

// finish calls Do until the run answers, then checks it.
func (r *roundsRecovery) finish(ctx context.Context) {
	tools := crashTools(r.effects, func(point, string) {}, r.called)
	var res *planexec.Result
	done := r.until(ctx, func(attempt int) (*planexec.Run, error) {
		ex, err := crashExecutor(r.run, fmt.Sprintf("parent-%d", attempt), r.stores, tools, r.gate())
		if err != nil {
			return nil, err
		}
		res, err = ex.Do(ctx, r.planner, crashRoundsTask)
		return ex, err
	})
	if !done {
		return
	}
	if res.Answer != crashRoundsAnswer || res.Round != 3 || !res.Complete {
		r.problem("Do returned %+v, want the answer of round 3", res)
	}
	if !r.checkEffects(ctx) {
		return
	}
	asked := map[int]int{}
	for _, req := range r.planner.requests() {
		asked[req.Round]++
	}
	for n := 1; n <= len(crashRounds())+1; n++ {
		switch stored := r.log.reached[storedAt(n)]; {
		case stored && asked[n] > 0:
			r.problem("the planner was asked for round %d %d times, although the child had stored its plan", n, asked[n])
		case !stored && asked[n] != 1:
			r.problem("the planner was asked for round %d %d times, want once: the child had not stored its plan", n, asked[n])
		}
	}
	rec, err := r.stores.Store.LoadPlan(ctx, crashTenant, r.run)
	switch {
	case err != nil:
		r.problem("LoadPlan after the run answered: %v", err)
	case rec.Status != store.RunCompleted:
		r.problem("the run's record says %q after the run answered", rec.Status)
	}

	before := r.totalCalls()
	ex, err := crashExecutor(r.run, "parent-again", r.stores, tools, r.gate())
	if err != nil {
		r.problem("NewExecutor: %v", err)
		return
	}
	never := &scriptedPlanner{before: func(req planexec.PlanRequest) error {
		r.problem("Do of the answered run asked the planner for round %d", req.Round)
		return errors.New("the run is answered")
	}}
	again, err := ex.Do(ctx, never, crashRoundsTask)
	if err != nil || again.Answer != crashRoundsAnswer || again.Round != 3 {
		r.problem("Do of the answered run: %+v, %v; want the stored answer of round 3", again, err)
	}
	if r.totalCalls() != before {
		r.problem("Do of the answered run called tools")
	}
}
