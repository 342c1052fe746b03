package chat

import (
	"context"
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
	withheldCall   = "Withheld: this call was made for another person, from what they may read and the person you act for may not; so is its result."
	withheldPlan   = "Withheld: this plan was proposed for another person, from what they may read and the person you act for may not."
)

// callWithheld is the status the model is shown of a result withheld from
// it; no result is stored with it.
const callWithheld CallStatus = "withheld"

// usable reports whether the model working for the turn's person may be
// sent the summary (see judge.usable).
func (t *turn) usable(s *Summary) bool { return t.judgment().usable(s) }

// usable reports whether the person may be shown the summary: one made for
// them, or one whose every source they could read. A summary that does not
// say whose reads it holds is shown to no one.
func (j *judge) usable(s *Summary) bool {
	switch {
	case s == nil, s.For == "":
		return false
	case s.For == j.person.User:
		return true
	case s.Unlisted:
		return false
	}
	for i := range s.Sources {
		if !j.mayRead(&s.Sources[i]) {
			return false
		}
	}
	return true
}

// shown is the entries as the model working for the turn's person is shown
// them: each result or applied outcome the person could not have read is
// withheld, and so is each answer the planner wrote for another person once
// such an entry came before it (it may repeat what it read), or when it was
// shown more of the transcript than this turn is, with the calls of that
// answer, their results, its proposals and their outcomes.
func (t *turn) shown(entries []Output) []Output {
	out := slices.Clone(entries)
	v := &viewer{person: t.person, may: t.mayRead, after: t.after()}
	for i := range out {
		v.show(&out[i])
	}
	return out
}

// viewer withholds, entry after entry of a transcript read in order, what
// person could not have read: results and applied outcomes read under
// another's authority that the person's would not allow, the answers
// written for another person once such an entry came before them (or when
// the model that wrote them was shown more than after), and what came of a
// withheld answer: its calls and their results, its proposals and what was
// applied of them. A proposal made for another person once such an entry
// came before it is withheld too. A withheld proposal keeps its id, so that
// a person knows it is there; the steps named by a decision on it do not
// show.
type viewer struct {
	person planexec.Delegation
	may    func(*Source) bool // whether person could have read what a source did
	after  int64              // the entry after which what is viewed begins

	who     map[int64]string // each turn's person, by its number
	calls   map[string]*Call
	hidden  map[string]bool // the calls of withheld answers and the withheld proposals, by id (a proposal's is its call's)
	tainted bool            // an entry was withheld: answers for others after it may hold it
	hiding  bool            // the calls of a withheld answer follow it
}

// show withholds o, in place, if the viewer's person may not see it.
func (v *viewer) show(o *Output) {
	if v.who == nil {
		v.who, v.calls, v.hidden = map[int64]string{}, map[string]*Call{}, map[string]bool{}
	}
	if o.Kind != KindToolCall {
		v.hiding = false
	}
	switch o.Kind {
	case KindMessage:
		if o.Role != "assistant" {
			v.who[o.Turn] = o.By
			return
		}
		author := o.For
		if author == "" {
			author = v.who[o.Turn]
		}
		if author != v.person.User && (v.tainted || o.SeenAfter < v.after) {
			*o = Output{Seq: o.Seq, At: o.At, Kind: o.Kind, Turn: o.Turn, Role: o.Role, For: author, Text: withheldAnswer, withheld: true}
			v.hiding = true
		}
	case KindToolCall:
		v.calls[o.Call.ID] = o.Call
		if v.hiding {
			v.hidden[o.Call.ID] = true
			o.Call = &Call{ID: o.Call.ID, Tool: o.Call.Tool, Arguments: json.RawMessage(`"withheld"`)}
		}
	case KindProposal:
		// Its plan was written from what its turn's planner was shown, as
		// the answer that called for it was.
		if v.hidden[o.Proposal.ID] || (v.tainted && v.who[o.Turn] != v.person.User) {
			v.hidden[o.Proposal.ID] = true
			*o = Output{Seq: o.Seq, At: o.At, Kind: o.Kind, Turn: o.Turn, withheld: true,
				Proposal: &Proposal{ID: o.Proposal.ID, Plan: ProposedPlan{Goal: withheldPlan, Steps: []Step{}}}}
		}
	case KindApplying, KindRejected:
		if v.hidden[o.Decision.Proposal] {
			d := *o.Decision
			d.Steps = nil
			o.Decision = &d
		}
	case KindToolResult:
		if v.hidden[o.Result.Call] {
			v.withhold(o, withheldCall)
			return
		}
		if !v.readable(o) {
			v.withhold(o, withheldRead)
		}
	case KindApplied:
		if v.hidden[o.Decision.Proposal] || !v.readable(o) {
			v.withhold(o, withheldRead)
		}
	}
}

// readable reports whether the viewer's person could have read what a
// result or an applied outcome holds, setting its Source when it had to be
// inferred.
func (v *viewer) readable(o *Output) bool {
	src := o.Source
	if src == nil {
		src = inferredSource(o, v.who, v.calls)
	}
	if src == nil {
		return true // fixed words: no data
	}
	if v.may(src) {
		o.Source = src
		return true
	}
	return false
}

// withhold replaces a result or an applied outcome, in place, by fixed
// words: a result by why, an outcome by its decision without what its steps
// did (nor, for a withheld proposal, which steps).
func (v *viewer) withhold(o *Output, why string) {
	v.tainted = true
	if o.Kind == KindToolResult {
		*o = Output{Seq: o.Seq, At: o.At, Kind: o.Kind, Turn: o.Turn, withheld: true, Result: &Result{
			Call: o.Result.Call, Tool: o.Result.Tool, Status: callWithheld, Error: &ToolError{Code: "withheld", Message: why}}}
		return
	}
	d := o.Decision
	steps := d.Steps
	if v.hidden[d.Proposal] {
		steps = nil
	}
	*o = Output{Seq: o.Seq, At: o.At, Kind: o.Kind, By: o.By, withheld: true,
		Decision: &Decision{Proposal: d.Proposal, Steps: steps, Run: d.Run, Status: d.Status}}
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
func (t *turn) mayRead(src *Source) bool { return t.judgment().mayRead(src) }

// judgment is the turn's judge, made at its first use.
func (t *turn) judgment() *judge {
	if t.judge == nil {
		t.judge = &judge{c: t.c, ctx: t.ctx, person: t.person, planner: t.planner}
	}
	return t.judge
}

// judgeFor is a judge for person reading the session.
func (c *Chat) judgeFor(ctx context.Context, person planexec.Delegation, session string) (*judge, error) {
	planner, err := person.Delegate("planner:"+session, person.Scope, person.Expires)
	if err != nil {
		return nil, err
	}
	return &judge{c: c, ctx: ctx, person: person, planner: planner}, nil
}

// judge tells, for one person, whether they could have read what a source
// did, remembering each answer.
type judge struct {
	c               *Chat
	ctx             context.Context
	person, planner planexec.Delegation // the person's, and theirs narrowed to the planner
	judged          map[string]bool
}

func (j *judge) mayRead(src *Source) bool {
	if src.By == j.person.User {
		return true
	}
	key, _ := json.Marshal(src) // strings and raw JSON: it cannot fail
	if ok, seen := j.judged[string(key)]; seen {
		return ok
	}
	ok := j.c.mayRead(j.ctx, j.person, j.planner, src)
	if j.judged == nil {
		j.judged = map[string]bool{}
	}
	j.judged[string(key)] = ok
	return ok
}

// mayRead asks as a call would: a read under the person's delegation to
// the planner, on the executor of the read tools; applied steps under the
// person's own, on the engine. Validation (the scope, the tools' contracts)
// and the authorizer decide.
func (c *Chat) mayRead(ctx context.Context, person, planner planexec.Delegation, src *Source) bool {
	ex, d := c.reads, planner
	if src.Applied {
		ex, d = c.cfg.Engine, person
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
	return run.Validate(plan) == nil && run.Authorize(ctx, plan) == nil
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

// proposalWithheld reports whether proposal id of the session is withheld
// from person: made, for another person, from what this one may not read.
func (c *Chat) proposalWithheld(ctx context.Context, person planexec.Delegation, session, id string) (bool, error) {
	seen, err := c.TranscriptFor(ctx, person, session, 0, 0)
	if err != nil {
		return false, err
	}
	for i := range seen {
		if o := &seen[i]; o.Kind == KindProposal && o.Proposal != nil && o.Proposal.ID == id {
			return o.withheld, nil
		}
	}
	return false, nil
}
