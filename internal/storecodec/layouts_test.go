package storecodec

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/store"
)

// The documents are written as the stores have always written them, byte
// for byte: these are the layouts already on file, which the stores keep
// reading.
func TestRecordsAreWrittenInTheLayoutsOnFile(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 123456789, time.UTC)
	// The plan's document as the executor writes it (the root package pins
	// that layout): the store keeps it byte for byte, whitespace in the
	// arguments included.
	const planDoc = `{"id":"p1","goal":"nul \u0000 <b> \u2028 😀","revision":3,` +
		`"steps":[{"id":"s1","tool":"notify","arguments":{"note":"\u0000 \u2028","n":412.50, "big": 9007199254740993},"depends_on":["s0"]},` +
		`{"id":"s0","tool":"x","arguments":[ 1.0e3 ]}]}`
	rec := &store.PlanRecord{Version: 1, Tenant: "acme<&>", RunID: "run-1", Status: store.RunAwaitingApproval, Created: at, Updated: at.Add(time.Hour),
		Steps:  map[string]store.StepRecord{"s0": {StepID: "s0", Status: store.StepDone}},
		PlanID: "p1", Plan: json.RawMessage(planDoc)}
	const (
		plan  = `{"version":1,"tenant":"acme<&>","run_id":"run-1","plan":` + planDoc + `,"status":"awaiting_approval"`
		times = `,"steps":null,"created":"2030-01-02T03:04:05.123456789Z","updated":"2030-01-02T04:04:05.123456789Z"`
	)
	step := store.StepRecord{StepID: "s1", PlanID: "p1", Tool: "n", Status: store.StepDone, Outcome: json.RawMessage(`{"a":"<&>"}`), Key: "k", Finished: at}
	decision := planexec.Decision{RequestID: "r<1>", Status: planexec.Denied, Approver: "a\x00", Why: "no", DecidedAt: at}
	for _, c := range []struct {
		name   string
		encode func() ([]byte, error)
		want   string
	}{
		{"a plan whose times are columns", func() ([]byte, error) { return EncodePlan(rec, TimesInColumns) }, plan + `}`},
		{"a plan whose times are in its document", func() ([]byte, error) { return EncodePlan(rec, TimesInDocument) }, plan + times + `}`},
		{"a step", func() ([]byte, error) { return EncodeStep(step) }, `{"version":1,"step_id":"s1","plan_id":"p1","tool":"n","status":"done",` +
			`"outcome":{"a":"<&>"},"key":"k","finished":"2030-01-02T03:04:05.123456789Z"}`},
		{"a decision", func() ([]byte, error) { return EncodeDecision(decision) }, `{"version":2,"request_id":"r<1>","status":"denied",` +
			`"approver":"a\u0000","why":"no","decided_at":"2030-01-02T03:04:05.123456789Z","expires":"0001-01-01T00:00:00Z"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.encode()
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != c.want {
				t.Errorf("got  %s\nwant %s", got, c.want)
			}
		})
	}

	for _, times := range []PlanTimes{TimesInColumns, TimesInDocument} {
		doc, err := EncodePlan(rec, times)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodePlan("acme<&>", "run-1", 1, doc)
		if err != nil {
			t.Fatal(err)
		}
		if string(got.Plan) != planDoc || got.PlanID != "p1" {
			t.Errorf("times %d: plan %s read back as %s, plan id %q", times, planDoc, got.Plan, got.PlanID)
		}
		if len(got.Steps) != 0 || got.Steps == nil {
			t.Errorf("times %d: steps read back from the plan's document: %v", times, got.Steps)
		}
		if inDoc := times == TimesInDocument; got.Created.Equal(rec.Created) != inDoc || got.Updated.Equal(rec.Updated) != inDoc {
			t.Errorf("times %d: read back created %v, updated %v", times, got.Created, got.Updated)
		}
	}
}

// An empty outcome is stored as zero bytes, never as NULL, which a
// completed claim only has when it is damaged.
func TestAnEmptyOutcomeIsStoredAsZeroBytes(t *testing.T) {
	for _, o := range []json.RawMessage{nil, {}} {
		b := EncodeOutcome(o)
		if b == nil || len(b) != 0 {
			t.Errorf("EncodeOutcome(%#v) = %#v, want zero bytes", o, b)
		}
		if state, outcome, err := DecodeClaim(store.Key{Digest: "k"}, ClaimRow{State: StateCompleted, Outcome: b, Version: ClaimVersion}); err != nil ||
			state != store.ClaimCompleted || outcome != nil {
			t.Errorf("the stored empty outcome reads back as %d, %#v, %v", state, outcome, err)
		}
	}
	if b := EncodeOutcome(json.RawMessage(`"PNR"`)); string(b) != `"PNR"` {
		t.Errorf("EncodeOutcome kept %s", b)
	}
}
