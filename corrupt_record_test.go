package planexec_test

// A damaged record is never read as something it is not: an outcome that is
// not JSON is not replayed (and its tool is not called in its stead), and a
// step record of a status this package never writes stops the resume before
// anything runs.

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/store"
	"github.com/planexec/planexec/store/memory"
)

// corruptOutcomeStore answers every claim with a completed effect whose
// recorded outcome is damaged.
type corruptOutcomeStore struct {
	*memory.Store
	outcome json.RawMessage
}

func (s *corruptOutcomeStore) Claim(context.Context, store.ClaimRequest) (store.Claim, error) {
	return store.Claim{State: store.ClaimCompleted, Epoch: 1, Outcome: s.outcome}, nil
}

func TestARecordedOutcomeThatIsNotJSONIsACorruptRecordAndNothingIsReplayedOrRun(t *testing.T) {
	for name, outcome := range map[string]string{
		"cut short":   `["BA117","VS`,
		"not JSON":    `PNR-BA117`,
		"empty":       ``,
		"two values":  `"PNR" "PNR"`,
		"bare object": `{"pnr":}`,
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st := &corruptOutcomeStore{Store: memory.New(), outcome: json.RawMessage(outcome)}
			r := &recorder{}
			run, _ := newExecutor(t, r, withStore(st))
			res, err := run.Execute(ctx, tripPlan())

			var se *store.Error
			if !errors.As(err, &se) || !errors.Is(err, store.ErrCorruptRecord) {
				t.Fatalf("err = %v, want a *store.Error wrapping ErrCorruptRecord", err)
			}
			if n := len(r.Calls()); n != 0 {
				t.Errorf("tools called %d times in place of a damaged record", n)
			}
			if res != nil {
				for id, s := range res.Steps {
					if s.Status == planexec.StepDone || s.Replayed {
						t.Errorf("step %s = %+v: a damaged outcome was replayed", id, s)
					}
				}
				if res.Complete {
					t.Errorf("result %+v is complete", res)
				}
			}
			es := run.Events()
			if n := count(es, planexec.EventStepExecuted); n != 0 {
				t.Errorf("%d STEP_EXECUTED events: %v", n, kinds(es))
			}
			if findEvent(es, planexec.EventStepFailed, "s1") < 0 || findEvent(es, planexec.EventPlanFailed, "") < 0 {
				t.Errorf("want s1 failed and the plan failed: %v", kinds(es))
			}
			rec, lerr := st.LoadPlan(ctx, "acme", "run-1")
			if lerr != nil {
				t.Fatalf("LoadPlan: %v", lerr)
			}
			if s1, ok := rec.Steps["s1"]; ok && s1.Status == planexec.StepDone {
				t.Errorf("s1 is on record as done: %+v", s1)
			}
		})
	}
}

func TestAStepRecordOfAnUnknownStatusIsACorruptRecordAndNothingRuns(t *testing.T) {
	planner, model := doPlanner(t)
	for _, tc := range []struct {
		name string
		pick func(context.Context, *planexec.Run) (*planexec.Result, error)
	}{
		{"Resume", func(ctx context.Context, run *planexec.Run) (*planexec.Result, error) { return run.Resume(ctx) }},
		{"Do", func(ctx context.Context, run *planexec.Run) (*planexec.Result, error) {
			return run.Do(ctx, planner, "get them to New York")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			st := memory.New()
			plan := tripPlan()
			plan.ID, plan.Revision = "p1", 1
			if err := st.SavePlan(ctx, storedPlan(t, "acme", "run-1", plan, store.RunRunning)); err != nil {
				t.Fatalf("SavePlan: %v", err)
			}
			// s1 finished, but its status was damaged on the way to disk.
			if err := st.SaveStep(ctx, "acme", "run-1", store.StepRecord{
				StepID: "s1", PlanID: "p1", Tool: "search_flights", Status: "finished",
				Outcome: json.RawMessage(`["BA117","VS3"]`), Finished: time.Now(),
			}); err != nil {
				t.Fatalf("SaveStep: %v", err)
			}

			r := &recorder{}
			run, gate := newExecutor(t, r, withStore(st))
			res, err := tc.pick(ctx, run)
			var se *store.Error
			if !errors.As(err, &se) || !errors.Is(err, store.ErrCorruptRecord) {
				t.Fatalf("err = %v, want a *store.Error wrapping ErrCorruptRecord", err)
			}
			if res != nil {
				t.Errorf("result %+v, want none: nothing ran", res)
			}
			if n := len(r.Calls()); n != 0 {
				t.Errorf("tools called %d times: %v", n, toolNames(r.Calls()))
			}
			if asked := gate.Asked(); len(asked) != 0 {
				t.Errorf("a person was asked about a run that cannot go on: %+v", asked)
			}
			if n := len(model.Requests()); n != 0 {
				t.Errorf("the model was asked %d times", n)
			}
			es := run.Events()
			if count(es, planexec.EventStepStarted) != 0 || findEvent(es, planexec.EventPlanFailed, "") < 0 {
				t.Errorf("events %v, want the plan failed and nothing started", kinds(es))
			}
			rec, lerr := st.LoadPlan(ctx, "acme", "run-1")
			if lerr != nil {
				t.Fatalf("LoadPlan: %v", lerr)
			}
			if s1 := rec.Steps["s1"]; s1.Status != "finished" {
				t.Errorf("s1 on record = %+v, want left as it was found", s1)
			}
		})
	}
}

// A plan document a store gives back damaged (not a plan, or naming another
// plan than its record) stops the resume before anything runs or anyone is
// asked.
func TestAStoredPlanThatIsNotThePlanOnRecordIsACorruptRecord(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(*store.PlanRecord)
	}{
		{"not a plan", func(rec *store.PlanRecord) { rec.Plan = json.RawMessage(`{"steps":"s1"}`) }},
		{"another plan's", func(rec *store.PlanRecord) { rec.PlanID = "p2" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			st := memory.New()
			plan := tripPlan()
			plan.ID, plan.Revision = "p1", 1
			rec := storedPlan(t, "acme", "run-1", plan, store.RunRunning)
			tc.damage(rec)
			if err := st.SavePlan(ctx, rec); err != nil {
				t.Fatalf("SavePlan: %v", err)
			}
			r := &recorder{}
			run, gate := newExecutor(t, r, withStore(st))
			res, err := run.Resume(ctx)
			var se *store.Error
			if !errors.As(err, &se) || !errors.Is(err, store.ErrCorruptRecord) {
				t.Fatalf("err = %v, want a *store.Error wrapping ErrCorruptRecord", err)
			}
			if res != nil || len(r.Calls()) != 0 || len(gate.Asked()) != 0 {
				t.Errorf("result %+v, %d tool calls, %d people asked: want nothing", res, len(r.Calls()), len(gate.Asked()))
			}
		})
	}
}
