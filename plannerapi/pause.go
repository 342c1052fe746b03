package plannerapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/internal/strictjson"
)

// take records what a request brings for the pause its session is in: the
// results of calls handed back (the tool messages after the last other
// message) and decisions on approvals. The whole request is checked against
// what the session waits for (info) before anything is recorded: an entry
// for nothing it waits for, or ever waited for, records nothing and is a
// problem naming the entry, and what the session waits for. One it waited
// for and has since taken stands as first given. reply reports a new user
// turn for a session awaiting a reply: the answer to its question.
func take(ctx context.Context, run *planexec.Run, j *job, info planexec.RunInfo) (reply bool, p *problem) {
	in, p := intakeOf(ctx, run, j, info)
	if p == nil {
		p = in.record(ctx, run)
	}
	if p != nil {
		if p.status == http.StatusBadRequest {
			p.meta = waits(info)
			p.message += " " + waitingText(info)
		}
		return false, p
	}
	return info.Status == planexec.RunAwaitingReply && newTurn(j.req.Messages), nil
}

// intake is what a request brings for a pause, checked: the results and
// decisions to record.
type intake struct {
	results   []result
	decisions []planexec.Decision
}

type result struct {
	call    string
	outcome json.RawMessage
}

// intakeOf checks what j brings against what the session waits for.
func intakeOf(ctx context.Context, run *planexec.Run, j *job, info planexec.RunInfo) (*intake, *problem) {
	calls, requests := map[string]bool{}, map[string]bool{}
	for _, w := range info.Waiting {
		if w.Call != "" {
			calls[w.Call] = true
		}
		if w.Request != "" {
			requests[w.Request] = true
		}
	}
	var in intake
	var gone, goneDecided []int // entries for nothing the session waits for now
	msgs := j.req.Messages
	start := len(msgs)
	for start > 0 && msgs[start-1].Role == "tool" {
		start--
	}
	named := map[string]bool{}
	for i := start; i < len(msgs); i++ {
		m := msgs[i]
		if named[m.ToolCallID] {
			return nil, badRequest(fmt.Sprintf("messages[%d].tool_call_id", i), fmt.Sprintf("The call %s has two results in this request.", quoteName(m.ToolCallID)))
		}
		named[m.ToolCallID] = true
		text, _ := m.text()
		outcome := json.RawMessage(text)
		if !json.Valid(outcome) {
			outcome, _ = json.Marshal(text) // plain text is the result as a string
		}
		if vs := strictjson.CheckValue(outcome, strictjson.Limits{MaxBytes: len(outcome) + 1}); vs != nil {
			return nil, badRequest(fmt.Sprintf("messages[%d].content", i), "The tool result cannot be recorded: "+vs[0].Problem+".")
		}
		if !calls[m.ToolCallID] {
			gone = append(gone, i)
			continue
		}
		in.results = append(in.results, result{m.ToolCallID, outcome})
	}
	named = map[string]bool{}
	for i, d := range j.req.Decisions {
		switch {
		case d.Request == "":
			return nil, badRequest(fmt.Sprintf("decisions[%d].request", i), "A decision names the request it decides.")
		case named[d.Request]:
			return nil, badRequest(fmt.Sprintf("decisions[%d].request", i), fmt.Sprintf("The request %s is decided twice in this request.", quoteName(d.Request)))
		}
		named[d.Request] = true
		if !requests[d.Request] {
			goneDecided = append(goneDecided, i)
			continue
		}
		// The approver is the authenticated caller; who they say decided
		// rides along.
		approver := j.caller
		if d.By != "" && d.By != j.caller {
			approver = j.caller + " (for " + d.By + ")"
		}
		dec := planexec.Decision{RequestID: d.Request, Status: planexec.Denied, Approver: approver, Why: d.Reason}
		if d.Approved {
			dec.Status = planexec.Approved
		}
		in.decisions = append(in.decisions, dec)
	}
	if len(gone) == 0 && len(goneDecided) == 0 {
		return &in, nil
	}
	// An entry for something the session no longer waits for is one sent
	// again (its response lost) if the session handed that call back, or
	// asked that request, before: it was taken then.
	handed, asked, err := earlier(ctx, run)
	if err != nil {
		return nil, &problem{status: http.StatusInternalServerError, reason: "store_failed", message: "The session's history could not be read."}
	}
	for _, i := range gone {
		if !handed[msgs[i].ToolCallID] {
			return nil, badRequest(fmt.Sprintf("messages[%d].tool_call_id", i), fmt.Sprintf("The session awaits no tool call %s.", quoteName(msgs[i].ToolCallID)))
		}
	}
	for _, i := range goneDecided {
		if req := j.req.Decisions[i].Request; !asked[req] {
			return nil, badRequest(fmt.Sprintf("decisions[%d].request", i), fmt.Sprintf("The session awaits no decision on request %s.", quoteName(req)))
		}
	}
	return &in, nil
}

// record records what was checked. One recorded before (a request sent
// again after its run stopped) stands as first given.
func (in *intake) record(ctx context.Context, run *planexec.Run) *problem {
	for _, r := range in.results {
		err := run.SubmitResult(ctx, r.call, r.outcome)
		switch {
		case err == nil, errors.Is(err, planexec.ErrNotPending):
		case errors.Is(err, planexec.ErrInvalidDecision):
			return badRequest("messages", fmt.Sprintf("The result of call %s cannot be recorded: it is too large.", quoteName(r.call)))
		default:
			return &problem{status: http.StatusInternalServerError, reason: "store_failed", message: "The tool result could not be recorded."}
		}
	}
	for _, dec := range in.decisions {
		if err := run.Decide(ctx, dec); err != nil && !errors.Is(err, planexec.ErrNotPending) {
			return &problem{status: http.StatusInternalServerError, reason: "store_failed", message: "The decision could not be recorded."}
		}
	}
	return nil
}

// earlier reads the run's history for the calls it handed back and the
// approvals it asked for.
func earlier(ctx context.Context, run *planexec.Run) (handed, asked map[string]bool, _ error) {
	handed, asked = map[string]bool{}, map[string]bool{}
	const page = 1000
	var after int64
	for {
		events, err := run.History(ctx, after, page)
		var cerr *planexec.ConfigurationError
		if errors.As(err, &cerr) {
			return handed, asked, nil // no history kept: nothing is known of before
		}
		if err != nil {
			return nil, nil, err
		}
		for _, e := range events {
			switch e.Kind {
			case planexec.EventToolCallHandedBack:
				handed[e.Call] = true
			case planexec.EventApprovalRequired, planexec.EventApprovalPending:
				asked[e.Request] = true
			}
			after = e.Seq
		}
		if len(events) < page {
			return handed, asked, nil
		}
	}
}

// waits says where a session stands, for an error's metadata: its status
// and, paused, what it waits for (the calls handed back, by id and tool;
// the approval requests; the question; the steps in doubt).
func waits(info planexec.RunInfo) map[string]any {
	meta := map[string]any{"type": "plan_state", "session_status": string(info.Status)}
	switch info.Status {
	case planexec.RunCompleted:
		meta["plan_status"] = planCompleted
	case planexec.RunRunning, planexec.RunPlanning, planexec.RunInterrupted:
		meta["plan_status"] = planInProgress
	}
	var calls []toolCall
	var reqs []planexec.ApprovalRequest
	var doubts []map[string]any
	for _, w := range info.Waiting {
		switch {
		case w.Call != "":
			var c toolCall
			c.ID, c.Type, c.Function.Name = w.Call, "function", w.Tool
			if w.HandedBack != nil {
				c.Function.Arguments = string(w.HandedBack.Arguments)
			}
			calls = append(calls, c)
		case w.Approval != nil:
			reqs = append(reqs, *w.Approval)
		case w.Request != "":
			reqs = append(reqs, planexec.ApprovalRequest{ID: w.Request, StepID: w.Step, Tool: w.Tool})
		case w.Key.Digest != "":
			doubts = append(doubts, map[string]any{"step": w.Step, "tool": w.Tool})
		}
	}
	if len(doubts) > 0 {
		meta["in_doubt"] = doubts
	}
	if len(reqs) > 0 {
		_, m := approvals(reqs)
		meta["plan_status"], meta["approvals"] = m["plan_status"], m["approvals"]
	}
	if len(calls) > 0 {
		meta["tool_calls"] = calls
	}
	if info.Status == planexec.RunAwaitingReply && info.Question != "" {
		meta["plan_status"], meta["question"] = planClarification, info.Question
	}
	return meta
}

// maxNamed bounds the waits a message names; metadata names them all.
const maxNamed = 8

// waitingText says in a sentence what a session waits for.
func waitingText(info planexec.RunInfo) string {
	var parts []string
	for _, w := range info.Waiting {
		switch {
		case w.Call != "":
			parts = append(parts, fmt.Sprintf("the result of call %s (%s)", w.Call, w.Tool))
		case w.Request != "":
			parts = append(parts, fmt.Sprintf("a decision on request %s (%s)", w.Request, w.Tool))
		}
	}
	if info.Status == planexec.RunAwaitingReply {
		parts = append(parts, "the person's reply to its question (the next user message)")
	}
	if len(parts) == 0 {
		return fmt.Sprintf("The session is %s and waits for nothing.", info.Status)
	}
	if len(parts) > maxNamed {
		parts = append(parts[:maxNamed], fmt.Sprintf("%d more", len(parts)-maxNamed))
	}
	return "The session waits for " + strings.Join(parts, "; ") + " (error.metadata lists them); a request that brings nothing new is answered with the pause again."
}
