package chat

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/planexec/planexec"
)

func TestASummaryOfMoreSourcesThanItListsIsSentOnlyForItsPerson(t *testing.T) {
	reads := func(n int) []Output {
		out := make([]Output, n)
		for i := range out {
			out[i] = Output{Kind: KindToolResult, Source: &Source{By: "cy", Steps: []Step{{ID: "call", Tool: "get_item", Arguments: json.RawMessage(fmt.Sprintf(`{"id":"T-%d"}`, i))}}}}
		}
		return out
	}
	for _, tc := range []struct {
		reads    int
		unlisted bool
	}{{MaxSummarySources, false}, {MaxSummarySources + 1, true}} {
		sources, unlisted := sourcesOf(nil, reads(tc.reads))
		if unlisted != tc.unlisted || (unlisted && sources != nil) || (!unlisted && len(sources) != tc.reads) {
			t.Fatalf("%d reads: %d sources, unlisted %v", tc.reads, len(sources), unlisted)
		}
		// A summary over an unlisted one is unlisted too.
		if _, again := sourcesOf(&Summary{Unlisted: unlisted}, nil); again != unlisted {
			t.Fatalf("%d reads: the next summary's unlisted = %v", tc.reads, again)
		}
	}
	sum := &Summary{For: "cy", Unlisted: true}
	for _, tc := range []struct {
		user   string
		usable bool
	}{{"cy", true}, {"ben", false}} {
		tr := &turn{person: planexec.Delegation{Tenant: "acme", User: tc.user}}
		if got := tr.usable(sum); got != tc.usable {
			t.Errorf("an unlisted summary made for cy, for %s: usable = %v", tc.user, got)
		}
	}
}

// A plan proposed for another person after a read the viewer could not
// make is withheld, even when the call that proposed it was written before
// the read came back (in the same answer): it is withheld as an answer
// after the read would be, and what was applied of it with it.
func TestAProposalForAnotherPersonAfterAWithheldReadIsWithheld(t *testing.T) {
	plan := json.RawMessage(`{"goal":"Raise Alice","steps":[{"id":"raise","tool":"create_item","arguments":{"title":"Raise Alice"},"depends_on":[],"intent":""}]}`)
	salaries := &Source{By: "cy", Steps: []Step{{ID: "call", Tool: "get_salaries", Arguments: json.RawMessage(`{}`)}}}
	raise := []Step{{ID: "raise", Tool: "create_item", Arguments: json.RawMessage(`{"title":"Raise Alice"}`)}}
	entries := []Output{
		{Kind: KindMessage, Turn: 1, Role: "user", By: "cy", Text: "Raise Alice"},
		{Kind: KindMessage, Turn: 1, Role: "assistant", For: "cy"},
		{Kind: KindToolCall, Turn: 1, Call: &Call{ID: "t1r1c1", Tool: "get_salaries", Arguments: json.RawMessage(`{}`)}},
		{Kind: KindToolCall, Turn: 1, Call: &Call{ID: "t1r1c2", Tool: proposeTool, Arguments: plan}},
		{Kind: KindToolResult, Turn: 1, Source: salaries, Result: &Result{Call: "t1r1c1", Tool: "get_salaries", Status: CallOK, Output: json.RawMessage(`{"alice":1}`)}},
		{Kind: KindToolResult, Turn: 1, Result: &Result{Call: "t1r1c2", Tool: proposeTool, Status: CallOK, Output: json.RawMessage(`{"proposal":"t1r1c2"}`)}},
		{Kind: KindProposal, Turn: 1, Proposal: &Proposal{ID: "t1r1c2", Plan: ProposedPlan{Goal: "Raise Alice", Steps: raise}}},
		{Kind: KindApplying, By: "ana", Decision: &Decision{Proposal: "t1r1c2", Steps: []string{"raise"}, Run: "chat:s1:t1r1c2"}},
		{Kind: KindApplied, By: "ana", Source: &Source{By: "ana", Applied: true, Steps: raise},
			Decision: &Decision{Proposal: "t1r1c2", Steps: []string{"raise"}, Run: "chat:s1:t1r1c2", Status: "completed",
				Results: []StepOutcome{{Step: "raise", Tool: "create_item", Status: "done", Output: json.RawMessage(`{"title":"Raise Alice"}`)}}}},
	}
	v := &viewer{person: planexec.Delegation{Tenant: "acme", User: "ben"}, may: func(s *Source) bool { return s.Steps[0].Tool != "get_salaries" }}
	for i := range entries {
		v.show(&entries[i])
	}
	if c := entries[3].Call; string(c.Arguments) != string(plan) {
		t.Fatalf("the call written before the read was withheld: %s", c.Arguments)
	}
	if p := entries[6].Proposal; !entries[6].withheld || p.ID != "t1r1c2" || p.Plan.Goal != withheldPlan || len(p.Plan.Steps) != 0 {
		t.Errorf("the proposal for cy after the withheld read: %+v", p)
	}
	for _, i := range []int{7, 8} {
		if d := entries[i].Decision; len(d.Steps) != 0 || len(d.Results) != 0 || d.Proposal != "t1r1c2" {
			t.Errorf("the %s of the withheld proposal names its steps or what they did: %+v", entries[i].Kind, d)
		}
	}
	if entries[8].Source != nil || !entries[8].withheld {
		t.Errorf("the outcome of the withheld proposal, which ben could have applied, is shown: %+v", entries[8])
	}
}
