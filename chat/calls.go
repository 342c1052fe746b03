package chat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/internal/strictjson"
	"github.com/planexec/planexec/llm"
)

// maxFixes is how many times in a row the model is asked again for an
// answer out of form, before the turn fails.
const maxFixes = 2

// ask calls the model with the conversation and decodes its answer. An
// answer out of form, or cut off at the model's length limit, is told back
// to the model to fix, up to maxFixes times; what it wrote then is on no
// record, and none of its calls runs. Every call is metered, an answer that
// came with an error too.
func (t *turn) ask() (*answerWire, *llm.Response, error) {
	msgs := messages(t.summary, t.history)
	for fixes := 0; ; fixes++ {
		ans, resp, err := t.askOnce(msgs)
		var bad *malformedAnswer
		if !errors.As(err, &bad) || fixes == maxFixes || t.stopped() {
			return ans, resp, err
		}
		if n := len(msgs); n > 0 && msgs[n-1].Role == llm.RoleUser {
			// Roles alternate: the model's answer, then the note.
			var wrote string
			if resp != nil {
				wrote = strings.ToValidUTF8(clipRunes(resp.Content, 2000), "\uFFFD")
			}
			if strings.TrimSpace(wrote) == "" {
				wrote = "(an answer with no text)"
			}
			msgs = append(msgs, llm.Message{Role: llm.RoleAssistant, Content: wrote}, llm.Message{Role: llm.RoleUser, Content: bad.fix()})
		}
	}
}

func (t *turn) askOnce(msgs []llm.Message) (*answerWire, *llm.Response, error) {
	req := &llm.Request{System: t.system, Messages: msgs, Output: t.c.answer}
	resp, err := t.c.cfg.Model.Generate(t.ctx, req)
	if resp != nil {
		t.meter(resp)
	}
	if cutOff(resp, err) {
		return nil, resp, &malformedAnswer{cut: true}
	}
	if err != nil {
		return nil, resp, err
	}
	if resp.Refusal != "" {
		return nil, resp, fmt.Errorf("%w: the model declined to answer", errMalformedAnswer)
	}
	ans, err := decodeAnswer(resp.Content)
	return ans, resp, err
}

// call runs one tool call of the planner and returns what goes on record:
// its result, and a proposal when it proposed one. A result that holds what
// the tool returned says it was read under the person's authority.
func (t *turn) call(c *Call) []Output {
	result := func(r *Result) []Output {
		r.Call, r.Tool = c.ID, c.Tool
		return []Output{{Kind: KindToolResult, Turn: t.number, Result: r}}
	}
	read := func(r *Result) []Output {
		out := result(r)
		out[0].Source = &Source{By: t.person.User, Steps: []Step{{ID: "call", Tool: c.Tool, Arguments: c.Arguments}}}
		return out
	}
	if c.Tool == proposeTool && t.c.cfg.Engine != nil {
		p, err := t.propose(c)
		if err != nil {
			return result(&Result{Status: CallFailed, Error: err})
		}
		out, _ := json.Marshal(map[string]string{"proposal": p.ID, "status": "proposed: a person will apply it, in whole or in part, or reject it"})
		return append(result(&Result{Status: CallOK, Output: out}), Output{Kind: KindProposal, Turn: t.number, Proposal: p})
	}
	if _, ok := t.c.readOf[c.Tool]; !ok {
		return result(&Result{Status: CallFailed, Error: &ToolError{Code: "unknown_tool", Message: "There is no tool named " + quote(c.Tool) + ". Call only the tools listed."}})
	}
	d := t.planner
	d.RunID = ""
	run, err := t.c.reads.Run(d)
	if err != nil {
		return result(&Result{Status: CallFailed, Error: t.toolError(c, err)})
	}
	res, err := run.Execute(t.ctx, planexec.Plan{Goal: "read", Steps: []planexec.Step{{ID: "call", Tool: c.Tool, Arguments: c.Arguments}}})
	var own *ToolError
	switch {
	case errors.As(err, &own):
		return read(&Result{Status: CallFailed, Error: t.toolError(c, err)}) // the tool's own words
	case err != nil:
		return result(&Result{Status: CallFailed, Error: t.toolError(c, err)})
	}
	out, truncated := cut(res.Steps["call"].Outcome, t.c.cfg.MaxResultBytes)
	return read(&Result{Status: CallOK, Output: out, Truncated: truncated})
}

// bounded is a tool's *ToolError as the model is shown it and the transcript
// keeps it: its message cut to limit bytes on a rune boundary, and marked.
func bounded(te *ToolError, limit int) *ToolError {
	return &ToolError{Code: clip(te.Code), Message: cutText(te.Message, limit)}
}

// cutText cuts s to at most limit bytes, on a rune boundary, marked as cut.
func cutText(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	const mark = "… (truncated)"
	n := limit - len(mark)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:max(n, 0)] + mark
}

// forbidden is the fixed result of a call the person may not make.
func forbidden(tool string) *ToolError {
	return &ToolError{Code: "forbidden", Message: "The person you act for may not use " + quote(tool) + "; it was not run."}
}

// toolError turns a call's failure into what the model may read: the
// validation's own words (paths and rules, never values), the fixed
// forbidden result, a tool's *ToolError as written (bounded as a result
// is), or "the tool failed"; anything else goes only to the log.
func (t *turn) toolError(c *Call, err error) *ToolError {
	var te *ToolError
	var pve *planexec.PlanValidationError
	var de *planexec.DelegationError
	switch {
	case errors.As(err, &te):
		return bounded(te, t.c.cfg.MaxResultBytes)
	case errors.As(err, &pve) && pve.Reason == planexec.ReasonNotAllowed:
		return forbidden(c.Tool)
	case errors.As(err, &pve):
		return &ToolError{Code: "invalid_arguments", Message: describe(pve)}
	case errors.As(err, &de):
		return forbidden(c.Tool)
	case t.ctx.Err() != nil:
		return &ToolError{Code: "cancelled", Message: "The turn was cancelled while the call ran."}
	}
	t.c.cfg.Logger.LogAttrs(context.WithoutCancel(t.ctx), slog.LevelError, "chat: a tool call failed",
		slog.String("tenant", t.key.tenant), slog.String("session", t.key.id), slog.String("call", c.ID), slog.String("tool", c.Tool), slog.Any("error", err))
	return &ToolError{Code: "failed", Message: "The tool failed. Try again later, or another way."}
}

// describe says what validation refused, in its own fixed words.
func describe(e *planexec.PlanValidationError) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Refused (%s)", e.Reason)
	if e.Step != "" && e.Step != "call" {
		fmt.Fprintf(&b, " at step %s", quote(e.Step))
	}
	if e.Tool != "" {
		fmt.Fprintf(&b, " (tool %s)", quote(e.Tool))
	}
	b.WriteString(".")
	for _, v := range e.Violations {
		b.WriteString(" " + v.String() + ".")
	}
	return b.String()
}

// proposedDecoder decodes propose_plan's arguments strictly.
var proposedDecoder = func() *strictjson.Decoder {
	d, err := strictjson.For(reflect.TypeFor[ProposedPlan]())
	if err != nil {
		panic(err)
	}
	return d
}()

// propose validates a proposed plan as if it were to run now, under the
// person's authority: the engine's validation (tools, scope, arguments,
// dependencies, references) and its authorizer for each step.
func (t *turn) propose(c *Call) (*Proposal, *ToolError) {
	var pp ProposedPlan
	if vs := proposedDecoder.Decode(c.Arguments, &pp, strictjson.Limits{MaxDepth: 64, MaxBytes: maxAnswerBytes}); vs != nil {
		msg := "The plan is not in the expected form."
		for _, v := range vs {
			msg += " " + v.Path + ": " + v.Problem + "."
		}
		return nil, &ToolError{Code: "invalid_plan", Message: msg}
	}
	plan := pp.plan()
	// As it would run when applied: under the person's delegation.
	d := t.person
	d.RunID = ""
	run, err := t.c.cfg.Engine.Run(d)
	if err == nil {
		err = run.Validate(plan)
	}
	if err == nil {
		err = run.Authorize(t.ctx, plan)
	}
	if err == nil {
		err = run.CheckPreconditions(t.ctx, plan)
	}
	var (
		pve *planexec.PlanValidationError
		de  *planexec.DelegationError
	)
	switch {
	case errors.As(err, &pve) && pve.Reason == planexec.ReasonNotAllowed && pve.Tool != "":
		return nil, forbidden(pve.Tool)
	case errors.As(err, &pve):
		return nil, &ToolError{Code: "invalid_plan", Message: describe(pve) + " Nothing was proposed; propose the whole plan again, corrected."}
	case errors.As(err, &de) && de.Tool != "":
		return nil, forbidden(de.Tool)
	case err != nil:
		return nil, t.toolError(c, err)
	}
	p := &Proposal{ID: c.ID, Plan: pp}
	for _, s := range plan.Steps {
		if t.c.irreversible(s.Tool) {
			p.Irreversible = append(p.Irreversible, s.ID)
		}
	}
	return p, nil
}

// irreversible reports whether the engine's tool cannot be undone.
func (c *Chat) irreversible(tool string) bool {
	return slices.ContainsFunc(c.plans, func(s planexec.ToolSpec) bool { return s.Name == tool && s.Irreversible })
}

// plan is the proposal as a plan for the engine.
func (p *ProposedPlan) plan() planexec.Plan {
	out := planexec.Plan{Goal: p.Goal, Steps: make([]planexec.Step, len(p.Steps))}
	for i, s := range p.Steps {
		out.Steps[i] = planexec.Step(s)
	}
	return out
}

// cut bounds a tool's output: a longer one is replaced by a JSON string of
// its start, cut on a rune boundary.
func cut(out json.RawMessage, max int) (json.RawMessage, bool) {
	if len(out) <= max {
		return out, false
	}
	n := max
	for n > 0 && out[n]&0xC0 == 0x80 {
		n--
	}
	b, _ := json.Marshal(string(out[:n]) + "…")
	return b, true
}

// quote quotes a name the model wrote, clipped, for a message.
func quote(s string) string { return fmt.Sprintf("%q", clip(s)) }
