package planexec_test

// Autonomy grants are held to what they were when a step was cleared: a grant
// replaced before its step runs stops that step, a window survives a
// revocation, a plan's ceiling counts what finished before a resume (once),
// and act_and_report reports each act after it ran.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/store/memory"
)

// ---- helpers (prefixed grants) ----

func grantsWithLadder(l *planexec.AutonomyLadder) func(*setup) {
	return func(s *setup) { s.Ladder = l }
}

// grantsRefund is a refund step in GBP.
func grantsRefund(id, order, amount string, deps ...string) planexec.Step {
	return step(id, "refund", fmt.Sprintf(`{"order":%q,"amount":%s,"currency":"GBP"}`, order, amount), deps...)
}

// grantsLadder is a ladder with a refunds class (amount and currency) holding
// grants.
func grantsLadder(t *testing.T, grants ...planexec.Grant) *planexec.AutonomyLadder {
	t.Helper()
	l, err := planexec.NewAutonomyLadder(planexec.ActionClass{Name: "refunds", Tools: []string{"refund"}, Amount: "amount", Currency: "currency"})
	if err != nil {
		t.Fatalf("NewAutonomyLadder: %v", err)
	}
	for _, g := range grants {
		if err := l.Grant(g); err != nil {
			t.Fatalf("Grant(%s): %v", g.ID, err)
		}
	}
	return l
}

// grantsRefunds is a refunds grant for acme at level, with a ceiling in GBP
// when ceiling is not "".
func grantsRefunds(level planexec.Level, ceiling string, window time.Duration) planexec.Grant {
	g := planexec.Grant{ID: "g-refunds", Tenant: "acme", Class: "refunds", Level: level}
	if ceiling != "" {
		g.Ceiling = &planexec.Ceiling{Amount: decimal.RequireFromString(ceiling), Currency: "GBP", Window: window}
	}
	return g
}

// grantsAsked lists the step ids the gate was asked about, in order.
func grantsAsked(g *approve) []string {
	var ids []string
	for _, req := range g.Asked() {
		ids = append(ids, req.StepID)
	}
	return ids
}

// ---- a grant re-checked before its step ----

func TestAGrantReplacedBeforeItsStepRunsStopsTheStepClearedUnderIt(t *testing.T) {
	ladder := grantsLadder(t, grantsRefunds(planexec.LevelActWithinLimits, "", 0))
	var regrantErr error
	r := &recorder{fail: func(tool string, _ any) error {
		if tool == "search_flights" {
			// Same id, but a person must now be asked.
			regrantErr = ladder.Grant(grantsRefunds(planexec.LevelAskAlways, "", 0))
		}
		return nil
	}}
	run, gate := newExecutor(t, r, grantsWithLadder(ladder))

	_, err := run.Execute(context.Background(), planexec.Plan{Steps: []planexec.Step{
		iSearch("s1", "LHR"),
		grantsRefund("s2", "o-1", "5", "s1"),
	}})

	if regrantErr != nil {
		t.Fatalf("replacing the grant: %v", regrantErr)
	}
	var refused *planexec.AutonomyRefusedError
	if !errors.As(err, &refused) || refused.Step != "s2" || !refused.AtDispatch {
		t.Fatalf("err = %v, want *AutonomyRefusedError for s2 at dispatch", err)
	}
	if got := toolNames(r.Calls()); !slices.Equal(got, []string{"search_flights"}) {
		t.Errorf("calls = %v, want the search only", got)
	}
	if asked := gate.Asked(); len(asked) != 0 {
		t.Errorf("the gate was asked: %+v", asked)
	}
	es := run.Events()
	if findEvent(es, planexec.EventAutonomyRefused, "s2") < 0 || findEvent(es, planexec.EventStepStarted, "s2") >= 0 {
		t.Errorf("want s2 refused and never started: %v", kinds(es))
	}
}

// ---- windows and ceilings ----

func TestRevokingAndGrantingAgainDoesNotResetTheWindow(t *testing.T) {
	grant := grantsRefunds(planexec.LevelActWithinLimits, "100", time.Hour)
	ladder := grantsLadder(t, grant)

	st := memory.New() // the store the executors share counts the window
	first, gate1 := newExecutor(t, &recorder{}, edits(grantsWithLadder(ladder), iRun("acme", "run-a"), withStore(st)))
	if _, err := first.Execute(context.Background(), planexec.Plan{Steps: []planexec.Step{grantsRefund("s1", "o-1", "60")}}); err != nil {
		t.Fatalf("first plan: %v", err)
	}
	if len(gate1.Asked()) != 0 || findEvent(first.Events(), planexec.EventAutonomyCleared, "s1") < 0 {
		t.Fatalf("a refund of 60 under a ceiling of 100 should act: %v", kinds(first.Events()))
	}

	if !ladder.Revoke("g-refunds") {
		t.Fatal("the grant was not there to revoke")
	}
	if err := ladder.Grant(grant); err != nil {
		t.Fatalf("granting again: %v", err)
	}

	// 60 spent within the hour; 60 more would pass 100.
	r := &recorder{}
	second, gate2 := newExecutor(t, r, edits(grantsWithLadder(ladder), iRun("acme", "run-b"), withStore(st)))
	res, err := second.Execute(context.Background(), planexec.Plan{Steps: []planexec.Step{grantsRefund("s1", "o-2", "60")}})
	if err != nil {
		t.Fatalf("second plan: %v", err)
	}
	if got := grantsAsked(gate2); !slices.Equal(got, []string{"s1"}) {
		t.Errorf("the gate was asked about %v, want s1: the window still holds the first 60", got)
	}
	es := second.Events()
	if findEvent(es, planexec.EventAutonomyEscalated, "s1") < 0 || findEvent(es, planexec.EventAutonomyCleared, "s1") >= 0 {
		t.Errorf("want s1 escalated, not acted on: %v", kinds(es))
	}
	if s1 := res.Steps["s1"]; s1.Grant != "" || s1.ApprovedBy != "dana" {
		t.Errorf("s1 = %+v, want cleared by dana, not under the grant", s1)
	}
}

func TestAPlanCeilingCountsWhatFinishedBeforeAResume(t *testing.T) {
	ctx := context.Background()
	ladder := grantsLadder(t, grantsRefunds(planexec.LevelActWithinLimits, "100", 0))
	st := memory.New()
	plan := planexec.Plan{Goal: "two refunds", Steps: []planexec.Step{
		grantsRefund("s1", "o-1", "60"),
		iSearch("f", "LHR", "s1"),
		grantsRefund("s2", "o-2", "60", "f"),
	}}

	r := &recorder{}
	failOnce(r, "search_flights", errors.New("search is down"))
	first, _ := newExecutor(t, r, edits(grantsWithLadder(ladder), withStore(st)))
	if _, err := first.Execute(ctx, plan); err == nil {
		t.Fatal("the first run succeeded with a failing search")
	}
	if got := toolNames(r.Calls()); !slices.Equal(got, []string{"refund", "search_flights"}) {
		t.Fatalf("first run calls = %v, want s1's refund and the failed search", got)
	}

	second, gate := newExecutor(t, r, edits(grantsWithLadder(ladder), withStore(st)))
	res, err := second.Resume(ctx)
	if err != nil {
		t.Fatalf("Resume: %v", err)
	}
	// s1's 60 is still on this plan's account: 60 more passes 100, and
	// the person's decision on record clears s2.
	if got := grantsAsked(gate); len(got) != 0 {
		t.Errorf("on resume the gate was asked about %v, want none: the decision is on record", got)
	}
	es := second.Events()
	if findEvent(es, planexec.EventAutonomyEscalated, "s2") < 0 || findEvent(es, planexec.EventAutonomyCleared, "s2") >= 0 ||
		findEvent(es, planexec.EventApprovalGranted, "s2") < 0 {
		t.Errorf("want s2 escalated on resume and cleared by the recorded decision, not acted on: %v", kinds(es))
	}
	if s2 := res.Steps["s2"]; s2.Grant != "" || s2.ApprovedBy != "dana" {
		t.Errorf("s2 = %+v, want cleared by dana, not under the grant", s2)
	}
	if s1 := res.Steps["s1"]; !s1.Replayed || s1.Grant != "g-refunds" {
		t.Errorf("s1 = %+v, want replayed from the record under g-refunds", s1)
	}
	if n := callsOf(r, "refund"); n != 2 {
		t.Errorf("refund called %d times, want 2 (s1 once, s2 once)", n)
	}
}

func TestAResumeDoesNotCountItsFinishedStepsTwiceAgainstAWindowedCeiling(t *testing.T) {
	ctx := context.Background()
	// 40 + 40 is within a ceiling of 100, in the plan and in the window.
	ladder := grantsLadder(t, grantsRefunds(planexec.LevelActWithinLimits, "100", time.Hour))
	st := memory.New()
	plan := planexec.Plan{Goal: "two refunds", Steps: []planexec.Step{
		grantsRefund("s1", "o-1", "40"),
		iSearch("f", "LHR", "s1"),
		grantsRefund("s2", "o-2", "40", "f"),
	}}
	r := &recorder{}
	failOnce(r, "search_flights", errors.New("search is down"))
	first, gate1 := newExecutor(t, r, edits(grantsWithLadder(ladder), withStore(st)))
	if _, err := first.Execute(ctx, plan); err == nil {
		t.Fatal("the first run succeeded with a failing search")
	}
	if got := grantsAsked(gate1); len(got) != 0 {
		t.Fatalf("the first run asked about %v, want both refunds cleared under the grant", got)
	}

	second, gate2 := newExecutor(t, r, edits(grantsWithLadder(ladder), withStore(st)))
	res, err := second.Resume(ctx)
	if err != nil {
		t.Fatalf("Resume: %v", err)
	}
	if got := grantsAsked(gate2); len(got) != 0 {
		t.Errorf("on resume the gate was asked about %v: s1's 40 counted twice (80 of 100 acted on in all)", got)
	}
	if s2 := res.Steps["s2"]; s2.Grant != "g-refunds" {
		t.Errorf("s2 = %+v, want it acted on under g-refunds", s2)
	}
}

// ---- reporting ----

func TestActAndReportReportsAStepAfterItRanAndActWithinLimitsDoesNot(t *testing.T) {
	for _, level := range []planexec.Level{planexec.LevelActAndReport, planexec.LevelActWithinLimits} {
		t.Run(string(level), func(t *testing.T) {
			ladder := grantsLadder(t, grantsRefunds(level, "100", 0))
			run, gate := newExecutor(t, &recorder{}, grantsWithLadder(ladder))
			if _, err := run.Execute(context.Background(), planexec.Plan{Steps: []planexec.Step{grantsRefund("s1", "o-1", "5")}}); err != nil {
				t.Fatalf("Execute: %v", err)
			}
			if asked := gate.Asked(); len(asked) != 0 {
				t.Errorf("the gate was asked: %+v", asked)
			}
			es := run.Events()
			cleared := findEvent(es, planexec.EventAutonomyCleared, "s1")
			started := findEvent(es, planexec.EventStepStarted, "s1")
			executed := findEvent(es, planexec.EventStepExecuted, "s1")
			if cleared < 0 || started < 0 || cleared > started {
				t.Fatalf("want AUTONOMY_CLEARED for s1 before it started: %v", kinds(es))
			}
			if es[cleared].Grant != "g-refunds" || es[cleared].Level != level {
				t.Errorf("AUTONOMY_CLEARED = %+v, want g-refunds at %s", es[cleared], level)
			}
			reported := findEvent(es, planexec.EventAutonomyReported, "")
			if level == planexec.LevelActWithinLimits {
				if reported >= 0 {
					t.Errorf("a step under act_within_limits was reported: %v", kinds(es))
				}
				return
			}
			if reported < 0 || reported < executed || es[reported].StepID != "s1" {
				t.Fatalf("want AUTONOMY_REPORTED for s1 after STEP_EXECUTED: %v", kinds(es))
			}
			if es[reported].Grant != "g-refunds" || es[reported].Level != planexec.LevelActAndReport {
				t.Errorf("AUTONOMY_REPORTED = %+v, want g-refunds at act_and_report", es[reported])
			}
			if n := count(es, planexec.EventAutonomyReported); n != 1 {
				t.Errorf("%d AUTONOMY_REPORTED events, want 1", n)
			}
		})
	}
}
