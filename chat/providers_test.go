package chat_test

// The requests the chat sends, through the real provider adapters, to a
// loopback API that holds them to each provider's wire rules: a request that
// breaks one is refused with a 400 in the provider's error shape, as the
// provider would refuse it.
//
// Anthropic's first-party Messages API now merges consecutive turns of one
// role (see the messages parameter in anthropic-sdk-go) and has been seen to
// take a conversation that opens with the assistant; Bedrock and Vertex still
// refuse both. The checker holds requests to the strict rules (first message
// user, roles alternating), which the chat promises (model.go: "so a
// provider that wants roles to alternate accepts it"), and to the rules the
// first-party API enforces everywhere: messages and max_tokens required,
// non-blank text blocks, tool blocks only with tools, no prefill (the last
// message the user's) on current models, no unknown members.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/planexec/planexec/chat"
	"github.com/planexec/planexec/llm"
	"github.com/planexec/planexec/llm/anthropic"
	"github.com/planexec/planexec/llm/openai"
)

const wireKey = "sk-wire-test-0b9d4c"

// wireExchange is one request the fake API got, as it read it.
type wireExchange struct {
	System   string
	Roles    []string
	Texts    []string // each message's text, blocks joined
	Format   string   // openai: response_format.type; anthropic: "tool" (forced output tool) or "json_schema" (output_config)
	Strict   *bool    // openai json_schema: strict as sent
	Tool     string   // anthropic: the forced tool's name
	Summary  bool     // the system prompt is the compaction's
	Refused  string   // the rule the request broke; "" when accepted
	Envelope string   // the scripted answer given to a turn request
}

// wireAPI is a provider's API on loopback: it checks each request with
// rules, refuses a bad one with a 400 in the provider's error shape, answers
// a summary request with plain text and a turn request with the next
// scripted answer envelope, in the provider's answer shape.
type wireAPI struct {
	t      *testing.T
	srv    *httptest.Server
	path   string
	rules  func(h http.Header, body map[string]any) (*wireExchange, string)
	answer func(w http.ResponseWriter, ex *wireExchange, content string, n int)
	refuse func(w http.ResponseWriter, status int, problem string)

	mu        sync.Mutex
	script    []string
	used      int
	summaries int
	got       []*wireExchange
}

func newWireAPI(t *testing.T, path string, rules func(http.Header, map[string]any) (*wireExchange, string),
	answer func(http.ResponseWriter, *wireExchange, string, int), refuse func(http.ResponseWriter, int, string), script ...string) *wireAPI {
	t.Helper()
	a := &wireAPI{t: t, path: path, rules: rules, answer: answer, refuse: refuse, script: script}
	a.srv = httptest.NewServer(http.HandlerFunc(a.serve))
	t.Cleanup(a.srv.Close)
	return a
}

func (a *wireAPI) serve(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	if r.Method != http.MethodPost || r.URL.Path != a.path {
		a.record(&wireExchange{Refused: "not found: " + r.Method + " " + r.URL.Path})
		a.refuse(w, http.StatusNotFound, "Not found: "+r.URL.Path)
		return
	}
	var body map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&body); err != nil || body == nil {
		a.record(&wireExchange{Refused: "the body is not a JSON object"})
		a.refuse(w, http.StatusBadRequest, "The request body is not valid JSON.")
		return
	}
	ex, problem := a.rules(r.Header, body)
	if ex == nil {
		ex = &wireExchange{}
	}
	ex.Summary = strings.HasPrefix(ex.System, "You summarise")
	if problem != "" {
		ex.Refused = problem
		a.record(ex)
		a.refuse(w, http.StatusBadRequest, problem)
		return
	}
	a.mu.Lock()
	n := len(a.got) + 1
	var content string
	switch {
	case ex.Summary:
		a.summaries++
		content = fmt.Sprintf("Summary %d: ana asked what was open; the planner read the tracker, proposed changes; every decision on a proposal is kept here.", a.summaries)
	case a.used < len(a.script):
		content = a.script[a.used]
		a.used++
		ex.Envelope = content
	default:
		problem = "the test's script has no answer left for this turn request"
	}
	a.mu.Unlock()
	if problem != "" {
		ex.Refused = problem
		a.record(ex)
		a.refuse(w, http.StatusBadRequest, problem)
		return
	}
	a.record(ex)
	a.answer(w, ex, content, n)
}

func (a *wireAPI) record(ex *wireExchange) {
	a.mu.Lock()
	a.got = append(a.got, ex)
	a.mu.Unlock()
}

func (a *wireAPI) exchanges() []*wireExchange {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.got)
}

// conversation is the exchange's messages without the system prompt (which
// OpenAI's wire carries as the first message, Anthropic's beside them).
func (ex *wireExchange) conversation() []string {
	var out []string
	for i, role := range ex.Roles {
		if role != "system" && role != "developer" {
			out = append(out, ex.Texts[i])
		}
	}
	return out
}

func (a *wireAPI) unused() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.script) - a.used
}

// ---- JSON helpers ----

func wireObject(v any) (map[string]any, bool) {
	m, ok := v.(map[string]any)
	return m, ok
}

func wireString(v any) (string, bool) {
	s, ok := v.(string)
	return s, ok
}

// wireInt reads a JSON integer.
func wireInt(v any) (int64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	i, err := n.Int64()
	return i, err == nil
}

func wireFloat(v any) (float64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	f, err := n.Float64()
	return f, err == nil && !math.IsNaN(f)
}

// wireUnknown names the first member of body not in known.
func wireUnknown(body map[string]any, known ...string) string {
	keys := make([]string, 0, len(body))
	for k := range body {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !slices.Contains(known, k) {
			return k
		}
	}
	return ""
}

var wireName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// ---- Anthropic's Messages API ----

func anthropicRules(h http.Header, body map[string]any) (*wireExchange, string) {
	ex := &wireExchange{}
	if h.Get("x-api-key") == "" {
		return ex, "x-api-key header is required"
	}
	if h.Get("anthropic-version") == "" {
		return ex, "anthropic-version: header is required"
	}
	if k := wireUnknown(body, "model", "messages", "max_tokens", "system", "tools", "tool_choice", "temperature",
		"top_p", "top_k", "stop_sequences", "stream", "metadata", "output_config", "thinking", "service_tier",
		"container", "mcp_servers", "context_management", "inference_geo"); k != "" {
		return ex, k + ": Extra inputs are not permitted"
	}
	if s, ok := wireString(body["model"]); !ok || s == "" {
		return ex, "model: Field required"
	}
	if _, ok := body["max_tokens"]; !ok {
		return ex, "max_tokens: Field required"
	}
	if n, ok := wireInt(body["max_tokens"]); !ok || n < 1 {
		return ex, "max_tokens: Input should be a positive integer"
	}
	if v, ok := body["temperature"]; ok {
		if f, ok := wireFloat(v); !ok || f < 0 || f > 1 {
			return ex, "temperature: Input should be between 0 and 1"
		}
	}
	switch s := body["system"].(type) {
	case nil:
	case string:
		ex.System = s
	case []any:
		for i, b := range s {
			blk, _ := wireObject(b)
			text, ok := wireString(blk["text"])
			if blk["type"] != "text" || !ok {
				return ex, fmt.Sprintf("system.%d: Input should be a text block", i)
			}
			if strings.TrimSpace(text) == "" {
				return ex, "system: text content blocks must contain non-whitespace text"
			}
			ex.System += text
		}
	default:
		return ex, "system: Input should be a valid string or list of text blocks"
	}
	// Tools, and the choice of one.
	tools := map[string]bool{}
	if v, ok := body["tools"]; ok {
		list, ok := v.([]any)
		if !ok {
			return ex, "tools: Input should be a valid list"
		}
		for i, tv := range list {
			tool, _ := wireObject(tv)
			name, _ := wireString(tool["name"])
			if !wireName.MatchString(name) {
				return ex, fmt.Sprintf("tools.%d.name: String should match pattern '^[a-zA-Z0-9_-]{1,64}$'", i)
			}
			if tools[name] {
				return ex, "tools: Tool names must be unique."
			}
			tools[name] = true
			schema, ok := wireObject(tool["input_schema"])
			if !ok {
				return ex, fmt.Sprintf("tools.%d.input_schema: Field required", i)
			}
			if schema["type"] != "object" {
				return ex, fmt.Sprintf("tools.%d.input_schema.type: Input should be 'object'", i)
			}
			if s, ok := tool["strict"]; ok {
				if _, ok := s.(bool); !ok {
					return ex, fmt.Sprintf("tools.%d.strict: Input should be a valid boolean", i)
				}
			}
		}
	}
	if v, ok := body["tool_choice"]; ok {
		choice, _ := wireObject(v)
		switch choice["type"] {
		case "auto", "none":
		case "any":
			if len(tools) == 0 {
				return ex, "tool_choice: tool_choice may only be specified while providing tools."
			}
		case "tool":
			name, _ := wireString(choice["name"])
			if !tools[name] {
				return ex, fmt.Sprintf("tool_choice: Tool '%s' not found in provided tools", name)
			}
			ex.Format, ex.Tool = "tool", name
		default:
			return ex, "tool_choice.type: Input should be 'auto', 'any', 'tool' or 'none'"
		}
	}
	if v, ok := body["output_config"]; ok {
		oc, _ := wireObject(v)
		if f, ok := oc["format"]; ok {
			format, _ := wireObject(f)
			if format["type"] != "json_schema" {
				return ex, "output_config.format.type: Input should be 'json_schema'"
			}
			if _, ok := wireObject(format["schema"]); !ok {
				return ex, "output_config.format.schema: Input should be a valid dictionary"
			}
			if ex.Format == "tool" {
				return ex, "output_config.format cannot be combined with a forced tool choice"
			}
			ex.Format = "json_schema"
		}
	}
	// The conversation.
	v, ok := body["messages"]
	if !ok {
		return ex, "messages: Field required"
	}
	msgs, ok := v.([]any)
	if !ok {
		return ex, "messages: Input should be a valid list"
	}
	if len(msgs) == 0 {
		return ex, "messages: at least one message is required"
	}
	var pending []string // tool_use ids the next user message must answer
	for i, mv := range msgs {
		m, _ := wireObject(mv)
		if k := wireUnknown(m, "role", "content"); k != "" {
			return ex, fmt.Sprintf("messages.%d.%s: Extra inputs are not permitted", i, k)
		}
		role, _ := wireString(m["role"])
		if role != "user" && role != "assistant" {
			return ex, fmt.Sprintf("messages.%d.role: Input should be 'user' or 'assistant'", i)
		}
		if i == 0 && role != "user" {
			return ex, `messages: first message must use the "user" role`
		}
		if i > 0 && ex.Roles[i-1] == role {
			return ex, fmt.Sprintf(`messages: roles must alternate between "user" and "assistant", but found multiple %q roles in a row`, role)
		}
		var blocks []map[string]any
		switch c := m["content"].(type) {
		case string:
			blocks = []map[string]any{{"type": "text", "text": c}}
		case []any:
			if len(c) == 0 {
				return ex, fmt.Sprintf("messages.%d: all messages must have non-empty content", i)
			}
			for _, b := range c {
				blk, ok := wireObject(b)
				if !ok {
					return ex, fmt.Sprintf("messages.%d.content: Input should be a valid list of content blocks", i)
				}
				blocks = append(blocks, blk)
			}
		default:
			return ex, fmt.Sprintf("messages.%d.content: Field required", i)
		}
		var text strings.Builder
		var answered []string
		for j, blk := range blocks {
			switch blk["type"] {
			case "text":
				s, _ := wireString(blk["text"])
				if strings.TrimSpace(s) == "" {
					return ex, fmt.Sprintf("messages.%d.content.%d: text content blocks must contain non-whitespace text", i, j)
				}
				text.WriteString(s)
			case "tool_use", "tool_result":
				if len(tools) == 0 {
					return ex, "Requests which include `tool_use` or `tool_result` blocks must define tools."
				}
				id, _ := wireString(blk["id"])
				if blk["type"] == "tool_use" {
					if role != "assistant" {
						return ex, fmt.Sprintf("messages.%d.content.%d: tool_use blocks may only be in assistant messages", i, j)
					}
					pending = append(pending, id)
					continue
				}
				if role != "user" {
					return ex, fmt.Sprintf("messages.%d.content.%d: tool_result blocks may only be in user messages", i, j)
				}
				id, _ = wireString(blk["tool_use_id"])
				answered = append(answered, id)
			case "image", "document":
			default:
				return ex, fmt.Sprintf("messages.%d.content.%d.type: unknown content block type %v", i, j, blk["type"])
			}
		}
		if role == "user" {
			for _, id := range pending {
				if !slices.Contains(answered, id) {
					return ex, fmt.Sprintf("messages.%d: `tool_use` ids were found without `tool_result` blocks immediately after: %s", i, id)
				}
			}
			for _, id := range answered {
				if !slices.Contains(pending, id) {
					return ex, fmt.Sprintf("messages.%d: unexpected `tool_use_id` found in `tool_result` blocks: %s", i, id)
				}
			}
			pending = nil
		}
		ex.Roles = append(ex.Roles, role)
		ex.Texts = append(ex.Texts, text.String())
	}
	if len(pending) > 0 {
		return ex, "messages: `tool_use` ids were found without `tool_result` blocks immediately after"
	}
	if ex.Roles[len(ex.Roles)-1] != "user" {
		return ex, "This model does not support assistant message prefill. The conversation must end with a user message."
	}
	return ex, ""
}

func anthropicAnswer(w http.ResponseWriter, ex *wireExchange, content string, n int) {
	var blocks []any
	stop := "end_turn"
	if ex.Tool != "" {
		blocks = []any{map[string]any{"type": "tool_use", "id": fmt.Sprintf("toolu_%03d", n), "name": ex.Tool, "input": json.RawMessage(content)}}
		stop = "tool_use"
	} else {
		blocks = []any{map[string]any{"type": "text", "text": content}}
	}
	in := 0
	for _, t := range ex.Texts {
		in += len(t)
	}
	b, _ := json.Marshal(map[string]any{
		"id": fmt.Sprintf("msg_%03d", n), "type": "message", "role": "assistant", "model": "claude-wire-1",
		"content": blocks, "stop_reason": stop, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": (len(ex.System) + in) / 4, "output_tokens": len(content) / 4},
	})
	w.Header().Set("content-type", "application/json")
	w.Header().Set("request-id", fmt.Sprintf("req_%03d", n))
	_, _ = w.Write(b)
}

func anthropicRefuse(w http.ResponseWriter, status int, problem string) {
	kind := "invalid_request_error"
	if status == http.StatusNotFound {
		kind = "not_found_error"
	}
	b, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]any{"type": kind, "message": problem}})
	w.Header().Set("content-type", "application/json")
	w.Header().Set("x-should-retry", "false")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func newAnthropicWire(t *testing.T, script ...string) *wireAPI {
	return newWireAPI(t, "/v1/messages", anthropicRules, anthropicAnswer, anthropicRefuse, script...)
}

func (a *wireAPI) anthropic(t *testing.T, opts ...anthropic.Option) llm.Model {
	t.Helper()
	m, err := anthropic.New("claude-wire-1", append([]anthropic.Option{anthropic.WithAPIKey(wireKey),
		anthropic.WithBaseURL(a.srv.URL), anthropic.WithMaxRetries(0)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// ---- OpenAI's Chat Completions API ----

func openaiRules(h http.Header, body map[string]any) (*wireExchange, string) {
	ex := &wireExchange{}
	if !strings.HasPrefix(h.Get("Authorization"), "Bearer ") {
		return ex, "You didn't provide an API key."
	}
	if k := wireUnknown(body, "model", "messages", "response_format", "max_tokens", "max_completion_tokens",
		"temperature", "top_p", "n", "stop", "stream", "stream_options", "tools", "tool_choice", "parallel_tool_calls",
		"seed", "user", "metadata", "store", "reasoning_effort", "logprobs", "top_logprobs", "presence_penalty",
		"frequency_penalty", "logit_bias", "modalities", "audio", "prediction", "service_tier", "web_search_options",
		"verbosity", "prompt_cache_key", "safety_identifier"); k != "" {
		return ex, fmt.Sprintf("Unrecognized request argument supplied: %s", k)
	}
	if s, ok := wireString(body["model"]); !ok || s == "" {
		return ex, "you must provide a model parameter"
	}
	_, legacy := body["max_tokens"]
	_, current := body["max_completion_tokens"]
	if legacy && current {
		return ex, "max_tokens and max_completion_tokens cannot both be set"
	}
	for _, k := range []string{"max_tokens", "max_completion_tokens"} {
		if v, ok := body[k]; ok {
			if n, ok := wireInt(v); !ok || n < 1 {
				return ex, fmt.Sprintf("Invalid '%s': integer below minimum value 1.", k)
			}
		}
	}
	if v, ok := body["temperature"]; ok {
		if f, ok := wireFloat(v); !ok || f < 0 || f > 2 {
			return ex, "Invalid 'temperature': decimal out of range [0, 2]."
		}
	}
	tools := false
	if v, ok := body["tools"]; ok {
		list, ok := v.([]any)
		if !ok || len(list) == 0 {
			return ex, "Invalid 'tools': empty array. Expected an array with minimum length 1."
		}
		tools = true
	}
	if _, ok := body["tool_choice"]; ok && !tools {
		return ex, "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified."
	}
	// The conversation.
	v, ok := body["messages"]
	if !ok {
		return ex, "Missing required parameter: 'messages'."
	}
	msgs, ok := v.([]any)
	if !ok {
		return ex, "Invalid type for 'messages': expected an array."
	}
	if len(msgs) == 0 {
		return ex, "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead."
	}
	var calls []string // tool_call ids a tool message may answer
	mentionsJSON := false
	for i, mv := range msgs {
		m, _ := wireObject(mv)
		role, _ := wireString(m["role"])
		if role == "tool" {
			if !tools {
				return ex, fmt.Sprintf("Invalid parameter: messages[%d]: messages with role 'tool' need 'tools' to be specified.", i)
			}
			id, _ := wireString(m["tool_call_id"])
			if !slices.Contains(calls, id) {
				return ex, "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'."
			}
			continue
		}
		calls = nil
		var text string
		switch c := m["content"].(type) {
		case string:
			text = c
		case []any:
			for _, p := range c {
				part, _ := wireObject(p)
				if part["type"] == "text" {
					s, _ := wireString(part["text"])
					text += s
				}
			}
		case nil:
			if role != "assistant" {
				return ex, fmt.Sprintf("Invalid value for 'content': expected a string, got null. (messages[%d])", i)
			}
		default:
			return ex, fmt.Sprintf("Invalid type for 'messages[%d].content'", i)
		}
		switch role {
		case "system", "developer", "user":
			if k := wireUnknown(m, "role", "content", "name"); k != "" {
				return ex, fmt.Sprintf("Unrecognized parameter: messages[%d].%s", i, k)
			}
			if role != "user" && i == 0 {
				ex.System = text
			}
		case "assistant":
			if k := wireUnknown(m, "role", "content", "name", "tool_calls", "refusal", "audio"); k != "" {
				return ex, fmt.Sprintf("Unrecognized parameter: messages[%d].%s", i, k)
			}
			if tc, ok := m["tool_calls"]; ok {
				if !tools {
					return ex, fmt.Sprintf("Invalid parameter: messages[%d]: 'tool_calls' need 'tools' to be specified.", i)
				}
				list, _ := tc.([]any)
				for _, c := range list {
					call, _ := wireObject(c)
					id, _ := wireString(call["id"])
					calls = append(calls, id)
				}
			} else if m["content"] == nil {
				return ex, fmt.Sprintf("Invalid value for messages[%d]: an assistant message needs 'content' or 'tool_calls'.", i)
			}
		default:
			return ex, fmt.Sprintf("Invalid value: '%s'. Supported values are: 'system', 'assistant', 'user', 'tool', 'function', and 'developer'. (messages[%d].role)", role, i)
		}
		if m["content"] != nil && strings.TrimSpace(text) == "" {
			return ex, fmt.Sprintf("Invalid 'messages[%d].content': empty content.", i)
		}
		if strings.Contains(strings.ToLower(text), "json") {
			mentionsJSON = true
		}
		ex.Roles = append(ex.Roles, role)
		ex.Texts = append(ex.Texts, text)
	}
	if slices.Equal(slices.Compact(slices.Clone(ex.Roles)), []string{"system"}) || slices.Equal(slices.Compact(slices.Clone(ex.Roles)), []string{"developer"}) {
		return ex, "Invalid 'messages': the conversation has no user or assistant message."
	}
	if v, ok := body["response_format"]; ok {
		rf, ok := wireObject(v)
		if !ok {
			return ex, "Invalid type for 'response_format': expected an object."
		}
		typ, _ := wireString(rf["type"])
		ex.Format = typ
		switch typ {
		case "text":
		case "json_object":
			if !mentionsJSON {
				return ex, "'messages' must contain the word 'json' in some form, to use 'response_format' of type 'json_object'."
			}
		case "json_schema":
			js, ok := wireObject(rf["json_schema"])
			if !ok {
				return ex, "Missing required parameter: 'response_format.json_schema'."
			}
			if k := wireUnknown(js, "name", "description", "schema", "strict"); k != "" {
				return ex, "Unrecognized parameter: response_format.json_schema." + k
			}
			name, _ := wireString(js["name"])
			if !wireName.MatchString(name) {
				return ex, "Invalid 'response_format.json_schema.name': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$' of at most 64 characters."
			}
			if d, ok := js["description"]; ok {
				if _, ok := d.(string); !ok {
					return ex, "Invalid type for 'response_format.json_schema.description': expected a string."
				}
			}
			schema, ok := wireObject(js["schema"])
			if !ok {
				return ex, "Invalid type for 'response_format.json_schema.schema': expected an object."
			}
			if s, ok := js["strict"]; ok {
				b, ok := s.(bool)
				if !ok {
					return ex, "Invalid type for 'response_format.json_schema.strict': expected a boolean."
				}
				ex.Strict = &b
				if b {
					if problem := strictSchema(schema); problem != "" {
						return ex, "Invalid schema for response_format '" + name + "': " + problem
					}
				}
			}
		default:
			return ex, "Invalid value for 'response_format.type': expected one of 'text', 'json_object', 'json_schema'."
		}
	}
	return ex, ""
}

// strictSchema holds a schema to what OpenAI's strict structured outputs
// require: an object at the root, not a union; every object closed
// (additionalProperties false) with each property required; references
// that resolve within the schema.
func strictSchema(root map[string]any) string {
	if root["type"] != "object" {
		return "schema must be a JSON Schema of 'type: \"object\"', got 'type: \"" + fmt.Sprint(root["type"]) + "\"'."
	}
	if _, ok := root["anyOf"]; ok {
		return "the root schema must not be 'anyOf'."
	}
	var walk func(node any, path string) string
	walk = func(node any, path string) string {
		s, ok := wireObject(node)
		if !ok {
			return ""
		}
		if ref, ok := wireString(s["$ref"]); ok {
			if ref == "#" {
				return ""
			}
			parts := strings.Split(strings.TrimPrefix(ref, "#/"), "/")
			var at any = root
			for _, p := range parts {
				m, _ := wireObject(at)
				at = m[p]
			}
			if at == nil || !strings.HasPrefix(ref, "#/") {
				return fmt.Sprintf("In context=%s, reference %q does not resolve.", path, ref)
			}
		}
		props, hasProps := wireObject(s["properties"])
		if s["type"] == "object" || hasProps {
			if ap, ok := s["additionalProperties"]; !ok || ap != false {
				return fmt.Sprintf("In context=%s, 'additionalProperties' is required to be supplied and to be false.", path)
			}
			req, _ := s["required"].([]any)
			for k := range props {
				if !slices.Contains(req, any(k)) {
					return fmt.Sprintf("In context=%s, 'required' is required to be supplied and to be an array including every key in properties. Missing '%s'.", path, k)
				}
			}
		}
		for k, p := range props {
			if problem := walk(p, path+"/properties/"+k); problem != "" {
				return problem
			}
		}
		for _, k := range []string{"items", "not"} {
			if problem := walk(s[k], path+"/"+k); problem != "" {
				return problem
			}
		}
		for _, k := range []string{"anyOf", "allOf", "oneOf", "prefixItems"} {
			list, _ := s[k].([]any)
			for i, e := range list {
				if problem := walk(e, fmt.Sprintf("%s/%s/%d", path, k, i)); problem != "" {
					return problem
				}
			}
		}
		for _, k := range []string{"$defs", "definitions"} {
			defs, _ := wireObject(s[k])
			for name, d := range defs {
				if problem := walk(d, path+"/"+k+"/"+name); problem != "" {
					return problem
				}
			}
		}
		return ""
	}
	return walk(root, "")
}

func openaiAnswer(w http.ResponseWriter, ex *wireExchange, content string, n int) {
	in := len(ex.System)
	for _, t := range ex.Texts {
		in += len(t)
	}
	b, _ := json.Marshal(map[string]any{
		"id": fmt.Sprintf("chatcmpl-%d", n), "object": "chat.completion", "created": 1767225600, "model": "gpt-wire-1",
		"choices": []any{map[string]any{
			"index":         0,
			"message":       map[string]any{"role": "assistant", "content": content, "refusal": nil, "annotations": []any{}},
			"logprobs":      nil,
			"finish_reason": "stop",
		}},
		"usage": map[string]any{"prompt_tokens": in / 4, "completion_tokens": len(content) / 4, "total_tokens": in/4 + len(content)/4},
	})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("x-request-id", fmt.Sprintf("req_%d", n))
	_, _ = w.Write(b)
}

func openaiRefuse(w http.ResponseWriter, status int, problem string) {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": problem, "type": "invalid_request_error", "param": nil, "code": nil}})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("x-should-retry", "false")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func newOpenAIWire(t *testing.T, script ...string) *wireAPI {
	return newWireAPI(t, "/v1/chat/completions", openaiRules, openaiAnswer, openaiRefuse, script...)
}

func (a *wireAPI) openai(t *testing.T, opts ...openai.Option) llm.Model {
	t.Helper()
	m, err := openai.New("gpt-wire-1", append([]openai.Option{openai.WithAPIKey(wireKey),
		openai.WithBaseURL(a.srv.URL + "/v1"), openai.WithMaxRetries(0)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// ---- the conversation ----

// wireScript is the planner's side of a conversation of three turns: reads
// in several rounds (one failing), a proposal that is applied, another that
// is rejected.
var wireScript = []string{
	// Turn 1: two rounds of reads, a proposal, an answer.
	wireEnvelope("Let me look.", call("list_items", `{}`), call("get_item", `{"id":"T-1"}`)),
	wireEnvelope("", call("list_items", `{"state":"open"}`), call("get_item", `{"id":"T-404"}`)),
	wireEnvelope("I propose closing T-1.", call("propose_plan", `{"goal":"close T-1","steps":[{"id":"s1","tool":"update_item","arguments":{"id":"T-1","state":"done","version":1},"depends_on":[],"intent":"close it"}]}`)),
	wireEnvelope("Apply it when you are ready."),
	// Turn 2 (compacted first): a read, a proposal, an answer.
	wireEnvelope("", call("list_items", `{}`)),
	wireEnvelope("Proposing it.", call("propose_plan", `{"goal":"track the changelog","steps":[{"id":"s1","tool":"create_item","arguments":{"title":"Write the changelog"},"depends_on":[],"intent":"add it"}]}`)),
	wireEnvelope("It waits for you."),
	// Turn 3, ben's (compacted again, from the start: the first summary
	// holds ana's applied outcome, which ben may not read): a read, an
	// answer.
	wireEnvelope("", call("get_item", `{"id":"T-1"}`)),
	wireEnvelope("T-1 is done; the changelog item was rejected."),
}

func wireEnvelope(text string, calls ...string) string { return say(text, calls...).Content }

// wireConverse runs the conversation of wireScript through model, served by
// api, and checks what the API saw and what the session got.
func wireConverse(t *testing.T, api *wireAPI, model llm.Model) {
	ctx := context.Background()
	r := newRig(t, model, func(c *chat.Config) { c.CompactAtTokens = 1 })
	s := r.session("wire")

	var all []chat.Output
	out := r.turn(ana(), s, "What is open, and what is T-1?")
	all = append(all, out...)
	props := of(out, chat.KindProposal)
	if len(props) != 1 {
		wireFatal(t, api, "turn 1: %s, want one proposal", kinds(out))
	}
	if _, err := r.chat.Apply(ctx, ana(), s, props[0].Proposal.ID, nil); err != nil {
		t.Fatalf("applying %s: %v", props[0].Proposal.ID, err)
	}

	out = r.turn(ana(), s, "Thanks. Now add an item to write the changelog.")
	all = append(all, out...)
	props = of(out, chat.KindProposal)
	if len(props) != 1 {
		wireFatal(t, api, "turn 2: %s, want one proposal", kinds(out))
	}
	if err := r.chat.Reject(ctx, ana(), s, props[0].Proposal.ID, "Not now."); err != nil {
		t.Fatalf("rejecting %s: %v", props[0].Proposal.ID, err)
	}

	out = r.turn(ben(), s, "What happened so far?")
	all = append(all, out...)

	// Every request was accepted, and each turn ended as the script did.
	for i, ex := range api.exchanges() {
		if ex.Refused != "" {
			wireFatal(t, api, "request %d was refused: %s", i+1, ex.Refused)
		}
	}
	if errs := of(all, chat.KindError); len(errs) > 0 {
		wireFatal(t, api, "the turns failed: %q", errs[0].Text)
	}
	for _, d := range of(all, chat.KindDone) {
		if d.Done.Reason != chat.EndTurn {
			wireFatal(t, api, "a turn ended %s: %s", d.Done.Reason, kinds(all))
		}
	}
	if n := api.unused(); n != 0 {
		t.Fatalf("%d scripted answers were never asked for", n)
	}

	// Both compactions happened, the second, for ben, without the first's
	// summary, which holds what he may not read.
	if n := len(of(all, chat.KindCompacted)); n != 2 {
		t.Fatalf("%d compacted outputs, want 2 (turns 2 and 3): %s", n, kinds(all))
	}
	st := r.chat.Stats()
	if st.CompactionFailures != 0 || st.Compactions != 2 {
		t.Fatalf("stats %+v, want 2 compactions and no failure", st)
	}
	var summaries []*wireExchange
	turns := 0
	for _, ex := range api.exchanges() {
		if ex.Summary {
			summaries = append(summaries, ex)
		} else {
			turns++
		}
	}
	if len(summaries) != 2 || turns != len(wireScript) {
		t.Fatalf("the API saw %d summary and %d turn requests, want 2 and %d", len(summaries), turns, len(wireScript))
	}
	if first := summaries[0].conversation(); !strings.HasPrefix(first[0], "ana: What is open") ||
		!strings.Contains(strings.Join(first, "\n"), "applied proposal t1r3c1") {
		t.Fatalf("the first summary request does not hold turn 1 and its applied decision:\n%s", strings.Join(first, "\n---\n"))
	}
	second := summaries[1].conversation()
	if told := strings.Join(second, "\n"); !strings.HasPrefix(second[0], "ana: What is open") || strings.Contains(told, "Summary 1:") ||
		!strings.Contains(told, "applied proposal t1r3c1 (steps s1): the run is completed. What each step did: Withheld") ||
		!strings.Contains(told, "rejected proposal t2r2c1") {
		t.Fatalf("the second summary request, for ben, does not hold the conversation from its start, ana's applied outcome withheld, and turn 2's rejection:\n%s", strings.Join(second, "\n---\n"))
	}
	for _, ex := range summaries {
		if ex.Format != "" || ex.Tool != "" {
			t.Fatalf("a summary request asked for structured output (%q %q)", ex.Format, ex.Tool)
		}
		if last := ex.Texts[len(ex.Texts)-1]; !strings.HasSuffix(last, "Summarise the conversation above, as the instructions say.") {
			t.Fatalf("the summary request does not end with the ask: %q", last)
		}
	}
	sess, err := r.chat.Session(ctx, "acme", s)
	if err != nil {
		t.Fatal(err)
	}
	if sess.Compactions != 2 || sess.Summary == nil || !strings.HasPrefix(sess.Summary.Text, "Summary 2:") {
		t.Fatalf("session: %d compactions, summary %+v", sess.Compactions, sess.Summary)
	}
}

// wireFatal fails the test with what the API saw.
func wireFatal(t *testing.T, api *wireAPI, format string, args ...any) {
	t.Helper()
	var b strings.Builder
	for i, ex := range api.exchanges() {
		fmt.Fprintf(&b, "\n#%d summary=%v format=%q roles=%v refused=%q", i+1, ex.Summary, ex.Format, ex.Roles, ex.Refused)
	}
	t.Fatalf(format+"\nrequests:%s", append(args, b.String())...)
}

func TestTheChatsRequestsAreAcceptedByAnthropicsWireRules(t *testing.T) {
	for _, mode := range []struct {
		name   string
		opts   []anthropic.Option
		format string
	}{
		{"forced tool", nil, "tool"},
		{"structured output", []anthropic.Option{anthropic.WithStructuredOutput(), anthropic.WithStrictSchema()}, "json_schema"},
	} {
		t.Run(mode.name, func(t *testing.T) {
			api := newAnthropicWire(t, wireScript...)
			wireConverse(t, api, api.anthropic(t, mode.opts...))
			for _, ex := range api.exchanges() {
				if !ex.Summary && ex.Format != mode.format {
					t.Fatalf("a turn request asked for its answer as %q, want %q", ex.Format, mode.format)
				}
				if ex.System == "" {
					t.Fatal("a request has no system prompt in system")
				}
			}
		})
	}
}

func TestTheChatsRequestsAreAcceptedByOpenAIsWireRules(t *testing.T) {
	for _, mode := range []struct {
		mode   openai.Mode
		format string
	}{
		{openai.ModeJSONSchema, "json_schema"},
		{openai.ModeJSONObject, "json_object"},
		{openai.ModePrompt, ""},
	} {
		t.Run(mode.mode.String(), func(t *testing.T) {
			api := newOpenAIWire(t, wireScript...)
			wireConverse(t, api, api.openai(t, openai.WithMode(mode.mode)))
			for _, ex := range api.exchanges() {
				if ex.Summary {
					continue
				}
				if ex.Format != mode.format {
					t.Fatalf("a turn request has response_format %q, want %q", ex.Format, mode.format)
				}
				if mode.mode == openai.ModeJSONSchema && ex.Strict == nil {
					t.Fatal("a turn request's json_schema has no strict")
				}
				if ex.Roles[0] != "system" {
					t.Fatalf("a turn request opens with %q, not the system prompt", ex.Roles[0])
				}
			}
		})
	}
}

// The checkers refuse what the providers refuse: requests built by hand, sent
// through the adapters, come back as the provider's 400.
func TestTheWireCheckersRefuseWhatTheProvidersRefuse(t *testing.T) {
	user := func(s string) llm.Message { return llm.Message{Role: llm.RoleUser, Content: s} }
	assistant := func(s string) llm.Message { return llm.Message{Role: llm.RoleAssistant, Content: s} }
	loose := &llm.OutputSchema{Name: "answer", Strict: true,
		Schema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}}}`)}
	cases := []struct {
		provider string
		name     string
		req      llm.Request
		rule     string
	}{
		{"anthropic", "assistant first", llm.Request{System: "s", Messages: []llm.Message{assistant("Hello."), user("Hi.")}}, `first message must use the "user" role`},
		{"anthropic", "two user messages in a row", llm.Request{System: "s", Messages: []llm.Message{user("a"), user("b")}}, "roles must alternate"},
		{"anthropic", "no messages", llm.Request{System: "s"}, "messages: Field required"},
		{"anthropic", "ends with the assistant", llm.Request{System: "s", Messages: []llm.Message{user("a"), assistant("b")}}, "prefill"},
		{"openai", "no messages", llm.Request{}, "'messages'"},
		{"openai", "an empty message", llm.Request{System: "s", Messages: []llm.Message{user("")}}, "empty content"},
		{"openai", "a strict schema left open", llm.Request{System: "s", Messages: []llm.Message{user("a")}, Output: loose}, "'additionalProperties' is required"},
		{"openai", "a schema that is no object", llm.Request{System: "s", Messages: []llm.Message{user("a")},
			Output: &llm.OutputSchema{Name: "answer", Schema: json.RawMessage(`[]`)}}, "expected an object"},
	}
	for _, c := range cases {
		t.Run(c.provider+"/"+c.name, func(t *testing.T) {
			var api *wireAPI
			var model llm.Model
			if c.provider == "anthropic" {
				api = newAnthropicWire(t, wireEnvelope("never"))
				model = api.anthropic(t)
			} else {
				api = newOpenAIWire(t, wireEnvelope("never"))
				model = api.openai(t)
			}
			_, err := model.Generate(context.Background(), &c.req)
			var pe *llm.ProviderError
			if !errors.As(err, &pe) || pe.Status != http.StatusBadRequest || pe.Retryable {
				t.Fatalf("Generate = %v, want a 400 that is not retryable", err)
			}
			if !strings.Contains(err.Error(), c.rule) {
				t.Fatalf("refused with %q, want the rule %q", err, c.rule)
			}
			got := api.exchanges()
			if len(got) != 1 || !strings.Contains(got[0].Refused, c.rule) {
				t.Fatalf("the API saw %d requests, the first refused for %q", len(got), got[0].Refused)
			}
		})
	}
	// And a well-formed request passes both, so the refusals above are the rules'.
	for _, provider := range []string{"anthropic", "openai"} {
		var api *wireAPI
		var model llm.Model
		if provider == "anthropic" {
			api = newAnthropicWire(t)
			model = api.anthropic(t)
		} else {
			api = newOpenAIWire(t)
			model = api.openai(t)
		}
		resp, err := model.Generate(context.Background(), &llm.Request{System: "You summarise.", Messages: []llm.Message{user("a"), assistant("b"), user("c")}})
		if err != nil || !strings.HasPrefix(resp.Content, "Summary 1:") {
			t.Fatalf("%s: a well-formed request: %v, %+v", provider, err, resp)
		}
	}
}
