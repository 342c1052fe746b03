package planexec_test

// What a run writes to its store, and when: the plan before its first step,
// each step before the steps that wait on it, what finished when a later step
// fails; one tenant never sees another's run.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/shopspring/decimal"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/store"
	"github.com/planexec/planexec/store/memory"
)

// ---- helpers (prefixed store) ----

// A store that keeps plans but no claims cannot be an executor's: every
// effect would be at risk of running twice.
func TestAStoreWithoutClaimsCannotBeAnExecutorsStore(t *testing.T) {
	type plansOnly struct{ store.PlanStore }
	if reflect.TypeFor[plansOnly]().Implements(reflect.TypeFor[store.Store]()) {
		t.Fatal("a store of plans only satisfies store.Store")
	}
	if !reflect.TypeFor[*memory.Store]().Implements(reflect.TypeFor[store.Store]()) {
		t.Fatal("the memory store does not satisfy store.Store")
	}
}

// ---- what is written, and when ----

func TestThePlanIsStoredAsRunningBeforeTheFirstStepRuns(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	var inside *store.PlanRecord
	var loadErr error
	r := &recorder{fail: func(tool string, _ any) error {
		if tool == "search_flights" {
			inside, loadErr = st.LoadPlan(ctx, "acme", "run-1")
		}
		return nil
	}}
	run, _ := newExecutor(t, r, withStore(st))
	res, err := run.Execute(ctx, tripPlan())
	if err != nil {
		t.Fatalf("Execute: %v", err)
	}
	if loadErr != nil {
		t.Fatalf("inside the first tool, LoadPlan: %v", loadErr)
	}
	if inside.Status != store.RunRunning {
		t.Errorf("status inside the first tool = %q, want running", inside.Status)
	}
	if len(inside.Steps) != 0 {
		t.Errorf("steps on record before any finished: %v", inside.Steps)
	}
	if p := planOf(t, inside); inside.PlanID != res.PlanID || p.ID != res.PlanID || len(p.Steps) != 2 || p.Goal != "get them to New York" {
		t.Errorf("stored plan = %s (id %s), want the executed plan %s", inside.Plan, inside.PlanID, res.PlanID)
	}
	if inside.Tenant != "acme" || inside.RunID != "run-1" || inside.Version != store.RecordVersion {
		t.Errorf("record = tenant %q run %q version %d", inside.Tenant, inside.RunID, inside.Version)
	}

	after, err := st.LoadPlan(ctx, "acme", "run-1")
	if err != nil {
		t.Fatalf("LoadPlan after the run: %v", err)
	}
	if after.Status != store.RunCompleted || len(after.Steps) != 2 {
		t.Errorf("after the run: status %q, %d steps; want completed with 2", after.Status, len(after.Steps))
	}
}

func TestEachStepIsStoredBeforeTheStepsThatWaitOnItRun(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	var inside *store.PlanRecord
	var loadErr error
	r := &recorder{fail: func(tool string, _ any) error {
		if tool == "book_flight" {
			inside, loadErr = st.LoadPlan(ctx, "acme", "run-1")
		}
		return nil
	}}
	run, _ := newExecutor(t, r, withStore(st))
	if _, err := run.Execute(ctx, tripPlan()); err != nil {
		t.Fatalf("Execute: %v", err)
	}
	if loadErr != nil {
		t.Fatalf("inside step 2's tool, LoadPlan: %v", loadErr)
	}
	s1, ok := inside.Steps["s1"]
	if !ok {
		t.Fatalf("inside step 2's tool, step 1 is not on record: %v", inside.Steps)
	}
	if s1.Status != planexec.StepDone || s1.Tool != "search_flights" || s1.StepID != "s1" {
		t.Errorf("s1 record = %+v, want done by search_flights", s1)
	}
	var flights []string
	if err := json.Unmarshal(s1.Outcome, &flights); err != nil || len(flights) != 2 || flights[0] != "BA117" {
		t.Errorf("s1 outcome on record = %s (%v), want the search result", s1.Outcome, err)
	}
	if _, early := inside.Steps["s2"]; early {
		t.Errorf("s2 is on record while it is still running")
	}
	if inside.Status != store.RunRunning {
		t.Errorf("status while step 2 runs = %q, want running", inside.Status)
	}
}

func TestWhatFinishedIsOnRecordWhenALaterStepFails(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	r := &recorder{fail: func(tool string, _ any) error {
		if tool == "book_flight" {
			return fmt.Errorf("no seats left: %w", planexec.ErrNotApplied)
		}
		return nil
	}}
	run, _ := newExecutor(t, r, withStore(st))
	if _, err := run.Execute(ctx, tripPlan()); err == nil {
		t.Fatalf("Execute succeeded with a failing booking")
	}
	rec, err := st.LoadPlan(ctx, "acme", "run-1")
	if err != nil {
		t.Fatalf("LoadPlan: %v", err)
	}
	if rec.Status != store.RunFailed {
		t.Errorf("plan status %q, want failed", rec.Status)
	}
	if s1 := rec.Steps["s1"]; s1.Status != planexec.StepDone || len(s1.Outcome) == 0 {
		t.Errorf("s1 record = %+v, want done with its outcome", s1)
	}
	s2, ok := rec.Steps["s2"]
	if !ok || s2.Status != planexec.StepFailed {
		t.Errorf("s2 record = %+v (present %v), want failed", s2, ok)
	}
	if !strings.Contains(s2.Error, "no seats left") {
		t.Errorf("s2 error on record = %q, want the tool's error", s2.Error)
	}
}

func TestTheStoreRecordsAFailedIrreversibleStepAsInDoubtAndAReversibleOneAsFailed(t *testing.T) {
	for _, tc := range []struct {
		step planexec.Step
		want planexec.StepStatus
		run  planexec.RunStatus
	}{
		{iBooking("x1"), planexec.StepInDoubt, planexec.RunInDoubt},
		{iSearch("x1", "LHR"), planexec.StepFailed, planexec.RunFailed},
	} {
		t.Run(tc.step.Tool, func(t *testing.T) {
			ctx := context.Background()
			st := memory.New()
			r := &recorder{fail: func(string, any) error { return errors.New("timed out") }}
			run, _ := newExecutor(t, r, withStore(st))
			if _, err := run.Execute(ctx, iOne(tc.step)); err == nil {
				t.Fatalf("Execute succeeded with a failing tool")
			}
			rec, err := st.LoadPlan(ctx, "acme", "run-1")
			if err != nil {
				t.Fatalf("LoadPlan: %v", err)
			}
			if got := rec.Steps["x1"].Status; got != tc.want {
				t.Errorf("stored status %q, want %q", got, tc.want)
			}
			if rec.Status != tc.run {
				t.Errorf("run status %q, want %q", rec.Status, tc.run)
			}
			if wantWait := tc.run == planexec.RunInDoubt; wantWait != (len(rec.Waiting) == 1 && rec.Waiting[0].StepID == "x1" && rec.Waiting[0].Key == rec.Steps["x1"].Key) {
				t.Errorf("the run waits for %+v; want its key in doubt: %v", rec.Waiting, wantWait)
			}
		})
	}
}

func TestAStepRecordCarriesItsPlanKeyGrantAndAmount(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	r := &recorder{}
	ladder := grantsLadder(t, grantsRefunds(planexec.LevelActWithinLimits, "100", 0))
	run, _ := newExecutor(t, r, edits(withStore(st), grantsWithLadder(ladder)))
	res, err := run.Execute(ctx, planexec.Plan{Steps: []planexec.Step{grantsRefund("s1", "o-1", "60.50")}})
	if err != nil {
		t.Fatalf("Execute: %v", err)
	}
	rec, err := st.LoadPlan(ctx, "acme", "run-1")
	if err != nil {
		t.Fatalf("LoadPlan: %v", err)
	}
	sr, ok := rec.Steps["s1"]
	if !ok {
		t.Fatalf("s1 is not on record: %+v", rec.Steps)
	}
	if sr.PlanID == "" || sr.PlanID != res.PlanID {
		t.Errorf("PlanID = %q, want %q", sr.PlanID, res.PlanID)
	}
	if sr.Key == "" || sr.Key != res.Steps["s1"].Key.Digest || sr.Key != r.Calls()[0].Key {
		t.Errorf("Key = %q, want the step's key %q", sr.Key, res.Steps["s1"].Key.Digest)
	}
	if sr.Grant != "g-refunds" || !sr.Amount.Equal(decimal.RequireFromString("60.5")) {
		t.Errorf("Grant %q Amount %s, want g-refunds 60.5", sr.Grant, sr.Amount)
	}
}

// ---- forgetting, and tenants ----

func TestForgetRemovesTheRun(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	r := &recorder{}
	run, _ := newExecutor(t, r, withStore(st))
	if _, err := run.Execute(ctx, tripPlan()); err != nil {
		t.Fatalf("Execute: %v", err)
	}
	if _, err := st.LoadPlan(ctx, "acme", "run-1"); err != nil {
		t.Fatalf("the run is not on record before Forget: %v", err)
	}
	if err := run.Forget(ctx); err != nil {
		t.Fatalf("Forget: %v", err)
	}
	if _, err := st.LoadPlan(ctx, "acme", "run-1"); !errors.Is(err, planexec.ErrNoRecord) {
		t.Errorf("LoadPlan after Forget: want ErrNoRecord, got %v", err)
	}
	again, _ := newExecutor(t, r, withStore(st))
	if _, err := again.Resume(ctx); !errors.Is(err, planexec.ErrNoRecord) || !strings.Contains(err.Error(), "not on record") {
		t.Errorf("Resume after Forget: want the run not on record, got %v", err)
	}
	if err := run.Forget(ctx); err != nil {
		t.Errorf("forgetting a forgotten run: %v", err)
	}
	if n := len(r.Calls()); n != 2 {
		t.Errorf("tools called %d times, want only the first run's 2", n)
	}
}

func TestOneTenantCannotSeeOrResumeAnothersRun(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	r := &recorder{fail: func(tool string, _ any) error {
		if tool == "book_flight" {
			return fmt.Errorf("later: %w", planexec.ErrNotApplied)
		}
		return nil
	}}
	acme, _ := newExecutor(t, r, edits(withStore(st), iRun("acme", "run-1")))
	if _, err := acme.Execute(ctx, tripPlan()); err == nil {
		t.Fatalf("acme's run succeeded; it should be left to resume")
	}
	calls := len(r.Calls())

	globex, _ := newExecutor(t, r, edits(withStore(st), iRun("globex", "run-1")))
	res, err := globex.Resume(ctx)
	if !errors.Is(err, planexec.ErrNoRecord) || !strings.Contains(err.Error(), "not on record") {
		t.Fatalf("globex resuming acme's run id: want the run not on record, got %v (%+v)", err, res)
	}
	if n := len(r.Calls()); n != calls {
		t.Errorf("globex's resume called tools: %v", toolNames(r.Calls()[calls:]))
	}
	if _, err := st.LoadPlan(ctx, "globex", "run-1"); !errors.Is(err, planexec.ErrNoRecord) {
		t.Errorf("LoadPlan with the wrong tenant: want ErrNoRecord, got %v", err)
	}
	if err := globex.Forget(ctx); err != nil {
		t.Fatalf("globex Forget: %v", err)
	}
	if rec, err := st.LoadPlan(ctx, "acme", "run-1"); err != nil || rec.Tenant != "acme" {
		t.Errorf("acme's run after globex forgot its own: %+v, %v", rec, err)
	}
	if err := st.SaveStep(ctx, "globex", "run-1", store.StepRecord{StepID: "s2", Tool: "book_flight", Status: planexec.StepDone}); !errors.Is(err, planexec.ErrNoRecord) {
		t.Errorf("SaveStep into another tenant's run: want ErrNoRecord, got %v", err)
	}
	if rec, err := st.LoadPlan(ctx, "acme", "run-1"); err != nil || rec.Steps["s2"].Status == planexec.StepDone {
		t.Errorf("acme's run after globex's SaveStep: %v; globex's step must not land in it", err)
	}
}

// The executor gives a store the plan's document in the layout the durable
// stores have on file (internal/storecodec pins the record around it): no
// HTML escaping, and each step's arguments byte for byte as the planner
// wrote them, spaces and number spellings included.
func TestThePlanIsStoredAsTheDocumentOnFile(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	run, _ := newExecutor(t, &recorder{}, withStore(st))
	plan := planexec.Plan{Goal: "get <them> & go", Steps: []planexec.Step{
		step("s1", "search_flights", "{ \"origin\" : \"LHR\",\n\t\"destination\":\"JFK\" }"),
		step("s2", "book_flight", `{"flight":"BA117","seats":1,"fare":412.50}`, "s1"),
	}}
	plan.Steps[1].Intent = "book <it>"
	res, err := run.Execute(ctx, plan)
	if err != nil {
		t.Fatalf("Execute: %v", err)
	}
	rec, err := st.LoadPlan(ctx, "acme", "run-1")
	if err != nil {
		t.Fatalf("LoadPlan: %v", err)
	}
	want := `{"id":"` + res.PlanID + `","goal":"get <them> & go","revision":` + strconv.Itoa(res.Revision) + `,"steps":[` +
		"{\"id\":\"s1\",\"tool\":\"search_flights\",\"arguments\":{ \"origin\" : \"LHR\",\n\t\"destination\":\"JFK\" }}," +
		`{"id":"s2","tool":"book_flight","arguments":{"flight":"BA117","seats":1,"fare":412.50},"depends_on":["s1"],"intent":"book <it>"}]}`
	if string(rec.Plan) != want || rec.PlanID != res.PlanID {
		t.Errorf("stored plan (id %s):\n%s\nwant (id %s):\n%s", rec.PlanID, rec.Plan, res.PlanID, want)
	}
}
