package planexec

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/planexec/planexec/llm"
)

// Planner writes plans. It holds no tools: it returns the raw payload of a
// plan, and the executor decodes and validates it (so validation never
// depends on how a planner was written). A Planner may return a response
// beside an error, to account for the tokens a failed call still cost.
type Planner interface {
	Plan(ctx context.Context, req PlanRequest) (*PlanResponse, error)
}

// PlanRequest is what a planner is asked.
type PlanRequest struct {
	Task string
	// Images are the images the task came with (a photo of a receipt, a
	// screenshot); the agent planner sends them with the task's message.
	// A run does not record them: Run.Do asks with none, and a planner
	// that wraps the agent planner sets them on each request it passes on.
	Images []llm.Image
	// Tools the plan may use: the executor's tools that the run's
	// delegation covers.
	Tools []ToolSpec
	// Attempt counts from 1; Refusals holds why each earlier attempt was
	// refused, oldest first, with its payload.
	Attempt  int
	Refusals []*PlanValidationError

	// Round is the round asked for in a run of rounds (Run.Do), from 1; 0
	// asks for one plan on its own (Run.Plan). In a round the planner may
	// write steps to run now, or answer the task (Plan.Answer), or ask the
	// person a question (Plan.Question); RoundSchema says so to a model.
	Round int
	// History is what the run's earlier rounds did, oldest first: each
	// round's goal and the outcome of each of its steps, or the question
	// asked and the person's reply.
	History []Round
	// Barred names tools that failed twice in this run: they are left out
	// of Tools, and a step naming one is refused.
	Barred []string
	// Final is true when the run is at its bound (rounds, or tokens): the
	// planner answers from the work done, and Tools is empty.
	Final bool
}

// Round is one round of a run of rounds, as its planner is shown it.
type Round struct {
	Number int    `json:"round"`
	Goal   string `json:"goal,omitempty"`
	// Observations are what its steps did, in the plan's order.
	Observations []Observation `json:"observations,omitempty"`
	// Question is what the planner asked the person in this round, and
	// Reply what they answered.
	Question string `json:"question,omitempty"`
	Reply    string `json:"reply,omitempty"`
}

// Observation is what one step of a round did, as its planner is told:
// the outcome as the tool returned it (cut at 2 KiB, and then
// marked Truncated, its start in Excerpt), or a fixed account of why it did
// not finish, which carries no internal error's text.
type Observation struct {
	Step      string          `json:"step"`
	Tool      string          `json:"tool"`
	Status    string          `json:"status"` // done, failed, in_doubt or not_run
	Outcome   json.RawMessage `json:"outcome,omitempty"`
	Excerpt   string          `json:"excerpt,omitempty"`
	Truncated bool            `json:"truncated,omitempty"`
	Error     string          `json:"error,omitempty"`
}

// ToolSpec is what a planner is told about one tool.
type ToolSpec struct {
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	Irreversible bool            `json:"irreversible"`
	Schema       json.RawMessage `json:"arguments_schema"`
	// Output is the JSON Schema of the tool's outcome, which a reference
	// ({"$from": step, "path": pointer}) may read; nil when the tool's
	// result type says nothing of its shape.
	Output json.RawMessage `json:"output_schema,omitempty"`
	// Strict tells whether Schema is within what strict structured output
	// accepts (see Contract.Strict). It is not shown to the model.
	Strict bool `json:"-"`
}

// PlanResponse is a planner's answer.
type PlanResponse struct {
	// Payload is the plan as the model wrote it.
	Payload []byte
	Usage   llm.Usage
	// Model and RequestID identify the call, where the model reports them.
	Model     string
	RequestID string
}

// AgentPlanner plans with a language model. Its agent holds no tools and its
// output is a Plan: a planner cannot dispatch what it is planning.
type AgentPlanner struct {
	model llm.Model
	agent Agent
}

// NewAgentPlanner returns a planner over model, acting as agent. The agent
// has no tools to declare: a planner cannot dispatch what it is planning.
func NewAgentPlanner(model llm.Model, agent Agent) (*AgentPlanner, error) {
	if model == nil {
		return nil, &ConfigurationError{Why: "the planner needs a model"}
	}
	return &AgentPlanner{model: model, agent: agent}, nil
}

const plannerInstructions = `You are a planner. You do not act: you write a plan that deterministic code will validate in full and then execute.
A plan is one JSON object: {"goal": string, "steps": [{"id": string, "tool": string, "arguments": object, "depends_on": [step ids], "intent": string}]}.
Use only the tools listed. Give each step a short unique id. Arguments must follow the tool's schema exactly: no extra keys, no missing keys, the exact JSON types.
A step runs only after every step in its depends_on has finished; steps with no dependency between them may run at the same time.
Where an argument needs what an earlier step returns, write a reference instead of a guess: {"$from": "<step id>", "path": "<JSON Pointer into its outcome>"}, e.g. {"$from": "s1", "path": "/0/flight"}; "" is the whole outcome. The step then waits for that step. A tool's output_schema says what its outcome holds; the type found at the path must fit the argument.
Irreversible tools cannot be undone and will be put to a person before anything runs.`

const roundInstructions = `You work in rounds. Write the steps that can run now; once they have run you see each step's outcome and plan the next round. Do not guess what a step will find: run it first, or refer to its outcome.
When the task is done, or cannot be done, write no steps and give the answer: {"goal": "", "steps": [], "answer": "...", "question": null}.
If only the person can tell you something you need, write no steps and ask: {"goal": "", "steps": [], "answer": null, "question": "..."}.`

const finalInstructions = `You are a planner whose run has reached its bound: no more steps can run. Answer the task from the work done, as one JSON object: {"answer": "..."}. Say plainly what was done and what was not.`

// Plan asks the model for a plan. Each earlier refusal is sent back as a
// follow-up turn, after the model's own answer, so it sees what it wrote and
// why it was refused. In a run of rounds the earlier rounds are told in the
// first turn, after the task.
func (p *AgentPlanner) Plan(ctx context.Context, req PlanRequest) (*PlanResponse, error) {
	system := plannerInstructions
	switch {
	case req.Final:
		system = finalInstructions
	case req.Round > 0:
		system += "\n" + roundInstructions
	}
	if p.agent.Instructions != "" {
		system += "\n\n" + p.agent.Instructions
	}
	var first strings.Builder
	first.WriteString("Task: " + req.Task)
	if !req.Final {
		catalog, err := json.MarshalIndent(req.Tools, "", "  ")
		if err != nil {
			return nil, err
		}
		first.WriteString("\n\nTools:\n" + string(catalog))
	}
	if len(req.Barred) > 0 {
		first.WriteString("\n\nThese tools failed twice in this run and are no longer offered: " + strings.Join(req.Barred, ", ") + ".")
	}
	for _, h := range req.History {
		first.WriteString("\n\n" + tellRound(h))
	}
	switch {
	case req.Final:
		first.WriteString("\n\nAnswer now, from the work done.")
	case req.Round > 1:
		fmt.Fprintf(&first, "\n\nWrite round %d: the steps to run next, or the answer.", req.Round)
	}
	msgs := []llm.Message{{Role: llm.RoleUser, Content: first.String(), Images: req.Images}}
	for _, r := range req.Refusals {
		msgs = append(msgs,
			llm.Message{Role: llm.RoleAssistant, Content: excerpt(r.Payload)},
			llm.Message{Role: llm.RoleUser, Content: Feedback(r)})
	}
	strict := true
	for _, t := range req.Tools {
		strict = strict && t.Strict
	}
	output := &llm.OutputSchema{Name: "plan", Description: "A plan of tool calls that reaches the goal.", Schema: PlanSchema(req.Tools), Strict: strict}
	switch {
	case req.Final:
		output = &llm.OutputSchema{Name: "answer", Description: "The answer to the task from the work done.", Schema: AnswerSchema(), Strict: true}
	case req.Round > 0:
		output.Description = "The steps of the next round, or the answer, or a question for the person."
		output.Schema = RoundSchema(req.Tools)
	}
	resp, err := p.model.Generate(ctx, &llm.Request{System: system, Messages: msgs, Output: output, Temperature: p.agent.Temperature})
	if resp == nil {
		return nil, err
	}
	// A provider's refusal comes with no content: an empty payload, which the
	// executor refuses as ReasonEmpty and replans like any other refusal. An
	// answer that came with an error (cut off by the token limit) still cost
	// its tokens: the response carries them beside the error.
	return &PlanResponse{Payload: []byte(resp.Content), Usage: resp.Usage, Model: resp.Model, RequestID: resp.RequestID}, err
}

// tellRound renders an earlier round for the planner.
func tellRound(h Round) string {
	if h.Question != "" {
		return fmt.Sprintf("Round %d: you asked the person: %s\nThey replied: %s", h.Number, h.Question, h.Reply)
	}
	obs, _ := json.MarshalIndent(h.Observations, "", "  ") // plain values: it cannot fail
	return fmt.Sprintf("Round %d ran (goal: %s). What each step did:\n%s", h.Number, h.Goal, obs)
}

// maxExcerpt bounds how much of a refused plan is sent back to the model: a
// plan refused for its size must not grow every later request by its size.
const maxExcerpt = 16 << 10

// excerpt is a refused payload as the model is shown it again: whole when
// small, else its start, cut on a rune boundary and marked as cut.
func excerpt(payload []byte) string {
	if len(payload) <= maxExcerpt {
		return string(payload)
	}
	cut := maxExcerpt
	for cut > 0 && !utf8.RuneStart(payload[cut]) {
		cut--
	}
	return string(payload[:cut]) + fmt.Sprintf("\n[… %d more bytes not shown]", len(payload)-cut)
}

// Feedback renders a refusal for the planner to read: the reason, the step,
// the tool and every violation.
func Feedback(r *PlanValidationError) string {
	var b strings.Builder
	fmt.Fprintf(&b, "That plan was refused (%s)", r.Reason)
	if r.Step != "" {
		fmt.Fprintf(&b, " at step %q", r.Step)
	}
	if r.Tool != "" {
		fmt.Fprintf(&b, " (tool %q)", r.Tool)
	}
	b.WriteString(".")
	for _, v := range r.Violations {
		b.WriteString("\n- ")
		b.WriteString(v.String())
	}
	b.WriteString("\nWrite the whole plan again, corrected. Nothing from the refused plan was executed.")
	return b.String()
}

// PlanSchema is the JSON Schema of a plan over tools: each step is one branch
// of a union per tool, whose "tool" is a one-value enum and whose "arguments" is
// that tool's own schema, so a strict provider cannot emit an unknown tool or
// a wrongly typed argument. The executor still validates everything.
//
// Wherever an argument value goes, the schema also admits a reference to an
// earlier step's outcome (see RefKey), defined once as "$defs/reference".
// Definitions a tool's schema carries (those of recursive types, named after
// the tool) are moved to the plan schema's own "$defs", where their
// references point.
func PlanSchema(tools []ToolSpec) json.RawMessage {
	return planSchema(tools, true)
}

// referenceSchema is what a reference is written as, strict-mode ready.
var referenceSchema = map[string]any{
	"type":        "object",
	"description": "The outcome of an earlier step, or the value at a JSON Pointer in it (\"\" is the whole outcome). The step referred to runs first.",
	"properties": map[string]any{
		RefKey: map[string]any{"type": "string", "description": "the id of an earlier step"},
		"path": map[string]any{"type": "string", "description": "a JSON Pointer into its outcome, e.g. /0/flight"},
	},
	"required":             []string{RefKey, "path"},
	"additionalProperties": false,
}

// RoundSchema is PlanSchema for a round of a run of rounds: beside the goal
// and the steps, an answer and a question (strings, or null), so a strict
// provider can end the run or ask the person.
func RoundSchema(tools []ToolSpec) json.RawMessage {
	return withOutcomes(planSchema(tools, true))
}

// AnswerSchema is what a planner writes at a run's bound: an answer only.
func AnswerSchema() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{"answer":{"type":"string"}},"required":["answer"],"additionalProperties":false}`)
}

// withOutcomes adds the answer and the question to a plan schema.
func withOutcomes(schema json.RawMessage) json.RawMessage {
	var tree map[string]any
	if json.Unmarshal(schema, &tree) != nil {
		return schema
	}
	props, _ := tree["properties"].(map[string]any)
	nullable := map[string]any{"type": []string{"string", "null"}}
	props["answer"], props["question"] = nullable, nullable
	tree["required"] = []string{"goal", "steps", "answer", "question"}
	out, _ := json.Marshal(tree)
	return out
}

func planSchema(tools []ToolSpec, refs bool) json.RawMessage {
	branches := make([]map[string]any, len(tools))
	defs := map[string]any{}
	for i, t := range tools {
		var args any = t.Schema
		if refs {
			var tree map[string]any
			if json.Unmarshal(t.Schema, &tree) == nil {
				if own, ok := tree["$defs"].(map[string]any); ok {
					for name, d := range own {
						defs[name] = admitRefs(d)
					}
					delete(tree, "$defs")
				}
				args = admitRefs(tree)
			}
		} else {
			var withDefs map[string]json.RawMessage
			if json.Unmarshal(t.Schema, &withDefs) == nil && withDefs["$defs"] != nil {
				var own map[string]json.RawMessage
				if json.Unmarshal(withDefs["$defs"], &own) == nil {
					for name, d := range own {
						defs[name] = d
					}
					delete(withDefs, "$defs")
					args = withDefs
				}
			}
		}
		branches[i] = map[string]any{
			"type": "object",
			"properties": map[string]any{
				"id":         map[string]any{"type": "string"},
				"tool":       map[string]any{"type": "string", "enum": []string{t.Name}},
				"arguments":  args,
				"depends_on": map[string]any{"type": []string{"array", "null"}, "items": map[string]any{"type": "string"}},
				"intent":     map[string]any{"type": []string{"string", "null"}},
			},
			"required":             []string{"id", "tool", "arguments", "depends_on", "intent"},
			"additionalProperties": false,
		}
	}
	if refs {
		defs["reference"] = referenceSchema
	}
	schema := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"goal":  map[string]any{"type": "string"},
			"steps": map[string]any{"type": "array", "items": map[string]any{"anyOf": branches}},
		},
		"required":             []string{"goal", "steps"},
		"additionalProperties": false,
	}
	if len(defs) > 0 {
		schema["$defs"] = defs
	}
	out, _ := json.Marshal(schema) // maps of strings and raw schemas always marshal
	return out
}

// admitRefs lets a reference stand for every value inside schema: each
// member's and each element's schema becomes a union with the reference.
// The schema itself (a tool's arguments, an object) stays as it is.
func admitRefs(schema any) any {
	node, ok := schema.(map[string]any)
	if !ok {
		return schema
	}
	if props, ok := node["properties"].(map[string]any); ok {
		for name, p := range props {
			props[name] = orRef(admitRefs(p))
		}
	}
	if items, ok := node["items"]; ok {
		node["items"] = orRef(admitRefs(items))
	}
	if add, ok := node["additionalProperties"].(map[string]any); ok {
		node["additionalProperties"] = orRef(admitRefs(add))
	}
	if anyOf, ok := node["anyOf"].([]any); ok {
		for i, b := range anyOf {
			anyOf[i] = admitRefs(b)
		}
	}
	return node
}

var refBranch = map[string]any{"$ref": "#/$defs/reference"}

// orRef is a union of schema and a reference.
func orRef(schema any) any {
	node, ok := schema.(map[string]any)
	if !ok {
		return schema // true or false: any value, or none
	}
	if anyOf, ok := node["anyOf"].([]any); ok && len(node) <= 2 {
		if _, described := node["description"]; described || len(node) == 1 {
			node["anyOf"] = append(anyOf, refBranch)
			return node
		}
	}
	return map[string]any{"anyOf": []any{node, refBranch}}
}

// Plan asks planner for a plan for task, validates it, and on refusal asks
// again with the refusal as feedback, at most MaxReplans more times. Each
// attempt is a new revision of one plan id. Malformed output counts as an
// attempt. Past the allowance it returns a *PlanValidationError with
// ReasonReplan, wrapping the last refusal. An error from the planner itself
// (a provider outage) is returned as it is.
func (r *Run) Plan(ctx context.Context, planner Planner, task string) (_ Plan, err error) {
	defer r.j.store(ctx, &err)
	return (&planning{r: r, d: &r.d, planner: planner, req: PlanRequest{Task: task}}).run(ctx)
}

// planning is one request for a plan: asked of the planner again, with the
// refusals as feedback, until a plan passes validation under d or the
// replans run out.
type planning struct {
	r       *Run
	d       *Delegation
	planner Planner
	req     PlanRequest // its Attempt and Refusals are filled as it goes
	id      string      // the plan's id: every attempt is a revision of it
}

// run asks until a plan passes. For a round, an answer or a question with
// no steps passes; at the bound (req.Final) only an answer does.
func (p *planning) run(ctx context.Context) (Plan, error) {
	r, d, req := p.r, p.d, &p.req
	if len(r.catalog) == 0 {
		return Plan{}, &DelegationError{RunID: d.RunID, Why: "the delegation's scope leaves no tool to plan with"}
	}
	if d.expired(r.ex.now()) {
		return Plan{}, &DelegationError{RunID: d.RunID, Why: "the delegation expired"}
	}
	if !req.Final {
		// The run's catalog as d allows it, without the tools barred.
		req.Tools = slices.DeleteFunc(r.Catalog(), func(t ToolSpec) bool { return slices.Contains(req.Barred, t.Name) || !d.allows(t.Name) })
	}
	p.id = uuid.NewString()
	if req.Round > 0 {
		// A round's plan is named by its run and round: planned again after
		// a crash lost it before it was stored, it is still that round's,
		// and the people's decisions on it still clear its steps.
		p.id = roundPlanID(d, req.Round)
	}
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return Plan{}, err
		}
		req.Attempt = attempt
		resp, err := p.planner.Plan(ctx, *req)
		if resp != nil {
			r.mu.Lock()
			r.usage = r.usage.Add(resp.Usage)
			r.mu.Unlock()
		}
		if err != nil {
			return Plan{}, fmt.Errorf("planexec: planning attempt %d: %w", attempt, err)
		}
		usage := resp.Usage
		plan, perr := p.check(resp.Payload, attempt)
		if perr == nil {
			r.mu.Lock()
			r.planned = planRef{p.id, attempt}
			r.current = &plan
			r.mu.Unlock()
			detail := fmt.Sprintf("%d steps", len(plan.Steps))
			switch {
			case plan.Answer != "":
				detail = "an answer"
			case plan.Question != "":
				detail = "a question for the person"
			}
			r.j.emit(&Event{Kind: EventPlanned, RunID: d.RunID, Tenant: d.Tenant, PlanID: p.id, Revision: attempt, Round: req.Round, Attempt: attempt, Usage: &usage,
				Model: resp.Model, RequestID: resp.RequestID, Detail: detail})
			return plan, nil
		}
		perr.Attempts = attempt
		r.j.emit(&Event{Kind: EventPlanRefused, RunID: d.RunID, Tenant: d.Tenant, PlanID: p.id, Revision: attempt, Round: req.Round, Attempt: attempt, Usage: &usage,
			Model: resp.Model, RequestID: resp.RequestID,
			StepID: perr.Step, Tool: perr.Tool, Reason: perr.Reason, Detail: firstViolation(perr)})
		req.Refusals = append(req.Refusals, perr)
		if attempt > r.ex.cfg.MaxReplans {
			return Plan{}, &PlanValidationError{Reason: ReasonReplan, Step: perr.Step, Tool: perr.Tool, Violations: perr.Violations,
				Payload: perr.Payload, Attempts: attempt, RunID: d.RunID, Tenant: d.Tenant, PlanID: p.id, Revision: attempt, Err: perr}
		}
		r.j.emit(&Event{Kind: EventReplanned, RunID: d.RunID, Tenant: d.Tenant, PlanID: p.id, Revision: attempt + 1, Round: req.Round, Attempt: attempt + 1, Reason: perr.Reason})
	}
}

// check decodes and validates what the planner wrote as revision revision.
func (p *planning) check(payload []byte, revision int) (Plan, *PlanValidationError) {
	r, d, req := p.r, p.d, &p.req
	plan, err := DecodePlan(payload, r.ex.cfg.Limits)
	refuse := func(perr *PlanValidationError) (Plan, *PlanValidationError) {
		perr.RunID, perr.Tenant, perr.PlanID, perr.Revision = d.RunID, d.Tenant, p.id, revision
		return Plan{}, perr
	}
	if err != nil {
		return refuse(err.(*PlanValidationError))
	}
	plan.ID, plan.Revision, plan.Round = p.id, revision, req.Round
	switch {
	case req.Final && plan.Answer == "":
		return refuse(&PlanValidationError{Reason: ReasonMalformed, Payload: payload,
			Violations: []Violation{{Path: "/answer", Why: "the run is at its bound: only an answer is taken"}}})
	case req.Round == 0 && (plan.Answer != "" || plan.Question != ""):
		return refuse(&PlanValidationError{Reason: ReasonEmpty, Payload: payload})
	case plan.Answer != "" || plan.Question != "":
		return plan, nil
	}
	if _, perr := r.validate(&plan, payload, req.Barred, d); perr != nil {
		return Plan{}, perr
	}
	return plan, nil
}

// roundPlanID names the plan of a round of d's run; round 0 is the empty
// plan a run of rounds is stored with before its first round is planned.
func roundPlanID(d *Delegation, round int) string {
	return uuid.NewSHA1(uuid.NameSpaceURL, []byte("planexec:"+d.Tenant+"\x00"+d.RunID+"\x00"+strconv.Itoa(round))).String()
}
