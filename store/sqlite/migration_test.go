package sqlite_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/store"
	"github.com/planexec/planexec/store/sqlite"
)

// A file the first version of this package made, with the rows it wrote
// (step and decision documents without their version, an empty outcome as
// NULL), is carried over by the migrations: every record reads back as it
// was written, and the documents gain their version without another byte
// changing.
func TestRowsOfTheFirstSchemaAreCarriedOver(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "first.db")
	if err := sqlite.MigrateTo(ctx, path, 1); err != nil {
		t.Fatal(err)
	}
	created := time.Date(2030, 1, 2, 3, 4, 5, 123456789, time.UTC)
	const (
		plan        = `{"id":"p1","goal":"nul \u0000 goal 😀","revision":1,"steps":[{"id":"s1","tool":"notify","arguments":{"note":"\u0000 \u2028","n":412.50},"intent":"ls \u2028"}]}`
		planDoc     = `{"version":1,"tenant":"acme","run_id":"run-1","plan":` + plan + `,"status":"running"}`
		stepDoc     = `{"step_id":"s1","plan_id":"p1","tool":"notify","status":"done","outcome":{"echo":"\u0000"},"key":"k-done","finished":"2030-01-02T03:04:05.123456789Z"}`
		decisionDoc = `{"record_id":"r1","status":"denied","approver":"ana\u0000","reason":"no 𝄞","decided_at":"2030-01-02T03:04:05.123456789Z","expires":"0001-01-01T00:00:00Z"}`
	)
	db := rawDB(t, path)
	mustExec(t, db, `INSERT INTO plans (tenant, run_id, plan_id, version, status, record, created, updated) VALUES ('acme', 'run-1', 'p1', 1, 'running', ?, ?, ?)`,
		planDoc, created.UnixNano(), created.UnixNano())
	mustExec(t, db, `INSERT INTO steps (tenant, run_id, step_id, plan_id, version, record) VALUES ('acme', 'run-1', 's1', 'p1', 1, ?)`, stepDoc)
	mustExec(t, db, `INSERT INTO approvals (tenant, record_id, version, decision) VALUES ('acme', 'r1', 1, ?)`, decisionDoc)
	mustExec(t, db, `INSERT INTO claims (tenant, key, state, epoch, holder, lease_expires, outcome, run_id, step_id, tool) VALUES
		('acme', 'k-empty', 'completed', 1, 'h', 0, NULL, 'run-1', 's0', 'notify'),
		('acme', 'k-done', 'completed', 2, 'h', 0, CAST('"PNR"' AS BLOB), 'run-1', 's1', 'notify'),
		('acme', 'k-doubt', 'in_doubt', 3, 'h', 0, NULL, 'run-1', 's2', 'notify')`)

	s := openAt(t, path)

	for _, c := range []struct{ query, want string }{
		{`SELECT record FROM plans`, planDoc},
		{`SELECT record FROM steps`, `{"version":1,` + stepDoc[1:]},
		{`SELECT decision FROM approvals`, `{"version":1,` + decisionDoc[1:]},
		// The decision of the first layout is given its time from its document.
		{`SELECT decided FROM approvals`, fmt.Sprint(created.UnixNano())},
	} {
		var got string
		if err := db.QueryRow(c.query).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("%s after the migration = %q, want %q", c.query, got, c.want)
		}
	}

	got, err := s.LoadPlan(ctx, "acme", "run-1")
	if err != nil {
		t.Fatalf("LoadPlan: %v", err)
	}
	if string(got.Plan) != plan || got.PlanID != "p1" || !got.Created.Equal(created) {
		t.Errorf("LoadPlan = %+v", got)
	}
	if st := got.Steps["s1"]; st.Status != planexec.StepDone || string(st.Outcome) != `{"echo":"\u0000"}` || !st.Finished.Equal(created) {
		t.Errorf("step s1 = %+v", st)
	}
	rec := *got
	rec.Status = store.RunCompleted
	if err := s.SavePlan(ctx, &rec); err != nil {
		t.Fatalf("SavePlan of the migrated run: %v", err)
	}
	if d, err := s.Decision(ctx, "acme", "r1"); err != nil || d.Approver != "ana\x00" || d.Why != "no \U0001D11E" || d.Status != planexec.Denied {
		t.Errorf("Decision = %+v, %v", d, err)
	}
	for _, c := range []struct {
		key     string
		state   store.ClaimState
		outcome json.RawMessage
	}{{"k-empty", store.ClaimCompleted, nil}, {"k-done", store.ClaimCompleted, json.RawMessage(`"PNR"`)}, {"k-doubt", store.ClaimInDoubt, nil}} {
		got, err := s.Claim(ctx, store.ClaimRequest{Key: planexec.Key{Tenant: "acme", Digest: c.key}, Holder: "h2", Lease: time.Minute, TakeOver: true})
		if err != nil || got.State != c.state || string(got.Outcome) != string(c.outcome) {
			t.Errorf("Claim of %s = %+v, %v; want state %d with outcome %s", c.key, got, err, c.state, c.outcome)
		}
	}
}

// A file at schema 2, with the runs it held, is carried over to schema 3:
// its runs read back waiting for nothing and under no delegation (NULL in
// the new columns), are listed (one never updated last), have no history
// until one is appended, and are saved with waits and a delegation. They
// have no holder nor lease: a running one is stalled, and is taken. Its
// decisions are given the time they were made from their documents (the
// least of times for the zero time; none, and so never pruned, for one
// that cannot be read), and their status and expiry, so that SaveDecision
// keeps and replaces them by its rule as it does those written since (one
// that cannot be read has neither, and is kept); its claims, whose kind
// nobody knows, are counted once per tenant, have no time, and are never
// pruned.
func TestRunsOfTheSecondSchemaAreCarriedOver(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "second.db")
	if err := sqlite.MigrateTo(ctx, path, 2); err != nil {
		t.Fatal(err)
	}
	created := time.Date(2030, 1, 2, 3, 4, 5, 123456789, time.UTC)
	const (
		plan     = `{"id":"p1","goal":"g","revision":1,"steps":[{"id":"s1","tool":"notify","arguments":{"n":412.50}}]}`
		stepDoc  = `{"version":1,"step_id":"s1","plan_id":"p1","tool":"notify","status":"done","outcome":{"ok":true},"key":"k1","finished":"2030-01-02T03:04:05.123456789Z"}`
		planDoc1 = `{"version":1,"tenant":"acme","run_id":"run-1","plan":` + plan + `,"status":"awaiting_approval"}`
		planDoc2 = `{"version":1,"tenant":"acme","run_id":"run-2","plan":` + plan + `,"status":"completed"}`
	)
	db := rawDB(t, path)
	mustExec(t, db, `INSERT INTO plans (tenant, run_id, plan_id, version, status, record, created, updated) VALUES
		('acme', 'run-1', 'p1', 1, 'awaiting_approval', ?, ?, ?),
		('acme', 'run-2', 'p1', 1, 'completed', ?, NULL, NULL)`, planDoc1, created.UnixNano(), created.UnixNano(), planDoc2)
	mustExec(t, db, `INSERT INTO steps (tenant, run_id, step_id, plan_id, version, record) VALUES ('acme', 'run-1', 's1', 'p1', 1, ?)`, stepDoc)
	planDoc3 := `{"version":1,"tenant":"acme","run_id":"run-3","plan":` + plan + `,"status":"running"}`
	mustExec(t, db, `INSERT INTO plans (tenant, run_id, plan_id, version, status, record, created, updated) VALUES
		('acme', 'run-3', 'p1', 1, 'running', ?, ?, ?)`, planDoc3, created.UnixNano(), created.UnixNano())
	mustExec(t, db, `INSERT INTO approvals (tenant, record_id, version, decision) VALUES
		('acme', 'r-offset', 2, '{"version":2,"request_id":"r-offset","status":"approved","approver":"ana","why":"","decided_at":"2030-01-02T05:04:05.5+02:00","expires":"0001-01-01T00:00:00Z"}'),
		('acme', 'r-first', 1, '{"version":1,"record_id":"r-first","status":"granted","approver":"lee","reason":"","decided_at":"2030-01-02T03:04:05Z","expires":"0001-01-01T00:00:00Z"}'),
		('acme', 'r-zero', 2, '{"version":2,"request_id":"r-zero","status":"denied","approver":"ana","why":"","decided_at":"0001-01-01T00:00:00Z","expires":"0001-01-01T00:00:00Z"}'),
		('acme', 'r-expiring', 2, '{"version":2,"request_id":"r-expiring","status":"approved","approver":"ana","why":"","decided_at":"2030-01-02T03:04:05.123456789Z","expires":"2030-01-02T04:04:05.123456789Z"}'),
		('acme', 'r-pending', 2, '{"version":2,"request_id":"r-pending","status":"pending","decided_at":"2030-01-02T03:04:05.123456789Z","expires":"0001-01-01T00:00:00Z"}'),
		('acme', 'r-damaged', 2, 'not json')`)
	mustExec(t, db, `INSERT INTO claims (tenant, key, state, epoch, holder, lease_expires, outcome, run_id, step_id, tool) VALUES
		('acme', 'k-old', 'completed', 1, 'h', 0, x'', 'run-gone', 's1', 'notify'),
		('acme', 'k-old-free', 'free', 2, 'h', 0, NULL, 'run-gone', 's2', 'notify')`)

	s := openAt(t, path)

	type columns struct {
		decided *int64
		status  *string
		expires *int64
	}
	migrated := map[string]columns{}
	rows, err := db.Query(`SELECT record_id, decided, status, expires FROM approvals`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var (
			id string
			c  columns
		)
		if err := rows.Scan(&id, &c.decided, &c.status, &c.expires); err != nil {
			t.Fatal(err)
		}
		migrated[id] = c
	}
	rows.Close()
	expires := created.Add(time.Hour)
	for id, want := range map[string]columns{
		"r-offset":   {ptr(time.Date(2030, 1, 2, 3, 4, 5, 500_000_000, time.UTC).UnixNano()), ptr("approved"), nil},
		"r-first":    {ptr(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC).UnixNano()), ptr("approved"), nil}, // "granted"
		"r-zero":     {ptr(int64(math.MinInt64)), ptr("denied"), nil},
		"r-expiring": {ptr(created.UnixNano()), ptr("approved"), ptr(expires.UnixNano())},
		"r-pending":  {ptr(created.UnixNano()), ptr("pending"), nil},
		"r-damaged":  {nil, nil, nil},
	} {
		got := migrated[id]
		if !samePtr(got.decided, want.decided) || !samePtr(got.status, want.status) || !samePtr(got.expires, want.expires) {
			t.Errorf("decision %s after the migration: decided %v, status %v, expires %v; want %v, %v, %v", id,
				show(got.decided), show(got.status), show(got.expires), show(want.decided), show(want.status), show(want.expires))
		}
	}
	// The decisions stored before are kept and replaced by the rule.
	for _, c := range []struct {
		what string
		next planexec.Decision
		want error // nil: recorded
	}{
		{"an approval over an approval that never expires", approval("r-offset", created.Add(time.Hour)), store.ErrDecided},
		{"an approval over one of the first layout", approval("r-first", created.Add(time.Hour)), store.ErrDecided},
		{"a denial after it (the first decision stands)", planexec.Decision{RequestID: "r-first", Status: planexec.Denied, Approver: "eve", DecidedAt: created.Add(time.Hour)}, store.ErrDecided},
		{"an approval over that denial", approval("r-first", created.Add(2*time.Hour)), store.ErrDecided},
		{"an approval over a denial made at the zero time", approval("r-zero", created.Add(time.Hour)), store.ErrDecided},
		{"a denial over that denial", planexec.Decision{RequestID: "r-zero", Status: planexec.Denied, Approver: "eve", DecidedAt: created.Add(time.Hour)}, store.ErrDecided},
		{"an approval a nanosecond before the approval expires", approval("r-expiring", expires.Add(-time.Nanosecond)), store.ErrDecided},
		{"an approval when it expires", approval("r-expiring", expires), nil},
		{"an approval over a pending decision", approval("r-pending", created.Add(time.Hour)), nil},
	} {
		before, err := s.Decision(ctx, "acme", c.next.RequestID)
		if err != nil {
			t.Fatalf("%s: Decision before: %v", c.what, err)
		}
		err = s.SaveDecision(ctx, "acme", c.next)
		if !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
			t.Errorf("%s: SaveDecision = %v, want %v", c.what, err, c.want)
		}
		want := before
		if c.want == nil {
			want = c.next
		}
		if got, err := s.Decision(ctx, "acme", c.next.RequestID); err != nil || got.Status != want.Status || got.Approver != want.Approver || !got.DecidedAt.Equal(want.DecidedAt) {
			t.Errorf("%s: the decision recorded is %+v, %v; want %+v", c.what, got, err, want)
		}
	}
	// One whose document cannot be read is not judged, nor replaced, even
	// by a denial: it is refused as Decision refuses it.
	err = s.SaveDecision(ctx, "acme", planexec.Decision{RequestID: "r-damaged", Status: planexec.Denied, Approver: "eve", DecidedAt: created.Add(time.Hour)})
	wantStoreError(t, err, "save decision", store.ErrCorruptRecord)
	var damaged string
	if err := db.QueryRow(`SELECT decision FROM approvals WHERE record_id = 'r-damaged'`).Scan(&damaged); err != nil || damaged != "not json" {
		t.Errorf("the damaged decision after SaveDecision = %q, %v; want it as it was", damaged, err)
	}
	var perTenant, unwritten int
	if err := db.QueryRow(`SELECT count(*) FILTER (WHERE per_tenant = 1), count(*) FILTER (WHERE written IS NULL) FROM claims`).Scan(&perTenant, &unwritten); err != nil ||
		perTenant != 2 || unwritten != 2 {
		t.Errorf("old claims: %d once per tenant, %d with no time (%v); want both 2", perTenant, unwritten, err)
	}
	var holders int
	if err := db.QueryRow(`SELECT count(*) FROM plans WHERE holder IS NULL AND lease_expires IS NULL`).Scan(&holders); err != nil || holders != 3 {
		t.Errorf("%d runs with no holder nor lease (%v), want 3", holders, err)
	}
	later := created.Add(24 * time.Hour)
	if stalled, err := s.Stalled(ctx, later, 10); err != nil || len(stalled) != 1 || stalled[0].RunID != "run-3" {
		t.Errorf("Stalled = %v, %v; want the run that was running", stalled, err)
	}
	if took, err := s.TakeRun(ctx, store.RunRef{Tenant: "acme", RunID: "run-3"}, "replica", later, time.Minute); err != nil || !took {
		t.Errorf("TakeRun of the run that was running = %v, %v", took, err)
	}

	var v, nulls int
	if err := db.QueryRow(`PRAGMA user_version`).Scan(&v); err != nil || v != sqlite.SchemaVersion || v != 5 {
		t.Fatalf("user_version = %d, %v; want 5", v, err)
	}
	if err := db.QueryRow(`SELECT count(*) FROM plans WHERE waiting IS NULL AND delegation IS NULL`).Scan(&nulls); err != nil || nulls != 3 {
		t.Errorf("%d runs with NULL waits and delegation (%v), want 3", nulls, err)
	}
	got, err := s.LoadPlan(ctx, "acme", "run-1")
	if err != nil {
		t.Fatalf("LoadPlan: %v", err)
	}
	if got.Waiting != nil || got.Delegation != nil || string(got.Plan) != plan || got.Status != store.RunAwaitingApproval ||
		!got.Created.Equal(created) || len(got.Steps) != 1 || string(got.Steps["s1"].Outcome) != `{"ok":true}` {
		t.Errorf("LoadPlan = %+v", got)
	}
	runs, err := s.ListRuns(ctx, "acme", store.RunQuery{Limit: 10})
	if err != nil || len(runs) != 3 || runs[0].RunID != "run-1" || runs[1].RunID != "run-3" || runs[2].RunID != "run-2" || runs[0].Waiting != nil ||
		!runs[0].Updated.Equal(created) || !runs[2].Updated.IsZero() {
		t.Errorf("ListRuns = %+v, %v; want run-1, run-3, then run-2 (never updated)", runs, err)
	}
	if runs, err := s.ListRuns(ctx, "acme", store.RunQuery{Statuses: []store.RunStatus{store.RunCompleted}, Limit: 10}); err != nil ||
		len(runs) != 1 || runs[0].RunID != "run-2" {
		t.Errorf("ListRuns of the completed = %+v, %v", runs, err)
	}
	if evs, err := s.Events(ctx, "acme", "run-1", 0, 10); err != nil || len(evs) != 0 {
		t.Errorf("Events = %+v, %v; want none", evs, err)
	}
	if err := s.AppendEvents(ctx, "acme", "run-1", []json.RawMessage{json.RawMessage(`{"kind":"PLAN_RESUMED"}`)}); err != nil {
		t.Fatalf("AppendEvents: %v", err)
	}
	if evs, err := s.Events(ctx, "acme", "run-1", 0, 10); err != nil || len(evs) != 1 || evs[0].Seq != 1 {
		t.Errorf("Events = %+v, %v; want the one appended", evs, err)
	}
	rec := *got
	rec.Waiting = []store.Wait{{StepID: "s1", Tool: "notify", Request: "r1"}}
	rec.Delegation = json.RawMessage(`{"run_id":"run-1"}`)
	if err := s.SavePlan(ctx, &rec); err != nil {
		t.Fatalf("SavePlan of the migrated run: %v", err)
	}
	if again, err := s.LoadPlan(ctx, "acme", "run-1"); err != nil || len(again.Waiting) != 1 || string(again.Delegation) != `{"run_id":"run-1"}` {
		t.Errorf("LoadPlan after saving = %+v, %v", again, err)
	}
	// run-2 completed and was never updated; the decisions whose time is
	// known (the replaced ones included) are old; the claims are kept.
	pruned, err := s.Prune(ctx, "acme", later)
	if want := (store.Pruned{Runs: 1, Decisions: 5}); err != nil || pruned != want {
		t.Errorf("Prune = %+v, %v; want %+v", pruned, err, want)
	}
	if _, err := s.Decision(ctx, "acme", "r-damaged"); !errors.Is(err, store.ErrCorruptRecord) {
		t.Errorf("the damaged decision after Prune: %v, want it still there, corrupt", err)
	}
	// A kept row answers from where it stood; a pruned one would be
	// acquired afresh under epoch 1.
	for _, c := range []struct {
		key   string
		state store.ClaimState
		epoch int64
	}{{"k-old", store.ClaimCompleted, 1}, {"k-old-free", store.ClaimAcquired, 3}} {
		got, err := s.Claim(ctx, store.ClaimRequest{Key: planexec.Key{Tenant: "acme", Digest: c.key}, Holder: "h2", Lease: time.Minute})
		if err != nil || got.State != c.state || got.Epoch != c.epoch {
			t.Errorf("Claim of the old claim %s after Prune = %+v, %v; want state %d under epoch %d (its row kept)", c.key, got, err, c.state, c.epoch)
		}
	}
}

// A file at schema 3, with a run and its history, is carried over to
// schema 4: the run and its history read back as they were, and the file
// gains conversations (store.TranscriptStore), none to begin with.
func TestAFileOfTheThirdSchemaGainsConversations(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "third.db")
	if err := sqlite.MigrateTo(ctx, path, 3); err != nil {
		t.Fatal(err)
	}
	db := rawDB(t, path)
	var tables int
	if err := db.QueryRow(`SELECT count(*) FROM sqlite_master WHERE name IN ('chat_sessions', 'chat_entries')`).Scan(&tables); err != nil || tables != 0 {
		t.Fatalf("schema 3 has %d of the conversation tables (%v), want none", tables, err)
	}
	created := time.Date(2030, 1, 2, 3, 4, 5, 123456789, time.UTC)
	const (
		plan    = `{"id":"p1","goal":"g","revision":1,"steps":[{"id":"s1","tool":"notify","arguments":{"n":412.50}}]}`
		planDoc = `{"version":1,"tenant":"acme","run_id":"run-1","plan":` + plan + `,"status":"completed"}`
		event   = `{"kind":"PLAN_COMPLETED", "n":1}`
	)
	mustExec(t, db, `INSERT INTO plans (tenant, run_id, plan_id, version, status, record, created, updated) VALUES
		('acme', 'run-1', 'p1', 1, 'completed', ?, ?, ?)`, planDoc, created.UnixNano(), created.UnixNano())
	mustExec(t, db, `INSERT INTO events (tenant, run_id, seq, event, stored) VALUES ('acme', 'run-1', 1, ?, ?)`, event, created.UnixNano())

	s := openAt(t, path, sqlite.WithClock(func() time.Time { return created }))
	var v int
	if err := db.QueryRow(`PRAGMA user_version`).Scan(&v); err != nil || v != sqlite.SchemaVersion || v != 5 {
		t.Fatalf("user_version = %d, %v; want 5", v, err)
	}
	if got, err := s.LoadPlan(ctx, "acme", "run-1"); err != nil || string(got.Plan) != plan || got.Status != store.RunCompleted {
		t.Fatalf("LoadPlan = %+v, %v", got, err)
	}
	if evs, err := s.Events(ctx, "acme", "run-1", 0, 10); err != nil || len(evs) != 1 || string(evs[0].Event) != event {
		t.Fatalf("Events = %+v, %v", evs, err)
	}
	if _, err := s.Session(ctx, "acme", "c1"); !errors.Is(err, store.ErrNoRecord) {
		t.Fatalf("Session in a migrated file: %v, want ErrNoRecord", err)
	}
	if err := s.CreateSession(ctx, store.SessionRecord{Tenant: "acme", ID: "c1", Doc: json.RawMessage(`{"a": 1}`)}); err != nil {
		t.Fatal(err)
	}
	res, err := s.TakeTurn(ctx, &store.TurnWrite{Tenant: "acme", Session: "c1", Holder: "h", Now: created, Until: created.Add(time.Minute),
		Entries: []json.RawMessage{json.RawMessage(`{"role":"user"}`)}})
	if err != nil || res != (store.TurnResult{Epoch: 1, Seq: 1}) {
		t.Fatalf("TakeTurn = %+v, %v", res, err)
	}
	if page, err := s.Transcript(ctx, "acme", "c1", 0, 10); err != nil || len(page) != 1 || string(page[0].Entry) != `{"role":"user"}` || !page[0].At.Equal(created) {
		t.Fatalf("Transcript = %+v, %v", page, err)
	}
}

// A file at schema 4, with the runs it held, is carried over to schema 5:
// its runs read at revision 0, as does a row written afterwards without
// the revision (as schema 4 wrote them), and they are saved as any run:
// a save with Update based on revision 0 stores 1, and another based on
// revision 0 after it is fenced; a save without Update stores 1.
func TestRunsOfTheFourthSchemaAreAtRevisionZero(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "fourth.db")
	if err := sqlite.MigrateTo(ctx, path, 4); err != nil {
		t.Fatal(err)
	}
	created := time.Date(2030, 1, 2, 3, 4, 5, 123456789, time.UTC)
	const (
		plan    = `{"id":"p1","goal":"g","revision":1,"steps":[{"id":"s1","tool":"notify","arguments":{"n":412.50}}]}`
		stepDoc = `{"version":1,"step_id":"s1","plan_id":"p1","tool":"notify","status":"done","outcome":{"ok":true},"key":"k1","finished":"2030-01-02T03:04:05.123456789Z"}`
	)
	planDoc := func(run, status string) string {
		return `{"version":1,"tenant":"acme","run_id":"` + run + `","plan":` + plan + `,"status":"` + status + `"}`
	}
	insert := `INSERT INTO plans (tenant, run_id, plan_id, version, status, record, created, updated, waiting, delegation, holder, lease_expires)
		VALUES ('acme', ?, 'p1', 1, ?, ?, ?, ?, NULL, '{"d":1}', ?, ?)`
	db := rawDB(t, path)
	mustExec(t, db, insert, "run-1", "running", planDoc("run-1", "running"), created.UnixNano(), created.UnixNano(), "exec-1", created.Add(time.Minute).UnixNano())
	mustExec(t, db, `INSERT INTO steps (tenant, run_id, step_id, plan_id, version, record) VALUES ('acme', 'run-1', 's1', 'p1', 1, ?)`, stepDoc)

	s := openAt(t, path, sqlite.WithClock(func() time.Time { return created }))
	var v int
	if err := db.QueryRow(`PRAGMA user_version`).Scan(&v); err != nil || v != sqlite.SchemaVersion || v != 5 {
		t.Fatalf("user_version = %d, %v; want 5", v, err)
	}
	// A row written as schema 4 wrote them, after the migration.
	mustExec(t, db, insert, "run-2", "interrupted", planDoc("run-2", "interrupted"), created.UnixNano(), created.UnixNano(), nil, nil)

	read := map[string]*store.PlanRecord{}
	for _, run := range []string{"run-1", "run-2"} {
		got, err := s.LoadPlan(ctx, "acme", run)
		if err != nil || got.Rev != 0 || string(got.Plan) != plan || string(got.Delegation) != `{"d":1}` {
			t.Fatalf("LoadPlan of %s = %+v, %v; want it as written, at revision 0", run, got, err)
		}
		read[run] = got
	}
	if len(read["run-1"].Steps) != 1 || read["run-1"].Holder != "exec-1" {
		t.Errorf("run-1 = %+v, want its step, held by exec-1", read["run-1"])
	}

	rec := *read["run-1"]
	rec.Update, rec.Status, rec.Updated = true, store.RunAwaitingApproval, created.Add(time.Second)
	rec.Waiting = []store.Wait{{StepID: "s2", Tool: "pay", Request: "sha256:r"}}
	if err := s.SavePlan(ctx, &rec); err != nil {
		t.Fatalf("SavePlan with Update based on revision 0: %v", err)
	}
	stale := *read["run-1"]
	stale.Update, stale.Status, stale.Updated = true, store.RunFailed, created.Add(2*time.Second)
	if err := s.SavePlan(ctx, &stale); !errors.Is(err, store.ErrFenced) {
		t.Errorf("a second SavePlan with Update based on revision 0: %v, want ErrFenced", err)
	}
	if got, err := s.LoadPlan(ctx, "acme", "run-1"); err != nil || got.Rev != 1 || got.Status != store.RunAwaitingApproval || len(got.Steps) != 1 {
		t.Errorf("LoadPlan of run-1 = %+v, %v; want it awaiting approval with its step, at revision 1", got, err)
	}

	rec = *read["run-2"]
	rec.Status, rec.Updated = store.RunCompleted, created.Add(time.Second)
	if err := s.SavePlan(ctx, &rec); err != nil {
		t.Fatalf("SavePlan without Update of run-2: %v", err)
	}
	if got, err := s.LoadPlan(ctx, "acme", "run-2"); err != nil || got.Rev != 1 || got.Status != store.RunCompleted {
		t.Errorf("LoadPlan of run-2 = %+v, %v; want it completed at revision 1", got, err)
	}
}

func ptr[T any](v T) *T { return &v }

func samePtr[T comparable](a, b *T) bool { return a == b || a != nil && b != nil && *a == *b }

func show[T any](p *T) any {
	if p == nil {
		return "NULL"
	}
	return *p
}

// approval is an approval of request by eve at at, which never expires.
func approval(request string, at time.Time) planexec.Decision {
	return planexec.Decision{RequestID: request, Status: planexec.Approved, Approver: "eve", DecidedAt: at}
}
