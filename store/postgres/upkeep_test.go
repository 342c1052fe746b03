package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/shopspring/decimal"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/store"
	"github.com/planexec/planexec/store/postgres"
)

// count runs a query of one number in schema.
func count(t *testing.T, schema, sql string, args ...any) int64 {
	t.Helper()
	ctx := context.Background()
	tx, err := sharedPool(t).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SET LOCAL search_path TO "+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	var n int64
	if err := tx.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// Replicas, each on a pool of its own, spending under one windowed grant at
// once: the spends that go through are exactly those the ceiling has room
// for, counted exactly (a tenth, sixty times over, against 1.00), and a
// step spending again, on any replica, is counted once.
func TestReplicasSpendingAtOnceNeverPassTheCeilingTogether(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	schema := freshSchema(t, sharedPool(t))
	const replicas, spendersEach = 6, 10
	stores := make([]*postgres.Store, replicas)
	for i := range stores {
		stores[i] = replicaStore(t, schema, 3)
	}
	d := decimal.RequireFromString
	ceiling, window := d("1.00"), time.Hour
	at := time.Date(2030, 3, 4, 9, 0, 0, 123_456_789, time.UTC)

	var (
		wg      sync.WaitGroup
		start   = make(chan struct{})
		through atomic.Int64
		refused atomic.Int64
		errs    = make(chan error, replicas*spendersEach*2)
	)
	spend := func(s *postgres.Store, sp store.Spend) {
		<-start
		switch err := s.Spend(ctx, sp, window, ceiling); {
		case err == nil:
			through.Add(1)
		case errors.Is(err, store.ErrCeiling):
			refused.Add(1)
		default:
			errs <- err
		}
	}
	for r, s := range stores {
		for i := range spendersEach {
			sp := store.Spend{Tenant: "acme", Grant: "g-refunds", Key: fmt.Sprintf("k-%d-%d", r, i), Amount: d("0.10"), At: at}
			wg.Go(func() { spend(s, sp) })
		}
	}
	close(start)
	wg.Wait()
	if through.Load() != 10 || refused.Load() != replicas*spendersEach-10 {
		t.Errorf("%d spends of 0.10 went through and %d were refused under a ceiling of 1.00; want 10 and %d", through.Load(), refused.Load(), replicas*spendersEach-10)
	}
	if got, err := stores[0].Spent(ctx, "g-refunds", at.Add(window-time.Microsecond), window, nil); err != nil || !got.Equal(d("1.00")) {
		t.Errorf("Spent = %s, %v; want 1.00", got, err)
	}
	if n := count(t, schema, "SELECT count(*) FROM spends WHERE grant_id = 'g-refunds' AND tenant = 'acme'"); n != 10 {
		t.Errorf("%d spends recorded, want 10", n)
	}
	if n := count(t, schema, "SELECT count(*) FILTER (WHERE total = 1.00) FROM (SELECT sum(amount) AS total FROM spends) AS s"); n != 1 {
		t.Errorf("the recorded spends do not sum to 1.00 exactly")
	}

	// A window later the old spends fall out: each replica, three times
	// at once, spends for one step; it is recorded once, at its first
	// amount.
	later := at.Add(window)
	through.Store(0)
	start = make(chan struct{})
	for _, s := range stores {
		for range 3 {
			sp := store.Spend{Tenant: "acme", Grant: "g-refunds", Key: "k-resumed", Amount: d("0.70"), At: later}
			wg.Go(func() { spend(s, sp) })
		}
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("Spend: %v", err)
	}
	if through.Load() != replicas*3 {
		t.Errorf("%d of %d spends of one step succeeded, want every one", through.Load(), replicas*3)
	}
	if got, err := stores[1].Spent(ctx, "g-refunds", later, window, nil); err != nil || !got.Equal(d("0.70")) {
		t.Errorf("Spent a window later = %s, %v; want the step's 0.70, once", got, err)
	}
	if n := count(t, schema, "SELECT count(*) FROM spends WHERE key = 'k-resumed'"); n != 1 {
		t.Errorf("the step's spend is recorded %d times, want once", n)
	}
}

// Replicas, each on a pool of its own, recovering at once: each finds the
// stalled runs and tries to take every one. Each stalled run is taken by
// exactly one of them; no live or finished run is taken; the taken runs
// are running under their taker's lease and stalled no more.
func TestReplicasTakingStalledRunsAtOnceTakeEachOnce(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	schema := freshSchema(t, sharedPool(t))
	const replicas = 6
	stores := make([]*postgres.Store, replicas)
	for i := range stores {
		stores[i] = replicaStore(t, schema, 3)
	}
	now := time.Now().UTC()
	const lease = time.Minute
	stalled := map[store.RunRef]bool{}
	for i := range 40 {
		tenant := []string{"acme", "globex"}[i%2]
		rec := record(tenant, fmt.Sprintf("run-%02d", i), plan("p", "s1"), now.Add(-time.Hour))
		switch i % 5 {
		case 0:
			rec.Status = store.RunInterrupted
		case 1:
			rec.Holder, rec.LeaseExpires = "dead", now.Add(-time.Second) // its executor died
		case 2:
			// Running under no lease, as an earlier version saved it.
		case 3:
			rec.Holder, rec.LeaseExpires = "alive", now.Add(time.Hour)
		case 4:
			rec.Status = []store.RunStatus{store.RunCompleted, store.RunAwaitingApproval, store.RunInDoubt, store.RunFailed}[i/5%4]
		}
		if i%5 < 3 {
			stalled[store.RunRef{Tenant: tenant, RunID: rec.RunID}] = true
		}
		if err := stores[0].SavePlan(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	var (
		mu    sync.Mutex
		taken = map[store.RunRef][]string{}
		wg    sync.WaitGroup
		start = make(chan struct{})
		errs  = make(chan error, replicas)
	)
	for r, s := range stores {
		for w := range 2 {
			holder := fmt.Sprintf("replica-%d/%d", r, w)
			wg.Go(func() {
				<-start
				refs, err := s.Stalled(ctx, now, 100)
				if err != nil {
					errs <- err
					return
				}
				for _, ref := range refs {
					ok, err := s.TakeRun(ctx, ref, holder, now, lease)
					if err != nil {
						errs <- err
						return
					}
					if ok {
						mu.Lock()
						taken[ref] = append(taken[ref], holder)
						mu.Unlock()
					}
				}
			})
		}
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for ref := range stalled {
		if len(taken[ref]) != 1 {
			t.Errorf("stalled run %v taken by %v, want exactly one replica", ref, taken[ref])
			continue
		}
		rec, err := stores[replicas-1].LoadPlan(ctx, ref.Tenant, ref.RunID)
		if err != nil || rec.Status != store.RunRunning || rec.Holder != taken[ref][0] || !rec.LeaseExpires.Equal(now.Add(lease).Truncate(time.Microsecond)) {
			t.Errorf("run %v after it was taken: %+v, %v; want running under %s until %v", ref, rec, err, taken[ref][0], now.Add(lease))
		}
	}
	for ref, by := range taken {
		if !stalled[ref] {
			t.Errorf("run %v, live or finished, was taken by %v", ref, by)
		}
	}
	if left, err := stores[0].Stalled(ctx, now, 100); err != nil || len(left) != 0 {
		t.Errorf("Stalled after every run was taken = %v, %v", left, err)
	}
	// Once the takers' leases run out, the runs are stalled again, in
	// order.
	again, err := stores[0].Stalled(ctx, now.Add(lease), 100)
	if err != nil || len(again) != len(stalled) {
		t.Fatalf("Stalled a lease later = %d runs, %v; want %d", len(again), err, len(stalled))
	}
	for i := 1; i < len(again); i++ {
		a, b := again[i-1], again[i]
		if a.Tenant > b.Tenant || (a.Tenant == b.Tenant && a.RunID >= b.RunID) {
			t.Errorf("Stalled lists %v before %v", a, b)
		}
	}
}

// A run's holder and lease are columns, NULL for none, kept to the
// microsecond; a holder's lease moves on only by its holder, while the run
// is running.
func TestARunsHolderAndLeaseAreKept(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, schema := newStore(t)
	at := time.Date(2030, 3, 4, 9, 0, 0, 123_456_789, time.UTC)
	rec := record("acme", "run-1", plan("p", "s1"), at)
	rec.Holder, rec.LeaseExpires = "worker/1", at.Add(time.Minute)
	if err := s.SavePlan(ctx, rec); err != nil {
		t.Fatal(err)
	}
	got, err := s.LoadPlan(ctx, "acme", "run-1")
	if err != nil || got.Holder != "worker/1" || !got.LeaseExpires.Equal(at.Add(time.Minute).Truncate(time.Microsecond)) || got.LeaseExpires.Location() != time.UTC {
		t.Fatalf("LoadPlan = %+v, %v; want the holder and its lease, to the microsecond, in UTC", got, err)
	}
	ref := store.RunRef{Tenant: "acme", RunID: "run-1"}
	if err := s.ExtendRun(ctx, ref, "worker/1", at.Add(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := s.ExtendRun(ctx, ref, "worker/2", at.Add(3*time.Minute)); !errors.Is(err, store.ErrFenced) {
		t.Errorf("ExtendRun by another holder: %v, want ErrFenced", err)
	}
	if got, _ := s.LoadPlan(ctx, "acme", "run-1"); !got.LeaseExpires.Equal(at.Add(2 * time.Minute).Truncate(time.Microsecond)) {
		t.Errorf("lease after the extensions = %v", got.LeaseExpires)
	}
	if err := s.ExtendRun(ctx, store.RunRef{Tenant: "globex", RunID: "run-1"}, "worker/1", at); !errors.Is(err, store.ErrNoRecord) {
		t.Errorf("ExtendRun of another tenant's run: %v, want ErrNoRecord", err)
	}
	// The run stops: saved by its holder with no lease, it has no holder,
	// and its holder may not move a lease on it.
	rec.Status, rec.LeaseExpires = store.RunInterrupted, time.Time{}
	if err := s.SavePlan(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if n := count(t, schema, "SELECT count(*) FROM plans WHERE holder IS NULL AND lease_expires IS NULL"); n != 1 {
		t.Errorf("a run saved with no holder has a holder or lease in its row")
	}
	if got, _ := s.LoadPlan(ctx, "acme", "run-1"); got.Holder != "" || !got.LeaseExpires.IsZero() {
		t.Errorf("a run saved with no holder reads back with %q until %v", got.Holder, got.LeaseExpires)
	}
	if err := s.ExtendRun(ctx, ref, "worker/1", at.Add(time.Hour)); !errors.Is(err, store.ErrFenced) {
		t.Errorf("ExtendRun of an interrupted run: %v, want ErrFenced", err)
	}
	// Taken to be recovered: the document still says interrupted, the
	// run is running.
	if ok, err := s.TakeRun(ctx, ref, "worker/3", at, time.Minute); !ok || err != nil {
		t.Fatalf("TakeRun = %v, %v", ok, err)
	}
	if got, err := s.LoadPlan(ctx, "acme", "run-1"); err != nil || got.Status != store.RunRunning || got.Holder != "worker/3" {
		t.Errorf("the taken run reads back as %+v, %v", got, err)
	}
	if runs, err := s.ListRuns(ctx, "acme", store.RunQuery{Statuses: []store.RunStatus{store.RunRunning}, Limit: 10}); err != nil || len(runs) != 1 {
		t.Errorf("the taken run is not listed as running: %+v, %v", runs, err)
	}
	// A status column this package never writes is damage, not a status.
	sqlExec(t, schema, "UPDATE plans SET status = 'paused'")
	_, err = s.LoadPlan(ctx, "acme", "run-1")
	wantStoreError(t, "LoadPlan of a run whose status column is damaged", err, store.ErrCorruptRecord)
}

// The stalled runs are found through the plans_unfinished index, not by
// reading every run.
func TestStalledRunsAreFoundThroughTheirIndex(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, schema := newStore(t)
	fillRuns(t, schema, "acme", 20_000, time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	pool := sharedPool(t)
	var planText string
	rows, err := pool.Query(ctx, "EXPLAIN "+postgres.StalledSQL(s), time.Now(), 100, store.RecordVersion)
	if err != nil {
		t.Fatal(err)
	}
	var line string
	if _, err := pgx.ForEachRow(rows, []any{&line}, func() error { planText += line + "\n"; return nil }); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(planText, "plans_unfinished") || strings.Contains(planText, "Seq Scan") || strings.Contains(planText, "Sort") {
		t.Errorf("Stalled's plan reads more than the unfinished runs, in order:\n%s", planText)
	}
}

// Prune, on two replicas at once, while other replicas write the very runs
// it drops (append to their histories, complete their steps, forget them,
// save them again as running) and histories of runs with no plan: nobody
// waits for anybody in a circle (PostgreSQL would fail one of them), each
// run is dropped once, and what is left is what may still be needed.
// Another tenant's records are never touched.
func TestPruneWhileReplicasWriteTheRunsItDrops(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	schema := freshSchema(t, sharedPool(t))
	pruners := []*postgres.Store{replicaStore(t, schema, 2), replicaStore(t, schema, 2)}
	writer := replicaStore(t, schema, 8)
	const runs = 60
	old := time.Now().Add(-48 * time.Hour)
	name := func(i int) string { return fmt.Sprintf("r%02d", i) }
	for _, tenant := range []string{"acme", "globex"} {
		for i := range runs {
			rec := record(tenant, name(i), plan("p1", "s1", "s2"), old)
			rec.Status = store.RunCompleted
			if err := writer.SavePlan(ctx, rec); err != nil {
				t.Fatal(err)
			}
			if err := completeStep(ctx, writer, tenant, name(i), "s1", "k-s1-"+name(i), batchOf("setup", 0, 2)); err != nil {
				t.Fatal(err)
			}
			// s2 failed once (its key given up, its row written), and was
			// taken again by a replica that went quiet.
			key := planexec.Key{Tenant: tenant, Digest: "k-s2-" + name(i)}
			for epoch, holder := range []string{"first", "zombie"} {
				c, err := writer.Claim(ctx, store.ClaimRequest{Key: key, RunID: name(i), StepID: "s2", Tool: "tool", Holder: holder, Lease: time.Hour})
				if err != nil || c.State != store.ClaimAcquired || c.Epoch != int64(epoch+1) {
					t.Fatalf("Claim: %+v, %v", c, err)
				}
				if holder == "zombie" {
					break
				}
				err = writer.ReleaseStep(ctx, &store.StepWrite{Key: key, Epoch: c.Epoch, RunID: name(i),
					Record: store.StepRecord{StepID: "s2", PlanID: "p1", Tool: "tool", Status: planexec.StepFailed, Error: "timeout", Key: key.Digest, Finished: old},
					Events: batchOf("setup", 1, 1)})
				if err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	globex := func() [5]int64 {
		var n [5]int64
		for i, table := range []string{"plans", "steps", "claims", "histories", "events"} {
			n[i] = count(t, schema, "SELECT count(*) FROM "+table+" WHERE tenant = 'globex'")
		}
		return n
	}
	before := globex()
	cut := time.Now().Add(time.Hour) // everything written below is before it too

	var (
		wg     sync.WaitGroup
		start  = make(chan struct{})
		pruned atomic.Int64
		errs   = make(chan error, 64)
	)
	fail := func(what string, err error) { errs <- fmt.Errorf("%s: %w", what, err) }
	for _, p := range pruners {
		wg.Go(func() {
			<-start
			for range 5 {
				got, err := p.Prune(ctx, "acme", cut)
				if err != nil {
					fail("Prune", err)
					return
				}
				pruned.Add(got.Runs)
				time.Sleep(2 * time.Millisecond)
			}
		})
	}
	for i := range runs {
		wg.Go(func() {
			<-start
			if err := writer.AppendEvents(ctx, "acme", name(i), batchOf("late", i, 2)); err != nil {
				fail("AppendEvents", err)
			}
			if err := writer.AppendEvents(ctx, "acme", "orphan-"+name(i), batchOf("orphan", i, 1)); err != nil {
				fail("AppendEvents", err)
			}
			// The quiet replica comes back and records s2.
			w := &store.StepWrite{Key: planexec.Key{Tenant: "acme", Digest: "k-s2-" + name(i)}, Epoch: 2, RunID: name(i), Outcome: json.RawMessage(`"late"`),
				Record: store.StepRecord{StepID: "s2", PlanID: "p1", Tool: "tool", Status: planexec.StepDone, Outcome: json.RawMessage(`"late"`), Key: "k-s2-" + name(i), Finished: time.Now()},
				Events: batchOf("zombie", i, 1)}
			if err := writer.CompleteStep(ctx, w); err != nil && !errors.Is(err, store.ErrNoRecord) {
				fail("CompleteStep", err)
			}
			switch {
			case i < 10:
				if err := writer.Forget(ctx, "acme", name(i)); err != nil {
					fail("Forget", err)
				}
			case i >= 50:
				rec := record("acme", name(i), plan("p2", "s1"), time.Now())
				if err := writer.SavePlan(ctx, rec); err != nil { // running again
					fail("SavePlan", err)
				}
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}
	if n := pruned.Load(); n < 40 || n > runs {
		t.Errorf("the Prunes dropped %d runs in all; want each of the 40 runs nobody else dropped or saved again, and no run twice", n)
	}
	// What the writers left after the Prunes is dropped by one more.
	if _, err := pruners[0].Prune(ctx, "acme", cut); err != nil {
		t.Fatal(err)
	}
	for what, sql := range map[string]string{
		"plans that are not running":      "SELECT count(*) FROM plans WHERE tenant = 'acme' AND status <> 'running'",
		"histories of runs with no plan":  "SELECT count(*) FROM histories h WHERE tenant = 'acme' AND NOT EXISTS (SELECT 1 FROM plans p WHERE p.tenant = h.tenant AND p.run_id = h.run_id)",
		"events of no history":            "SELECT count(*) FROM events e WHERE tenant = 'acme' AND NOT EXISTS (SELECT 1 FROM histories h WHERE h.tenant = e.tenant AND h.run_id = e.run_id)",
		"settled claims of runs not kept": "SELECT count(*) FROM claims c WHERE tenant = 'acme' AND state <> 'acquired' AND NOT EXISTS (SELECT 1 FROM plans p WHERE p.tenant = c.tenant AND p.run_id = c.run_id)",
	} {
		if n := count(t, schema, sql); n != 0 {
			t.Errorf("%d %s are left", n, what)
		}
	}
	if n := count(t, schema, "SELECT count(*) FROM plans WHERE tenant = 'acme' AND status = 'running'"); n != 10 {
		t.Errorf("%d runs saved again as running are left, want all 10", n)
	}
	if after := globex(); after != before {
		t.Errorf("another tenant's rows (plans, steps, claims, histories, events) went from %v to %v", before, after)
	}
}

// Prune leaves alone the rows a newer version of this package wrote, and
// counts exactly what it drops.
func TestPruneLeavesRowsOfANewerVersionAlone(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, schema := newStore(t)
	old := time.Now().Add(-time.Hour)
	for _, run := range []string{"mine", "newer"} {
		rec := record("acme", run, plan("p1", "s1"), old)
		rec.Status = store.RunFailed
		if err := s.SavePlan(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	for _, key := range []string{"k-mine", "k-newer"} {
		c, err := s.Claim(ctx, store.ClaimRequest{Key: planexec.Key{Tenant: "acme", Digest: key}, RunID: "gone", StepID: "s1", Tool: "t", Holder: "h", Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Complete(ctx, planexec.Key{Tenant: "acme", Digest: key}, c.Epoch, json.RawMessage(`1`)); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"d-mine", "d-newer"} {
		if err := s.SaveDecision(ctx, "acme", planexec.Decision{RequestID: id, Status: planexec.Approved, Approver: "ana", DecidedAt: old}); err != nil {
			t.Fatal(err)
		}
	}
	sqlExec(t, schema, "UPDATE plans SET version = 99 WHERE run_id = 'newer'")
	sqlExec(t, schema, "UPDATE claims SET version = 99 WHERE key = 'k-newer'")
	sqlExec(t, schema, "UPDATE approvals SET version = 99 WHERE record_id = 'd-newer'")
	got, err := s.Prune(ctx, "acme", time.Now().Add(time.Hour))
	if want := (store.Pruned{Runs: 1, Claims: 1, Decisions: 1}); err != nil || got != want {
		t.Errorf("Prune = %+v, %v; want %+v", got, err, want)
	}
	for table, cond := range map[string]string{"plans": "run_id = 'newer'", "claims": "key = 'k-newer'", "approvals": "record_id = 'd-newer'"} {
		if n := count(t, schema, "SELECT count(*) FROM "+table+" WHERE "+cond); n != 1 {
			t.Errorf("the %s row a newer version wrote was dropped", table)
		}
	}
}

// Prune takes a run's locks in the order a step's write takes them: its
// step row, then its histories row. A writer that holds the step row (as a
// step's write does, before it appends the step's events) while Prune drops
// the run: Prune waits for the row, and the writer still appends to the
// run's history, which Prune has not locked. In the other order each would
// wait for the other, and PostgreSQL would fail one of them. The event the
// writer appended is dropped with the rest of the history.
func TestPruneTakesLocksInTheOrderAStepsWriteDoes(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, schema := newStore(t)
	old := time.Now().Add(-time.Hour)
	rec := record("acme", "run-1", plan("p1", "s1"), old)
	rec.Status = store.RunCompleted
	if err := s.SavePlan(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if err := completeStep(ctx, s, "acme", "run-1", "s1", "k-s1", batchOf("step", 0, 2)); err != nil {
		t.Fatal(err)
	}
	pool := sharedPool(t)
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	q := func(table string) string { return pgx.Identifier{schema, table}.Sanitize() }
	if _, err := tx.Exec(ctx, "UPDATE "+q("steps")+" SET record = record WHERE tenant = 'acme' AND run_id = 'run-1' AND step_id = 's1'"); err != nil {
		t.Fatal(err)
	}
	type result struct {
		p   store.Pruned
		err error
	}
	done := make(chan result, 1)
	go func() {
		p, err := s.Prune(ctx, "acme", time.Now().Add(time.Hour))
		done <- result{p, err}
	}()
	waitForPrune(t, schema, "steps")
	actx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err = tx.Exec(actx, "INSERT INTO "+q("histories")+` AS h (tenant, run_id, last_seq, updated) VALUES ('acme', 'run-1', 1, now())
		ON CONFLICT (tenant, run_id) DO UPDATE SET last_seq = h.last_seq + 1, updated = now()`)
	if err != nil {
		t.Fatalf("the writer holding the step row could not go on to the run's history: %v", err)
	}
	if _, err := tx.Exec(ctx, "INSERT INTO "+q("events")+` (tenant, run_id, seq, event) VALUES ('acme', 'run-1', 3, '{}')`); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || r.p.Runs != 1 {
		t.Fatalf("Prune = %+v, %v; want the run dropped", r.p, r.err)
	}
	for _, table := range []string{"plans", "steps", "histories", "events"} {
		if n := count(t, schema, "SELECT count(*) FROM "+table); n != 0 {
			t.Errorf("%d %s rows left after Prune", n, table)
		}
	}
}

// An append to a run's history in flight as Prune drops the run: Prune
// waits for it, and drops the history whole, the appended events with it.
// None is left behind, numbered in a history that is gone.
func TestPruneDropsAHistoryWithTheEventsAppendedAsItPrunes(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, schema := newStore(t)
	rec := record("acme", "run-1", plan("p1", "s1"), time.Now().Add(-time.Hour))
	rec.Status = store.RunCompleted
	if err := s.SavePlan(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendEvents(ctx, "acme", "run-1", batchOf("run", 0, 2)); err != nil {
		t.Fatal(err)
	}
	pool := sharedPool(t)
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	// The append's statement: the counter moved on, the event written.
	if _, err := tx.Exec(ctx, "SET LOCAL search_path TO "+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `WITH c AS (UPDATE histories SET last_seq = last_seq + 1, updated = now() WHERE tenant = 'acme' AND run_id = 'run-1' RETURNING last_seq)
		INSERT INTO events (tenant, run_id, seq, event) SELECT 'acme', 'run-1', last_seq, '{}' FROM c`); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		p, err := s.Prune(ctx, "acme", time.Now().Add(time.Hour))
		if err == nil && p.Runs != 1 {
			err = fmt.Errorf("Prune = %+v, want the run dropped", p)
		}
		done <- err
	}()
	waitForPrune(t, schema, "histories")
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"histories", "events"} {
		if n := count(t, schema, "SELECT count(*) FROM "+table); n != 0 {
			t.Errorf("%d %s rows left after Prune", n, table)
		}
	}
}

// waitForPrune returns once a statement of the store in schema on table
// waits for a lock.
func waitForPrune(t *testing.T, schema, table string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; {
		var waiting bool
		err := sharedPool(t).QueryRow(t.Context(), `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND strpos(query, $1) > 0)`, pgx.Identifier{schema}.Sanitize()+"."+table+" ").Scan(&waiting)
		if err != nil {
			t.Fatal(err)
		}
		if waiting {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Prune never waited for a row of %s", table)
		}
		time.Sleep(time.Millisecond)
	}
}

// With WithClock, a claim and a history are stamped by the store's clock,
// and Prune compares those times with its cut: here the clock is years
// ahead of the database's, and what was written a moment ago by it is
// kept. A key taken again is marked by its last taker: once per tenant
// now, it is kept however old.
func TestPruneJudgesClaimsAndHistoriesByTheStoresClock(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	var (
		mu  sync.Mutex
		now = time.Date(2040, 1, 1, 0, 0, 0, 0, time.UTC)
	)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	s, _ := newStore(t, postgres.WithClock(clock))
	claim := func(digest string, perTenant bool, complete bool) {
		t.Helper()
		key := planexec.Key{Tenant: "acme", Digest: digest}
		c, err := s.Claim(ctx, store.ClaimRequest{Key: key, RunID: "gone", StepID: "s1", Tool: "t", Holder: "h", Lease: time.Minute, PerTenant: perTenant})
		if err != nil || c.State != store.ClaimAcquired {
			t.Fatalf("Claim: %+v, %v", c, err)
		}
		if complete {
			err = s.Complete(ctx, key, c.Epoch, json.RawMessage(`1`))
		} else {
			err = s.Release(ctx, key, c.Epoch, false)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	claim("k-run", false, true)
	claim("k-tenant", false, false)
	claim("k-tenant", true, true) // taken again, once per tenant
	if err := s.AppendEvents(ctx, "acme", "gone", batchOf("h", 0, 1)); err != nil {
		t.Fatal(err)
	}
	cut := clock().Add(-time.Hour)
	if got, err := s.Prune(ctx, "acme", cut); err != nil || got != (store.Pruned{}) {
		t.Errorf("Prune before what the clock stamped = %+v, %v; want nothing dropped", got, err)
	}
	mu.Lock()
	now = now.Add(2 * time.Hour)
	mu.Unlock()
	if got, err := s.Prune(ctx, "acme", clock().Add(-time.Hour)); err != nil || got != (store.Pruned{Histories: 1, Claims: 1}) {
		t.Errorf("Prune after = %+v, %v; want the history and the claim once per run", got, err)
	}
	c, err := s.Claim(ctx, store.ClaimRequest{Key: planexec.Key{Tenant: "acme", Digest: "k-tenant"}, RunID: "again", StepID: "s1", Tool: "t", Holder: "h", Lease: time.Minute})
	if err != nil || c.State != store.ClaimCompleted {
		t.Errorf("the claim once per tenant after Prune: %+v, %v; want it completed", c, err)
	}
}
