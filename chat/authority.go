package chat

import (
	"encoding/json"
	"slices"

	"github.com/planexec/planexec"
)

// What the planner working for one person is shown of what was read under
// another's authority: a session is its tenant's, but the planner acts with
// exactly the person's authority, in what it is shown as in what it calls.

const (
	withheldRead   = "Withheld: this was read under the authority of another person, which the person you act for does not have."
	withheldAnswer = "Withheld: this answer was written for another person, from what they may read and the person you act for may not."
)

// callWithheld is the status the model is shown of a result withheld from
// it; no result is stored with it.
const callWithheld CallStatus = "withheld"

// usable reports whether the model working for the turn's person may be
// sent the summary: one made for them, or one whose every source they could
// read. A summary that does not say whose reads it holds is sent to no one.
func (t *turn) usable(s *Summary) bool {
	switch {
	case s == nil, s.For == "":
		return false
	case s.For == t.person.User:
		return true
	case s.Unlisted:
		return false
	}
	for i := range s.Sources {
		if !t.mayRead(&s.Sources[i]) {
			return false
		}
	}
	return true
}

// shown is the entries as the model working for the turn's person is shown
// them: each result or applied outcome the person could not have read is
// withheld, and so is each answer the planner wrote for another person once
// such an entry came before it (it may repeat what it read), or when it was
// shown more of the transcript than this turn is.
func (t *turn) shown(entries []Output) []Output {
	out := slices.Clone(entries)
	after := t.after()
	who := map[int64]string{} // each turn's person, by its number
	calls := map[string]*Call{}
	tainted := false // an entry was withheld: answers for others after it may hold it
	hiding := false  // the calls of a withheld answer follow it
	for i := range out {
		o := &out[i]
		if o.Kind != KindToolCall {
			hiding = false
		}
		switch o.Kind {
		case KindMessage:
			if o.Role != "assistant" {
				who[o.Turn] = o.By
				continue
			}
			author := o.For
			if author == "" {
				author = who[o.Turn]
			}
			if author != t.person.User && (tainted || o.SeenAfter < after) {
				*o = Output{Seq: o.Seq, At: o.At, Kind: o.Kind, Turn: o.Turn, Role: o.Role, For: author, Text: withheldAnswer, withheld: true}
				hiding = true
			}
		case KindToolCall:
			calls[o.Call.ID] = o.Call
			if hiding {
				o.Call = &Call{ID: o.Call.ID, Tool: o.Call.Tool, Arguments: json.RawMessage(`"withheld"`)}
			}
		case KindToolResult, KindApplied:
			src := o.Source
			if src == nil {
				src = inferredSource(o, who, calls)
			}
			if src == nil {
				continue // fixed words: no data
			}
			if t.mayRead(src) {
				o.Source = src
				continue
			}
			tainted = true
			if o.Kind == KindToolResult {
				*o = Output{Seq: o.Seq, At: o.At, Kind: o.Kind, Turn: o.Turn, withheld: true, Result: &Result{
					Call: o.Result.Call, Tool: o.Result.Tool, Status: callWithheld, Error: &ToolError{Code: "withheld", Message: withheldRead}}}
			} else {
				d := o.Decision
				*o = Output{Seq: o.Seq, At: o.At, Kind: o.Kind, By: o.By, withheld: true,
					Decision: &Decision{Proposal: d.Proposal, Steps: d.Steps, Run: d.Run, Status: d.Status}}
			}
		}
	}
	return out
}

// fixedCodes are the codes of the results the chat writes in its own words.
var fixedCodes = []string{"forbidden", "invalid_arguments", "unknown_tool", "failed", "cancelled", "not_run", "interrupted", "invalid_plan"}

// inferredSource is the source of an entry stored before entries said
// theirs: a read's, from its call and its turn's person; an applied
// outcome's, its person's alone (nobody else's to read, as its steps are
// not at hand). nil for an entry in fixed words.
func inferredSource(o *Output, who map[int64]string, calls map[string]*Call) *Source {
	if o.Kind == KindApplied {
		return &Source{By: o.By, Applied: true}
	}
	r := o.Result
	if r.Tool == proposeTool || r.Status == CallNotRun || (r.Error != nil && slices.Contains(fixedCodes, r.Error.Code)) {
		return nil
	}
	src := &Source{By: who[o.Turn], Steps: []Step{{ID: "call", Tool: r.Tool}}}
	if c := calls[r.Call]; c != nil {
		src.Steps[0].Arguments = c.Arguments
	}
	return src
}

// mayRead reports whether the turn's person could have read what src did;
// what the person read themselves they may.
func (t *turn) mayRead(src *Source) bool {
	if src.By == t.person.User {
		return true
	}
	key, _ := json.Marshal(src) // strings and raw JSON: it cannot fail
	if ok, seen := t.judged[string(key)]; seen {
		return ok
	}
	ok := t.c.mayRead(t, src)
	if t.judged == nil {
		t.judged = map[string]bool{}
	}
	t.judged[string(key)] = ok
	return ok
}

// mayRead asks as a call would: a read under the person's delegation to
// the planner, on the executor of the read tools; applied steps under the
// person's own, on the engine. Validation (the scope, the tools' contracts)
// and the authorizer decide.
func (c *Chat) mayRead(t *turn, src *Source) bool {
	ex, d := c.reads, t.planner
	if src.Applied {
		ex, d = c.cfg.Engine, t.person
	}
	if ex == nil || len(src.Steps) == 0 {
		return false
	}
	d.RunID = ""
	run, err := ex.Run(d)
	if err != nil {
		return false
	}
	plan := planexec.Plan{Goal: "read", Steps: make([]planexec.Step, len(src.Steps))}
	for i, s := range src.Steps {
		plan.Steps[i] = planexec.Step(s)
	}
	return run.Validate(plan) == nil && run.Authorize(t.ctx, plan) == nil
}

// sourcesOf are the sources of what a summary of entries, after prev, is
// made from, each once; unlisted when there are more than
// MaxSummarySources, or prev's were.
func sourcesOf(prev *Summary, entries []Output) (_ []Source, unlisted bool) {
	if prev != nil && prev.Unlisted {
		return nil, true
	}
	var out []Source
	seen := map[string]bool{}
	add := func(s *Source) {
		key, _ := json.Marshal(s)
		if !seen[string(key)] {
			seen[string(key)] = true
			out = append(out, *s)
		}
	}
	if prev != nil {
		for i := range prev.Sources {
			add(&prev.Sources[i])
		}
	}
	for i := range entries {
		if o := &entries[i]; o.Source != nil && !o.withheld {
			add(o.Source)
		}
	}
	if len(out) > MaxSummarySources {
		return nil, true
	}
	return out, false
}
