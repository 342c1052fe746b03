package sqlite_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/store"
	"github.com/planexec/planexec/store/sqlite"
	"github.com/planexec/planexec/storetest"
)

// ---- helpers ----

// openAt opens the store at path, closed when the test ends.
func openAt(t testing.TB, path string, opts ...sqlite.Option) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), path, opts...)
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// openNew opens a store on a new file and returns it with the file's path.
func openNew(t testing.TB, opts ...sqlite.Option) (*sqlite.Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "planexec.db")
	return openAt(t, path, opts...), path
}

// rawDB opens the file with the bare driver, to write what the store never
// would.
func rawDB(t testing.TB, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func mustExec(t testing.TB, db *sql.DB, query string, args ...any) {
	t.Helper()
	if _, err := db.Exec(query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

func samplePlan(id string) planexec.Plan {
	return planexec.Plan{ID: id, Goal: "get them to New York", Revision: 1, Steps: []planexec.Step{
		{ID: "s1", Tool: "search_flights", Arguments: json.RawMessage(`{"to":"JFK","max":412.50,"n":9007199254740993}`)},
		{ID: "s2", Tool: "book_flight", Arguments: json.RawMessage(`{"flight":"BA117","note":"<ok> & fine"}`), DependsOn: []string{"s1"}, Intent: "book it"},
	}}
}

// planDoc is p's JSON document, as a store is given it to keep byte for
// byte. It is indented, and its markup is not escaped, so that a store that
// compacted, escaped or re-encoded the document would give back other bytes.
func planDoc(t testing.TB, p planexec.Plan) json.RawMessage {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(p); err != nil {
		t.Fatalf("encoding plan %s: %v", p.ID, err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

func saveSample(t testing.TB, s *sqlite.Store, tenant, run, planID string) *store.PlanRecord {
	t.Helper()
	now := time.Date(2030, time.March, 4, 9, 0, 0, 123456789, time.UTC)
	rec := &store.PlanRecord{Version: store.RecordVersion, Tenant: tenant, RunID: run, PlanID: planID, Plan: planDoc(t, samplePlan(planID)),
		Status: store.RunRunning, Created: now, Updated: now}
	if err := s.SavePlan(context.Background(), rec); err != nil {
		t.Fatalf("SavePlan: %v", err)
	}
	return rec
}

func stepRec(id, planID string) store.StepRecord {
	return store.StepRecord{StepID: id, PlanID: planID, Tool: "book_flight", Status: planexec.StepDone,
		Outcome: json.RawMessage(`{"pnr":"X1","fare":"412.50"}`), Key: "k-" + id, Grant: "g1",
		Amount: decimal.RequireFromString("412.50"), Finished: time.Date(2030, time.March, 4, 9, 1, 0, 0, time.UTC)}
}

// wantStoreError fails unless err is a *store.Error of the sqlite
// store for op that wraps target.
func wantStoreError(t *testing.T, err error, op string, target error) {
	t.Helper()
	var se *store.Error
	if !errors.As(err, &se) || se.Store != "sqlite" || se.Op != op {
		t.Fatalf("err = %v (%T), want a *store.Error from the sqlite store for %q", err, err, op)
	}
	if target != nil && !errors.Is(err, target) {
		t.Fatalf("err = %v, want it to wrap %v", err, target)
	}
}

// ---- records come back as they were written ----

func TestAPlanAndItsStepsComeBackAfterTheFileIsReopened(t *testing.T) {
	ctx := context.Background()
	s, path := openNew(t)
	want := saveSample(t, s, "acme", "run-1", "p1")
	st := stepRec("s1", "p1")
	if err := s.SaveStep(ctx, "acme", "run-1", st); err != nil {
		t.Fatalf("SaveStep: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	s = openAt(t, path)
	got, err := s.LoadPlan(ctx, "acme", "run-1")
	if err != nil {
		t.Fatalf("LoadPlan: %v", err)
	}
	if got.Version != store.RecordVersion || got.Tenant != "acme" || got.RunID != "run-1" || got.Status != store.RunRunning {
		t.Errorf("record = %+v", got)
	}
	if !got.Created.Equal(want.Created) || !got.Updated.Equal(st.Finished) {
		t.Errorf("created %v updated %v, want %v and the step's finish %v", got.Created, got.Updated, want.Created, st.Finished)
	}
	// The plan's document, its spacing, numbers and markup in arguments
	// included, is kept exactly as written.
	if doc := planDoc(t, samplePlan("p1")); got.PlanID != "p1" || !bytes.Equal(got.Plan, doc) || !bytes.Equal(want.Plan, doc) {
		t.Errorf("plan %s =\n%s\nwant p1 =\n%s", got.PlanID, got.Plan, doc)
	}
	g := got.Steps["s1"]
	if len(got.Steps) != 1 || g.PlanID != "p1" || g.Status != planexec.StepDone || string(g.Outcome) != string(st.Outcome) ||
		g.Key != "k-s1" || g.Grant != "g1" || !g.Amount.Equal(st.Amount) || g.Amount.String() != "412.5" || !g.Finished.Equal(st.Finished) {
		t.Errorf("step = %+v", g)
	}
}

func TestSavingThePlanAgainKeepsItsStepsAndCreationTime(t *testing.T) {
	ctx := context.Background()
	s, _ := openNew(t)
	first := saveSample(t, s, "acme", "run-1", "p1")
	if err := s.SaveStep(ctx, "acme", "run-1", stepRec("s1", "p1")); err != nil {
		t.Fatal(err)
	}
	later := *first
	later.Status, later.Created, later.Updated = store.RunCompleted, first.Created.Add(time.Hour), first.Created.Add(time.Hour)
	if err := s.SavePlan(ctx, &later); err != nil {
		t.Fatal(err)
	}
	got, err := s.LoadPlan(ctx, "acme", "run-1")
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != store.RunCompleted || len(got.Steps) != 1 || !got.Created.Equal(first.Created) || !got.Updated.Equal(later.Updated) {
		t.Errorf("got status %s, %d steps, created %v, updated %v", got.Status, len(got.Steps), got.Created, got.Updated)
	}
}

func TestANewPlanForTheRunDropsTheOldPlansSteps(t *testing.T) {
	ctx := context.Background()
	s, _ := openNew(t)
	saveSample(t, s, "acme", "run-1", "p1")
	for _, id := range []string{"s1", "s2"} {
		if err := s.SaveStep(ctx, "acme", "run-1", stepRec(id, "p1")); err != nil {
			t.Fatal(err)
		}
	}
	saveSample(t, s, "acme", "run-1", "p2")
	got, err := s.LoadPlan(ctx, "acme", "run-1")
	if err != nil {
		t.Fatal(err)
	}
	if got.PlanID != "p2" || !bytes.Equal(got.Plan, planDoc(t, samplePlan("p2"))) || len(got.Steps) != 0 {
		t.Errorf("plan %s with %d steps, want p2 with none; document:\n%s", got.PlanID, len(got.Steps), got.Plan)
	}
}

func TestForgetRemovesTheRunAndItsStepsOnly(t *testing.T) {
	ctx := context.Background()
	s, path := openNew(t)
	saveSample(t, s, "acme", "run-1", "p1")
	saveSample(t, s, "acme", "run-2", "p1")
	_ = s.SaveStep(ctx, "acme", "run-1", stepRec("s1", "p1"))
	_ = s.SaveStep(ctx, "acme", "run-2", stepRec("s1", "p1"))
	if err := s.Forget(ctx, "acme", "run-1"); err != nil {
		t.Fatal(err)
	}
	if err := s.Forget(ctx, "acme", "never"); err != nil {
		t.Errorf("forgetting a run with no record: %v", err)
	}
	if _, err := s.LoadPlan(ctx, "acme", "run-1"); !errors.Is(err, store.ErrNoRecord) {
		t.Errorf("LoadPlan after Forget: %v, want ErrNoRecord", err)
	}
	if got, err := s.LoadPlan(ctx, "acme", "run-2"); err != nil || len(got.Steps) != 1 {
		t.Errorf("the other run: %v, %v", got, err)
	}
	var n int
	if err := rawDB(t, path).QueryRow(`SELECT count(*) FROM steps WHERE run_id = 'run-1'`).Scan(&n); err != nil || n != 0 {
		t.Errorf("%d step rows of the forgotten run are left (%v)", n, err)
	}
}

func TestAStepForARunWithNoPlanIsNoRecord(t *testing.T) {
	s, _ := openNew(t)
	if err := s.SaveStep(context.Background(), "acme", "run-1", stepRec("s1", "p1")); !errors.Is(err, store.ErrNoRecord) {
		t.Errorf("SaveStep = %v, want ErrNoRecord", err)
	}
}

func TestDecisionsAreKeptPerTenantAndReplaced(t *testing.T) {
	ctx := context.Background()
	s, _ := openNew(t)
	d := planexec.Decision{RequestID: "r1", Status: planexec.Approved, Approver: "ana",
		DecidedAt: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), Expires: time.Date(2030, 1, 2, 0, 0, 0, 0, time.UTC)}
	if err := s.SaveDecision(ctx, "acme", d); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Decision(ctx, "globex", "r1"); !errors.Is(err, store.ErrNoRecord) {
		t.Errorf("another tenant's decision: %v, want ErrNoRecord", err)
	}
	got, err := s.Decision(ctx, "acme", "r1")
	if err != nil || got.Status != planexec.Approved || got.Approver != "ana" || !got.Expires.Equal(d.Expires) || !got.DecidedAt.Equal(d.DecidedAt) {
		t.Errorf("Decision = %+v, %v", got, err)
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
}

// ---- tenants ----

func TestOneTenantNeverReachesAnothersRecords(t *testing.T) {
	ctx := context.Background()
	s, _ := openNew(t)
	saveSample(t, s, "acme", "run-1", "p1")
	if _, err := s.LoadPlan(ctx, "globex", "run-1"); !errors.Is(err, store.ErrNoRecord) {
		t.Errorf("LoadPlan for another tenant = %v, want ErrNoRecord", err)
	}
	if err := s.SaveStep(ctx, "globex", "run-1", stepRec("s1", "p1")); !errors.Is(err, store.ErrNoRecord) {
		t.Errorf("SaveStep for another tenant = %v, want ErrNoRecord", err)
	}
	if err := s.Forget(ctx, "globex", "run-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.LoadPlan(ctx, "acme", "run-1"); err != nil {
		t.Errorf("another tenant's Forget removed the run: %v", err)
	}

	// The same digest under two tenants is two keys.
	a, err := s.Claim(ctx, store.ClaimRequest{Key: planexec.Key{Tenant: "acme", Digest: "d"}, Holder: "h1", Lease: time.Minute})
	if err != nil || a.State != store.ClaimAcquired {
		t.Fatalf("acme claim = %+v, %v", a, err)
	}
	b, err := s.Claim(ctx, store.ClaimRequest{Key: planexec.Key{Tenant: "globex", Digest: "d"}, Holder: "h2", Lease: time.Minute})
	if err != nil || b.State != store.ClaimAcquired {
		t.Fatalf("globex claim = %+v, %v; want its own acquisition", b, err)
	}
	if err := s.Complete(ctx, planexec.Key{Tenant: "initech", Digest: "d"}, 1, nil); !errors.Is(err, store.ErrNoRecord) {
		t.Errorf("Complete for a tenant that never claimed = %v, want ErrNoRecord", err)
	}
	if err := s.Resolve(ctx, planexec.Key{Tenant: "initech", Digest: "d"}, "run-1", planexec.Resolution{}); !errors.Is(err, store.ErrNoRecord) {
		t.Errorf("Resolve for a tenant that never claimed = %v, want ErrNoRecord", err)
	}
}

// ---- bad input ----

// reads is what reading each record gave.
type reads struct{ load, decision, claim, save error }

// onRecords saves a plan with a step, a decision and a completed claim,
// damages them with the statements given (run on one connection, so a
// PRAGMA holds for those after it), and returns what reading each gives.
func onRecords(t *testing.T, damage ...string) reads {
	t.Helper()
	ctx := context.Background()
	s, path := openNew(t)
	saveSample(t, s, "acme", "run-1", "p1")
	if err := s.SaveStep(ctx, "acme", "run-1", stepRec("s1", "p1")); err != nil {
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
	db := rawDB(t, path)
	db.SetMaxOpenConns(1)
	for _, stmt := range damage {
		mustExec(t, db, stmt)
	}
	var r reads
	_, r.load = s.LoadPlan(ctx, "acme", "run-1")
	_, r.decision = s.Decision(ctx, "acme", "r1")
	_, r.claim = s.Claim(ctx, store.ClaimRequest{Key: key, Holder: "h2", Lease: time.Minute, TakeOver: true})
	r.save = s.SavePlan(ctx, &store.PlanRecord{Tenant: "acme", RunID: "run-1", PlanID: "p1", Plan: planDoc(t, samplePlan("p1")), Status: store.RunCompleted})
	return r
}

// check fails unless each read the case names was refused with a store
// error for op wrapping target, and every other read succeeded.
func (r reads) check(t *testing.T, target error, load, decision, claim, save bool) {
	t.Helper()
	for _, c := range []struct {
		op      string
		err     error
		refused bool
	}{{"load plan", r.load, load}, {"decision", r.decision, decision}, {"claim", r.claim, claim}, {"save plan", r.save, save}} {
		switch {
		case c.refused:
			wantStoreError(t, c.err, c.op, target)
			if target == store.ErrNewerRecord && errors.Is(c.err, store.ErrCorruptRecord) {
				t.Errorf("%s: %v; a newer record is not corrupt", c.op, c.err)
			}
		case c.err != nil:
			t.Errorf("%s: %v; only the record tampered with is refused", c.op, c.err)
		}
	}
}

// Each record keeps its layout version in a column and, for documents, in
// the document too: a newer version in either place is refused.
func TestARecordOfANewerVersionIsRefusedNotMisread(t *testing.T) {
	tests := []struct {
		name                        string
		sql                         string
		load, decision, claim, save bool
	}{
		{"the plan row's version", `UPDATE plans SET version = 99`, true, false, false, true},
		{"the plan document's version", `UPDATE plans SET record = json_set(record, '$.version', 99)`, true, false, false, true},
		{"a plan in a new layout", `UPDATE plans SET version = 99, record = '{"version":99,"plan":"a layout this package never wrote"}'`, true, false, false, true},
		{"a step row's version", `UPDATE steps SET version = 99`, true, false, false, false},
		{"a step document's version", `UPDATE steps SET record = json_set(record, '$.version', 99)`, true, false, false, false},
		{"a decision row's version", `UPDATE approvals SET version = 99`, false, true, false, false},
		{"a decision document's version", `UPDATE approvals SET decision = json_set(decision, '$.version', 99)`, false, true, false, false},
		{"a claim row's version", `UPDATE claims SET version = 99`, false, false, true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			onRecords(t, tc.sql).check(t, store.ErrNewerRecord, tc.load, tc.decision, tc.claim, tc.save)
		})
	}
}

func TestAPlanRecordWrittenStraightIntoTheTableWithVersion99IsRefused(t *testing.T) {
	s, path := openNew(t)
	mustExec(t, rawDB(t, path), `INSERT INTO plans (tenant, run_id, plan_id, version, status, record, created, updated)
		VALUES ('acme', 'run-9', 'p9', 99, 'running', '{"version":99,"tenant":"acme","run_id":"run-9","plan":{"id":"p9"},"status":"running"}', 0, 0)`)
	_, err := s.LoadPlan(context.Background(), "acme", "run-9")
	wantStoreError(t, err, "load plan", store.ErrNewerRecord)
	// Nor is it overwritten by this older writer.
	err = s.SavePlan(context.Background(), &store.PlanRecord{Tenant: "acme", RunID: "run-9", PlanID: "p9", Plan: planDoc(t, planexec.Plan{ID: "p9"})})
	wantStoreError(t, err, "save plan", store.ErrNewerRecord)
}

// A decision a newer version wrote is not replaced by this older writer,
// whatever it decides and whatever the row's columns say: not even when
// they say it is pending.
func TestADecisionOfANewerVersionIsNotOverwritten(t *testing.T) {
	ctx := context.Background()
	s, path := openNew(t)
	const doc = `{"version":99,"request_id":"r9","status":"pending","decided_at":"2030-01-01T00:00:00Z"}`
	db := rawDB(t, path)
	mustExec(t, db, `INSERT INTO approvals (tenant, record_id, version, decision, decided, status) VALUES ('acme', 'r9', 99, ?, 0, 'pending')`, doc)
	for _, st := range []planexec.DecisionStatus{planexec.Approved, planexec.Denied, planexec.Pending} {
		err := s.SaveDecision(ctx, "acme", planexec.Decision{RequestID: "r9", Status: st, Approver: "eve", DecidedAt: time.Date(2030, 1, 2, 0, 0, 0, 0, time.UTC)})
		wantStoreError(t, err, "save decision", store.ErrNewerRecord)
	}
	var got string
	if err := db.QueryRow(`SELECT decision FROM approvals WHERE tenant = 'acme' AND record_id = 'r9'`).Scan(&got); err != nil || got != doc {
		t.Errorf("the newer decision after SaveDecision = %q, %v; want it as it was", got, err)
	}
}

func TestACorruptRowIsReportedCorrupt(t *testing.T) {
	tests := []struct {
		name                  string
		sql                   []string
		load, decision, claim bool
	}{
		{"a truncated plan record", []string{`UPDATE plans SET record = '{"version":1,"plan":{"id":'`}, true, false, false},
		{"a plan record not JSON", []string{`UPDATE plans SET record = 'gob:0x1f8b'`}, true, false, false},
		{"a plan record of a list", []string{`UPDATE plans SET record = '[1,2]'`}, true, false, false},
		{"a plan record as null", []string{`UPDATE plans SET record = 'null'`}, true, false, false},
		{"a plan without a version", []string{`UPDATE plans SET record = json_remove(record, '$.version')`}, true, false, false},
		{"a plan row without a version", []string{`UPDATE plans SET version = 0`}, true, false, false},
		// The store keeps the plan's document without reading it, but a
		// record holds a plan: an object with an id.
		{"a plan of the wrong type", []string{`UPDATE plans SET record = json_set(record, '$.plan', 'three')`}, true, false, false},
		{"a plan without an id", []string{`UPDATE plans SET record = json_remove(record, '$.plan.id')`}, true, false, false},
		{"a plan of another run", []string{`UPDATE plans SET record = json_set(record, '$.run_id', 'run-9')`}, true, false, false},
		{"a plan with a status never written", []string{`UPDATE plans SET record = json_set(record, '$.status', 'archived')`}, true, false, false},
		{"a truncated step record", []string{`UPDATE steps SET record = '{"version":1,"step_id":"s1","outcome":'`}, true, false, false},
		{"a step record without a version", []string{`UPDATE steps SET record = json_remove(record, '$.version')`}, true, false, false},
		{"a step record of another step", []string{`UPDATE steps SET record = json_set(record, '$.step_id', 's9')`}, true, false, false},
		{"a step with a status never written", []string{`UPDATE steps SET record = json_set(record, '$.status', 'skipped')`}, true, false, false},
		{"a decision not JSON", []string{`UPDATE approvals SET decision = 'not json'`}, false, true, false},
		{"a decision without a version", []string{`UPDATE approvals SET decision = json_remove(decision, '$.version')`}, false, true, false},
		{"a decision on another record", []string{`UPDATE approvals SET decision = json_set(decision, '$.request_id', 'r9')`}, false, true, false},
		{"a decision with a status never written", []string{`UPDATE approvals SET decision = json_set(decision, '$.status', 'maybe')`}, false, true, false},
		{"a claim row without a version", []string{`UPDATE claims SET version = 0`}, false, false, true},
		{"a completed claim with an outcome cut short", []string{`UPDATE claims SET outcome = CAST('"do' AS BLOB)`}, false, false, true},
		{"a completed claim without an outcome", []string{`UPDATE claims SET outcome = NULL`}, false, false, true},
		{"a claim in a state never written", []string{`PRAGMA ignore_check_constraints = 1`, `UPDATE claims SET state = 'settled'`}, false, false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			onRecords(t, tc.sql...).check(t, store.ErrCorruptRecord, tc.load, tc.decision, tc.claim, false)
		})
	}
}

func TestAFileWithANewerSchemaIsRefusedAtOpen(t *testing.T) {
	s, path := openNew(t)
	saveSample(t, s, "acme", "run-1", "p1")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db := rawDB(t, path)
	mustExec(t, db, `PRAGMA user_version = 99`)
	db.Close()

	got, err := sqlite.Open(context.Background(), path)
	if got != nil {
		got.Close()
		t.Error("Open returned a store")
	}
	wantStoreError(t, err, "migrate", store.ErrNewerRecord)
}

func TestOpeningTwiceMigratesOnce(t *testing.T) {
	s, path := openNew(t)
	saveSample(t, s, "acme", "run-1", "p1")
	again := openAt(t, path)
	if _, err := again.LoadPlan(context.Background(), "acme", "run-1"); err != nil {
		t.Fatalf("the second Open lost the record: %v", err)
	}
	var v int
	var mode string
	db := rawDB(t, path)
	if err := db.QueryRow(`PRAGMA user_version`).Scan(&v); err != nil || v != sqlite.SchemaVersion {
		t.Errorf("user_version = %d, %v; want %d", v, err, sqlite.SchemaVersion)
	}
	if err := db.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		t.Errorf("journal_mode = %q, %v; want wal", mode, err)
	}
}

func TestOpenRefusesWhatIsNotAFilePath(t *testing.T) {
	for _, path := range []string{"", ":memory:", "file:x.db?mode=memory", filepath.Join(t.TempDir(), "missing", "dir", "x.db")} {
		s, err := sqlite.Open(context.Background(), path)
		if s != nil {
			s.Close()
		}
		wantStoreError(t, err, "open", nil)
	}
}

func TestAPathWithURICharactersIsAFileName(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "odd?name#with%25.db")
	s := openAt(t, path)
	saveSample(t, s, "acme", "run-1", "p1")
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the file was not created under its own name: %v", err)
	}
}

func TestACancelledContextIsAStoreErrorThatSaysSo(t *testing.T) {
	s, _ := openNew(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := s.Claim(ctx, store.ClaimRequest{Key: planexec.Key{Tenant: "acme", Digest: "d"}, Lease: time.Minute})
	wantStoreError(t, err, "claim", context.Canceled)
}

// ---- one step, one transaction ----

func TestCompleteStepWritesTheClaimTheRecordAndTheEventsOrNone(t *testing.T) {
	ctx := context.Background()
	s, _ := openNew(t)
	saveSample(t, s, "acme", "run-1", "p1")
	key := planexec.Key{Tenant: "acme", Digest: "k-s1"}
	c, err := s.Claim(ctx, store.ClaimRequest{Key: key, Holder: "h", Lease: time.Minute})
	if err != nil || c.State != store.ClaimAcquired || c.Epoch != 1 {
		t.Fatalf("Claim = %+v, %v", c, err)
	}
	events := []json.RawMessage{json.RawMessage(`{"kind":"STEP_STARTED","step_id":"s1"}`), json.RawMessage(`{"kind":"STEP_EXECUTED", "step_id":"s1"}`)}
	historyOf := func(run string) []store.EventRecord {
		t.Helper()
		got, err := s.Events(ctx, "acme", run, 0, 100)
		if err != nil {
			t.Fatalf("Events: %v", err)
		}
		return got
	}

	// A stale epoch writes none of it.
	if err := s.CompleteStep(ctx, &store.StepWrite{Key: key, Epoch: c.Epoch + 1, RunID: "run-1", Outcome: json.RawMessage(`"x"`), Record: stepRec("s1", "p1"), Events: events}); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("CompleteStep with a stale epoch = %v, want ErrFenced", err)
	}
	// A run with no record writes neither: the claim stays held.
	if err := s.CompleteStep(ctx, &store.StepWrite{Key: key, Epoch: c.Epoch, RunID: "run-404", Outcome: json.RawMessage(`"x"`), Record: stepRec("s1", "p1"), Events: events}); !errors.Is(err, store.ErrNoRecord) {
		t.Fatalf("CompleteStep for a run with no plan = %v, want ErrNoRecord", err)
	}
	rec, _ := s.LoadPlan(ctx, "acme", "run-1")
	if len(rec.Steps) != 0 {
		t.Fatalf("a refused CompleteStep left a step record: %+v", rec.Steps)
	}
	if again, _ := s.Claim(ctx, store.ClaimRequest{Key: key, Holder: "h2", Lease: time.Minute}); again.State != store.ClaimHeld {
		t.Fatalf("after refused CompleteSteps the claim is %+v, want still held", again)
	}
	if got := append(historyOf("run-1"), historyOf("run-404")...); len(got) != 0 {
		t.Fatalf("refused CompleteSteps stored events: %+v", got)
	}

	if err := s.CompleteStep(ctx, &store.StepWrite{Key: key, Epoch: c.Epoch, RunID: "run-1", Outcome: json.RawMessage(`"x"`), Record: stepRec("s1", "p1"), Events: events}); err != nil {
		t.Fatalf("CompleteStep: %v", err)
	}
	rec, _ = s.LoadPlan(ctx, "acme", "run-1")
	done, _ := s.Claim(ctx, store.ClaimRequest{Key: key, Holder: "h2", Lease: time.Minute})
	if rec.Steps["s1"].Status != planexec.StepDone || done.State != store.ClaimCompleted || string(done.Outcome) != `"x"` {
		t.Errorf("after CompleteStep: step %+v, claim %+v", rec.Steps["s1"], done)
	}
	got := historyOf("run-1")
	if len(got) != 2 || got[0].Seq != 1 || string(got[0].Event) != string(events[0]) || got[1].Seq != 2 || string(got[1].Event) != string(events[1]) {
		t.Errorf("after CompleteStep the history is %+v, want the step's two events", got)
	}
}

func TestReleaseStepKeepsAnIrreversibleFailureInDoubt(t *testing.T) {
	ctx := context.Background()
	s, _ := openNew(t)
	saveSample(t, s, "acme", "run-1", "p1")
	key := planexec.Key{Tenant: "acme", Digest: "k-s2"}
	c, _ := s.Claim(ctx, store.ClaimRequest{Key: key, Holder: "h", Lease: time.Minute})
	st := stepRec("s2", "p1")
	st.Status, st.Outcome, st.Error = planexec.StepInDoubt, nil, "gateway timeout"
	if err := s.ReleaseStep(ctx, &store.StepWrite{Key: key, Epoch: c.Epoch, RunID: "run-1", InDoubt: true, Record: st}); err != nil {
		t.Fatal(err)
	}
	rec, _ := s.LoadPlan(ctx, "acme", "run-1")
	again, _ := s.Claim(ctx, store.ClaimRequest{Key: key, Holder: "h2", Lease: time.Minute, TakeOver: true})
	if rec.Steps["s2"].Status != planexec.StepInDoubt || again.State != store.ClaimInDoubt {
		t.Errorf("step %+v, claim %+v; want both in doubt", rec.Steps["s2"], again)
	}
	if err := s.ReleaseStep(ctx, &store.StepWrite{Key: key, Epoch: c.Epoch, RunID: "run-1", Record: st}); !errors.Is(err, store.ErrFenced) {
		t.Errorf("a second release = %v, want ErrFenced", err)
	}
}

// ---- claims ----

func TestEpochsNeverGoBackAcrossReleaseResolveAndReopening(t *testing.T) {
	ctx := context.Background()
	clk := storetest.NewClock()
	s, path := openNew(t, sqlite.WithClock(clk.Now))
	key := planexec.Key{Tenant: "acme", Digest: "d"}
	req := store.ClaimRequest{Key: key, Holder: "h", Lease: time.Minute, TakeOver: true}
	var epochs []int64
	c, _ := s.Claim(ctx, req)
	epochs = append(epochs, c.Epoch)
	_ = s.Release(ctx, key, c.Epoch, false)
	c, _ = s.Claim(ctx, req)
	epochs = append(epochs, c.Epoch)
	_ = s.Release(ctx, key, c.Epoch, true)
	if err := s.Resolve(ctx, key, "", planexec.Resolution{}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = openAt(t, path, sqlite.WithClock(clk.Now))
	c, _ = s.Claim(ctx, req)
	epochs = append(epochs, c.Epoch)
	clk.Advance(2 * time.Minute)
	c, _ = s.Claim(ctx, req) // taken over
	epochs = append(epochs, c.Epoch)
	if want := []int64{1, 2, 4, 5}; len(epochs) != 4 || epochs[0] != 1 || epochs[1] != 2 || epochs[2] != 4 || epochs[3] != 5 {
		t.Errorf("epochs = %v, want %v", epochs, want)
	}
	if err := s.Complete(ctx, key, 4, nil); !errors.Is(err, store.ErrFenced) {
		t.Errorf("the taken-over holder's Complete = %v, want ErrFenced", err)
	}
}

func TestResolveRefusesALiveHolder(t *testing.T) {
	ctx := context.Background()
	clk := storetest.NewClock()
	s, _ := openNew(t, sqlite.WithClock(clk.Now))
	key := planexec.Key{Tenant: "acme", Digest: "d"}
	c, _ := s.Claim(ctx, store.ClaimRequest{Key: key, Holder: "h", Lease: time.Minute})
	if err := s.Resolve(ctx, key, "", planexec.Resolution{Applied: true}); !errors.Is(err, store.ErrInFlight) {
		t.Fatalf("Resolve while the lease is live = %v, want ErrInFlight", err)
	}
	clk.Advance(time.Minute)
	// Expired and irreversible: in doubt until resolved.
	if got, _ := s.Claim(ctx, store.ClaimRequest{Key: key, Holder: "h2", Lease: time.Minute}); got.State != store.ClaimInDoubt {
		t.Fatalf("claim after the lease = %+v, want in doubt", got)
	}
	if err := s.Resolve(ctx, key, "", planexec.Resolution{Applied: true, Outcome: json.RawMessage(`{"pnr":"Q"}`)}); err != nil {
		t.Fatal(err)
	}
	got, _ := s.Claim(ctx, store.ClaimRequest{Key: key, Holder: "h2", Lease: time.Minute})
	if got.State != store.ClaimCompleted || string(got.Outcome) != `{"pnr":"Q"}` || got.Epoch != c.Epoch+1 {
		t.Errorf("after Resolve: %+v", got)
	}
	if err := s.Extend(ctx, key, c.Epoch, time.Minute); !errors.Is(err, store.ErrFenced) {
		t.Errorf("the old holder's Extend = %v, want ErrFenced", err)
	}
}
