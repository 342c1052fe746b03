package plannerapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/llm"
)

// plan serves a planner-mode request: the session's run, from where it
// stands.
func (s *Server) plan(w http.ResponseWriter, r *http.Request, caller, session string, req *chatRequest, model llm.Model) {
	ctx := r.Context()
	switch {
	case req.MaxTokens != nil || req.MaxCompletionTokens != nil:
		badRequest("max_tokens", "A planner run sets the bounds of its own model calls; use an ordinary completion to set max_tokens.").write(w)
		return
	case len(req.ResponseFormat) > 0:
		badRequest("response_format", "A planner run answers in text; use an ordinary completion to ask for a response_format.").write(w)
		return
	}
	scope, p := s.scope(req.Agents)
	if p != nil {
		p.write(w)
		return
	}
	var clientTools []*planexec.Tool
	for i, t := range req.Tools {
		params := t.Function.Parameters
		if len(params) == 0 {
			params = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		tool, err := planexec.NewClientTool(t.Function.Name, t.Function.Description, params)
		if err != nil {
			badRequest(fmt.Sprintf("tools[%d].function.parameters", i), "The tool cannot be offered: "+err.Error()).write(w)
			return
		}
		clientTools = append(clientTools, tool)
		if scope != nil {
			scope = append(scope, t.Function.Name)
		}
	}
	// Where the session stands: new, paused, under way, or over. A session
	// that is over, or paused past its time, starts over as a new run (the
	// next generation of the session), so nothing of the last one is
	// replayed in it.
	d := planexec.Delegation{Tenant: caller, User: caller, Agent: s.cfg.Agent.Name, Scope: scope}
	gen, info, found, err := s.generation(ctx, d, session)
	var derr *planexec.DelegationError
	switch {
	case errors.As(err, &derr):
		badRequest("x-session-id", "The session id must be printable text.").write(w)
		return
	case err != nil:
		errorStatus(w, err)
		return
	}
	fresh := !found
	if found {
		// A finished session starts over on a new turn of the conversation;
		// a request that repeats the last one (a retry) gets its answer.
		over := (info.Status == planexec.RunCompleted || info.Status == planexec.RunFailed) && newTurn(req.Messages)
		expired := paused(info.Status) && s.cfg.Now().Sub(info.Updated) > s.cfg.SessionTTL
		if over || expired {
			gen, fresh = gen+1, true
			if expired {
				w.Header().Set("X-Session-Status", "restarted")
			}
		}
	}
	out := newResponder(w, req, s.cfg.Now())
	opts := []planexec.RunOption{planexec.WithTools(clientTools...), planexec.WithStepTimeout(s.cfg.ToolTimeout)}
	if req.Stream {
		opts = append(opts, planexec.WithObserver(out.progress))
	}
	d.RunID = runID(session, gen)
	run, err := s.cfg.Executor.Run(d, opts...)
	out.run = run
	var cerr *planexec.ConfigurationError
	switch {
	case errors.As(err, &cerr):
		badRequest("tools", "The tools cannot be offered: "+cerr.Error()).write(w)
		return
	case err != nil:
		errorStatus(w, err)
		return
	}
	agent := s.cfg.Agent
	agent.Temperature = req.Temperature // the run's own model calls take it
	planner, err := planexec.NewAgentPlanner(model, agent)
	if err != nil {
		errorStatus(w, err)
		return
	}

	var res *planexec.Result
	replied := false
	if !fresh {
		switch info.Status {
		case planexec.RunAwaitingTool:
			if p := submitResults(ctx, run, req.Messages); p != nil {
				p.write(w)
				return
			}
		case planexec.RunAwaitingApproval:
			if p := decide(ctx, run, caller, req.Decisions); p != nil {
				p.write(w)
				return
			}
		case planexec.RunAwaitingReply:
			// The reply is a new user turn after the question; a request
			// that repeats the one before gets the question again.
			if newTurn(req.Messages) {
				text, _ := lastUser(req.Messages)
				res, err = run.Reply(ctx, planner, text)
				replied = true
			}
		}
	}
	if !replied {
		res, err = run.Do(ctx, planner, task(req.Messages))
	}
	if (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) && ctx.Err() == nil {
		// Not the client going away: a model call or a store that ran out
		// of time.
		err = errTimedOut
	}
	s.finish(out, run, res, err)
}

// errTimedOut is a run cut short by a deadline while its client waited.
var errTimedOut = errors.New("plannerapi: the run ran out of time")

// runID is the id of the run of generation gen of session: the session id
// itself first, then "<session>~<gen>".
func runID(session string, gen int) string {
	if gen <= 1 {
		return session
	}
	return fmt.Sprintf("%s%s%d", session, generationMark, gen)
}

// generation finds the session's latest run: its generation and where it
// stands; found is false for a session with no run yet (generation 1).
// Generations are made one after another, so it probes 1, 2, 4, … and then
// halves the gap: a few loads whatever the number of generations.
func (s *Server) generation(ctx context.Context, d planexec.Delegation, session string) (gen int, info planexec.RunInfo, found bool, err error) {
	probe := func(g int) (planexec.RunInfo, bool, error) {
		d.RunID = runID(session, g)
		run, err := s.cfg.Executor.Run(d)
		if err != nil {
			return planexec.RunInfo{}, false, err
		}
		info, err := run.Info(ctx)
		if errors.Is(err, planexec.ErrNoRecord) {
			return planexec.RunInfo{}, false, nil
		}
		return info, err == nil, err
	}
	info, found, err = probe(1)
	if err != nil || !found {
		return 1, planexec.RunInfo{}, false, err
	}
	lo, hi := 1, 2 // lo exists; hi is the first probe past it
	for {
		next, ok, err := probe(hi)
		if err != nil {
			return 0, planexec.RunInfo{}, false, err
		}
		if !ok {
			break
		}
		lo, info, hi = hi, next, hi*2
	}
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		next, ok, err := probe(mid)
		if err != nil {
			return 0, planexec.RunInfo{}, false, err
		}
		if ok {
			lo, info = mid, next
		} else {
			hi = mid
		}
	}
	return lo, info, true, nil
}

// newTurn reports whether the conversation goes on past the session's last
// answer: its last message is the user's, after an assistant message. A
// request that repeats the one before (a retry) does not.
func newTurn(msgs []chatMessage) bool {
	if len(msgs) == 0 || msgs[len(msgs)-1].Role != "user" {
		return false
	}
	for _, m := range msgs[:len(msgs)-1] {
		if m.Role == "assistant" {
			return true
		}
	}
	return false
}

// paused reports whether a session waits on its client.
func paused(st planexec.RunStatus) bool {
	return st == planexec.RunAwaitingTool || st == planexec.RunAwaitingApproval || st == planexec.RunAwaitingReply
}

// finish answers with how the run ended, or where it paused.
func (s *Server) finish(out *responder, run *planexec.Run, res *planexec.Result, err error) {
	var (
		calls    *planexec.ToolCallPendingError
		question *planexec.AwaitingReplyError
		pending  *planexec.ApprovalPendingError
	)
	u := run.Usage()
	switch {
	case err == nil:
		out.answer(res.Answer, nil, "stop", u, nil)
	case errors.As(err, &pending):
		text, meta := approvals(pending.Requests)
		out.answer(text, nil, "stop", u, meta)
	case errors.As(err, &calls):
		out.answer("", callsOf(calls.Calls), "tool_calls", u, nil)
	case errors.As(err, &question):
		out.answer(question.Question, nil, "stop", u, map[string]any{"type": "plan_state", "plan_status": planClarification})
	case errors.Is(err, context.Canceled):
		out.fail(errGone)
	default:
		out.fail(err)
	}
}

// scope is the tools a request's agents give a run: nil for all when the
// server names no groups.
func (s *Server) scope(agents []string) ([]string, *problem) {
	if s.cfg.Agents == nil {
		if len(agents) > 0 {
			return nil, badRequest("agents", "This server has no agents to name.")
		}
		return nil, nil
	}
	if len(agents) > s.cfg.MaxAgents {
		return nil, badRequest("agents", fmt.Sprintf("At most %d agents may be named.", s.cfg.MaxAgents))
	}
	grouped := map[string]bool{}
	for _, tools := range s.cfg.Agents {
		for _, t := range tools {
			grouped[t] = true
		}
	}
	var scope []string
	for _, spec := range s.catalog() {
		if !grouped[spec] {
			scope = append(scope, spec)
		}
	}
	for _, a := range agents {
		tools, ok := s.cfg.Agents[a]
		if !ok {
			return nil, badRequest("agents", fmt.Sprintf("Unknown agent %s.", quoteName(a)))
		}
		scope = append(scope, tools...)
	}
	return scope, nil
}

// catalog is the names of the executor's tools.
func (s *Server) catalog() []string {
	run, err := s.cfg.Executor.Run(planexec.Delegation{RunID: "catalog"})
	if err != nil {
		return nil
	}
	var names []string
	for _, t := range run.Catalog() {
		names = append(names, t.Name)
	}
	return names
}

// submitResults gives the run the results of its calls handed back: the
// tool messages after the last assistant message.
func submitResults(ctx context.Context, run *planexec.Run, msgs []chatMessage) *problem {
	start := len(msgs)
	for start > 0 && msgs[start-1].Role == "tool" {
		start--
	}
	if start == len(msgs) {
		return badRequest("messages", "The session waits for tool results: send each as a \"tool\" message with its tool_call_id.")
	}
	for i := start; i < len(msgs); i++ {
		m := msgs[i]
		text, _ := m.text()
		result := json.RawMessage(text)
		if !json.Valid(result) {
			result, _ = json.Marshal(text) // plain text is the result as a string
		}
		err := run.SubmitResult(ctx, m.ToolCallID, result)
		switch {
		case errors.Is(err, planexec.ErrNotPending):
			return badRequest(fmt.Sprintf("messages[%d].tool_call_id", i), fmt.Sprintf("The session awaits no tool call %s.", quoteName(m.ToolCallID)))
		case errors.Is(err, planexec.ErrInvalidDecision):
			return badRequest(fmt.Sprintf("messages[%d].content", i), "The tool result cannot be recorded.")
		case err != nil:
			return &problem{status: http.StatusInternalServerError, reason: "store_failed", message: "The tool result could not be recorded."}
		}
	}
	return nil
}

// decide records the client's decisions on the approvals the run waits on.
func decide(ctx context.Context, run *planexec.Run, caller string, decisions []decision) *problem {
	if len(decisions) == 0 {
		return badRequest("decisions", "The session waits for approvals: send a decision for each request in \"decisions\".")
	}
	for i, d := range decisions {
		// The approver is the authenticated caller; who they say decided
		// rides along.
		approver := caller
		if d.By != "" && d.By != caller {
			approver = caller + " (for " + d.By + ")"
		}
		dec := planexec.Decision{RequestID: d.Request, Status: planexec.Denied, Approver: approver, Why: d.Reason}
		if d.Approved {
			dec.Status = planexec.Approved
		}
		err := run.Decide(ctx, dec)
		switch {
		case errors.Is(err, planexec.ErrNotPending), errors.Is(err, planexec.ErrInvalidDecision):
			return badRequest(fmt.Sprintf("decisions[%d].request", i), fmt.Sprintf("The session awaits no decision on request %s.", quoteName(d.Request)))
		case err != nil:
			return &problem{status: http.StatusInternalServerError, reason: "store_failed", message: "The decision could not be recorded."}
		}
	}
	return nil
}

// lastUser is the text of the last user message.
func lastUser(msgs []chatMessage) (string, bool) {
	for _, m := range slices.Backward(msgs) {
		if m.Role == "user" {
			text, _ := m.text()
			return text, true
		}
	}
	return "", false
}

// task is the job a conversation asks for: its one user message, or the
// whole conversation, one line a message.
func task(msgs []chatMessage) string {
	users := 0
	for _, m := range msgs {
		if m.Role == "user" {
			users++
		}
	}
	if users == 1 && len(msgs) == 1 {
		text, _ := msgs[0].text()
		return text
	}
	var b strings.Builder
	for _, m := range msgs {
		text, _ := m.text()
		fmt.Fprintf(&b, "%s: %s\n", m.Role, text)
	}
	return b.String()
}
