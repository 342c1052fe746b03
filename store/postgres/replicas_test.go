package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/store"
	"github.com/planexec/planexec/store/postgres"
)

// errand is what the replicas' tools take.
type errand struct {
	Step string `json:"step"`
}

const (
	undoable = "undoable"
	once     = "once" // irreversible
)

// lanes returns a plan of n×depth steps: n lanes, each a chain, side by
// side; every third step irreversible.
func lanes(id string, n, depth int) planexec.Plan {
	p := planexec.Plan{ID: id, Goal: "run each errand once", Revision: 1}
	for i := range n * depth {
		step := fmt.Sprintf("s%02d", i)
		tool := undoable
		if i%3 == 2 {
			tool = once
		}
		var deps []string
		if i >= n {
			deps = []string{fmt.Sprintf("s%02d", i-n)}
		}
		args, _ := json.Marshal(errand{Step: step})
		p.Steps = append(p.Steps, planexec.Step{ID: step, Tool: tool, Arguments: args, DependsOn: deps})
	}
	return p
}

// errandExecutor builds an executor for run over db whose tools call
// effect before returning.
func errandExecutor(t testing.TB, tenant, run, holder string, db *postgres.Store, lease time.Duration, effect func(ctx context.Context, step string) error) *planexec.Run {
	t.Helper()
	tool := func(ctx context.Context, a errand) (string, error) {
		if err := effect(ctx, a.Step); err != nil {
			return "", err
		}
		return "done " + a.Step, nil
	}
	ex, err := planexec.NewExecutor(planexec.Config{
		Tools: []*planexec.Tool{
			planexec.MustTool(undoable, "An errand that may be done again.", tool),
			planexec.MustTool(once, "An errand done once.", tool, planexec.Irreversible()),
		},
		Gate: planexec.ApprovalGateFunc(func(_ context.Context, req planexec.ApprovalRequest) (planexec.Decision, error) {
			return req.Approve("ops"), nil
		}),
		Store:  db,
		Lease:  lease,
		Holder: holder,
	})
	if err != nil {
		t.Fatal(err)
	}
	r, err := ex.Run(planexec.Delegation{RunID: run, Tenant: tenant})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// onlyHeld reports whether err says no more than that another holder has
// a step in flight, or the run: another replica's execution holds it.
func onlyHeld(err error) bool {
	if errors.Is(err, planexec.ErrRunBusy) {
		return true
	}
	for _, e := range leaves(err) {
		if ind, ok := e.(*planexec.IndeterminateOutcomeError); !ok || ind.InDoubt {
			return false
		}
	}
	return err != nil
}

func TestEightReplicasResumingOnePlanRunEachStepOnce(t *testing.T) {
	t.Parallel()
	pool := sharedPool(t)
	schema := freshSchema(t, pool)
	ctx := t.Context()
	const replicas = 8
	stores := make([]*postgres.Store, replicas)
	for i := range stores {
		p, err := connect(testDSN(t), 3)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		if stores[i], err = postgres.New(ctx, p, postgres.WithSchema(schema)); err != nil {
			t.Fatal(err)
		}
	}
	calls := pgx.Identifier{schema, "calls"}.Sanitize()
	if _, err := pool.Exec(ctx, "CREATE TABLE "+calls+" (step text NOT NULL, holder text NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	const tenant, run = "acme", "run-replicas"
	p := lanes("plan-1", 4, 5)
	now := time.Now()
	if err := stores[0].SavePlan(ctx, record(tenant, run, p, now)); err != nil {
		t.Fatal(err)
	}

	start := make(chan struct{})
	var wg sync.WaitGroup
	errs := make([]error, replicas)
	for i, db := range stores {
		holder := fmt.Sprintf("replica-%d", i)
		ex := errandExecutor(t, tenant, run, holder, db, time.Minute, func(ctx context.Context, step string) error {
			_, err := pool.Exec(ctx, "INSERT INTO "+calls+" (step, holder) VALUES ($1, $2)", step, holder)
			return err
		})
		wg.Go(func() {
			<-start
			deadline := time.Now().Add(30 * time.Second)
			for {
				res, err := ex.Resume(ctx)
				if err == nil && res.Complete {
					return
				}
				if !onlyHeld(err) || time.Now().After(deadline) {
					errs[i] = err
					return
				}
				time.Sleep(5 * time.Millisecond) // another replica has the step: let it finish
			}
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("replica %d: %v", i, err)
		}
	}

	counts := map[string]int{}
	holders := map[string]bool{}
	rows, _ := pool.Query(ctx, "SELECT step, holder FROM "+calls)
	var step, holder string
	if _, err := pgx.ForEachRow(rows, []any{&step, &holder}, func() error {
		counts[step]++
		holders[holder] = true
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, s := range p.Steps {
		if counts[s.ID] != 1 {
			t.Errorf("step %s (%s) ran %d times, want once", s.ID, s.Tool, counts[s.ID])
		}
	}
	rec, err := stores[replicas-1].LoadPlan(ctx, tenant, run)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Status != store.RunCompleted || len(rec.Steps) != len(p.Steps) {
		t.Errorf("the record ends %s with %d of %d steps", rec.Status, len(rec.Steps), len(p.Steps))
	}
	for id, st := range rec.Steps {
		if st.Status != planexec.StepDone || string(st.Outcome) != `"done `+id+`"` {
			t.Errorf("step %s recorded as %s with %s", id, st.Status, st.Outcome)
		}
	}
	t.Logf("%d steps run by %d of %d replicas", len(p.Steps), len(holders), replicas)
}

func TestAZombieHoldersLateWriteIsFencedAndChangesNothing(t *testing.T) {
	t.Parallel()
	pool := sharedPool(t)
	schema := freshSchema(t, pool)
	ctx := t.Context()
	replica := func() *postgres.Store {
		p, err := connect(testDSN(t), 2)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		s, err := postgres.New(ctx, p, postgres.WithSchema(schema))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	zombie, live := replica(), replica()
	const tenant, run = "acme", "run-zombie"
	now := time.Now()
	if err := live.SavePlan(ctx, record(tenant, run, lanes("plan-1", 1, 2), now)); err != nil {
		t.Fatal(err)
	}
	stepRec := func(step, outcome string) store.StepRecord {
		return store.StepRecord{StepID: step, PlanID: "plan-1", Tool: undoable, Status: planexec.StepDone,
			Outcome: json.RawMessage(outcome), Key: "k-" + step, Finished: time.Now()}
	}

	// A reversible step: the zombie's lease runs out, the live replica
	// takes the step over and completes it.
	key := planexec.Key{Tenant: tenant, Digest: "k-s00"}
	req := store.ClaimRequest{Key: key, RunID: run, StepID: "s00", Tool: undoable, Holder: "zombie", Lease: 50 * time.Millisecond, TakeOver: true}
	old, err := zombie.Claim(ctx, req)
	if err != nil || old.State != store.ClaimAcquired {
		t.Fatalf("zombie's claim: %+v, %v", old, err)
	}
	time.Sleep(100 * time.Millisecond)
	req.Holder, req.Lease = "live", time.Minute
	cur, err := live.Claim(ctx, req)
	if err != nil || cur.State != store.ClaimAcquired || cur.Epoch <= old.Epoch {
		t.Fatalf("taking over: %+v, %v; want acquired above epoch %d", cur, err, old.Epoch)
	}
	if err := live.CompleteStep(ctx, &store.StepWrite{Key: key, Epoch: cur.Epoch, RunID: run, Outcome: json.RawMessage(`"live"`), Record: stepRec("s00", `"live"`)}); err != nil {
		t.Fatal(err)
	}
	for what, err := range map[string]error{
		"Extend":       zombie.Extend(ctx, key, old.Epoch, time.Minute),
		"Complete":     zombie.Complete(ctx, key, old.Epoch, json.RawMessage(`"zombie"`)),
		"CompleteStep": zombie.CompleteStep(ctx, &store.StepWrite{Key: key, Epoch: old.Epoch, RunID: run, Outcome: json.RawMessage(`"zombie"`), Record: stepRec("s00", `"zombie"`), Events: zombieEvents}),
		"ReleaseStep":  zombie.ReleaseStep(ctx, &store.StepWrite{Key: key, Epoch: old.Epoch, RunID: run, InDoubt: true, Record: stepRec("s00", `"zombie"`), Events: zombieEvents}),
		"Release":      zombie.Release(ctx, key, old.Epoch, false),
	} {
		if !errors.Is(err, store.ErrFenced) {
			t.Errorf("the zombie's %s: %v, want ErrFenced", what, err)
		}
	}
	c, err := live.Claim(ctx, req)
	if err != nil || c.State != store.ClaimCompleted || string(c.Outcome) != `"live"` || c.Epoch != cur.Epoch {
		t.Errorf("after the zombie's writes the claim is %+v, %v; want completed with the live outcome at epoch %d", c, err, cur.Epoch)
	}
	rec, err := live.LoadPlan(ctx, tenant, run)
	if err != nil || string(rec.Steps["s00"].Outcome) != `"live"` {
		t.Errorf("after the zombie's writes the step record is %+v, %v", rec.Steps["s00"], err)
	}

	// An irreversible step: nobody takes it over; it is in doubt until
	// resolved, and resolving it fences the zombie too.
	key = planexec.Key{Tenant: tenant, Digest: "k-s01"}
	req = store.ClaimRequest{Key: key, RunID: run, StepID: "s01", Tool: once, Holder: "zombie", Lease: 50 * time.Millisecond}
	if old, err = zombie.Claim(ctx, req); err != nil || old.State != store.ClaimAcquired {
		t.Fatalf("zombie's claim: %+v, %v", old, err)
	}
	if err := live.Resolve(ctx, key, run, planexec.Resolution{Applied: true, Outcome: json.RawMessage(`"too soon"`)}); !errors.Is(err, store.ErrInFlight) {
		t.Errorf("resolving a live claim: %v, want ErrInFlight", err)
	}
	time.Sleep(100 * time.Millisecond)
	req.Holder = "live"
	if c, err := live.Claim(ctx, req); err != nil || c.State != store.ClaimInDoubt || c.Holder != "zombie" {
		t.Fatalf("an irreversible step whose holder vanished: %+v, %v; want in doubt, held by the zombie", c, err)
	}
	if err := live.Resolve(ctx, key, run, planexec.Resolution{Applied: true, Outcome: json.RawMessage(`"checked"`)}); err != nil {
		t.Fatal(err)
	}
	if err := zombie.CompleteStep(ctx, &store.StepWrite{Key: key, Epoch: old.Epoch, RunID: run, Outcome: json.RawMessage(`"zombie"`), Record: stepRec("s01", `"zombie"`), Events: zombieEvents}); !errors.Is(err, store.ErrFenced) {
		t.Errorf("the zombie's CompleteStep after a resolution: %v, want ErrFenced", err)
	}
	if c, err := live.Claim(ctx, req); err != nil || c.State != store.ClaimCompleted || string(c.Outcome) != `"checked"` || c.Epoch <= old.Epoch {
		t.Errorf("after the zombie's write the claim is %+v, %v; want completed with the resolution above epoch %d", c, err, old.Epoch)
	}
	if rec, err := live.LoadPlan(ctx, tenant, run); err != nil || len(rec.Steps) != 1 {
		t.Errorf("the zombie's step record was written: %+v, %v", rec, err)
	}
	if got, err := live.Events(ctx, tenant, run, 0, 10); err != nil || len(got) != 0 {
		t.Errorf("the zombie's events were appended: %d events, %v", len(got), err)
	}
}

// zombieEvents are what a fenced holder tries to append with its step.
var zombieEvents = []json.RawMessage{json.RawMessage(`{"kind":"STEP_EXECUTED","by":"zombie"}`)}
