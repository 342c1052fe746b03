package postgres_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/shopspring/decimal"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/store"
	"github.com/planexec/planexec/store/postgres"
)

// A schema the first version of this package made, with the rows it wrote
// (records in json columns, an empty outcome as NULL), is carried over by
// the migrations: every record reads back as it was written, byte for byte,
// and a run whose goal held a NUL, which could not be saved again, can be.
func TestRowsOfTheFirstSchemaAreCarriedOver(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := sharedPool(t)
	schema := freshSchema(t, pool)
	if err := postgres.MigrateTo(ctx, pool, schema, 1); err != nil {
		t.Fatal(err)
	}
	created := time.Date(2030, 1, 2, 3, 4, 5, 123456789, time.UTC)
	const plan = `{"id":"p1","goal":"nul \u0000 goal 😀","revision":1,"steps":[{"id":"s1","tool":"notify","arguments":{"note":"\u0000 \u2028","n":412.50},"intent":"ls \u2028"}]}`
	planDoc := []byte(`{"version":1,"tenant":"acme","run_id":"run-1","plan":` + plan + `,"status":"running","steps":null,` +
		`"created":"2030-01-02T03:04:05.123456789Z","updated":"2030-01-02T03:04:05.123456789Z"}`)
	stepDoc := mustJSON(t, map[string]any{"version": 1, "step_id": "s1", "plan_id": "p1", "tool": "notify", "status": "done",
		"outcome": json.RawMessage(`{"echo":"\u0000"}`), "key": "k-done", "finished": created})
	decisionDoc := mustJSON(t, map[string]any{"version": 1, "record_id": "r1", "status": "denied", "approver": "ana\x00", "reason": "no \U0001D11E",
		"decided_at": created, "expires": time.Time{}})
	for _, stmt := range []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO plans (tenant, run_id, plan_id, version, status, record, created, updated) VALUES ('acme', 'run-1', 'p1', 1, 'running', $1::text::json, $2, $2)`,
			[]any{string(planDoc), created}},
		{`INSERT INTO steps (tenant, run_id, step_id, plan_id, record) VALUES ('acme', 'run-1', 's1', 'p1', $1::text::json)`, []any{string(stepDoc)}},
		{`INSERT INTO approvals (tenant, record_id, version, status, decision, decided_at) VALUES ('acme', 'r1', 1, 'denied', $1::text::json, $2)`,
			[]any{string(decisionDoc), created}},
		{`INSERT INTO claims (tenant, key, state, epoch, holder, lease_expires, outcome, run_id, step_id, tool) VALUES
			('acme', 'k-empty', 'completed', 1, 'h', now(), NULL, 'run-1', 's0', 'notify'),
			('acme', 'k-done', 'completed', 2, 'h', now(), convert_to('"PNR"', 'UTF8'), 'run-1', 's1', 'notify'),
			('acme', 'k-doubt', 'in_doubt', 3, 'h', now(), NULL, 'run-1', 's2', 'notify')`, nil},
	} {
		sqlExec(t, schema, stmt.sql, stmt.args...)
	}

	s, err := postgres.New(ctx, pool, postgres.WithSchema(schema))
	if err != nil {
		t.Fatalf("New over the first schema: %v", err)
	}
	defer s.Close()

	for _, c := range []struct {
		table, column, where string
		want                 []byte
	}{
		{"plans", "record", "run_id = 'run-1'", planDoc},
		{"steps", "record", "step_id = 's1'", stepDoc},
		{"approvals", "decision", "record_id = 'r1'", decisionDoc},
	} {
		var b []byte
		q := "SELECT " + c.column + " FROM " + pgx.Identifier{schema, c.table}.Sanitize() + " WHERE " + c.where
		if err := pool.QueryRow(ctx, q).Scan(&b); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, c.want) {
			t.Errorf("%s.%s after the migration = %q, want the json it held, byte for byte: %q", c.table, c.column, b, c.want)
		}
	}

	got, err := s.LoadPlan(ctx, "acme", "run-1")
	if err != nil {
		t.Fatalf("LoadPlan: %v", err)
	}
	if string(got.Plan) != plan || got.PlanID != "p1" || !got.Created.Equal(created) {
		t.Errorf("LoadPlan = %+v, want plan %s", got, plan)
	}
	if st := got.Steps["s1"]; st.Status != planexec.StepDone || string(st.Outcome) != `{"echo":"\u0000"}` {
		t.Errorf("step s1 = %+v", st)
	}
	// The run that could not be saved again can be.
	rec := *got
	rec.Status, rec.Updated = store.RunCompleted, created.Add(time.Hour)
	if err := s.SavePlan(ctx, &rec); err != nil {
		t.Fatalf("SavePlan of the migrated run: %v", err)
	}
	if got, err := s.LoadPlan(ctx, "acme", "run-1"); err != nil || got.Status != store.RunCompleted || len(got.Steps) != 1 || !got.Created.Equal(created) {
		t.Errorf("after saving again: %+v, %v", got, err)
	}

	if d, err := s.Decision(ctx, "acme", "r1"); err != nil || d.Approver != "ana\x00" || d.Why != "no \U0001D11E" || d.Status != planexec.Denied {
		t.Errorf("Decision = %+v, %v", d, err)
	}

	for _, c := range []struct {
		key     string
		state   store.ClaimState
		outcome string
	}{{"k-empty", store.ClaimCompleted, ""}, {"k-done", store.ClaimCompleted, `"PNR"`}, {"k-doubt", store.ClaimInDoubt, ""}} {
		got, err := s.Claim(ctx, store.ClaimRequest{Key: planexec.Key{Tenant: "acme", Digest: c.key}, Holder: "h2", Lease: time.Minute, TakeOver: true})
		if err != nil || got.State != c.state || string(got.Outcome) != c.outcome {
			t.Errorf("Claim of %s = %+v, %v; want state %d with outcome %q", c.key, got, err, c.state, c.outcome)
		}
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// A schema at version 2, with the rows that version wrote, is carried over
// to version 3: its runs read back as they were, waiting for nothing under
// no delegation, held by nobody, are listed, have no history until one is
// appended, and save and complete steps as before, now with what they wait
// for, their delegation and their events. A run it left running has no
// lease, and is found stalled and taken to be recovered. Its claims are
// once per run, and its claims and decisions are pruned as those written
// since are; ceilings are counted. Its decisions are given their expiry
// (and the first layout's "granted" the status approved) from their
// documents, so that SaveDecision keeps and replaces them by its rule as
// it does those written since.
func TestRowsOfTheSecondSchemaAreCarriedOver(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := sharedPool(t)
	schema := freshSchema(t, pool)
	if err := postgres.MigrateTo(ctx, pool, schema, 2); err != nil {
		t.Fatal(err)
	}
	created := time.Date(2030, 1, 2, 3, 4, 5, 123456000, time.UTC)
	updated := created.Add(time.Minute)
	const plan = `{"id":"p1","goal":"nul \u0000 goal","revision":1,"steps":[{"id":"s1","tool":"notify","arguments":{"n":412.50}},{"id":"s2","tool":"notify","arguments":{}}]}`
	planDoc := func(run, status string, at time.Time) string {
		return `{"version":1,"tenant":"acme","run_id":"` + run + `","plan":` + plan + `,"status":"` + status + `","steps":null,` +
			`"created":"2030-01-02T03:04:05.123456Z","updated":"` + at.Format(time.RFC3339Nano) + `"}`
	}
	stepDoc := mustJSON(t, map[string]any{"version": 1, "step_id": "s1", "plan_id": "p1", "tool": "notify", "status": "done",
		"outcome": json.RawMessage(`{"echo":"\u0000"}`), "key": "k-done", "finished": created})
	sqlExec(t, schema, `INSERT INTO plans (tenant, run_id, plan_id, version, status, record, created, updated) VALUES
		('acme', 'run-1', 'p1', 1, 'running', convert_to($1, 'UTF8'), $3, $4),
		('acme', 'run-2', 'p1', 1, 'awaiting_approval', convert_to($2, 'UTF8'), $3, $3)`,
		planDoc("run-1", "running", updated), planDoc("run-2", "awaiting_approval", created), created, updated)
	sqlExec(t, schema, `INSERT INTO steps (tenant, run_id, step_id, plan_id, version, record) VALUES ('acme', 'run-1', 's1', 'p1', 1, $1)`, stepDoc)
	sqlExec(t, schema, `INSERT INTO claims (tenant, key, state, epoch, holder, lease_expires, outcome, run_id, step_id, tool, version) VALUES
		('acme', 'k-done', 'completed', 1, 'h', now(), convert_to('"PNR"', 'UTF8'), 'run-1', 's1', 'notify', 1),
		('acme', 'k-s2', 'acquired', 4, 'h', now() + interval '1 hour', NULL, 'run-1', 's2', 'notify', 1),
		('acme', 'k-gone', 'completed', 1, 'h', now(), convert_to('"ok"', 'UTF8'), 'run-forgotten', 's1', 'notify', 1)`)
	decisionDoc := mustJSON(t, map[string]any{"version": 2, "request_id": "r1", "status": "approved", "approver": "ana", "decided_at": created})
	sqlExec(t, schema, `INSERT INTO approvals (tenant, record_id, version, status, decision, decided_at) VALUES ('acme', 'r1', 2, 'approved', $1, $2)`, decisionDoc, created)
	// A decision the first version wrote ("granted", carried over to
	// bytea by migration 2), one that expires, one pending, one damaged.
	expires := created.Add(time.Hour)
	for _, d := range []struct {
		id, status string
		version    int
		doc        []byte
	}{
		{"r-first", "granted", 1, mustJSON(t, map[string]any{"version": 1, "record_id": "r-first", "status": "granted", "approver": "lee", "reason": "",
			"decided_at": created, "expires": time.Time{}})},
		{"r-expiring", "approved", 2, mustJSON(t, map[string]any{"version": 2, "request_id": "r-expiring", "status": "approved", "approver": "ana",
			"decided_at": created, "expires": expires})},
		{"r-pending", "pending", 2, mustJSON(t, map[string]any{"version": 2, "request_id": "r-pending", "status": "pending", "decided_at": created,
			"expires": time.Time{}})},
		{"r-damaged", "approved", 2, []byte("not json")},
	} {
		sqlExec(t, schema, `INSERT INTO approvals (tenant, record_id, version, status, decision, decided_at) VALUES ('acme', $1, $2, $3, $4, $5)`,
			d.id, d.version, d.status, d.doc, created)
	}

	s, err := postgres.New(ctx, pool, postgres.WithSchema(schema))
	if err != nil {
		t.Fatalf("New over the second schema: %v", err)
	}
	defer s.Close()
	var version int
	if err := pool.QueryRow(ctx, "SELECT max(version) FROM "+pgx.Identifier{schema, "schema_version"}.Sanitize()).Scan(&version); err != nil || version != postgres.SchemaVersion {
		t.Fatalf("schema at version %d, %v; want %d", version, err, postgres.SchemaVersion)
	}

	got, err := s.LoadPlan(ctx, "acme", "run-1")
	if err != nil {
		t.Fatalf("LoadPlan: %v", err)
	}
	if string(got.Plan) != plan || got.Status != store.RunRunning || got.Waiting != nil || got.Delegation != nil || !got.Created.Equal(created) || len(got.Steps) != 1 {
		t.Errorf("LoadPlan = %+v", got)
	}
	if st := got.Steps["s1"]; st.Status != planexec.StepDone || string(st.Outcome) != `{"echo":"\u0000"}` {
		t.Errorf("step s1 = %+v", st)
	}
	if got.Holder != "" || !got.LeaseExpires.IsZero() {
		t.Errorf("a run of the second schema is held by %q until %v", got.Holder, got.LeaseExpires)
	}
	var nulls, perTenant int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{schema, "plans"}.Sanitize()+" WHERE holder IS NULL AND lease_expires IS NULL").Scan(&nulls); err != nil || nulls != 2 {
		t.Errorf("%d runs of the second schema have no holder and no lease, want 2 (%v)", nulls, err)
	}
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{schema, "claims"}.Sanitize()+" WHERE per_tenant").Scan(&perTenant); err != nil || perTenant != 0 {
		t.Errorf("%d claims of the second schema are once per tenant, want none (%v)", perTenant, err)
	}
	// The decisions' columns, then SaveDecision's rule over them.
	type columns struct {
		status  string
		expires *time.Time // nil: never ('infinity')
	}
	migrated := map[string]columns{}
	rows, err := pool.Query(ctx, "SELECT record_id, status, CASE WHEN isfinite(expires) THEN expires END FROM "+pgx.Identifier{schema, "approvals"}.Sanitize())
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var (
			id string
			c  columns
		)
		if err := rows.Scan(&id, &c.status, &c.expires); err != nil {
			t.Fatal(err)
		}
		migrated[id] = c
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]columns{
		"r1":         {"approved", nil},
		"r-first":    {"approved", nil},
		"r-expiring": {"approved", &expires},
		"r-pending":  {"pending", nil},
		"r-damaged":  {"approved", nil}, // as it was, never expiring
	} {
		got := migrated[id]
		if got.status != want.status || (got.expires == nil) != (want.expires == nil) || got.expires != nil && !got.expires.Equal(*want.expires) {
			t.Errorf("decision %s after the migration: status %q, expires %v; want %q, %v (nil: never)", id, got.status, got.expires, want.status, want.expires)
		}
	}
	approval := func(id string, at time.Time) planexec.Decision {
		return planexec.Decision{RequestID: id, Status: planexec.Approved, Approver: "eve", DecidedAt: at}
	}
	for _, c := range []struct {
		what string
		next planexec.Decision
		want error // nil: recorded
	}{
		{"an approval over an approval that never expires", approval("r1", created.Add(time.Hour)), store.ErrDecided},
		{"an approval over one of the first layout", approval("r-first", created.Add(time.Hour)), store.ErrDecided},
		{"a denial after it (the first decision stands)", planexec.Decision{RequestID: "r-first", Status: planexec.Denied, Approver: "eve", DecidedAt: created.Add(time.Hour)}, store.ErrDecided},
		{"an approval over that denial", approval("r-first", created.Add(2*time.Hour)), store.ErrDecided},
		{"an approval a nanosecond before the approval expires", approval("r-expiring", expires.Add(-time.Nanosecond)), store.ErrDecided},
		{"an approval when it expires", approval("r-expiring", expires), nil},
		{"an approval over a pending decision", approval("r-pending", created.Add(time.Hour)), nil},
	} {
		before, err := s.Decision(ctx, "acme", c.next.RequestID)
		if err != nil {
			t.Fatalf("%s: Decision before: %v", c.what, err)
		}
		if err := s.SaveDecision(ctx, "acme", c.next); !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
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
	// The damaged approval is kept, as its columns say, and refused as
	// Decision refuses it.
	wantStoreError(t, "an approval over a damaged approval", s.SaveDecision(ctx, "acme", approval("r-damaged", created.Add(time.Hour))), store.ErrCorruptRecord)
	var damaged []byte
	if err := pool.QueryRow(ctx, "SELECT decision FROM "+pgx.Identifier{schema, "approvals"}.Sanitize()+" WHERE record_id = 'r-damaged'").Scan(&damaged); err != nil || string(damaged) != "not json" {
		t.Errorf("the damaged decision after SaveDecision = %q, %v; want it as it was", damaged, err)
	}

	// Left running with no lease: stalled, and taken once.
	if stalled, err := s.Stalled(ctx, time.Now(), 10); err != nil || len(stalled) != 1 || stalled[0] != (store.RunRef{Tenant: "acme", RunID: "run-1"}) {
		t.Errorf("Stalled = %+v, %v; want the run left running", stalled, err)
	}
	for i, want := range []bool{true, false} {
		if took, err := s.TakeRun(ctx, store.RunRef{Tenant: "acme", RunID: "run-1"}, "recoverer", time.Now(), time.Minute); took != want || err != nil {
			t.Errorf("TakeRun %d = %v, %v; want %v", i+1, took, err, want)
		}
	}
	runs, err := s.ListRuns(ctx, "acme", store.RunQuery{Limit: 10})
	if err != nil || len(runs) != 2 {
		t.Fatalf("ListRuns = %+v, %v", runs, err)
	}
	if r := runs[0]; r.RunID != "run-1" || r.PlanID != "p1" || r.Status != store.RunRunning || r.Waiting != nil || !r.Created.Equal(created) || !r.Updated.Equal(updated) {
		t.Errorf("run-1 listed as %+v", r)
	}
	if r := runs[1]; r.RunID != "run-2" || r.Status != store.RunAwaitingApproval || r.Waiting != nil {
		t.Errorf("run-2 listed as %+v", r)
	}
	if page, err := s.ListRuns(ctx, "acme", store.RunQuery{Statuses: []store.RunStatus{store.RunAwaitingApproval}, Limit: 10}); err != nil || len(page) != 1 || page[0].RunID != "run-2" {
		t.Errorf("ListRuns awaiting approval = %+v, %v", page, err)
	}
	if h, err := s.Events(ctx, "acme", "run-1", 0, 10); err != nil || len(h) != 0 {
		t.Errorf("a run of the second schema has a history: %+v, %v", h, err)
	}

	// The run goes on: its step in flight completes with its events, and
	// its plan is saved waiting, under a delegation.
	if err := s.AppendEvents(ctx, "acme", "run-1", []json.RawMessage{json.RawMessage(`{"kind":"RESUMED"}`)}); err != nil {
		t.Fatal(err)
	}
	w := &store.StepWrite{Key: planexec.Key{Tenant: "acme", Digest: "k-s2"}, Epoch: 4, RunID: "run-1", Outcome: json.RawMessage(`"sent"`),
		Record: store.StepRecord{StepID: "s2", PlanID: "p1", Tool: "notify", Status: planexec.StepDone, Outcome: json.RawMessage(`"sent"`), Key: "k-s2", Finished: updated},
		Events: []json.RawMessage{json.RawMessage(`{"kind":"STEP_EXECUTED","step_id":"s2"}`)}}
	if err := s.CompleteStep(ctx, w); err != nil {
		t.Fatalf("CompleteStep of a claim of the second schema: %v", err)
	}
	if h, err := s.Events(ctx, "acme", "run-1", 0, 10); err != nil || len(h) != 2 || h[0].Seq != 1 || h[1].Seq != 2 || string(h[1].Event) != string(w.Events[0]) {
		t.Errorf("history after the step = %+v, %v", h, err)
	}
	// Saved by the recoverer that took it, which lets it go.
	rec := *got
	rec.Status, rec.Updated, rec.Holder = store.RunAwaitingApproval, updated.Add(time.Minute), "recoverer"
	rec.Waiting = []store.Wait{{StepID: "s2", Tool: "notify", Request: "sha256:r"}}
	rec.Delegation = json.RawMessage(`{"run_id":"run-1","tenant":"acme"}`)
	if err := s.SavePlan(ctx, &rec); err != nil {
		t.Fatalf("SavePlan of the migrated run: %v", err)
	}
	again, err := s.LoadPlan(ctx, "acme", "run-1")
	if err != nil || again.Status != store.RunAwaitingApproval || len(again.Steps) != 2 || len(again.Waiting) != 1 || !reflect.DeepEqual(again.Waiting[0], rec.Waiting[0]) ||
		string(again.Delegation) != string(rec.Delegation) || !again.Created.Equal(created) || again.Holder != "" {
		t.Errorf("after saving again: %+v, %v", again, err)
	}

	// Spends are counted; pruning drops the decisions (all made before the
	// cut, the replaced ones included) and the claim of the run that is
	// gone, and nothing of the run that waits.
	if err := s.Spend(ctx, store.Spend{Tenant: "acme", Grant: "g", Key: "k-s2", Amount: decimal.RequireFromString("12.50"), At: updated}, time.Hour, decimal.RequireFromString("20")); err != nil {
		t.Errorf("Spend: %v", err)
	}
	pruned, err := s.Prune(ctx, "acme", updated.Add(24*time.Hour))
	if want := (store.Pruned{Claims: 1, Decisions: 5, Spends: 1}); err != nil || pruned != want {
		t.Errorf("Prune = %+v, %v; want %+v", pruned, err, want)
	}
	if _, err := s.Decision(ctx, "acme", "r1"); !errors.Is(err, store.ErrNoRecord) {
		t.Errorf("the decision of the second schema after Prune: %v, want ErrNoRecord", err)
	}
	if again, err := s.LoadPlan(ctx, "acme", "run-1"); err != nil || len(again.Steps) != 2 {
		t.Errorf("the waiting run after Prune: %+v, %v", again, err)
	}
}

// A schema at version 3, with a run and its history, is carried over to
// version 4: the run and its history read back as they were, and the
// schema gains conversations (store.TranscriptStore), none to begin with.
func TestASchemaOfTheThirdVersionGainsConversations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := sharedPool(t)
	schema := freshSchema(t, pool)
	if err := postgres.MigrateTo(ctx, pool, schema, 3); err != nil {
		t.Fatal(err)
	}
	var tables int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE schemaname = $1 AND tablename IN ('chat_sessions', 'chat_entries')`, schema).
		Scan(&tables); err != nil || tables != 0 {
		t.Fatalf("version 3 has %d of the conversation tables (%v), want none", tables, err)
	}
	created := time.Date(2030, 1, 2, 3, 4, 5, 123456000, time.UTC)
	const (
		plan  = `{"id":"p1","goal":"g","revision":1,"steps":[{"id":"s1","tool":"notify","arguments":{"n":412.50}}]}`
		event = `{"kind":"PLAN_COMPLETED", "n":1}`
	)
	planDoc := `{"version":1,"tenant":"acme","run_id":"run-1","plan":` + plan + `,"status":"completed","steps":null,` +
		`"created":"2030-01-02T03:04:05.123456Z","updated":"2030-01-02T03:04:05.123456Z"}`
	sqlExec(t, schema, `INSERT INTO plans (tenant, run_id, plan_id, version, status, record, created, updated) VALUES
		('acme', 'run-1', 'p1', 1, 'completed', convert_to($1, 'UTF8'), $2, $2)`, planDoc, created)
	sqlExec(t, schema, `INSERT INTO histories (tenant, run_id, last_seq, updated) VALUES ('acme', 'run-1', 1, $1)`, created)
	sqlExec(t, schema, `INSERT INTO events (tenant, run_id, seq, event) VALUES ('acme', 'run-1', 1, convert_to($1, 'UTF8'))`, event)

	s, err := postgres.New(ctx, pool, postgres.WithSchema(schema), postgres.WithClock(func() time.Time { return created }))
	if err != nil {
		t.Fatalf("New over the third version: %v", err)
	}
	defer s.Close()
	var version int
	if err := pool.QueryRow(ctx, "SELECT max(version) FROM "+pgx.Identifier{schema, "schema_version"}.Sanitize()).Scan(&version); err != nil || version != 5 {
		t.Fatalf("schema at version %d, %v; want 5, this package's (%d)", version, err, postgres.SchemaVersion)
	}
	if got, err := s.LoadPlan(ctx, "acme", "run-1"); err != nil || string(got.Plan) != plan || got.Status != store.RunCompleted {
		t.Fatalf("LoadPlan = %+v, %v", got, err)
	}
	if evs, err := s.Events(ctx, "acme", "run-1", 0, 10); err != nil || len(evs) != 1 || string(evs[0].Event) != event {
		t.Fatalf("Events = %+v, %v", evs, err)
	}
	if _, err := s.Session(ctx, "acme", "c1"); !errors.Is(err, store.ErrNoRecord) {
		t.Fatalf("Session in a migrated schema: %v, want ErrNoRecord", err)
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

// A schema at version 4, with the runs it held, is carried over to version
// 5: its runs read at revision 0, as does a row written afterwards without
// the revision (as a replica of version 4 writes them), and they are saved
// as any run: a save with Update based on revision 0 writes 1, and another
// based on revision 0 after it is fenced; a save without Update writes 1.
func TestRunsOfTheFourthVersionAreAtRevisionZero(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := sharedPool(t)
	schema := freshSchema(t, pool)
	if err := postgres.MigrateTo(ctx, pool, schema, 4); err != nil {
		t.Fatal(err)
	}
	created := time.Date(2030, 1, 2, 3, 4, 5, 123456000, time.UTC)
	const plan = `{"id":"p1","goal":"g","revision":1,"steps":[{"id":"s1","tool":"notify","arguments":{"n":412.50}}]}`
	planDoc := func(run, status string) string {
		return `{"version":1,"tenant":"acme","run_id":"` + run + `","plan":` + plan + `,"status":"` + status + `","steps":null,` +
			`"created":"2030-01-02T03:04:05.123456Z","updated":"2030-01-02T03:04:05.123456Z"}`
	}
	const insert = `INSERT INTO plans (tenant, run_id, plan_id, version, status, record, created, updated, waiting, delegation, holder, lease_expires)
		VALUES ('acme', $1, 'p1', 1, $2, convert_to($3, 'UTF8'), $4, $4, NULL, convert_to('{"d":1}', 'UTF8'), $5, $6)`
	sqlExec(t, schema, insert, "run-1", "running", planDoc("run-1", "running"), created, "exec-1", created.Add(time.Minute))
	stepDoc := mustJSON(t, map[string]any{"version": 1, "step_id": "s1", "plan_id": "p1", "tool": "notify", "status": "done",
		"outcome": json.RawMessage(`{"ok":true}`), "key": "k1", "finished": created})
	sqlExec(t, schema, `INSERT INTO steps (tenant, run_id, step_id, plan_id, version, record) VALUES ('acme', 'run-1', 's1', 'p1', 1, $1)`, stepDoc)

	s, err := postgres.New(ctx, pool, postgres.WithSchema(schema), postgres.WithClock(func() time.Time { return created }))
	if err != nil {
		t.Fatalf("New over the fourth version: %v", err)
	}
	defer s.Close()
	var version int
	if err := pool.QueryRow(ctx, "SELECT max(version) FROM "+pgx.Identifier{schema, "schema_version"}.Sanitize()).Scan(&version); err != nil || version != 5 {
		t.Fatalf("schema at version %d, %v; want 5, this package's (%d)", version, err, postgres.SchemaVersion)
	}
	// A row written as a replica of version 4 writes them, after the
	// migration.
	sqlExec(t, schema, insert, "run-2", "interrupted", planDoc("run-2", "interrupted"), created, nil, nil)

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
