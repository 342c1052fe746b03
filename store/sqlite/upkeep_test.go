package sqlite_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/store"
	"github.com/planexec/planexec/store/sqlite"
	"github.com/planexec/planexec/storetest"
)

// ---- recovery ----

// A run's holder and lease are columns of its row, NULL when it has none,
// and read back to the nanosecond.
func TestAHolderAndLeaseAreColumnsNULLWhenNone(t *testing.T) {
	ctx := context.Background()
	s, path := openNew(t)
	rec := saveSample(t, s, "acme", "run-1", "p1")
	rec.Holder, rec.LeaseExpires = "worker-1/7", time.Date(2030, time.March, 4, 9, 1, 0, 987654321, time.UTC)
	if err := s.SavePlan(ctx, rec); err != nil {
		t.Fatal(err)
	}
	db := rawDB(t, path)
	var (
		holder *string
		lease  *int64
	)
	if err := db.QueryRow(`SELECT holder, lease_expires FROM plans WHERE run_id = 'run-1'`).Scan(&holder, &lease); err != nil {
		t.Fatal(err)
	}
	if holder == nil || *holder != rec.Holder || lease == nil || *lease != rec.LeaseExpires.UnixNano() {
		t.Errorf("holder %v, lease %v in the row; want %q, %d", holder, lease, rec.Holder, rec.LeaseExpires.UnixNano())
	}
	got, err := s.LoadPlan(ctx, "acme", "run-1")
	if err != nil || got.Holder != rec.Holder || !got.LeaseExpires.Equal(rec.LeaseExpires) {
		t.Errorf("LoadPlan: holder %q, lease %v (%v); want %q, %v", got.Holder, got.LeaseExpires, err, rec.Holder, rec.LeaseExpires)
	}
	// The holder finishes the run: a save with no lease lets it go, and no
	// holder is kept.
	rec.Status, rec.LeaseExpires = store.RunCompleted, time.Time{}
	if err := s.SavePlan(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(`SELECT holder, lease_expires FROM plans WHERE run_id = 'run-1'`).Scan(&holder, &lease); err != nil {
		t.Fatal(err)
	}
	if holder != nil || lease != nil {
		t.Errorf("a finished run has holder %v, lease %v in its row; want NULL", holder, lease)
	}
	if got, err := s.LoadPlan(ctx, "acme", "run-1"); err != nil || got.Holder != "" || !got.LeaseExpires.IsZero() {
		t.Errorf("LoadPlan: holder %q, lease %v (%v); want none", got.Holder, got.LeaseExpires, err)
	}
}

// Stalled lists every tenant's stalled runs by tenant, then run id, up to
// the limit: interrupted runs, running runs whose lease ran out, and
// running runs with no lease at all (saved so, or before schema 3).
func TestStalledListsEveryTenantsRunsInOrder(t *testing.T) {
	ctx := context.Background()
	s, _ := openNew(t)
	now := time.Date(2030, time.March, 4, 9, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		tenant, run string
		status      store.RunStatus
		lease       time.Time
	}{
		{"globex", "b", store.RunInterrupted, time.Time{}},
		{"acme", "z", store.RunRunning, now},                      // ran out at now exactly
		{"acme", "a", store.RunRunning, time.Time{}},              // no lease
		{"acme", "m", store.RunRunning, now.Add(time.Nanosecond)}, // live
		{"globex", "a", store.RunInDoubt, time.Time{}},
		{"acme", "c", store.RunInterrupted, time.Time{}},
		{"acme", "d", store.RunFailed, time.Time{}},
	} {
		rec := listedRecord(t, c.tenant, c.run, c.status, now)
		if !c.lease.IsZero() {
			rec.Holder, rec.LeaseExpires = "h", c.lease
		}
		if err := s.SavePlan(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	want := []store.RunRef{{Tenant: "acme", RunID: "a"}, {Tenant: "acme", RunID: "c"}, {Tenant: "acme", RunID: "z"}, {Tenant: "globex", RunID: "b"}}
	for limit := range len(want) + 2 {
		got, err := s.Stalled(ctx, now, limit)
		if n := min(limit, len(want)); err != nil || fmt.Sprint(got) != fmt.Sprint(want[:n]) {
			t.Errorf("Stalled(limit %d) = %v, %v; want %v", limit, got, err, want[:n])
		}
	}
}

// TakeRun puts the run's new status in its document too, so that the
// document and the row agree, and keeps the plan byte for byte. A run it
// took is not taken again until its lease runs out.
func TestTakeRunPutsTheStatusInTheDocumentAndKeepsThePlanByteForByte(t *testing.T) {
	ctx := context.Background()
	s, path := openNew(t)
	rec := saveSample(t, s, "acme", "run-1", "p1")
	rec.Status = store.RunInterrupted
	if err := s.SavePlan(ctx, rec); err != nil {
		t.Fatal(err)
	}
	ref := store.RunRef{Tenant: "acme", RunID: "run-1"}
	now := rec.Updated.Add(time.Hour)
	if took, err := s.TakeRun(ctx, ref, "replica-1", now, time.Minute); err != nil || !took {
		t.Fatalf("TakeRun = %v, %v; want taken", took, err)
	}
	var doc, status string
	if err := rawDB(t, path).QueryRow(`SELECT record, status FROM plans WHERE run_id = 'run-1'`).Scan(&doc, &status); err != nil {
		t.Fatal(err)
	}
	if status != "running" || !strings.HasSuffix(doc, `"status":"running"}`) {
		t.Errorf("after TakeRun the row's status is %q and its document ends %q; want running in both", status, doc[max(0, len(doc)-40):])
	}
	got, err := s.LoadPlan(ctx, "acme", "run-1")
	if err != nil || got.Status != store.RunRunning || got.Holder != "replica-1" || !got.LeaseExpires.Equal(now.Add(time.Minute)) {
		t.Fatalf("LoadPlan after TakeRun = %+v, %v", got, err)
	}
	if !bytes.Equal(got.Plan, rec.Plan) {
		t.Errorf("the plan after TakeRun:\n%s\nwant, byte for byte:\n%s", got.Plan, rec.Plan)
	}
	if took, err := s.TakeRun(ctx, ref, "replica-2", now.Add(time.Minute-time.Nanosecond), time.Minute); err != nil || took {
		t.Errorf("TakeRun of a run whose lease holds = %v, %v; want not taken", took, err)
	}
	if took, err := s.TakeRun(ctx, ref, "replica-2", now.Add(time.Minute), time.Minute); err != nil || !took {
		t.Errorf("TakeRun of a run whose lease ran out = %v, %v; want taken", took, err)
	}
	if took, err := s.TakeRun(ctx, store.RunRef{Tenant: "globex", RunID: "run-1"}, "replica-3", now.Add(time.Hour), time.Minute); err != nil || took {
		t.Errorf("TakeRun of another tenant's run = %v, %v; want not taken", took, err)
	}
}

// A run whose row a newer version of the package wrote is neither listed
// as stalled nor taken: this package could not resume it.
func TestARunOfANewerLayoutIsNeitherStalledNorTaken(t *testing.T) {
	ctx := context.Background()
	s, path := openNew(t)
	rec := saveSample(t, s, "acme", "run-1", "p1")
	rec.Status = store.RunInterrupted
	if err := s.SavePlan(ctx, rec); err != nil {
		t.Fatal(err)
	}
	mustExec(t, rawDB(t, path), `UPDATE plans SET version = 2 WHERE run_id = 'run-1'`)
	now := rec.Updated.Add(time.Hour)
	if got, err := s.Stalled(ctx, now, 10); err != nil || len(got) != 0 {
		t.Errorf("Stalled = %v, %v; want none", got, err)
	}
	if took, err := s.TakeRun(ctx, store.RunRef{Tenant: "acme", RunID: "run-1"}, "h", now, time.Minute); err != nil || took {
		t.Errorf("TakeRun = %v, %v; want not taken", took, err)
	}
}

// Only the holder of a running run moves its lease on; a run that is not
// running is nobody's.
func TestExtendRunIsTheRunningHoldersOnly(t *testing.T) {
	ctx := context.Background()
	s, _ := openNew(t)
	rec := saveSample(t, s, "acme", "run-1", "p1")
	rec.Holder, rec.LeaseExpires = "h1", rec.Updated.Add(time.Minute)
	if err := s.SavePlan(ctx, rec); err != nil {
		t.Fatal(err)
	}
	ref := store.RunRef{Tenant: "acme", RunID: "run-1"}
	later := rec.Updated.Add(time.Hour)
	if err := s.ExtendRun(ctx, ref, "h1", later); err != nil {
		t.Fatalf("ExtendRun by the holder: %v", err)
	}
	if got, _ := s.LoadPlan(ctx, "acme", "run-1"); !got.LeaseExpires.Equal(later) {
		t.Errorf("the lease after ExtendRun = %v, want %v", got.LeaseExpires, later)
	}
	for _, c := range []struct {
		name   string
		ref    store.RunRef
		holder string
		want   error
	}{
		{"another holder", ref, "h2", store.ErrFenced},
		{"no holder", ref, "", store.ErrFenced},
		{"another tenant", store.RunRef{Tenant: "globex", RunID: "run-1"}, "h1", store.ErrNoRecord},
		{"no run", store.RunRef{Tenant: "acme", RunID: "nope"}, "h1", store.ErrNoRecord},
	} {
		if err := s.ExtendRun(ctx, c.ref, c.holder, later.Add(time.Hour)); !errors.Is(err, c.want) {
			t.Errorf("ExtendRun by %s = %v, want %v", c.name, err, c.want)
		}
	}
	rec.Status = store.RunInterrupted // stopped; its holder is kept, but it no longer runs
	if err := s.SavePlan(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if err := s.ExtendRun(ctx, ref, "h1", later.Add(time.Hour)); !errors.Is(err, store.ErrFenced) {
		t.Errorf("ExtendRun of a run that stopped = %v, want ErrFenced", err)
	}
}

// ---- ceilings ----

// Amounts are summed as exact decimals, kept as their text: 0.1 and 0.2
// make 0.3 exactly (in floating point they would make more, and the
// second spend would be refused), and a spend of 10⁻¹⁸ more is refused.
func TestSpendsAreSummedAsExactDecimals(t *testing.T) {
	ctx := context.Background()
	s, path := openNew(t)
	d := decimal.RequireFromString
	at := time.Date(2030, time.March, 4, 9, 0, 0, 0, time.UTC)
	spend := func(key, amount string) error {
		return s.Spend(ctx, store.Spend{Tenant: "acme", Grant: "g", Key: key, Amount: d(amount), At: at}, time.Hour, d("0.3"))
	}
	for _, c := range []struct {
		key, amount string
		want        error
	}{{"k1", "0.1", nil}, {"k2", "0.2", nil}, {"k3", "0.000000000000000001", store.ErrCeiling}, {"k4", "0", nil}} {
		if err := spend(c.key, c.amount); !errors.Is(err, c.want) {
			t.Errorf("Spend of %s = %v, want %v", c.amount, err, c.want)
		}
	}
	if got, err := s.Spent(ctx, "g", at, time.Hour, nil); err != nil || got.String() != "0.3" {
		t.Errorf("Spent = %s, %v; want exactly 0.3", got, err)
	}
	big := "12345678901234567890.123456789012345678"
	if err := s.Spend(ctx, store.Spend{Tenant: "acme", Grant: "g-big", Key: "k", Amount: d(big), At: at}, time.Hour, d(big)); err != nil {
		t.Fatal(err)
	}
	var text string
	if err := rawDB(t, path).QueryRow(`SELECT amount FROM spends WHERE grant_id = 'g-big'`).Scan(&text); err != nil || text != big {
		t.Errorf("the amount is kept as %q (%v), want %q", text, err, big)
	}
	if got, _ := s.Spent(ctx, "g-big", at, time.Hour, nil); got.String() != big {
		t.Errorf("Spent = %s, want %s", got, big)
	}
}

// A spend's window is (at-window, at]: a spend at its start is out, one at
// its end in, and one after at is not counted yet.
func TestASpendsWindowIsOpenAtItsStartAndCountsLaterSpends(t *testing.T) {
	ctx := context.Background()
	s, _ := openNew(t)
	at := time.Date(2030, time.March, 4, 9, 0, 0, 0, time.UTC)
	for i, when := range []time.Time{at.Add(-time.Hour), at.Add(-time.Hour + time.Nanosecond), at, at.Add(time.Nanosecond)} {
		sp := store.Spend{Tenant: "acme", Grant: "g", Key: fmt.Sprint("k", i), Amount: decimal.New(1, int32(i)), At: when}
		if err := s.Spend(ctx, sp, time.Hour, decimal.New(1, 9)); err != nil {
			t.Fatal(err)
		}
	}
	// The spend at the window's start is out; one recorded after at (a
	// replica whose clock runs ahead) is in.
	if got, err := s.Spent(ctx, "g", at, time.Hour, nil); err != nil || !got.Equal(decimal.New(1110, 0)) {
		t.Errorf("Spent = %s, %v; want 1110 (every spend after the window's start)", got, err)
	}
}

// An amount that is not a decimal is damage: Spend and Spent refuse it,
// and Spend records nothing.
func TestADamagedSpendIsReportedCorrupt(t *testing.T) {
	ctx := context.Background()
	s, path := openNew(t)
	at := time.Date(2030, time.March, 4, 9, 0, 0, 0, time.UTC)
	one := decimal.NewFromInt(1)
	if err := s.Spend(ctx, store.Spend{Tenant: "acme", Grant: "g", Key: "k1", Amount: one, At: at}, time.Hour, decimal.NewFromInt(10)); err != nil {
		t.Fatal(err)
	}
	db := rawDB(t, path)
	mustExec(t, db, `UPDATE spends SET amount = 'one' WHERE key = 'k1'`)
	err := s.Spend(ctx, store.Spend{Tenant: "acme", Grant: "g", Key: "k2", Amount: one, At: at}, time.Hour, decimal.NewFromInt(10))
	wantStoreError(t, err, "spend", store.ErrCorruptRecord)
	_, err = s.Spent(ctx, "g", at, time.Hour, nil)
	wantStoreError(t, err, "spent", store.ErrCorruptRecord)
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM spends`).Scan(&n); err != nil || n != 1 {
		t.Errorf("%d spends recorded (%v), want the one", n, err)
	}
}

// ---- pruning ----

// Claims say whether their effect is once per tenant and when they were
// last written, by the store's clock, at every write.
func TestClaimsRecordTheirKindAndWhenTheyWereWritten(t *testing.T) {
	ctx := context.Background()
	clk := storetest.NewClock()
	s, path := openNew(t, sqlite.WithClock(clk.Now))
	db := rawDB(t, path)
	row := func(key string) (perTenant int, written int64) {
		t.Helper()
		if err := db.QueryRow(`SELECT per_tenant, written FROM claims WHERE key = ?`, key).Scan(&perTenant, &written); err != nil {
			t.Fatal(err)
		}
		return perTenant, written
	}
	key := func(digest string) planexec.Key { return planexec.Key{Tenant: "acme", Digest: digest} }
	claim := func(digest string, perTenant bool) store.Claim {
		t.Helper()
		c, err := s.Claim(ctx, store.ClaimRequest{Key: key(digest), RunID: "run-1", Holder: "h", Lease: time.Minute, TakeOver: true, PerTenant: perTenant})
		if err != nil || c.State != store.ClaimAcquired {
			t.Fatalf("Claim %s = %+v, %v", digest, c, err)
		}
		return c
	}
	once := claim("k-once", true)
	perRun := claim("k-run", false)
	if p, w := row("k-once"); p != 1 || w != clk.Now().UnixNano() {
		t.Errorf("a claim once per tenant: per_tenant %d, written %d; want 1, %d", p, w, clk.Now().UnixNano())
	}
	if p, _ := row("k-run"); p != 0 {
		t.Errorf("a claim once per run: per_tenant %d, want 0", p)
	}
	for _, write := range []struct {
		name, key string
		do        func() error
	}{
		{"Extend", "k-run", func() error { return s.Extend(ctx, key("k-run"), perRun.Epoch, time.Minute) }},
		{"Release", "k-run", func() error { return s.Release(ctx, key("k-run"), perRun.Epoch, false) }},
		{"Claim again", "k-run", func() error { perRun = claim("k-run", false); return nil }},
		{"Complete", "k-run", func() error { return s.Complete(ctx, key("k-run"), perRun.Epoch, json.RawMessage(`1`)) }},
		{"Release in doubt", "k-once", func() error { return s.Release(ctx, key("k-once"), once.Epoch, true) }},
		{"Resolve", "k-once", func() error { return s.Resolve(ctx, key("k-once"), "run-1", store.Resolution{}) }},
	} {
		clk.Advance(time.Second)
		if err := write.do(); err != nil {
			t.Fatalf("%s: %v", write.name, err)
		}
		if _, w := row(write.key); w != clk.Now().UnixNano() {
			t.Errorf("after %s the claim was written at %d, want %d", write.name, w, clk.Now().UnixNano())
		}
	}
	// A step write writes its claim too.
	saveSample(t, s, "acme", "run-1", "p1")
	c := claim("k-step", false)
	clk.Advance(time.Second)
	if err := s.CompleteStep(ctx, &store.StepWrite{Key: key("k-step"), Epoch: c.Epoch, RunID: "run-1", Record: stepRec("s1", "p1")}); err != nil {
		t.Fatal(err)
	}
	if _, w := row("k-step"); w != clk.Now().UnixNano() {
		t.Errorf("after CompleteStep the claim was written at %d, want %d", w, clk.Now().UnixNano())
	}
}

// counts is how many rows of each table a tenant has.
func counts(t *testing.T, db interface {
	QueryRow(string, ...any) *sql.Row
}, tenant string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, table := range []string{"plans", "steps", "events", "claims", "approvals", "spends"} {
		var n int
		if err := db.QueryRow(`SELECT count(*) FROM `+table+` WHERE tenant = ?`, tenant).Scan(&n); err != nil {
			t.Fatal(err)
		}
		out[table] = n
	}
	return out
}

// Prune drops what the tenant finished before the cut, and counts exactly
// what it dropped: finished runs (one never updated among them) with their
// steps and events, a history with no run whose last event is old (not one
// whose first only is), claims of effects once per run that are settled
// and whose run is gone (among them the claims of the runs it drops in
// the same call), old decisions and spends. Another tenant's rows, which
// are as old, stay every one; so does what may still be needed. A second
// Prune finds nothing more.
func TestPruneDropsOneTenantsFinishedRowsAndCountsThemExactly(t *testing.T) {
	ctx := context.Background()
	clk := storetest.NewClock()
	s, path := openNew(t, sqlite.WithClock(clk.Now))
	db := rawDB(t, path)
	d := decimal.RequireFromString
	populate := func(tenant string, old bool) {
		t.Helper()
		suffix := ""
		if !old {
			suffix = "-new"
		}
		runs := []struct {
			id     string
			status store.RunStatus
		}{{"done-1", store.RunCompleted}, {"done-2", store.RunCompleted}, {"failed", store.RunFailed},
			{"running", store.RunRunning}, {"waiting", store.RunAwaitingApproval}, {"doubt", store.RunInDoubt}, {"stopped", store.RunInterrupted}}
		for _, r := range runs {
			run := r.id + suffix
			rec := listedRecord(t, tenant, run, r.status, clk.Now())
			if err := s.SavePlan(ctx, rec); err != nil {
				t.Fatal(err)
			}
			for _, step := range []string{"s1", "s2"} {
				key := planexec.Key{Tenant: tenant, Digest: run + "/" + step}
				c, err := s.Claim(ctx, store.ClaimRequest{Key: key, RunID: run, StepID: step, Tool: "notify", Holder: "h", Lease: time.Minute})
				if err != nil {
					t.Fatal(err)
				}
				st := stepRec(step, rec.PlanID)
				st.Finished = clk.Now()
				if err := s.CompleteStep(ctx, &store.StepWrite{Key: key, Epoch: c.Epoch, RunID: run, Record: st, Outcome: json.RawMessage(`{}`),
					Events: []json.RawMessage{json.RawMessage(`{"kind":"STEP_STARTED"}`), json.RawMessage(`{"kind":"STEP_EXECUTED"}`)}}); err != nil {
					t.Fatal(err)
				}
			}
		}
		// A run never updated (the zero time) that completed: as old as a
		// run can be.
		if old {
			if err := s.SavePlan(ctx, listedRecord(t, tenant, "never-updated", store.RunCompleted, time.Time{})); err != nil {
				t.Fatal(err)
			}
		}
		// A history with no run, and one with no run whose last event comes
		// after the cut (appended below).
		for _, run := range []string{"refused", "refused-late"} {
			if err := s.AppendEvents(ctx, tenant, run+suffix, []json.RawMessage{json.RawMessage(`{"kind":"PLAN_REFUSED"}`)}); err != nil {
				t.Fatal(err)
			}
		}
		// Claims with no run: settled once per run, once per tenant, in
		// flight past its lease, in doubt.
		for _, c := range []struct {
			key       string
			perTenant bool
			end       func(key planexec.Key, epoch int64) error
		}{
			{"free", false, func(k planexec.Key, e int64) error { return s.Release(ctx, k, e, false) }},
			{"completed", false, func(k planexec.Key, e int64) error { return s.Complete(ctx, k, e, json.RawMessage(`1`)) }},
			{"once-per-tenant", true, func(k planexec.Key, e int64) error { return s.Complete(ctx, k, e, json.RawMessage(`1`)) }},
			{"in-flight", false, func(planexec.Key, int64) error { return nil }},
			{"in-doubt", false, func(k planexec.Key, e int64) error { return s.Release(ctx, k, e, true) }},
		} {
			key := planexec.Key{Tenant: tenant, Digest: c.key + suffix}
			got, err := s.Claim(ctx, store.ClaimRequest{Key: key, RunID: "gone" + suffix, Holder: "h", Lease: time.Minute, PerTenant: c.perTenant})
			if err != nil {
				t.Fatal(err)
			}
			if err := c.end(key, got.Epoch); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.SaveDecision(ctx, tenant, planexec.Decision{RequestID: "r" + suffix, Status: planexec.Approved, Approver: "ana", DecidedAt: clk.Now()}); err != nil {
			t.Fatal(err)
		}
		// Both tenants spend against one grant.
		if err := s.Spend(ctx, store.Spend{Tenant: tenant, Grant: "g", Key: tenant + suffix, Amount: d("1.50"), At: clk.Now()}, time.Hour, d("100")); err != nil {
			t.Fatal(err)
		}
	}
	populate("acme", true)
	populate("globex", true)
	clk.Advance(time.Hour)
	cut := clk.Now()
	clk.Advance(time.Hour)
	for _, tenant := range []string{"acme", "globex"} {
		if err := s.AppendEvents(ctx, tenant, "refused-late", []json.RawMessage{json.RawMessage(`{"kind":"LATE"}`)}); err != nil {
			t.Fatal(err)
		}
	}
	populate("acme", false)
	acme, globex := counts(t, db, "acme"), counts(t, db, "globex")

	got, err := s.Prune(ctx, "acme", cut)
	if err != nil {
		t.Fatalf("Prune: %v", err)
	}
	// Runs: done-1, done-2, failed, never-updated. Claims: the six of
	// those runs' steps, and the free and the completed ones of no run.
	want := store.Pruned{Runs: 4, Histories: 1, Claims: 8, Decisions: 1, Spends: 1}
	if got != want {
		t.Errorf("Prune = %+v, want %+v", got, want)
	}
	// Each dropped run had two steps and four events.
	wantLeft := map[string]int{"plans": acme["plans"] - 4, "steps": acme["steps"] - 6, "events": acme["events"] - 12 - 1,
		"claims": acme["claims"] - 8, "approvals": acme["approvals"] - 1, "spends": acme["spends"] - 1}
	if left := counts(t, db, "acme"); fmt.Sprint(left) != fmt.Sprint(wantLeft) {
		t.Errorf("acme's rows after Prune: %v, want %v", left, wantLeft)
	}
	if left := counts(t, db, "globex"); fmt.Sprint(left) != fmt.Sprint(globex) {
		t.Errorf("globex's rows after acme's Prune: %v, want them all: %v", left, globex)
	}
	for _, run := range []string{"done-1", "done-2", "failed", "never-updated"} {
		if _, err := s.LoadPlan(ctx, "acme", run); !errors.Is(err, store.ErrNoRecord) {
			t.Errorf("run %s after Prune: %v, want ErrNoRecord", run, err)
		}
	}
	for _, run := range []string{"running", "waiting", "doubt", "stopped", "done-1-new"} {
		if got, err := s.LoadPlan(ctx, "acme", run); err != nil || len(got.Steps) != 2 {
			t.Errorf("run %s after Prune: %v", run, err)
		}
	}
	if evs, err := s.Events(ctx, "acme", "refused-late", 0, 10); err != nil || len(evs) != 2 {
		t.Errorf("the history whose last event is after the cut: %d events, %v; want both", len(evs), err)
	}
	var keys []string
	rows, err := db.Query(`SELECT key FROM claims WHERE tenant = 'acme' AND key NOT LIKE '%-new' AND key NOT LIKE '%-new/%' ORDER BY key`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	wantKeys := "[doubt/s1 doubt/s2 in-doubt in-flight once-per-tenant running/s1 running/s2 stopped/s1 stopped/s2 waiting/s1 waiting/s2]"
	if fmt.Sprint(keys) != wantKeys {
		t.Errorf("acme's old claims left: %v, want %s", keys, wantKeys)
	}
	if again, err := s.Prune(ctx, "acme", cut); err != nil || again != (store.Pruned{}) {
		t.Errorf("Prune again = %+v, %v; want nothing", again, err)
	}
}

// A key whose row Prune deleted between Claim's insert, which met the row,
// and its transaction is a key nobody claimed: it is taken from epoch 1,
// not reported as an error.
func TestAClaimWhoseRowWasPrunedMeanwhileIsTakenAfresh(t *testing.T) {
	ctx := context.Background()
	clk := storetest.NewClock()
	s, _ := openNew(t, sqlite.WithClock(clk.Now))
	req := store.ClaimRequest{Key: planexec.Key{Tenant: "acme", Digest: "k"}, RunID: "gone", Holder: "h", Lease: time.Minute}
	for range 3 { // epoch 3
		c, err := s.Claim(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Release(ctx, req.Key, c.Epoch, false); err != nil {
			t.Fatal(err)
		}
	}
	clk.Advance(time.Hour)
	if p, err := s.Prune(ctx, "acme", clk.Now()); err != nil || p.Claims != 1 {
		t.Fatalf("Prune = %+v, %v; want the claim dropped", p, err)
	}
	c, err := s.ClaimFromRow(ctx, req)
	if err != nil || c.State != store.ClaimAcquired || c.Epoch != 1 {
		t.Fatalf("Claim of a key whose row went away = %+v, %v; want acquired under epoch 1", c, err)
	}
	if again, err := s.Claim(ctx, req); err != nil || again.State != store.ClaimHeld {
		t.Errorf("Claim after it = %+v, %v; want held", again, err)
	}
}

// Each statement of ceilings, recovery and pruning reads the index made
// for it, never a whole table and never through a sort: a window is a
// range of spends_window, the stalled runs a walk of the partial index
// plans_unfinished in their order, a prune ranges of indexes on its cut
// (or, for histories with no run, a seek per run of the events' primary
// key). So it is on a fresh file and after ANALYZE.
func TestUpkeepQueriesReadTheirIndexes(t *testing.T) {
	ctx := context.Background()
	s, path := openNew(t)
	at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	var recs []*store.PlanRecord
	for i := range 2000 {
		tenant := []string{"acme", "globex"}[i%2]
		run := fmt.Sprintf("run-%04d", i)
		recs = append(recs, listedRecord(t, tenant, run, store.RunStatuses[i%len(store.RunStatuses)], at.Add(time.Duration(i)*time.Second)))
		if err := s.AppendEvents(ctx, tenant, run, []json.RawMessage{json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
		if i%10 == 0 {
			if _, err := s.Claim(ctx, store.ClaimRequest{Key: planexec.Key{Tenant: tenant, Digest: run}, RunID: run, Holder: "h", Lease: time.Minute}); err != nil {
				t.Fatal(err)
			}
			if err := s.Spend(ctx, store.Spend{Tenant: tenant, Grant: "g", Key: run, Amount: decimal.NewFromInt(1), At: at}, time.Hour, decimal.NewFromInt(1e6)); err != nil {
				t.Fatal(err)
			}
			if err := s.SaveDecision(ctx, tenant, planexec.Decision{RequestID: run, Status: planexec.Approved, DecidedAt: at}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.SavePlans(ctx, recs); err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"sum a grant's window":       {"SEARCH spends USING COVERING INDEX spends_window (grant_id=? AND at>?)"},
		"stalled runs":               {"SCAN plans USING COVERING INDEX plans_unfinished"},
		"take a run":                 {"SEARCH plans USING PRIMARY KEY (tenant=? AND run_id=?)"},
		"drop finished runs' events": {"SEARCH events USING PRIMARY KEY (tenant=? AND run_id=?)", "SEARCH plans USING COVERING INDEX plans_listed_by_status (tenant=? AND status=? AND <expr><?)"},
		"drop finished runs' steps":  {"SEARCH steps USING PRIMARY KEY (tenant=? AND run_id=?)", "SEARCH plans USING COVERING INDEX plans_listed_by_status (tenant=? AND status=? AND <expr><?)"},
		"drop finished runs":         {"SEARCH plans USING PRIMARY KEY (tenant=? AND run_id=?)", "SEARCH plans USING COVERING INDEX plans_listed_by_status (tenant=? AND status=? AND <expr><?)"},
		"find histories with no run": {"SEARCH events USING PRIMARY KEY (tenant=?)", "SEARCH events USING PRIMARY KEY (tenant=? AND run_id>?)",
			"SEARCH plans USING PRIMARY KEY (tenant=? AND run_id=?)", "SEARCH events USING PRIMARY KEY (tenant=? AND run_id=?)"},
		"drop claims":    {"SEARCH claims USING INDEX claims_prunable (tenant=? AND written<?)", "SEARCH plans USING PRIMARY KEY (tenant=? AND run_id=?)"},
		"drop decisions": {"SEARCH approvals USING INDEX approvals_decided (tenant=? AND decided<?)"},
		"drop spends":    {"SEARCH spends USING INDEX spends_by_tenant (tenant=? AND at<?)"},
	}
	db := rawDB(t, path)
	for _, analyzed := range []bool{false, true} {
		if analyzed {
			mustExec(t, db, "ANALYZE")
		}
		for _, q := range sqlite.UpkeepQueries {
			plan := queryPlan(t, db, q.Query, q.Args...)
			t.Logf("analyzed %v, %s: %s", analyzed, q.Name, strings.Join(plan, "; "))
			var searches []string
			for _, step := range plan {
				switch {
				case step == "SCAN CONSTANT ROW", step == "SCAN runs": // the recursive walk's own rows
				case step == "SCAN plans USING COVERING INDEX plans_unfinished" && q.Name == "stalled runs":
					searches = append(searches, step)
				case strings.Contains(step, "TEMP B-TREE"), strings.HasPrefix(step, "SCAN"):
					t.Errorf("analyzed %v, %s: the plan %q sorts or scans", analyzed, q.Name, plan)
				case strings.HasPrefix(step, "SEARCH"):
					searches = append(searches, step)
				}
			}
			if fmt.Sprint(searches) != fmt.Sprint(want[q.Name]) {
				t.Errorf("analyzed %v, %s: the plan reads %q, want %q", analyzed, q.Name, searches, want[q.Name])
			}
		}
	}
}
