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

// job is a planner-mode request, checked: who asks, what, and the tools
// its run may use.
type job struct {
	caller string
	req    *chatRequest
	scope  []string         // the tools the run may use; nil for every tool
	tools  []*planexec.Tool // the client's own
}

// prepare checks what a planner-mode request asks of its run, before it
// waits for its session.
func (s *Server) prepare(caller string, req *chatRequest) (*job, *problem) {
	switch {
	case req.MaxTokens != nil || req.MaxCompletionTokens != nil:
		return nil, badRequest("max_tokens", "A planner run sets the bounds of its own model calls; use an ordinary completion to set max_tokens.")
	case len(req.ResponseFormat) > 0:
		return nil, badRequest("response_format", "A planner run answers in text; use an ordinary completion to ask for a response_format.")
	case len(req.Tools) > s.cfg.MaxTools:
		return nil, badRequest("tools", fmt.Sprintf("At most %d tools may be passed; the request has %d.", s.cfg.MaxTools, len(req.Tools)))
	}
	for i, t := range req.Tools {
		switch {
		case !toolName.MatchString(t.Function.Name):
			return nil, badRequest(fmt.Sprintf("tools[%d].function.name", i), "A tool's name is 1 to 64 letters, digits, underscores or dashes.")
		case len(t.Function.Description) > maxToolDescription:
			return nil, badRequest(fmt.Sprintf("tools[%d].function.description", i), fmt.Sprintf("A tool's description is at most %d bytes.", maxToolDescription))
		case len(t.Function.Parameters) > maxToolParameters:
			return nil, badRequest(fmt.Sprintf("tools[%d].function.parameters", i), fmt.Sprintf("A tool's parameters are at most %d bytes of JSON Schema.", maxToolParameters))
		}
	}
	scope, p := s.scope(req.Agents)
	if p != nil {
		return nil, p
	}
	j := &job{caller: caller, req: req}
	for i, t := range req.Tools {
		params := t.Function.Parameters
		if len(params) == 0 {
			params = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		tool, err := planexec.NewClientTool(t.Function.Name, t.Function.Description, params)
		if err != nil {
			return nil, badRequest(fmt.Sprintf("tools[%d].function.parameters", i), "The tool cannot be offered: "+err.Error())
		}
		j.tools = append(j.tools, tool)
		if scope != nil {
			scope = append(scope, t.Function.Name)
		}
	}
	j.scope = scope
	return j, nil
}

// plan serves a planner-mode request: the session's run, from where it
// stands. The caller holds the session.
func (s *Server) plan(w http.ResponseWriter, r *http.Request, session string, j *job, model llm.Model) {
	// The run stops when its client goes away or stops reading.
	ctx, stop := context.WithCancelCause(r.Context())
	defer stop(nil)
	out := newResponder(w, j.req, s.cfg.Now(), s.cfg.WriteTimeout, stop)
	defer out.done()

	// Where the session stands: new, paused, under way, or over. A session
	// that is over, or paused past its time, starts over as a new run (the
	// next generation of the session), so nothing of the last one is
	// replayed in it.
	d := planexec.Delegation{Tenant: j.caller, User: j.caller, Agent: s.cfg.Agent.Name, Scope: j.scope}
	gen, info, found, err := s.generation(ctx, d, session)
	var derr *planexec.DelegationError
	switch {
	case errors.As(err, &derr):
		out.problem(badRequest("x-session-id", "The session id must be printable text."))
		return
	case err != nil:
		out.fail(err, nil)
		return
	}
	fresh := !found
	if found {
		// A finished session starts over on a new turn of the conversation;
		// a request that repeats the last one (a retry) gets its answer.
		over := (info.Status == planexec.RunCompleted || info.Status == planexec.RunFailed) && newTurn(j.req.Messages)
		expired := paused(info.Status) && s.cfg.Now().Sub(info.Updated) > s.cfg.SessionTTL
		if over || expired {
			if d.Scope, err = s.unbarred(ctx, d, session, gen, info, j); err != nil {
				out.fail(err, nil)
				return
			}
			gen, fresh = gen+1, true
			if expired {
				w.Header().Set("X-Session-Status", "restarted")
			}
		}
	}
	opts := []planexec.RunOption{planexec.WithTools(j.tools...), planexec.WithStepTimeout(s.cfg.ToolTimeout)}
	if j.req.Stream {
		opts = append(opts, planexec.WithObserver(out.progress))
	}
	d.RunID = runID(session, gen)
	run, err := s.cfg.Executor.Run(d, opts...)
	var cerr *planexec.ConfigurationError
	switch {
	case errors.As(err, &cerr):
		out.problem(badRequest("tools", "The tools cannot be offered: "+cerr.Error()))
		return
	case err != nil:
		out.fail(err, nil)
		return
	}
	out.run = run
	agent := s.cfg.Agent
	agent.Temperature = j.req.Temperature // the run's own model calls take it
	agentPlanner, err := planexec.NewAgentPlanner(model, agent)
	if err != nil {
		out.fail(err, nil)
		return
	}
	var planner planexec.Planner = agentPlanner
	if images := imagesOf(j.req.Messages); len(images) > 0 {
		// The run does not record images: each request shows the planner
		// those it brings.
		planner = seeing{Planner: agentPlanner, images: images}
		out.state(map[string]any{"plan_status": planAnalyzingImage})
	}

	var res *planexec.Result
	reply := false
	if !fresh && paused(info.Status) {
		// What the request brings for the pause is recorded first; a
		// request that brings nothing (resent, its response lost) is
		// answered with the pause again.
		var p *problem
		if reply, p = take(ctx, run, j, info); p != nil {
			out.problem(p)
			return
		}
	}
	if reply {
		text, _ := lastUser(j.req.Messages)
		res, err = run.Reply(ctx, planner, text)
		if errors.Is(err, planexec.ErrInvalidDecision) {
			out.problem(badRequest(fmt.Sprintf("messages[%d].content", len(j.req.Messages)-1), "The reply cannot be taken: it is too long."))
			return
		}
	} else {
		res, err = run.Do(ctx, planner, task(j.req.Messages))
	}
	if (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) && ctx.Err() == nil {
		// Not the client going away: a model call or a store that ran out
		// of time.
		err = errTimedOut
	}
	finish(ctx, out, run, res, err)
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
	info, found, err = s.info(ctx, d, session, 1)
	if err != nil || !found {
		return 1, planexec.RunInfo{}, false, err
	}
	lo, hi := 1, 2 // lo exists; hi is the first probe past it
	for {
		next, ok, err := s.info(ctx, d, session, hi)
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
		next, ok, err := s.info(ctx, d, session, mid)
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

// info reads where generation gen of session stands; false when it has no
// run.
func (s *Server) info(ctx context.Context, d planexec.Delegation, session string, gen int) (planexec.RunInfo, bool, error) {
	d.RunID = runID(session, gen)
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

// unbarred is the scope of the generation after gen, whose run is latest:
// the request's, less every tool that failed twice in an earlier
// generation of the session. A tool not offered after it was barred could
// not fail again, so every generation is asked.
func (s *Server) unbarred(ctx context.Context, d planexec.Delegation, session string, gen int, latest planexec.RunInfo, j *job) ([]string, error) {
	barred := slices.Clone(latest.Barred)
	for g := 1; g < gen; g++ {
		info, ok, err := s.info(ctx, d, session, g)
		if err != nil {
			return nil, err
		}
		if ok {
			barred = append(barred, info.Barred...)
		}
	}
	if len(barred) == 0 {
		return j.scope, nil
	}
	scope := j.scope
	if scope == nil {
		scope = s.catalog()
		for _, t := range j.tools {
			scope = append(scope, t.Name())
		}
	}
	return slices.DeleteFunc(slices.Clone(scope), func(t string) bool { return slices.Contains(barred, t) }), nil
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

// finish answers with how the run ended, or where it paused: the calls
// handed back and the approvals a person has yet to give (a run may wait
// on both), or the question.
func finish(ctx context.Context, out *responder, run *planexec.Run, res *planexec.Result, err error) {
	var (
		calls    *planexec.ToolCallPendingError
		question *planexec.AwaitingReplyError
		pending  *planexec.ApprovalPendingError
	)
	u := run.Usage()
	isPending, isCalls := errors.As(err, &pending), errors.As(err, &calls)
	switch {
	case err == nil:
		out.answer(res.Answer, nil, "stop", u, map[string]any{"type": "plan_state", "plan_status": planCompleted})
	case isPending || isCalls:
		var (
			text   string
			meta   map[string]any
			handed []toolCall
			reason = "stop"
		)
		if isPending {
			text, meta = approvals(pending.Requests)
		}
		if isCalls {
			handed, reason = callsOf(calls.Calls), "tool_calls"
		}
		out.answer(text, handed, reason, u, meta)
	case errors.As(err, &question):
		out.answer(question.Question, nil, "stop", u, map[string]any{"type": "plan_state", "plan_status": planClarification})
	default:
		var meta map[string]any
		if f, ok := refusalOf(err); ok && f.sessionStatus {
			meta = standing(ctx, run)
		}
		out.fail(err, meta)
	}
}

// busy answers 409 for a session too many requests wait for, with where
// it stands.
func (s *Server) busy(w http.ResponseWriter, r *http.Request, j *job, session string) {
	d := planexec.Delegation{Tenant: j.caller, User: j.caller, Agent: s.cfg.Agent.Name}
	var meta map[string]any
	if _, info, found, err := s.generation(r.Context(), d, session); err == nil && found {
		meta = waits(info)
	}
	writeJSON(w, http.StatusConflict, errorBody("invalid_request_error", "", "session_busy",
		"Too many requests wait for this session; it runs one at a time. Try again once the one before has its answer.", meta))
}

// standing is where run stands, as an error's metadata says it; nil when
// it cannot be read.
func standing(ctx context.Context, run *planexec.Run) map[string]any {
	info, err := run.Info(ctx)
	if err != nil {
		return nil
	}
	return waits(info)
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

// seeing is a planner shown the images a request brought, with every
// request it is asked.
type seeing struct {
	planexec.Planner
	images []llm.Image
}

func (s seeing) Plan(ctx context.Context, req planexec.PlanRequest) (*planexec.PlanResponse, error) {
	req.Images = s.images
	return s.Planner.Plan(ctx, req)
}

// imagesOf is the images of a conversation's user messages, in order.
func imagesOf(msgs []chatMessage) []llm.Image {
	var images []llm.Image
	for _, m := range msgs {
		images = append(images, m.images...)
	}
	return images
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
