package plannerapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/llm"
)

// Plan statuses, as plan_state reports them.
const (
	planAnalyzingImage = "analyzing_image" // first, when the request brings images
	planInProgress     = "in_progress"
	planCompleted      = "completed"
	planClarification  = "clarification_requested"
	planPayment        = "payment_requested"
	planCardInteracted = "card_interaction_requested"
)

// responder answers one request: a chat.completion, or a stream of
// chat.completion.chunk events. Each write is bounded by the write
// timeout: one that fails loses the response (nothing more is written) and
// calls lose, which stops the run.
type responder struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	lose    func(error)
	stream  bool
	usage   bool // the client asked for usage in the stream's last chunk
	id      string
	created int64
	model   string

	run *planexec.Run // the run whose progress it shows; set before the run starts

	mu        sync.Mutex
	started   bool  // the response's headers are out (and, streaming, its first chunk)
	completed bool  // the stream said the plan completed
	lost      error // the write that failed
}

func newResponder(w http.ResponseWriter, req *chatRequest, now time.Time, timeout time.Duration, lose func(error)) *responder {
	o := &responder{w: w, rc: http.NewResponseController(w), timeout: timeout, lose: lose, stream: req.Stream,
		id: "chatcmpl-" + uuid.NewString(), created: now.Unix(), model: req.Model}
	o.usage = req.StreamOptions != nil && req.StreamOptions.IncludeUsage
	return o
}

// write writes b and flushes it within the write timeout. Callers hold mu.
func (o *responder) write(b []byte) {
	if o.lost != nil {
		return
	}
	if err := o.rc.SetWriteDeadline(time.Now().Add(o.timeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		o.fault(err)
		return
	}
	_, err := o.w.Write(b)
	if err == nil {
		if err = o.rc.Flush(); errors.Is(err, http.ErrNotSupported) {
			err = nil
		}
	}
	if err != nil {
		o.fault(err)
	}
}

// fault loses the response: a client that went away or stopped reading.
func (o *responder) fault(err error) {
	o.lost = err
	if o.lose != nil {
		o.lose(errGone)
	}
}

// done ends the response's writes: the connection's next response is not
// bound by this one's deadline.
func (o *responder) done() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.lost == nil {
		_ = o.rc.SetWriteDeadline(time.Time{})
	}
}

// json answers status with v, once.
func (o *responder) json(status int, v any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.jsonLocked(status, v)
}

// jsonLocked is json for callers that hold mu.
func (o *responder) jsonLocked(status int, v any) {
	if o.started {
		return
	}
	o.started = true
	o.w.Header().Set("Content-Type", "application/json")
	o.w.WriteHeader(status)
	b, _ := json.Marshal(v) // plain values: it cannot fail
	o.write(append(b, '\n'))
}

// problem answers a request refused before its run did anything.
func (o *responder) problem(p *problem) {
	o.json(p.status, errorBody("invalid_request_error", p.param, p.reason, p.message, p.meta))
}

// chunk is a chat.completion.chunk.
type chunk struct {
	ID       string        `json:"id"`
	Object   string        `json:"object"`
	Created  int64         `json:"created"`
	Model    string        `json:"model"`
	Choices  []chunkChoice `json:"choices"`
	Usage    *usage        `json:"usage,omitempty"`
	Metadata any           `json:"metadata,omitempty"`
}

type chunkChoice struct {
	Index        int       `json:"index"`
	Delta        delta     `json:"delta"`
	FinishReason *string   `json:"finish_reason"`
	Logprobs     *struct{} `json:"logprobs"`
}

type delta struct {
	Role      string     `json:"role,omitempty"`
	Content   *string    `json:"content,omitempty"`
	ToolCalls []toolCall `json:"tool_calls,omitempty"`
}

type usage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	TotalTokens      int64 `json:"total_tokens"`
}

func usageOf(u llm.Usage) *usage {
	return &usage{PromptTokens: u.InputTokens, CompletionTokens: u.OutputTokens, TotalTokens: u.Total()}
}

// completion is a chat.completion.
type completion struct {
	ID       string   `json:"id"`
	Object   string   `json:"object"`
	Created  int64    `json:"created"`
	Model    string   `json:"model"`
	Choices  []choice `json:"choices"`
	Usage    *usage   `json:"usage"`
	Metadata any      `json:"metadata,omitempty"`
}

type choice struct {
	Index        int       `json:"index"`
	Message      message   `json:"message"`
	FinishReason string    `json:"finish_reason"`
	Logprobs     *struct{} `json:"logprobs"`
}

type message struct {
	Role      string     `json:"role"`
	Content   *string    `json:"content"`
	Refusal   *string    `json:"refusal"`
	ToolCalls []toolCall `json:"tool_calls,omitempty"`
}

// begin writes the stream's headers and its first chunk, once. Callers
// hold mu.
func (o *responder) begin() {
	if o.started {
		return
	}
	o.started = true
	h := o.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	o.w.WriteHeader(http.StatusOK)
	o.send(chunk{Choices: []chunkChoice{{Delta: delta{Role: "assistant"}}}})
}

// send writes one chunk, stamped with the response's id. Callers hold mu.
func (o *responder) send(c chunk) {
	c.ID, c.Object, c.Created, c.Model = o.id, "chat.completion.chunk", o.created, o.model
	if c.Choices == nil {
		c.Choices = []chunkChoice{}
	}
	b, _ := json.Marshal(c) // plain values: it cannot fail
	o.event(b)
}

// event writes one server-sent event of data b. Callers hold mu.
func (o *responder) event(b []byte) {
	buf := make([]byte, 0, len(b)+8)
	buf = append(append(append(buf, "data: "...), b...), "\n\n"...)
	o.write(buf)
}

// state sends a partial plan_state, for a client to merge into what it has.
func (o *responder) state(update map[string]any) {
	if !o.stream {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.lost != nil {
		return
	}
	o.begin()
	update["type"] = "plan_state"
	o.completed = o.completed || update["plan_status"] == planCompleted
	o.send(chunk{Metadata: update})
}

// progress turns a run's event into a plan_state update: phases are rounds,
// tasks are steps, keyed by round (from 0) and step id.
func (o *responder) progress(e planexec.Event) {
	phase := strconv.Itoa(max(e.Round-1, 0))
	task := func(status string) map[string]any {
		t := map[string]any{}
		if status != "" {
			t["status"] = status
		}
		if e.Tool != "" {
			t["tool"] = e.Tool
		}
		if e.Replayed && e.Kind == planexec.EventStepExecuted {
			t["replayed"] = true // done before: its outcome is on record
		}
		switch e.Kind {
		case planexec.EventApprovalGranted:
			t["approval"] = "granted"
		case planexec.EventApprovalDenied:
			t["approval"] = "denied"
		}
		return map[string]any{"plan_status": planInProgress, "phases": map[string]any{phase: map[string]any{"tasks": map[string]any{e.StepID: t}}}}
	}
	phaseStatus := func(status string) map[string]any {
		return map[string]any{"plan_status": planInProgress, "phases": map[string]any{phase: map[string]any{"status": status}}}
	}
	switch e.Kind {
	case planexec.EventRoundStarted:
		o.state(phaseStatus("in_progress"))
	case planexec.EventPlanned, planexec.EventPlanResumed:
		if o.run == nil {
			return
		}
		plan, ok := o.run.Current()
		if !ok || len(plan.Steps) == 0 {
			return
		}
		tasks := map[string]any{}
		for _, st := range plan.Steps {
			t := map[string]any{"tool": st.Tool}
			if e.Kind == planexec.EventPlanned {
				t["status"] = "pending"
			}
			if st.Intent != "" {
				t["intent"] = bounded(st.Intent, maxShown)
			}
			tasks[st.ID] = t
		}
		p := map[string]any{"tasks": tasks}
		if plan.Goal != "" {
			p["reasoning"] = bounded(plan.Goal, maxShown)
		}
		o.state(map[string]any{"plan_status": planInProgress, "phases": map[string]any{phase: p}})
	case planexec.EventStepExecuted:
		u := task("completed")
		if len(e.Outcome) > 0 {
			t := u["phases"].(map[string]any)[phase].(map[string]any)["tasks"].(map[string]any)[e.StepID].(map[string]any)
			t["summary"] = bounded(string(e.Outcome), maxShown)
		}
		o.state(u)
	case planexec.EventStepStarted:
		o.state(task("running"))
	case planexec.EventStepFailed:
		status := "failed"
		if strings.HasSuffix(e.Detail, "timed out") { // a step past the executor's StepTimeout
			status = "timeout"
		}
		o.state(task(status))
	case planexec.EventApprovalPending, planexec.EventToolCallHandedBack:
		o.state(task("waiting_response"))
	case planexec.EventApprovalGranted:
		o.state(task(""))
	case planexec.EventApprovalDenied:
		o.state(task("skipped"))
	case planexec.EventRoundCompleted:
		o.state(phaseStatus("completed"))
	case planexec.EventQuestionAsked:
		o.state(map[string]any{"plan_status": planClarification})
	case planexec.EventAnswered:
		// The answering round is over too.
		o.state(map[string]any{"plan_status": planCompleted, "phases": map[string]any{phase: map[string]any{"status": "completed"}}})
	}
}

// maxShown bounds what a task or phase shows of the planner's words or a
// step's outcome.
const maxShown = 280

// bounded is s cut to at most n bytes on a rune boundary, marked when cut.
func bounded(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// answer ends the response with content (and tool calls), the finish
// reason, the run's usage and metadata: where the session stands.
func (o *responder) answer(content string, calls []toolCall, finish string, u llm.Usage, meta map[string]any) {
	if !o.stream {
		msg := message{Role: "assistant", ToolCalls: calls}
		if content != "" || calls == nil {
			msg.Content = &content
		}
		c := completion{ID: o.id, Object: "chat.completion", Created: o.created, Model: o.model,
			Choices: []choice{{Message: msg, FinishReason: finish}}, Usage: usageOf(u)}
		if meta != nil {
			c.Metadata = meta
		}
		o.json(http.StatusOK, c)
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.begin()
	if meta != nil && !(o.completed && meta["plan_status"] == planCompleted) {
		o.send(chunk{Metadata: meta})
	}
	if content != "" {
		o.send(chunk{Choices: []chunkChoice{{Delta: delta{Content: &content}}}})
	}
	if calls != nil {
		for i := range calls {
			n := i
			calls[i].Index = &n
		}
		o.send(chunk{Choices: []chunkChoice{{Delta: delta{ToolCalls: calls}}}})
	}
	o.send(chunk{Choices: []chunkChoice{{Delta: delta{}, FinishReason: &finish}}})
	if o.usage {
		o.send(chunk{Usage: usageOf(u)})
	}
	o.write([]byte("data: [DONE]\n\n"))
}

// fail ends the response with err: an OpenAI error body, or in a stream
// already under way, the same error as an event, then the stream's end.
// meta, if any, says where the session stands. A client that went away is
// answered nothing.
func (o *responder) fail(err error, meta map[string]any) {
	f, ok := refusalOf(err)
	if !ok {
		return
	}
	body := errorBody(f.typ, "", f.code, f.message, meta)
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.started {
		o.jsonLocked(f.status, body)
		return
	}
	b, _ := json.Marshal(body) // plain values: it cannot fail
	o.event(b)
	o.write([]byte("data: [DONE]\n\n"))
}

// errGone is a client that went away.
var errGone = errors.New("plannerapi: the client went away")

// callsOf renders calls handed back in OpenAI's shape.
func callsOf(calls []planexec.ToolCall) []toolCall {
	out := make([]toolCall, len(calls))
	for i, c := range calls {
		out[i].ID, out[i].Type = c.ID, "function"
		out[i].Function.Name, out[i].Function.Arguments = c.Tool, string(c.Arguments)
	}
	return out
}

// approvals describes the requests a paused run waits on, for the client.
func approvals(reqs []planexec.ApprovalRequest) (string, map[string]any) {
	status := planCardInteracted
	list := make([]map[string]any, len(reqs))
	var names []string
	for i, req := range reqs {
		if req.Class != "" {
			status = planPayment // an autonomy class over an amount escalated it
		}
		list[i] = map[string]any{"request": req.ID, "step": req.StepID, "tool": req.Tool, "arguments": req.Arguments,
			"irreversible": req.Irreversible, "why": req.Why}
		names = append(names, req.Tool)
	}
	return fmt.Sprintf("Approval needed before the run goes on: %s. Send decisions for the requests in metadata.approvals.", strings.Join(names, ", ")),
		map[string]any{"type": "plan_state", "plan_status": status, "approvals": list}
}
