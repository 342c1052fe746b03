package chat

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/internal/strictjson"
	"github.com/planexec/planexec/llm"
)

// proposeTool is the planner's own tool: it proposes a plan for a person to
// apply. It is offered when the Chat has an engine.
const proposeTool = "propose_plan"

// Bounds of one answer of the model.
const (
	maxAnswerBytes = 1 << 20
	maxCalls       = 24
)

// answerWire is what the model writes each call.
type answerWire struct {
	Text  string     `json:"text"`
	Calls []callWire `json:"calls"`
}

type callWire struct {
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
}

var answerDecoder = func() *strictjson.Decoder {
	d, err := strictjson.For(reflect.TypeFor[answerWire]())
	if err != nil {
		panic(err)
	}
	return d
}()

var (
	errMalformedAnswer = errors.New("chat: the model's answer is not in the expected form")
	errCutOff          = errors.New("chat: the model's answer was cut off at its length limit")
)

// malformedAnswer is an answer out of form, or cut off: where (a JSON
// Pointer into what the model wrote, its keys the model's own) and what was
// wrong, in fixed words. The model is told both, to fix it; the error's
// text, which a log gets, holds only the problem.
type malformedAnswer struct {
	path, problem string
	cut           bool // cut off at the length limit
}

func (e *malformedAnswer) Error() string {
	if e.cut {
		return errCutOff.Error()
	}
	return errMalformedAnswer.Error() + ": " + e.problem
}

func (e *malformedAnswer) Is(target error) bool {
	return target == errMalformedAnswer || (e.cut && target == errCutOff)
}

// cutOff reports an answer the model stopped at its length limit: the
// provider says so (finish reason "length", "max_tokens"), or its adapter
// does (llm.ErrTruncated).
func cutOff(resp *llm.Response, err error) bool {
	if errors.Is(err, llm.ErrTruncated) {
		return true
	}
	return resp != nil && (resp.FinishReason == "length" || resp.FinishReason == "max_tokens")
}

// fix is what the model is told of it.
func (e *malformedAnswer) fix() string {
	if e.cut {
		return "Your last answer was cut off before its end: it reached the length limit. Nothing of it was done. Answer again, shorter, with one JSON object, {\"text\": ..., \"calls\": [...]}, as the instructions say."
	}
	at := ""
	if e.path != "" {
		at = " at " + clip(e.path)
	}
	return "Your last answer was not in the expected form" + at + ": " + e.problem + ". Nothing of it was done. Answer again with one JSON object, {\"text\": ..., \"calls\": [...]}, as the instructions say."
}

// decodeAnswer decodes the model's answer strictly.
func decodeAnswer(content string) (*answerWire, error) {
	var a answerWire
	if vs := answerDecoder.Decode([]byte(content), &a, strictjson.Limits{MaxDepth: 64, MaxBytes: maxAnswerBytes}); vs != nil {
		return nil, &malformedAnswer{path: vs[0].Path, problem: vs[0].Problem}
	}
	if len(a.Calls) > maxCalls {
		return nil, &malformedAnswer{path: "/calls", problem: fmt.Sprintf("%d calls in one answer, more than %d", len(a.Calls), maxCalls)}
	}
	return &a, nil
}

const instructions = `You are the planner of this service, in a conversation with the people who use it. You act for the person who wrote the latest message, with exactly their permissions: nothing more.
Each answer of yours is one JSON object: {"text": "what you say to the person", "calls": [{"tool": "<name>", "arguments": {...}}]}.
To learn the state of things, call the read tools. The calls of one answer run one after another; their results come back in the next message, numbered in the order you wrote them, and you answer again. A call that fails comes back as an error: read it and go on.
You change nothing yourself. To change anything, call propose_plan with a plan over the plan tools: {"goal": "...", "steps": [{"id": "s1", "tool": "...", "arguments": {...}, "depends_on": [], "intent": "..."}]}. The plan is validated at once (a refused plan comes back as an error to fix); a person then reads it and applies it, in whole or in part, or rejects it. You cannot set approvals, grants or scopes.
When you have nothing to call, write "calls": [] and your text ends your turn.`

// answerSchema builds the schema of the model's answer and the catalog of
// tools it is told: a union branch per read tool, and propose_plan taking a
// plan over the engine's tools.
func (c *Chat) answerSchema() (*llm.OutputSchema, string, error) {
	var reads []planexec.ToolSpec
	if len(c.cfg.Reads) > 0 {
		r, err := c.reads.Run(planexec.Delegation{})
		if err != nil {
			return nil, "", err
		}
		reads = r.Catalog()
	}
	var plans []planexec.ToolSpec
	if c.cfg.Engine != nil {
		r, err := c.cfg.Engine.Run(planexec.Delegation{})
		if err != nil {
			return nil, "", err
		}
		plans = r.Catalog()
		c.plans = plans
	}
	if len(reads) == 0 && len(plans) == 0 {
		return nil, "", &planexec.ConfigurationError{Why: "the planner needs tools to read or an engine to propose plans to"}
	}
	defs := map[string]json.RawMessage{}
	branch := func(name string, args json.RawMessage) map[string]any {
		return map[string]any{
			"type": "object",
			"properties": map[string]any{
				"tool":      map[string]any{"type": "string", "enum": []string{name}},
				"arguments": hoist(args, defs),
			},
			"required":             []string{"tool", "arguments"},
			"additionalProperties": false,
		}
	}
	strict := true
	var branches []any
	for _, s := range reads {
		branches = append(branches, branch(s.Name, s.Schema))
		strict = strict && s.Strict
	}
	if len(plans) > 0 {
		branches = append(branches, branch(proposeTool, planexec.PlanSchema(plans)))
		for _, s := range plans {
			strict = strict && s.Strict
		}
	}
	schema := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"text":  map[string]any{"type": "string"},
			"calls": map[string]any{"type": "array", "items": map[string]any{"anyOf": branches}},
		},
		"required":             []string{"text", "calls"},
		"additionalProperties": false,
	}
	if len(defs) > 0 {
		schema["$defs"] = defs
	}
	raw, err := json.Marshal(schema)
	if err != nil {
		return nil, "", err
	}
	var cat strings.Builder
	if len(reads) > 0 {
		b, _ := json.MarshalIndent(reads, "", "  ") // plain values: it cannot fail
		cat.WriteString("Read tools you can call:\n" + string(b))
	}
	if len(plans) > 0 {
		b, _ := json.MarshalIndent(plans, "", "  ")
		if cat.Len() > 0 {
			cat.WriteString("\n\n")
		}
		cat.WriteString("Tools a proposed plan can use (through propose_plan only):\n" + string(b))
	}
	return &llm.OutputSchema{
		Name:        "planner_answer",
		Description: "What the planner says to the person, and the tool calls it makes.",
		Schema:      raw,
		Strict:      strict,
	}, cat.String(), nil
}

// hoist takes a schema's own definitions ($defs) into defs, so that the
// schema can sit inside another whose references (#/$defs/...) resolve from
// the root.
func hoist(schema json.RawMessage, defs map[string]json.RawMessage) json.RawMessage {
	var tree map[string]json.RawMessage
	if json.Unmarshal(schema, &tree) != nil || tree["$defs"] == nil {
		return schema
	}
	var own map[string]json.RawMessage
	if json.Unmarshal(tree["$defs"], &own) != nil {
		return schema
	}
	for name, d := range own {
		defs[name] = d
	}
	delete(tree, "$defs")
	out, err := json.Marshal(tree)
	if err != nil {
		return schema
	}
	return out
}

// system is the system prompt of a turn: the built-in instructions, the
// tenant and the session's project, the tools, the service's context and
// the turn's skill.
func (c *Chat) system(tenant, project, skill string) string {
	var b strings.Builder
	b.WriteString(instructions)
	b.WriteString("\n\nThis conversation is in the tenant " + strconv.Quote(tenant))
	if project != "" {
		b.WriteString(", on the project " + strconv.Quote(project))
	}
	b.WriteString(".\n\n" + c.catalog)
	if c.cfg.Instructions != "" {
		b.WriteString("\n\n" + c.cfg.Instructions)
	}
	if skill != "" {
		b.WriteString("\n\nThe project's planner skill (follow its process rules):\n" + skill)
	}
	return b.String()
}

// renderedCall is a call as the model wrote it, told back to it.
type renderedCall struct {
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
}

// renderedResult is a call's result as the model is told it.
type renderedResult struct {
	Call      int             `json:"call"`
	Tool      string          `json:"tool"`
	Status    CallStatus      `json:"status"`
	Output    json.RawMessage `json:"output,omitempty"`
	Truncated bool            `json:"truncated,omitempty"`
	Error     *ToolError      `json:"error,omitempty"`
}

// messages renders what the model is told: the summary, if any, then every
// entry after it, as plain text messages, consecutive ones of a role joined
// (so a provider that wants roles to alternate accepts it, and nothing needs
// tool definitions). It begins with the person's: an answer of the model's
// that would come first is told in the first user message.
func messages(summary *Summary, history []Output) []llm.Message {
	var out []llm.Message
	add := func(role llm.Role, text string) {
		if n := len(out); n > 0 && out[n-1].Role == role {
			out[n-1].Content += "\n\n" + text
			return
		}
		out = append(out, llm.Message{Role: role, Content: text})
	}
	if summary != nil {
		add(llm.RoleUser, "Summary of the conversation before this point (the earlier messages are not shown):\n"+summary.Text)
	}
	var answer *answerText // the assistant message being rendered, until its calls end
	number := map[string]int{}
	var results []renderedResult
	flushAnswer := func() {
		if answer != nil {
			b, _ := json.Marshal(answer)
			add(llm.RoleAssistant, string(b))
			answer = nil
		}
	}
	flushResults := func() {
		if len(results) > 0 {
			b, _ := json.Marshal(results)
			add(llm.RoleUser, "Results of your tool calls:\n"+string(b))
			results = nil
		}
	}
	for i := range history {
		o := &history[i]
		switch o.Kind {
		case KindMessage:
			flushAnswer()
			flushResults()
			if o.Role == "assistant" {
				answer = &answerText{Text: o.Text, Calls: []renderedCall{}}
				clear(number)
				continue
			}
			add(llm.RoleUser, o.By+": "+o.Text)
		case KindToolCall:
			if answer != nil {
				answer.Calls = append(answer.Calls, renderedCall{Tool: o.Call.Tool, Arguments: o.Call.Arguments})
				number[o.Call.ID] = len(answer.Calls)
			}
		case KindToolResult:
			flushAnswer()
			r := o.Result
			results = append(results, renderedResult{Call: number[r.Call], Tool: r.Tool, Status: r.Status, Output: r.Output, Truncated: r.Truncated, Error: r.Error})
		case KindApplied, KindRejected:
			flushAnswer()
			flushResults()
			add(llm.RoleUser, tellDecision(o))
		}
	}
	flushAnswer()
	flushResults()
	if len(out) > 0 && out[0].Role == llm.RoleAssistant {
		first := llm.Message{Role: llm.RoleUser, Content: "The conversation shown begins with an answer of yours:\n" + out[0].Content}
		if len(out) > 1 { // the person's, as roles alternate
			first.Content += "\n\n" + out[1].Content
			out = out[1:]
		}
		out[0] = first
	}
	return out
}

// answerText is an answer of the model as it is told back to it.
type answerText struct {
	Text  string         `json:"text"`
	Calls []renderedCall `json:"calls"`
}

// tellDecision tells the planner what a person did with a proposal.
func tellDecision(o *Output) string {
	d := o.Decision
	if o.withheld && len(d.Steps) == 0 { // the proposal itself was withheld
		return fmt.Sprintf("%s applied proposal %s: the run is %s. What each step did: %s", o.By, d.Proposal, d.Status, withheldPlan)
	}
	if o.withheld {
		return fmt.Sprintf("%s applied proposal %s (steps %s): the run is %s. What each step did: %s", o.By, d.Proposal, strings.Join(d.Steps, ", "), d.Status, withheldRead)
	}
	if o.Kind == KindRejected {
		s := fmt.Sprintf("%s rejected proposal %s.", o.By, d.Proposal)
		if d.Reason != "" {
			s += " Reason: " + d.Reason
		}
		return s
	}
	b, _ := json.Marshal(d.Results)
	return fmt.Sprintf("%s applied proposal %s (steps %s): the run is %s. What each step did:\n%s", o.By, d.Proposal, strings.Join(d.Steps, ", "), d.Status, b)
}
