package postgres_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/store"
	"github.com/planexec/planexec/store/postgres"
)

var _ store.Store = (*postgres.Store)(nil)

func plan(id string, steps ...string) planexec.Plan {
	p := planexec.Plan{ID: id, Goal: "test", Revision: 1}
	for _, s := range steps {
		p.Steps = append(p.Steps, planexec.Step{ID: s, Tool: "tool", Arguments: json.RawMessage(`{"n":"` + s + `","amount":412.50}`)})
	}
	return p
}

// planDoc is p's JSON document, as a store is given it.
func planDoc(p planexec.Plan) json.RawMessage {
	doc, err := json.Marshal(p)
	if err != nil {
		panic(err) // the test plans are JSON
	}
	return doc
}

func record(tenant, run string, p planexec.Plan, created time.Time) *store.PlanRecord {
	d, _ := json.Marshal(planexec.Delegation{RunID: run, Tenant: tenant})
	return &store.PlanRecord{Version: store.RecordVersion, Tenant: tenant, RunID: run, PlanID: p.ID, Plan: planDoc(p),
		Status: store.RunRunning, Delegation: d, Created: created, Updated: created}
}

func done(id, planID string, at time.Time) store.StepRecord {
	return store.StepRecord{StepID: id, PlanID: planID, Tool: "tool", Status: planexec.StepDone,
		Outcome: json.RawMessage(`{"ok":true}`), Key: "key-" + id, Finished: at}
}

// sqlExec runs a statement in the store's schema, to do what the store never
// would.
func sqlExec(t *testing.T, schema, sql string, args ...any) {
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
	if _, err := tx.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestAPlanAndItsStepsComeBackAsTheyWereWritten(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	created := time.Date(2030, 1, 2, 3, 4, 5, 123456789, time.UTC)
	if err := s.SavePlan(ctx, record("acme", "run-1", plan("p1", "s1", "s2"), created)); err != nil {
		t.Fatal(err)
	}
	finished := created.Add(time.Minute + 7)
	first := done("s1", "p1", finished)
	first.Outcome = json.RawMessage(`{"zeta":1,"alpha":"a \u0000 b"}`) // key order and a NUL kept, as jsonb would not
	if err := s.SaveStep(ctx, "acme", "run-1", first); err != nil {
		t.Fatal(err)
	}
	// The same plan again (a status change) keeps its creation time and steps.
	again := record("acme", "run-1", plan("p1", "s1", "s2"), created.Add(time.Hour))
	again.Status = store.RunCompleted
	if err := s.SavePlan(ctx, again); err != nil {
		t.Fatal(err)
	}
	rec, err := s.LoadPlan(ctx, "acme", "run-1")
	if err != nil {
		t.Fatal(err)
	}
	if !rec.Created.Equal(created) || rec.Status != store.RunCompleted || rec.PlanID != "p1" {
		t.Fatalf("record = %+v", rec)
	}
	if !bytes.Equal(rec.Plan, again.Plan) {
		t.Fatalf("the plan came back as\n%s\nwant, byte for byte,\n%s", rec.Plan, again.Plan)
	}
	var p planexec.Plan
	if err := json.Unmarshal(rec.Plan, &p); err != nil || p.ID != "p1" || len(p.Steps) != 2 {
		t.Fatalf("the plan came back as %s: %v", rec.Plan, err)
	}
	if got := string(p.Steps[0].Arguments); got != `{"n":"s1","amount":412.50}` {
		t.Errorf("arguments came back as %s", got)
	}
	st, ok := rec.Steps["s1"]
	if !ok || len(rec.Steps) != 1 || st.Status != planexec.StepDone || string(st.Outcome) != string(first.Outcome) || !st.Finished.Equal(finished) {
		t.Fatalf("steps = %+v", rec.Steps)
	}
	if !rec.Updated.Equal(created.Add(time.Hour)) {
		t.Errorf("updated = %v, want the later of the plan's and its steps' times", rec.Updated)
	}

	// A new plan for the run drops the old plan's steps.
	next := record("acme", "run-1", plan("p2", "s1"), created)
	if err := s.SavePlan(ctx, next); err != nil {
		t.Fatal(err)
	}
	if rec, err = s.LoadPlan(ctx, "acme", "run-1"); err != nil || len(rec.Steps) != 0 || rec.PlanID != "p2" || !bytes.Equal(rec.Plan, next.Plan) {
		t.Fatalf("after a new plan: %+v, %v", rec, err)
	}

	if err := s.Forget(ctx, "acme", "run-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.LoadPlan(ctx, "acme", "run-1"); !errors.Is(err, store.ErrNoRecord) {
		t.Fatalf("after Forget: %v, want ErrNoRecord", err)
	}
	if err := s.Forget(ctx, "acme", "run-1"); err != nil {
		t.Errorf("forgetting twice: %v", err)
	}
}

func TestAStepOfARunWithNoPlanIsWrittenNowhere(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	if err := s.SaveStep(ctx, "acme", "nobody", done("s1", "p1", time.Now())); !errors.Is(err, store.ErrNoRecord) {
		t.Fatalf("SaveStep: %v, want ErrNoRecord", err)
	}
	key := planexec.Key{Tenant: "acme", Digest: "k"}
	c, err := s.Claim(ctx, store.ClaimRequest{Key: key, Holder: "h", Lease: time.Minute})
	if err != nil || c.State != store.ClaimAcquired {
		t.Fatalf("Claim: %+v, %v", c, err)
	}
	// Both or neither: the claim is not completed when its record cannot
	// be written.
	if err := s.CompleteStep(ctx, &store.StepWrite{Key: key, Epoch: c.Epoch, RunID: "nobody", Outcome: json.RawMessage(`1`), Record: done("s1", "p1", time.Now()), Events: zombieEvents}); !errors.Is(err, store.ErrNoRecord) {
		t.Fatalf("CompleteStep: %v, want ErrNoRecord", err)
	}
	if err := s.ReleaseStep(ctx, &store.StepWrite{Key: key, Epoch: c.Epoch, RunID: "nobody", InDoubt: true, Record: done("s1", "p1", time.Now()), Events: zombieEvents}); !errors.Is(err, store.ErrNoRecord) {
		t.Fatalf("ReleaseStep: %v, want ErrNoRecord", err)
	}
	if c2, err := s.Claim(ctx, store.ClaimRequest{Key: key, Holder: "other", Lease: time.Minute}); err != nil || c2.State != store.ClaimHeld {
		t.Fatalf("the claim moved although its step was not written: %+v, %v", c2, err)
	}
	if got, err := s.Events(ctx, "acme", "nobody", 0, 10); err != nil || len(got) != 0 {
		t.Fatalf("the refused write appended %d events, %v", len(got), err)
	}
}

func TestARunSavedAnewStartsWithoutStepsLeftBehind(t *testing.T) {
	t.Parallel()
	s, schema := newStore(t)
	ctx := context.Background()
	// A step that finished while its run was being forgotten leaves a row
	// with no plan.
	doc, _ := json.Marshal(map[string]any{"version": 1, "step_id": "s1", "plan_id": "p1", "status": "done"})
	sqlExec(t, schema, `INSERT INTO steps (tenant, run_id, step_id, plan_id, version, record) VALUES ('acme', 'run-1', 's1', 'p1', 1, $1)`, doc)
	if err := s.SavePlan(ctx, record("acme", "run-1", plan("p1", "s1"), time.Now())); err != nil {
		t.Fatal(err)
	}
	if rec, err := s.LoadPlan(ctx, "acme", "run-1"); err != nil || len(rec.Steps) != 0 {
		t.Fatalf("a new run came back with steps: %+v, %v", rec, err)
	}
}

func TestOneTenantNeverSeesAnothersRecords(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	if err := s.SavePlan(ctx, record("acme", "run-1", plan("p1", "s1"), time.Now())); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveStep(ctx, "acme", "run-1", done("s1", "p1", time.Now())); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveDecision(ctx, "acme", planexec.Decision{RequestID: "r1", Status: planexec.Approved}); err != nil {
		t.Fatal(err)
	}
	key := planexec.Key{Tenant: "acme", Digest: "k"}
	if _, err := s.Claim(ctx, store.ClaimRequest{Key: key, Holder: "acme", Lease: time.Minute}); err != nil {
		t.Fatal(err)
	}

	if _, err := s.LoadPlan(ctx, "globex", "run-1"); !errors.Is(err, store.ErrNoRecord) {
		t.Errorf("LoadPlan of another tenant's run: %v, want ErrNoRecord", err)
	}
	if err := s.SaveStep(ctx, "globex", "run-1", done("s1", "p1", time.Now())); !errors.Is(err, store.ErrNoRecord) {
		t.Errorf("SaveStep into another tenant's run: %v, want ErrNoRecord", err)
	}
	if _, err := s.Decision(ctx, "globex", "r1"); !errors.Is(err, store.ErrNoRecord) {
		t.Errorf("Decision of another tenant: %v, want ErrNoRecord", err)
	}
	theirs := planexec.Key{Tenant: "globex", Digest: "k"}
	if err := s.Resolve(ctx, theirs, "run-1", planexec.Resolution{}); !errors.Is(err, store.ErrNoRecord) {
		t.Errorf("Resolve of another tenant's key: %v, want ErrNoRecord", err)
	}
	if c, err := s.Claim(ctx, store.ClaimRequest{Key: theirs, Holder: "globex", Lease: time.Minute}); err != nil || c.State != store.ClaimAcquired {
		t.Errorf("the same digest for another tenant: %+v, %v, want acquired", c, err)
	}
	if err := s.Forget(ctx, "globex", "run-1"); err != nil {
		t.Fatal(err)
	}
	if rec, err := s.LoadPlan(ctx, "acme", "run-1"); err != nil || len(rec.Steps) != 1 {
		t.Errorf("another tenant's Forget touched the run: %+v, %v", rec, err)
	}
}

func TestADecisionIsKeptAndReplaced(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	at := time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC)
	d := planexec.Decision{RequestID: "r1", Status: planexec.Approved, Approver: "ana", DecidedAt: at, Expires: at.Add(time.Hour)}
	if err := s.SaveDecision(ctx, "acme", d); err != nil {
		t.Fatal(err)
	}
	got, err := s.Decision(ctx, "acme", "r1")
	if err != nil || got.Status != d.Status || got.Approver != "ana" || !got.DecidedAt.Equal(at) || !got.Expires.Equal(d.Expires) {
		t.Fatalf("Decision = %+v, %v", got, err)
	}
	// The first decision stands until it expires: a change of mind is
	// refused, and one made after the approval expired replaces it.
	d.Status, d.Why = planexec.Denied, "changed my mind"
	if err := s.SaveDecision(ctx, "acme", d); !errors.Is(err, store.ErrDecided) {
		t.Fatalf("a denial after a live approval: %v, want ErrDecided", err)
	}
	if got, _ := s.Decision(ctx, "acme", "r1"); got.Status != planexec.Approved {
		t.Errorf("after a refused change of mind: %+v", got)
	}
	d.DecidedAt = d.Expires.Add(time.Microsecond)
	if err := s.SaveDecision(ctx, "acme", d); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Decision(ctx, "acme", "r1"); got.Status != planexec.Denied || got.Why != "changed my mind" {
		t.Errorf("after replacing the expired approval: %+v", got)
	}
	if _, err := s.Decision(ctx, "acme", "r2"); !errors.Is(err, store.ErrNoRecord) {
		t.Fatalf("an unknown record: %v, want ErrNoRecord", err)
	}
}

// wantStoreError checks that err is a *store.Error of this store
// wrapping target.
func wantStoreError(t *testing.T, what string, err, target error) {
	t.Helper()
	var se *store.Error
	if !errors.As(err, &se) || se.Store != "postgres" || !errors.Is(err, target) {
		t.Errorf("%s: %v (%T), want a postgres *store.Error wrapping %v", what, err, err, target)
	}
}

// onRecords saves a plan with a step, a decision and a claim, damages them
// with damage (statements run in the store's schema), and returns what
// reading each gives.
func onRecords(t *testing.T, damage ...string) (load, decision, claim, save error) {
	t.Helper()
	s, schema := newStore(t)
	ctx := context.Background()
	if err := s.SavePlan(ctx, record("acme", "run-1", plan("p1", "s1"), time.Now())); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveStep(ctx, "acme", "run-1", done("s1", "p1", time.Now())); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveDecision(ctx, "acme", planexec.Decision{RequestID: "r1", Status: planexec.Approved}); err != nil {
		t.Fatal(err)
	}
	key := planexec.Key{Tenant: "acme", Digest: "k1"}
	c, err := s.Claim(ctx, store.ClaimRequest{Key: key, Holder: "h", Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Complete(ctx, key, c.Epoch, json.RawMessage(`"done"`)); err != nil {
		t.Fatal(err)
	}
	for _, sql := range damage {
		sqlExec(t, schema, sql)
	}
	_, load = s.LoadPlan(ctx, "acme", "run-1")
	_, decision = s.Decision(ctx, "acme", "r1")
	_, claim = s.Claim(ctx, store.ClaimRequest{Key: key, Holder: "h2", Lease: time.Minute, TakeOver: true})
	save = s.SavePlan(ctx, record("acme", "run-1", plan("p1", "s1"), time.Now()))
	return load, decision, claim, save
}

// Each record keeps its layout version in a column and, for documents, in
// the document too: a newer version in either place is refused.
func TestARecordFromANewerVersionIsRefusedNotMisread(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	rec := record("acme", "run-1", plan("p1", "s1"), time.Now())
	rec.Version = 99
	wantStoreError(t, "SavePlan of a version 99 record", s.SavePlan(context.Background(), rec), store.ErrNewerRecord)
	if _, err := s.LoadPlan(context.Background(), "acme", "run-1"); !errors.Is(err, store.ErrNoRecord) {
		t.Fatalf("a refused record was written: %v", err)
	}

	tests := []struct {
		name string
		sql  string
		// which reads must see the newer record
		load, decision, claim, save bool
	}{
		{"the plan row's version", `UPDATE plans SET version = 99`, true, false, false, true},
		{"the plan document's version", `UPDATE plans SET record = convert_to('{"version": 99, "tenant": "acme", "run_id": "run-1", "plan": "from the future"}', 'UTF8')`,
			true, false, false, true},
		{"a step row's version", `UPDATE steps SET version = 99`, true, false, false, false},
		{"a step document's version", `UPDATE steps SET record = convert_to('{"version": 99, "step_id": "s1"}', 'UTF8')`, true, false, false, false},
		{"a decision row's version", `UPDATE approvals SET version = 99`, false, true, false, false},
		{"a decision document's version", `UPDATE approvals SET decision = convert_to('{"version": 99, "record_id": "r1"}', 'UTF8')`, false, true, false, false},
		{"a claim row's version", `UPDATE claims SET version = 99`, false, false, true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			load, decision, claim, save := onRecords(t, tc.sql)
			for _, r := range []struct {
				what  string
				err   error
				newer bool
			}{{"LoadPlan", load, tc.load}, {"Decision", decision, tc.decision}, {"Claim", claim, tc.claim}, {"SavePlan over it", save, tc.save}} {
				switch {
				case r.newer:
					wantStoreError(t, r.what, r.err, store.ErrNewerRecord)
					if errors.Is(r.err, store.ErrCorruptRecord) {
						t.Errorf("%s: %v; a newer record is not corrupt", r.what, r.err)
					}
				case r.err != nil:
					t.Errorf("%s: %v; only the record of a newer version is refused", r.what, r.err)
				}
			}
		})
	}
}

func TestASchemaMigratedByANewerVersionIsRefused(t *testing.T) {
	t.Parallel()
	_, schema := newStore(t)
	sqlExec(t, schema, `INSERT INTO schema_version (version) VALUES (99)`)
	_, err := postgres.New(context.Background(), sharedPool(t), postgres.WithSchema(schema))
	wantStoreError(t, "New on a schema at version 99", err, store.ErrNewerRecord)
}

func TestACorruptRecordIsReportedAsCorrupt(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		sql  string
		// which read must report it
		load, decision, claim bool
	}{
		{"a plan record that is not an object", `UPDATE plans SET record = convert_to('"scribbled over"', 'UTF8')`, true, false, false},
		{"a plan record cut short", `UPDATE plans SET record = substring(record for 20)`, true, false, false},
		{"a plan record in another format", `UPDATE plans SET record = '\x1f8b0800'::bytea`, true, false, false},
		{"a plan record of the wrong shape", `UPDATE plans SET record = convert_to('{"version": 1, "tenant": "acme", "run_id": "run-1", "status": "running", "plan": {"steps": "none"}}', 'UTF8')`,
			true, false, false},
		{"a plan record without a version", `UPDATE plans SET record = convert_to('{"tenant": "acme", "run_id": "run-1", "status": "running"}', 'UTF8')`, true, false, false},
		{"a plan row without a version", `UPDATE plans SET version = 0`, true, false, false},
		{"a plan record of another run", `UPDATE plans SET record = convert_to('{"version": 1, "tenant": "globex", "run_id": "elsewhere", "status": "running"}', 'UTF8')`,
			true, false, false},
		{"a plan record with a status never written", `UPDATE plans SET record = convert_to('{"version": 1, "tenant": "acme", "run_id": "run-1", "status": ""}', 'UTF8')`,
			true, false, false},
		{"a step record of the wrong shape", `UPDATE steps SET record = convert_to('{"version": 1, "step_id": "s1", "status": "done", "finished": "yesterday"}', 'UTF8')`,
			true, false, false},
		{"a step record of another step", `UPDATE steps SET record = convert_to('{"version": 1, "step_id": "s9", "status": "done"}', 'UTF8')`, true, false, false},
		{"a step record without a status", `UPDATE steps SET record = convert_to('{"version": 1, "step_id": "s1"}', 'UTF8')`, true, false, false},
		{"a step row without a version", `UPDATE steps SET version = 0`, true, false, false},
		{"a decision that is an array", `UPDATE approvals SET decision = convert_to('[1, 2, 3]', 'UTF8')`, false, true, false},
		{"a decision on another record", `UPDATE approvals SET decision = convert_to('{"version": 1, "record_id": "r9", "status": "granted"}', 'UTF8')`, false, true, false},
		{"a decision row without a version", `UPDATE approvals SET version = 0`, false, true, false},
		{"a claim row without a version", `UPDATE claims SET version = 0`, false, false, true},
		{"a completed claim with an outcome cut short", `UPDATE claims SET outcome = convert_to('"do', 'UTF8')`, false, false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			load, decision, claim, _ := onRecords(t, tc.sql)
			for _, r := range []struct {
				what    string
				err     error
				corrupt bool
			}{{"LoadPlan", load, tc.load}, {"Decision", decision, tc.decision}, {"Claim", claim, tc.claim}} {
				switch {
				case r.corrupt:
					wantStoreError(t, r.what, r.err, store.ErrCorruptRecord)
				case r.err != nil:
					t.Errorf("%s: %v; only the damaged record is refused", r.what, r.err)
				}
			}
		})
	}
}

func TestReplicasStartingAtOnceMigrateTheSchemaOnce(t *testing.T) {
	t.Parallel()
	pool := sharedPool(t)
	schema := freshSchema(t, pool)
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() {
			s, err := postgres.New(context.Background(), pool, postgres.WithSchema(schema))
			if err == nil {
				s.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("replica %d: %v", i, err)
		}
	}
	var rows int
	if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM "+pgx.Identifier{schema, "schema_version"}.Sanitize()).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != postgres.SchemaVersion {
		t.Errorf("schema_version has %d rows, want %d", rows, postgres.SchemaVersion)
	}
}

func TestABadSchemaNameIsAStoreError(t *testing.T) {
	t.Parallel()
	pool, err := pgxpool.New(context.Background(), "postgres://postgres@127.0.0.1:1/none") // connects lazily: never here
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	for _, name := range []string{"", string(make([]byte, 64))} {
		var se *store.Error
		if _, err := postgres.New(context.Background(), pool, postgres.WithSchema(name)); !errors.As(err, &se) || se.Op != "open" {
			t.Errorf("schema %q: %v, want a *store.Error opening the store", name, err)
		}
	}
}

func TestAnUnreachableDatabaseIsAStoreError(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := postgres.Open(ctx, "postgres://postgres@127.0.0.1:1/none?sslmode=disable&connect_timeout=2")
	var se *store.Error
	if !errors.As(err, &se) || se.Store != "postgres" || se.Op == "" {
		t.Fatalf("Open of a closed port: %v, want a postgres *store.Error", err)
	}
}
