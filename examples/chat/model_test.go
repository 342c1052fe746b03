package main

import (
	"slices"
	"testing"

	"github.com/planexec/planexec/llm"
)

// TestTheStandInFindsTheItemsAsked: quoted titles, or a list after the verb.
func TestTheStandInFindsTheItemsAsked(t *testing.T) {
	for _, c := range []struct {
		request string
		want    []string
	}{
		{"plan items for design review and launch checklist", []string{"Design review", "Launch checklist"}},
		{`please add "Security review" and "Beta invite list"`, []string{"Security review", "Beta invite list"}},
		{"create an item for the QA pass.", []string{"QA pass"}},
		{"make tasks to write docs, fix tests and ship", []string{"Write docs", "Fix tests", "Ship"}},
		{"plan", []string{"New item"}},
	} {
		if got := titlesIn(c.request); !slices.Equal(got, c.want) {
			t.Errorf("titlesIn(%q) = %q, want %q", c.request, got, c.want)
		}
	}
}

// TestTheStandInReadsThePersonsMessage: the person's words come after their
// name, after any decision the planner was told of in the same message.
func TestTheStandInReadsThePersonsMessage(t *testing.T) {
	msgs := []llm.Message{{Role: llm.RoleUser, Content: "ana applied proposal t1r2c1 (steps s1): the run is completed.\n\nana: what is open?"}}
	if got := personText(msgs); got != "what is open?" {
		t.Errorf("personText = %q", got)
	}
	if a := respond(msgs); len(a.Calls) != 1 || a.Calls[0].Tool != "list_items" {
		t.Errorf("respond = %+v, want a call of list_items", a)
	}
}
