package storetest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/internal/rawjson"
	"github.com/planexec/planexec/store"
)

// samplePlan is a plan whose arguments would suffer from a float64 detour,
// from HTML escaping or from a store that keeps only some key orders.
func samplePlan(id string) planexec.Plan {
	return planexec.Plan{ID: id, Goal: "get them to New York", Revision: 2, Steps: []planexec.Step{
		{ID: "s1", Tool: "search_flights", Arguments: json.RawMessage(`{"destination":"JFK","origin":"LHR"}`), Intent: "find flights"},
		{ID: "s2", Tool: "book_flight", Arguments: json.RawMessage(`{"fare":412.50,"flight":"BA117","note":"<a & b> \u00fcn\u00efcode","seats":9007199254740993}`), DependsOn: []string{"s1"}, Intent: "book the cheapest"},
		{ID: "s3", Tool: "notify", Arguments: json.RawMessage(`{"nested":{"list":[1,2.0,"x",null,true,{}],"tiny":1e-30}}`), DependsOn: []string{"s1", "s2"}},
	}}
}

// printableText is text as a planner may write it that may stand unescaped
// in a JSON string: an emoji and a character of the astral plane (surrogate
// pairs when escaped), U+2028 and U+2029 (which encoding/json escapes), a
// combining mark with nothing to combine with, a byte order mark, U+FFFD, a
// noncharacter and markup.
const printableText = "emoji \U0001F600 clef \U0001D11E ls\u2028ps\u2029 \u0301lone mark bom\ufeff repl\ufffd nonchar\uffff <a href='x'>&amp;</a>"

// plannerText is printableText with a NUL (which PostgreSQL's text and
// jsonb refuse), other control characters, quotes and backslashes. Every
// store keeps it as it is.
const plannerText = "nul\x00 ctl\x01\x1f\x7f quote\" back\\slash " + printableText

// plannerArguments are arguments as a planner may write them: spread over
// lines, with escapes ("\u0000", a surrogate pair, "\/") and printableText
// unescaped, and numbers a float64 would change. A store gives them back
// byte for byte.
var plannerArguments = json.RawMessage("{\n" +
	`  "escaped" : "NUL \u0000, emoji \ud83d\ude00, \u2028, \/, \" \\ \u0301",` + "\n" +
	"\t\"as is\": \"" + printableText + "\",\r\n" +
	`  "numbers": [ 412.50, 9007199254740993, 1e-30, -0 ], "empty": {  }` + "\n}")

// plannerPlan is a plan whose goal, intents and arguments hold what a
// planner may write.
func plannerPlan(id string) planexec.Plan {
	return planexec.Plan{ID: id, Goal: plannerText, Revision: 1, Steps: []planexec.Step{
		{ID: "s1", Tool: "notify", Arguments: plannerArguments, Intent: plannerText},
		{ID: "s2", Tool: "book_flight", Arguments: json.RawMessage(`{"note":"\u0000"}`), DependsOn: []string{"s1"}, Intent: "\x00"},
	}}
}

// plannerStep is a step record whose error, approver and outcome hold what
// a planner, a tool or a person may write.
func plannerStep(id, planID string, status planexec.StepStatus, at time.Time) store.StepRecord {
	return store.StepRecord{
		StepID: id, PlanID: planID, Tool: "notify", Status: status,
		Outcome: json.RawMessage(`{"echo":"NUL \u0000 \ud83d\ude00 \u2028","text":"` + printableText + `"}`),
		Key:     "sha256:" + id, ApprovedBy: plannerText, Error: plannerText, Finished: at,
	}
}

func sampleRecord(tenant, run string, p planexec.Plan, status store.RunStatus, at time.Time) *store.PlanRecord {
	return &store.PlanRecord{Version: store.RecordVersion, Tenant: tenant, RunID: run, PlanID: p.ID, Plan: document(p), Status: status, Created: at, Updated: at}
}

// document is p's document as the executor writes it: each step's
// arguments byte for byte as the planner wrote them.
func document(p planexec.Plan) json.RawMessage {
	args := make([]json.RawMessage, len(p.Steps))
	for i, s := range p.Steps {
		args[i] = s.Arguments
	}
	doc, err := rawjson.Marshal(p, []string{"steps", rawjson.Each, "arguments"}, args)
	if err != nil {
		panic(err) // the sample plans are JSON
	}
	return doc
}

// decoded is the plan rec holds.
func decoded(t *testing.T, rec *store.PlanRecord) planexec.Plan {
	t.Helper()
	var p planexec.Plan
	if err := json.Unmarshal(rec.Plan, &p); err != nil {
		t.Fatalf("the plan on record is not the plan's document: %v: %q", err, rec.Plan)
	}
	return p
}

// doneStep is a step record with every field set.
func doneStep(id, planID string, at time.Time) store.StepRecord {
	return store.StepRecord{
		StepID: id, PlanID: planID, Tool: "book_flight", Status: planexec.StepDone,
		Outcome:  json.RawMessage(`{"pnr":"PNR-BA117","fare":412.50,"seats":[1,2],"big":9007199254740993}`),
		Replayed: true, Key: "sha256:" + id, ApprovedBy: "dana", Grant: "grant-7",
		Amount:   decimal.RequireFromString("12345678901234567.89"),
		Finished: at,
	}
}

// doubtStep is a step record with the optional fields left empty.
func doubtStep(id, planID string, at time.Time) store.StepRecord {
	return store.StepRecord{
		StepID: id, PlanID: planID, Tool: "pay", Status: planexec.StepInDoubt,
		Key: "sha256:" + id, Error: "planexec: step \"" + id + "\" failed: gateway timeout", Finished: at,
	}
}

// diffPlan lists how got's plan differs from want, which it must hold
// byte for byte.
func diffPlan(got *store.PlanRecord, want planexec.Plan) []string {
	var d []string
	if got.PlanID != want.ID {
		d = append(d, fmt.Sprintf("plan id %q, want %q", got.PlanID, want.ID))
	}
	if doc := document(want); !bytes.Equal(got.Plan, doc) {
		d = append(d, fmt.Sprintf("plan %q, want byte for byte %q", got.Plan, doc))
	}
	return d
}

// diffStep lists how got differs from want, field by field.
func diffStep(got, want store.StepRecord) []string {
	var d []string
	field := func(name string, g, w any) {
		if g != w {
			d = append(d, fmt.Sprintf("%s = %#v, want %#v", name, g, w))
		}
	}
	field("StepID", got.StepID, want.StepID)
	field("PlanID", got.PlanID, want.PlanID)
	field("Tool", got.Tool, want.Tool)
	field("Status", got.Status, want.Status)
	field("Replayed", got.Replayed, want.Replayed)
	field("Key", got.Key, want.Key)
	field("ApprovedBy", got.ApprovedBy, want.ApprovedBy)
	field("Grant", got.Grant, want.Grant)
	field("Error", got.Error, want.Error)
	if len(want.Outcome) == 0 {
		if len(got.Outcome) != 0 {
			d = append(d, fmt.Sprintf("Outcome = %s, want none", got.Outcome))
		}
	} else if !jsonEqual(got.Outcome, want.Outcome) {
		d = append(d, fmt.Sprintf("Outcome = %s, want the same JSON as %s", got.Outcome, want.Outcome))
	}
	if !got.Amount.Equal(want.Amount) {
		d = append(d, fmt.Sprintf("Amount = %s, want exactly %s", got.Amount, want.Amount))
	}
	if !sameInstant(got.Finished, want.Finished) {
		d = append(d, fmt.Sprintf("Finished = %v, want %v to the millisecond", got.Finished, want.Finished))
	}
	return d
}

func runPlanStore(t *testing.T, open Open) {
	t.Run("SavePlan then LoadPlan gives back the plan, its status and its version", func(t *testing.T) {
		k := setup(t, open)
		want := samplePlan("plan-1")
		if err := k.Plans.SavePlan(k.ctx, sampleRecord("acme", "run-1", want, store.RunAwaitingApproval, k.clk.Now())); err != nil {
			t.Fatalf("SavePlan: %v", err)
		}
		got, err := k.Plans.LoadPlan(k.ctx, "acme", "run-1")
		if err != nil {
			t.Fatalf("LoadPlan: %v", err)
		}
		if got.Tenant != "acme" || got.RunID != "run-1" {
			t.Errorf("record of tenant %q run %q, want acme run-1", got.Tenant, got.RunID)
		}
		if got.Status != store.RunAwaitingApproval || got.Version != store.RecordVersion {
			t.Errorf("status %q version %d, want %q version %d", got.Status, got.Version, store.RunAwaitingApproval, store.RecordVersion)
		}
		for _, d := range diffPlan(got, want) {
			t.Error(d)
		}
		if len(got.Steps) != 0 {
			t.Errorf("a plan with no step written has steps %v", got.Steps)
		}
	})

	t.Run("Whatever a planner writes comes back as written, and the run can be saved again and again", func(t *testing.T) {
		k := setup(t, open)
		if !json.Valid(plannerArguments) {
			t.Fatalf("the suite's own arguments are not JSON: %s", plannerArguments)
		}
		want := plannerPlan("plan-1")
		first := plannerStep("s1", "plan-1", planexec.StepDone, k.clk.Now())
		second := plannerStep("s2", "plan-1", planexec.StepInDoubt, k.clk.Now())
		// A run saves its plan as it goes: a store that cannot read back
		// what its first save wrote fails the saves after it.
		for i, status := range []store.RunStatus{store.RunRunning, store.RunAwaitingApproval, store.RunFailed} {
			if err := k.Plans.SavePlan(k.ctx, sampleRecord("acme", "run-1", want, status, k.clk.Now())); err != nil {
				t.Fatalf("SavePlan %d (%s): %v", i+1, status, err)
			}
			if i == 0 {
				if err := k.Plans.SaveStep(k.ctx, "acme", "run-1", first); err != nil {
					t.Fatalf("SaveStep s1: %v", err)
				}
			}
		}
		if err := k.Plans.SaveStep(k.ctx, "acme", "run-1", second); err != nil {
			t.Fatalf("SaveStep s2: %v", err)
		}
		got, err := k.Plans.LoadPlan(k.ctx, "acme", "run-1")
		if err != nil {
			t.Fatalf("LoadPlan: %v", err)
		}
		if got.Status != store.RunFailed {
			t.Errorf("status %q, want the status saved last, failed", got.Status)
		}
		for _, d := range diffPlan(got, want) {
			t.Error(d)
		}
		for _, w := range []store.StepRecord{first, second} {
			g, ok := got.Steps[w.StepID]
			if !ok {
				t.Errorf("step %s is not on record", w.StepID)
				continue
			}
			for _, d := range diffStep(g, w) {
				t.Errorf("step %s: %s", w.StepID, d)
			}
		}
	})

	t.Run("SaveStep records come back in Steps by step id with every field", func(t *testing.T) {
		k := setup(t, open)
		if err := k.Plans.SavePlan(k.ctx, sampleRecord("acme", "run-1", samplePlan("plan-1"), store.RunRunning, k.clk.Now())); err != nil {
			t.Fatalf("SavePlan: %v", err)
		}
		k.clk.Advance(1500 * time.Millisecond)
		want := map[string]store.StepRecord{
			"s1": doneStep("s1", "plan-1", k.clk.Now()),
			"s2": doubtStep("s2", "plan-1", k.clk.Now().Add(time.Second)),
		}
		for _, id := range []string{"s1", "s2"} {
			if err := k.Plans.SaveStep(k.ctx, "acme", "run-1", want[id]); err != nil {
				t.Fatalf("SaveStep %s: %v", id, err)
			}
		}
		got, err := k.Plans.LoadPlan(k.ctx, "acme", "run-1")
		if err != nil {
			t.Fatalf("LoadPlan: %v", err)
		}
		if len(got.Steps) != len(want) {
			t.Errorf("%d steps on record, want %d: %v", len(got.Steps), len(want), got.Steps)
		}
		for id, w := range want {
			g, ok := got.Steps[id]
			if !ok {
				t.Errorf("step %s is not on record", id)
				continue
			}
			for _, d := range diffStep(g, w) {
				t.Errorf("step %s: %s", id, d)
			}
		}
	})

	t.Run("SaveStep again for a step replaces its record", func(t *testing.T) {
		// Executor.Resolve settles a step in doubt this way.
		k := setup(t, open)
		if err := k.Plans.SavePlan(k.ctx, sampleRecord("acme", "run-1", samplePlan("plan-1"), store.RunFailed, k.clk.Now())); err != nil {
			t.Fatalf("SavePlan: %v", err)
		}
		if err := k.Plans.SaveStep(k.ctx, "acme", "run-1", doubtStep("s2", "plan-1", k.clk.Now())); err != nil {
			t.Fatalf("SaveStep: %v", err)
		}
		k.clk.Advance(time.Minute)
		settled := doneStep("s2", "plan-1", k.clk.Now())
		if err := k.Plans.SaveStep(k.ctx, "acme", "run-1", settled); err != nil {
			t.Fatalf("SaveStep again: %v", err)
		}
		got, err := k.Plans.LoadPlan(k.ctx, "acme", "run-1")
		if err != nil {
			t.Fatalf("LoadPlan: %v", err)
		}
		if len(got.Steps) != 1 {
			t.Errorf("%d step records, want the one step once: %v", len(got.Steps), got.Steps)
		}
		for _, d := range diffStep(got.Steps["s2"], settled) {
			t.Errorf("step s2: %s", d)
		}
	})

	t.Run("SaveStep before SavePlan is ErrNoRecord", func(t *testing.T) {
		k := setup(t, open)
		err := k.Plans.SaveStep(k.ctx, "acme", "run-1", doneStep("s1", "plan-1", k.clk.Now()))
		if !errors.Is(err, store.ErrNoRecord) {
			t.Fatalf("SaveStep into a run never saved: want ErrNoRecord, got %v", err)
		}
		if rec, err := k.Plans.LoadPlan(k.ctx, "acme", "run-1"); !errors.Is(err, store.ErrNoRecord) {
			t.Errorf("LoadPlan after the refused SaveStep: want ErrNoRecord, got %+v, %v", rec, err)
		}
	})

	t.Run("SavePlan ignores the steps a record carries", func(t *testing.T) {
		k := setup(t, open)
		rec := sampleRecord("acme", "run-1", samplePlan("plan-1"), store.RunRunning, k.clk.Now())
		rec.Steps = map[string]store.StepRecord{"s1": doneStep("s1", "plan-1", k.clk.Now())}
		if err := k.Plans.SavePlan(k.ctx, rec); err != nil {
			t.Fatalf("SavePlan: %v", err)
		}
		got, err := k.Plans.LoadPlan(k.ctx, "acme", "run-1")
		if err != nil {
			t.Fatalf("LoadPlan: %v", err)
		}
		if len(got.Steps) != 0 {
			t.Errorf("steps %v came from SavePlan; only SaveStep writes steps", got.Steps)
		}
	})

	t.Run("Saving the same plan again keeps its steps and takes the new status", func(t *testing.T) {
		k := setup(t, open)
		p := samplePlan("plan-1")
		if err := k.Plans.SavePlan(k.ctx, sampleRecord("acme", "run-1", p, store.RunRunning, k.clk.Now())); err != nil {
			t.Fatalf("SavePlan: %v", err)
		}
		s1 := doneStep("s1", "plan-1", k.clk.Now())
		if err := k.Plans.SaveStep(k.ctx, "acme", "run-1", s1); err != nil {
			t.Fatalf("SaveStep: %v", err)
		}
		k.clk.Advance(time.Second)
		if err := k.Plans.SavePlan(k.ctx, sampleRecord("acme", "run-1", p, store.RunCompleted, k.clk.Now())); err != nil {
			t.Fatalf("SavePlan again: %v", err)
		}
		got, err := k.Plans.LoadPlan(k.ctx, "acme", "run-1")
		if err != nil {
			t.Fatalf("LoadPlan: %v", err)
		}
		if got.Status != store.RunCompleted {
			t.Errorf("status %q, want the status saved last, completed", got.Status)
		}
		g, ok := got.Steps["s1"]
		if !ok || len(got.Steps) != 1 {
			t.Fatalf("steps after saving the same plan again = %v, want s1 kept", got.Steps)
		}
		for _, d := range diffStep(g, s1) {
			t.Errorf("step s1: %s", d)
		}
	})

	t.Run("Saving another plan under the run drops the old plan's steps", func(t *testing.T) {
		k := setup(t, open)
		if err := k.Plans.SavePlan(k.ctx, sampleRecord("acme", "run-1", samplePlan("plan-1"), store.RunRunning, k.clk.Now())); err != nil {
			t.Fatalf("SavePlan: %v", err)
		}
		if err := k.Plans.SaveStep(k.ctx, "acme", "run-1", doneStep("s1", "plan-1", k.clk.Now())); err != nil {
			t.Fatalf("SaveStep: %v", err)
		}
		next := samplePlan("plan-2")
		next.Revision = 3
		if err := k.Plans.SavePlan(k.ctx, sampleRecord("acme", "run-1", next, store.RunRunning, k.clk.Now())); err != nil {
			t.Fatalf("SavePlan of the new plan: %v", err)
		}
		got, err := k.Plans.LoadPlan(k.ctx, "acme", "run-1")
		if err != nil {
			t.Fatalf("LoadPlan: %v", err)
		}
		for _, d := range diffPlan(got, next) {
			t.Error(d)
		}
		if len(got.Steps) != 0 {
			t.Errorf("the old plan's steps survived a new plan: %v", got.Steps)
		}
	})

	t.Run("Forget removes the plan and its steps", func(t *testing.T) {
		k := setup(t, open)
		p := samplePlan("plan-1")
		if err := k.Plans.SavePlan(k.ctx, sampleRecord("acme", "run-1", p, store.RunRunning, k.clk.Now())); err != nil {
			t.Fatalf("SavePlan: %v", err)
		}
		if err := k.Plans.SaveStep(k.ctx, "acme", "run-1", doneStep("s1", "plan-1", k.clk.Now())); err != nil {
			t.Fatalf("SaveStep: %v", err)
		}
		if err := k.Plans.Forget(k.ctx, "acme", "run-1"); err != nil {
			t.Fatalf("Forget: %v", err)
		}
		if rec, err := k.Plans.LoadPlan(k.ctx, "acme", "run-1"); !errors.Is(err, store.ErrNoRecord) {
			t.Errorf("LoadPlan after Forget: want ErrNoRecord, got %+v, %v", rec, err)
		}
		if err := k.Plans.SaveStep(k.ctx, "acme", "run-1", doneStep("s2", "plan-1", k.clk.Now())); !errors.Is(err, store.ErrNoRecord) {
			t.Errorf("SaveStep after Forget: want ErrNoRecord, got %v", err)
		}
		// The same plan saved again starts with no steps: none outlived Forget.
		if err := k.Plans.SavePlan(k.ctx, sampleRecord("acme", "run-1", p, store.RunRunning, k.clk.Now())); err != nil {
			t.Fatalf("SavePlan after Forget: %v", err)
		}
		got, err := k.Plans.LoadPlan(k.ctx, "acme", "run-1")
		if err != nil {
			t.Fatalf("LoadPlan: %v", err)
		}
		if len(got.Steps) != 0 {
			t.Errorf("steps outlived Forget: %v", got.Steps)
		}
	})

	t.Run("Forgetting a run with no record is not an error", func(t *testing.T) {
		k := setup(t, open)
		if err := k.Plans.Forget(k.ctx, "acme", "never-saved"); err != nil {
			t.Errorf("Forget of a run never saved: %v", err)
		}
		if err := k.Plans.SavePlan(k.ctx, sampleRecord("acme", "run-1", samplePlan("plan-1"), store.RunRunning, k.clk.Now())); err != nil {
			t.Fatalf("SavePlan: %v", err)
		}
		for range 2 {
			if err := k.Plans.Forget(k.ctx, "acme", "run-1"); err != nil {
				t.Errorf("Forget: %v", err)
			}
		}
	})

	t.Run("LoadPlan of a run never saved is ErrNoRecord", func(t *testing.T) {
		k := setup(t, open)
		if rec, err := k.Plans.LoadPlan(k.ctx, "acme", "run-1"); !errors.Is(err, store.ErrNoRecord) {
			t.Errorf("LoadPlan: want ErrNoRecord, got %+v, %v", rec, err)
		}
	})

	t.Run("Tenants are isolated: one tenant never sees or changes another's run", func(t *testing.T) {
		k := setup(t, open)
		acmePlan, globexPlan := samplePlan("plan-acme"), samplePlan("plan-globex")
		globexPlan.Goal = "get them to Boston"
		if err := k.Plans.SavePlan(k.ctx, sampleRecord("acme", "run-1", acmePlan, store.RunRunning, k.clk.Now())); err != nil {
			t.Fatalf("SavePlan acme: %v", err)
		}
		if rec, err := k.Plans.LoadPlan(k.ctx, "globex", "run-1"); !errors.Is(err, store.ErrNoRecord) {
			t.Errorf("globex loading acme's run id: want ErrNoRecord, got %+v, %v", rec, err)
		}
		if err := k.Plans.SaveStep(k.ctx, "globex", "run-1", doneStep("s1", "plan-acme", k.clk.Now())); !errors.Is(err, store.ErrNoRecord) {
			t.Errorf("globex writing a step into acme's run id: want ErrNoRecord, got %v", err)
		}
		if err := k.Plans.Forget(k.ctx, "globex", "run-1"); err != nil {
			t.Errorf("globex forgetting a run id it does not have: %v", err)
		}
		if err := k.Plans.SavePlan(k.ctx, sampleRecord("globex", "run-1", globexPlan, store.RunFailed, k.clk.Now())); err != nil {
			t.Fatalf("SavePlan globex: %v", err)
		}
		if err := k.Plans.SaveStep(k.ctx, "globex", "run-1", doubtStep("s2", "plan-globex", k.clk.Now())); err != nil {
			t.Fatalf("SaveStep globex: %v", err)
		}
		if err := k.Plans.SaveStep(k.ctx, "acme", "run-1", doneStep("s1", "plan-acme", k.clk.Now())); err != nil {
			t.Fatalf("SaveStep acme: %v", err)
		}

		acme, err := k.Plans.LoadPlan(k.ctx, "acme", "run-1")
		if err != nil {
			t.Fatalf("LoadPlan acme: %v", err)
		}
		if acme.Tenant != "acme" || acme.PlanID != "plan-acme" || acme.Status != store.RunRunning {
			t.Errorf("acme's record = tenant %q plan %q status %q; globex's save changed it", acme.Tenant, acme.PlanID, acme.Status)
		}
		if _, ok := acme.Steps["s2"]; ok || len(acme.Steps) != 1 {
			t.Errorf("acme's steps = %v, want only its own s1", acme.Steps)
		}
		globex, err := k.Plans.LoadPlan(k.ctx, "globex", "run-1")
		if err != nil {
			t.Fatalf("LoadPlan globex: %v", err)
		}
		if goal := decoded(t, globex).Goal; globex.Tenant != "globex" || goal != "get them to Boston" || globex.Status != store.RunFailed {
			t.Errorf("globex's record = tenant %q goal %q status %q", globex.Tenant, goal, globex.Status)
		}
		if _, ok := globex.Steps["s1"]; ok || len(globex.Steps) != 1 {
			t.Errorf("globex's steps = %v, want only its own s2", globex.Steps)
		}

		if err := k.Plans.Forget(k.ctx, "globex", "run-1"); err != nil {
			t.Fatalf("Forget globex: %v", err)
		}
		if acme, err := k.Plans.LoadPlan(k.ctx, "acme", "run-1"); err != nil || len(acme.Steps) != 1 {
			t.Errorf("acme's run after globex forgot its own: %+v, %v", acme, err)
		}
		if rec, err := k.Plans.LoadPlan(k.ctx, "initech", "run-1"); !errors.Is(err, store.ErrNoRecord) {
			t.Errorf("a third tenant loading the run id: want ErrNoRecord, got %+v, %v", rec, err)
		}
	})

	t.Run("A record is a copy: changing what was saved or loaded changes nothing stored", func(t *testing.T) {
		k := setup(t, open)
		want := samplePlan("plan-1")
		rec := sampleRecord("acme", "run-1", samplePlan("plan-1"), store.RunRunning, k.clk.Now())
		if err := k.Plans.SavePlan(k.ctx, rec); err != nil {
			t.Fatalf("SavePlan: %v", err)
		}
		step := doneStep("s1", "plan-1", k.clk.Now())
		wantStep := doneStep("s1", "plan-1", k.clk.Now())
		if err := k.Plans.SaveStep(k.ctx, "acme", "run-1", step); err != nil {
			t.Fatalf("SaveStep: %v", err)
		}
		// The caller reuses its buffers.
		copy(rec.Plan, `{"XXXXXXXXXXX":`)
		copy(step.Outcome, `{"XXX":`)

		loaded, err := k.Plans.LoadPlan(k.ctx, "acme", "run-1")
		if err != nil {
			t.Fatalf("LoadPlan: %v", err)
		}
		// The reader scribbles on what it loaded.
		loaded.Status = store.RunFailed
		copy(loaded.Plan, `{"XXXXXXXXXXX":`)
		loaded.PlanID = "changed"
		s1 := loaded.Steps["s1"]
		copy(s1.Outcome, `{"XXX":`)
		loaded.Steps["s9"] = doneStep("s9", "plan-1", k.clk.Now())
		delete(loaded.Steps, "s1")

		again, err := k.Plans.LoadPlan(k.ctx, "acme", "run-1")
		if err != nil {
			t.Fatalf("LoadPlan again: %v", err)
		}
		if again.Status != store.RunRunning {
			t.Errorf("status %q, want running", again.Status)
		}
		for _, d := range diffPlan(again, want) {
			t.Error(d)
		}
		if len(again.Steps) != 1 {
			t.Errorf("steps on record = %v, want s1 only", again.Steps)
		}
		for _, d := range diffStep(again.Steps["s1"], wantStep) {
			t.Errorf("step s1: %s", d)
		}
	})

	t.Run("A run takes a thousand steps: the thousandth is written like the first", func(t *testing.T) {
		k := setup(t, open)
		const n = 1000
		p := planexec.Plan{ID: "plan-long", Goal: "a long run", Revision: 1, Steps: make([]planexec.Step, n)}
		for i := range n {
			p.Steps[i] = planexec.Step{ID: fmt.Sprintf("s%04d", i+1), Tool: "notify", Arguments: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i+1))}
		}
		if err := k.Plans.SavePlan(k.ctx, sampleRecord("acme", "run-long", p, store.RunRunning, k.clk.Now())); err != nil {
			t.Fatalf("SavePlan: %v", err)
		}
		for i := range n {
			st := store.StepRecord{StepID: p.Steps[i].ID, PlanID: p.ID, Tool: "notify", Status: planexec.StepDone,
				Outcome: json.RawMessage(fmt.Sprintf(`%d`, i+1)), Key: fmt.Sprintf("sha256:%04d", i+1), Finished: k.clk.Now()}
			if err := k.Plans.SaveStep(k.ctx, "acme", "run-long", st); err != nil {
				t.Fatalf("SaveStep %d of %d: %v", i+1, n, err)
			}
		}
		got, err := k.Plans.LoadPlan(k.ctx, "acme", "run-long")
		if err != nil {
			t.Fatalf("LoadPlan: %v", err)
		}
		for _, d := range diffPlan(got, p) {
			t.Error(d)
		}
		if len(got.Steps) != n {
			t.Fatalf("%d step records, want %d", len(got.Steps), n)
		}
		missing := 0
		for i := range n {
			id := fmt.Sprintf("s%04d", i+1)
			st, ok := got.Steps[id]
			if !ok || st.Status != planexec.StepDone || !jsonEqual(st.Outcome, fmt.Appendf(nil, "%d", i+1)) {
				if missing++; missing <= 5 {
					t.Errorf("step %s = %+v (on record %v), want done with outcome %d", id, st, ok, i+1)
				}
			}
		}
		if missing > 5 {
			t.Errorf("and %d more steps wrong", missing-5)
		}
	})
}
