package planexec_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/store"
	"github.com/planexec/planexec/store/memory"
)

// The caller's tool: confirm a booking with the traveller, on their device.
const confirmSchema = `{"type":"object","properties":{
	"flight":{"type":"string","minLength":3},
	"seats":{"type":"integer","minimum":1,"maximum":9},
	"note":{"type":"string"}},
	"required":["flight","seats"],"additionalProperties":false}`

func confirmTool(t *testing.T) *planexec.Tool {
	t.Helper()
	tool, err := planexec.NewClientTool("confirm_with_traveller", "Ask the traveller to confirm the flight.", json.RawMessage(confirmSchema))
	if err != nil {
		t.Fatal(err)
	}
	return tool
}

// clientRun is a run over the trip's tools and the caller's confirm tool.
func clientRun(t *testing.T, r *recorder, st store.Store) *planexec.Run {
	t.Helper()
	run, _ := newExecutor(t, r, func(s *setup) {
		s.Store = st
		s.Options = append(s.Options, planexec.WithTools(confirmTool(t)))
	})
	return run
}

func confirmPlan() planexec.Plan {
	return planexec.Plan{Goal: "book what the traveller confirms", Steps: []planexec.Step{
		step("s1", "search_flights", `{"origin":"LHR","destination":"JFK"}`),
		step("s2", "confirm_with_traveller", `{"flight":{"$from":"s1","path":"/0"},"seats":1}`),
		step("s3", "book_flight", `{"flight":"BA117","seats":1}`, "s2"),
	}}
}

func TestAStepOfTheCallersToolIsHandedBackAndItsResultGoesOn(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	r := &recorder{}
	run := clientRun(t, r, st)
	if spec := run.Catalog()[len(run.Catalog())-1]; spec.Name != "confirm_with_traveller" || !strings.Contains(string(spec.Schema), `"minimum":1`) {
		t.Errorf("the catalog shows %+v", spec)
	}
	res, err := run.Execute(ctx, confirmPlan())
	var handed *planexec.ToolCallPendingError
	if !errors.As(err, &handed) || len(handed.Calls) != 1 || !handed.Stored {
		t.Fatalf("Execute: %v, want one call handed back", err)
	}
	call := handed.Calls[0]
	if call.StepID != "s2" || call.Tool != "confirm_with_traveller" || string(call.Arguments) != `{"flight":"BA117","seats":1}` || !strings.HasPrefix(call.ID, "call_") {
		t.Errorf("call %+v", call)
	}
	if res.Steps["s1"].Status != planexec.StepDone || callsOf(r, "book_flight") != 0 {
		t.Errorf("before the result: %+v, booked %d", res.Steps, callsOf(r, "book_flight"))
	}
	if planexec.StatusOf(err) != planexec.RunAwaitingTool {
		t.Errorf("StatusOf = %s", planexec.StatusOf(err))
	}
	ex := mustExecutor(t, st)
	page, err := ex.Runs(ctx, "acme", planexec.RunQuery{Status: []planexec.RunStatus{planexec.RunAwaitingTool}})
	if err != nil || len(page.Runs) != 1 || page.Runs[0].Waiting[0].Call != call.ID {
		t.Fatalf("listed %+v, %v", page, err)
	}
	// What it waits for says the call whole, for a client that lost it.
	if w := page.Runs[0].Waiting[0]; w.HandedBack == nil || w.HandedBack.ID != call.ID || w.HandedBack.Tool != call.Tool ||
		string(w.HandedBack.Arguments) != string(call.Arguments) || w.HandedBack.StepID != "s2" {
		t.Errorf("the wait's call = %+v, want %+v", w.HandedBack, call)
	}

	// Resumed before the result, it hands the same call back again.
	again := clientRun(t, r, st)
	if _, err := again.Resume(ctx); !errors.As(err, &handed) || handed.Calls[0].ID != call.ID {
		t.Fatalf("Resume before the result: %v", err)
	}
	if err := again.SubmitResult(ctx, call.ID, json.RawMessage(`{"confirmed": true}`)); err != nil {
		t.Fatalf("SubmitResult: %v", err)
	}
	if err := again.SubmitResult(ctx, call.ID, json.RawMessage(`{"confirmed": true}`)); err != nil {
		t.Errorf("the same result again (a retried request): %v", err)
	}
	if err := again.SubmitResult(ctx, call.ID, json.RawMessage(`{"confirmed": false}`)); !errors.Is(err, planexec.ErrNotPending) {
		t.Errorf("another result: %v, want ErrNotPending", err)
	}
	res, err = again.Resume(ctx)
	if err != nil {
		t.Fatalf("Resume: %v", err)
	}
	if s2 := res.Steps["s2"]; string(s2.Outcome) != `{"confirmed":true}` || !res.Complete || callsOf(r, "book_flight") != 1 || callsOf(r, "search_flights") != 1 {
		t.Errorf("after the result: %+v; searched %d, booked %d", res.Steps, callsOf(r, "search_flights"), callsOf(r, "book_flight"))
	}
}

func TestAResultThatCannotBeRecordedIsRefused(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	run := clientRun(t, &recorder{}, st)
	_, err := run.Execute(ctx, confirmPlan())
	var handed *planexec.ToolCallPendingError
	if !errors.As(err, &handed) {
		t.Fatal(err)
	}
	if err := run.SubmitResult(ctx, "call_made_up", json.RawMessage(`1`)); !errors.Is(err, planexec.ErrNotPending) {
		t.Errorf("an unknown call: %v", err)
	}
	for _, bad := range []string{`{"a":1,"a":2}`, `{"a":`, ``, `1e99999`} {
		if err := run.SubmitResult(ctx, handed.Calls[0].ID, json.RawMessage(bad)); !errors.Is(err, planexec.ErrInvalidDecision) {
			t.Errorf("result %q: %v, want ErrInvalidDecision", bad, err)
		}
	}
	other, _ := newExecutor(t, &recorder{}, edits(withStore(st), func(s *setup) { s.Delegation.RunID = "run-2" }))
	if err := other.SubmitResult(ctx, handed.Calls[0].ID, json.RawMessage(`1`)); err == nil {
		t.Error("another run took the call's result")
	}
}

func TestTheCallersToolsArgumentsAreHeldToItsSchema(t *testing.T) {
	for name, tc := range map[string]struct{ args, path, says string }{
		"a missing property":     {`{"flight":"BA117"}`, "", `missing required "seats"`},
		"a wrong type":           {`{"flight":"BA117","seats":"1"}`, "/seats", "type"},
		"a value out of range":   {`{"flight":"BA117","seats":10}`, "/seats", "maximum"},
		"a property not allowed": {`{"flight":"BA117","seats":1,"pin":"4321"}`, "", "additionalProperties"},
		"a key written twice":    {`{"flight":"BA117","seats":1,"seats":2}`, "/seats", "duplicate key"},
		"a huge number":          {`{"flight":"BA117","seats":1e999999}`, "/seats", "too long or too large"},
		"a string too short":     {`{"flight":"BA","seats":1}`, "/flight", "minLength"},
	} {
		t.Run(name, func(t *testing.T) {
			run := clientRun(t, &recorder{}, nil)
			err := run.Validate(planexec.Plan{Steps: []planexec.Step{step("s1", "confirm_with_traveller", tc.args)}})
			var perr *planexec.PlanValidationError
			if !errors.As(err, &perr) || perr.Reason != planexec.ReasonArguments || perr.Tool != "confirm_with_traveller" {
				t.Fatalf("Validate: %v", err)
			}
			v := perr.Violations[0]
			if v.Path != tc.path || !strings.Contains(v.Why, tc.says) {
				t.Errorf("violation %+v, want %q saying %q", v, tc.path, tc.says)
			}
			if strings.Contains(err.Error(), "4321") || strings.Contains(perr.Violations[0].Why, "BA") {
				t.Errorf("the refusal quotes the arguments: %v %v", err, perr.Violations)
			}
		})
	}
}

func TestACallersSchemaThatReachesOutsideItselfIsRefused(t *testing.T) {
	for _, schema := range []string{
		`{"type":"object","properties":{"a":{"$ref":"file:///etc/passwd"}}}`,
		`{"type":"object","properties":{"a":{"$ref":"http://127.0.0.1:1/schema.json"}}}`,
		`{"type":"array"}`,
		`{"type":"object","properties":{},"properties":{}}`,
		`not json`,
	} {
		if _, err := planexec.NewClientTool("t", "", json.RawMessage(schema)); err == nil {
			t.Errorf("schema %s was accepted", schema)
		}
	}
	inner := `{"type":"object","$defs":{"n":{"type":"integer"}},"properties":{"a":{"$ref":"#/$defs/n"}}}`
	tool, err := planexec.NewClientTool("t", "", json.RawMessage(inner))
	if err != nil {
		t.Fatalf("a schema with references within it: %v", err)
	}
	if err := tool.Contract().Check(json.RawMessage(`{"a":"x"}`)); !errors.Is(err, planexec.ReasonArguments) {
		t.Errorf("a reference within the schema is not followed: %v", err)
	}
}

func TestARunOfRoundsWaitsForTheCallersResultAndTellsThePlanner(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	r := &recorder{}
	p := &script{payloads: []string{
		`{"goal":"confirm","steps":[{"id":"c","tool":"confirm_with_traveller","arguments":{"flight":"BA117","seats":1}}]}`,
		answer("The traveller confirmed BA117."),
	}}
	run := clientRun(t, r, st)
	_, err := run.Do(ctx, p, "confirm BA117")
	var handed *planexec.ToolCallPendingError
	if !errors.As(err, &handed) {
		t.Fatalf("Do: %v", err)
	}
	next := clientRun(t, r, st)
	if err := next.SubmitResult(ctx, handed.Calls[0].ID, json.RawMessage(`"yes"`)); err != nil {
		t.Fatal(err)
	}
	res, err := next.Do(ctx, p, "confirm BA117")
	if err != nil || res.Answer == "" {
		t.Fatalf("Do after the result: %+v, %v", res, err)
	}
	if o := p.requests()[1].History[0].Observations[0]; o.Tool != "confirm_with_traveller" || string(o.Outcome) != `"yes"` {
		t.Errorf("round 2 was told %+v", o)
	}
}

func TestASchemaThatUnfoldsExponentiallyIsRefused(t *testing.T) {
	defs := map[string]any{}
	const levels = 30
	for i := range levels {
		next := fmt.Sprintf("#/$defs/a%d", i+1)
		defs[fmt.Sprintf("a%d", i)] = map[string]any{"allOf": []any{map[string]any{"$ref": next}, map[string]any{"$ref": next}}}
	}
	defs[fmt.Sprintf("a%d", levels)] = map[string]any{"type": "string"}
	schema, _ := json.Marshal(map[string]any{"type": "object", "$defs": defs, "properties": map[string]any{"x": map[string]any{"$ref": "#/$defs/a0"}}})
	start := time.Now()
	_, err := planexec.NewClientTool("t", "", schema)
	var cerr *planexec.ConfigurationError
	if !errors.As(err, &cerr) || !strings.Contains(err.Error(), "too costly") {
		t.Fatalf("NewClientTool: %v, want the schema refused as too costly", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("refusing it took %v", took)
	}
	// A recursive schema (a tree of any depth) is fine.
	tree := `{"type":"object","$defs":{"node":{"type":"object","properties":{"kids":{"type":"array","items":{"$ref":"#/$defs/node"}}}}},` +
		`"properties":{"root":{"$ref":"#/$defs/node"}}}`
	if _, err := planexec.NewClientTool("t", "", json.RawMessage(tree)); err != nil {
		t.Errorf("a recursive schema: %v", err)
	}
}
