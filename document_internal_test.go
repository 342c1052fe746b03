package planexec

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/planexec/planexec/internal/rawjson"
	"github.com/planexec/planexec/llm"
)

// byEncodingJSON is the plan's document as encoding/json writes it without
// HTML escaping, with each step's arguments put back byte for byte: the
// layout on file that appendPlan must write.
func byEncodingJSON(t testing.TB, p *Plan) []byte {
	args := make([]json.RawMessage, len(p.Steps))
	for i, s := range p.Steps {
		args[i] = s.Arguments
	}
	doc, err := rawjson.Marshal(p, []string{"steps", rawjson.Each, "arguments"}, args)
	if err != nil {
		t.Fatalf("encoding/json: %v", err)
	}
	return doc
}

// hostileText holds every byte and rune class encoding/json treats apart.
var hostileText = []string{
	"", "plain", "quote\" back\\slash /", "nul\x00 \x01 \x08\x0c\n\r\t \x1f \x7f",
	"<a href='x'>&amp;</a>", "ls\u2028ps\u2029", "emoji \U0001F600 clef \U0001D11E",
	"bad \xff utf8 \xe2\x80 cut", "\xed\xa0\x80 surrogate", "bom\ufeff nonchar\uffff repl\ufffd", "\u0301lone mark",
}

func TestThePlanDocumentIsWhatEncodingJSONWrites(t *testing.T) {
	for _, text := range hostileText {
		p := &Plan{ID: "p-" + text, Goal: text, Revision: 7, Steps: []Step{
			{ID: "s1", Tool: "t" + text, Arguments: json.RawMessage("{ \"a\" : [ 1.50, \"" + "x\\u0000" + "\" ] }"), Intent: text},
			{ID: "s2", Tool: "t", Arguments: json.RawMessage(`12.0e3`), DependsOn: []string{"s1", text}},
			{ID: "s3", Tool: "t", Arguments: json.RawMessage(" {}\n")},
			{ID: "s4", Tool: "t"},
		}}
		want := byEncodingJSON(t, p)
		if got := appendPlan(nil, p); string(got) != string(want) {
			t.Errorf("text %q:\ngot  %s\nwant %s", text, got, want)
		}
	}
	for _, text := range hostileText {
		// A round, and one that answers or asks: no steps.
		for _, p := range []*Plan{
			{ID: "p", Round: 3, Steps: []Step{{ID: "s1", Tool: "t", Arguments: json.RawMessage(`{}`)}}},
			{ID: "p", Round: 4, Answer: text},
			{ID: "p", Round: 5, Question: text, Steps: []Step{}},
		} {
			if got, want := appendPlan(nil, p), byEncodingJSON(t, p); string(got) != string(want) {
				t.Errorf("text %q:\ngot  %s\nwant %s", text, got, want)
			}
		}
	}
	for _, p := range []*Plan{{}, {Steps: []Step{}}} {
		if got, want := appendPlan(nil, p), byEncodingJSON(t, p); string(got) != string(want) {
			t.Errorf("got %s, want %s", got, want)
		}
	}
}

func FuzzPlanDocument(f *testing.F) {
	for _, s := range hostileText {
		f.Add(s, s)
	}
	f.Fuzz(func(t *testing.T, goal, dep string) {
		p := &Plan{ID: dep, Goal: goal, Round: len(goal), Steps: []Step{{ID: goal, Tool: dep, Arguments: json.RawMessage(`{}`), DependsOn: []string{dep}, Intent: goal}},
			Answer: dep, Question: goal}
		if got, want := appendPlan(nil, p), byEncodingJSON(t, p); string(got) != string(want) {
			t.Errorf("got %q, want %q", got, want)
		}
	})
}

// An event's stored document is what encoding/json writes for it (without
// HTML escaping), so that json.Unmarshal reads it back whole.
func TestAnEventsDocumentIsWhatEncodingJSONWrites(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 123456789, time.FixedZone("x", 3600))
	full := Event{Seq: 7, Kind: EventPlanRefused, Time: at, RunID: "run", Tenant: "acme", PlanID: "p", Revision: 2, Round: 4,
		StepID: "s1", Tool: "book", Reason: ReasonArguments, Attempt: 3, Usage: &llm.Usage{InputTokens: 10, OutputTokens: -1, Calls: 1},
		Model: "m", RequestID: "req", Request: "r", Approver: "dana", Grant: "g", Level: LevelActAndReport, Replayed: true,
		Duration: 1500 * time.Millisecond, Detail: "why"}
	events := []Event{full, {Kind: EventStepStarted, Time: at.UTC(), RunID: "r", Tenant: "t"}, {}}
	for _, text := range hostileText {
		e := full
		e.RunID, e.Tenant, e.Detail, e.Approver, e.StepID = text, text, text, text, text
		events = append(events, e)
	}
	for _, e := range events {
		want, err := rawjson.Marshal(&e, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendEvent(nil, &e); string(got) != string(want) {
			t.Errorf("got  %s\nwant %s", got, want)
		}
		var back Event
		if err := json.Unmarshal(appendEvent(nil, &e), &back); err != nil {
			t.Errorf("the document does not read back: %v", err)
		}
	}
}
