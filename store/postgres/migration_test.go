package postgres_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

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
