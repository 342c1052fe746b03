package plannerapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/llm"
	"github.com/planexec/planexec/llm/scripted"
	"github.com/planexec/planexec/plannerapi"
	"github.com/planexec/planexec/store/memory"
)

type search struct {
	Origin      string `json:"origin"`
	Destination string `json:"destination"`
}

// trip is a service with one tool of its own, a flight search, over a
// memory store, planning with a stand-in model that follows the
// conversation.
type trip struct {
	srv      *httptest.Server
	searches atomic.Int32
	// hold, when set, is waited on inside the search.
	hold chan struct{}
}

const (
	searchPlan  = `{"goal":"find a flight","steps":[{"id":"s1","tool":"search_flights","arguments":{"origin":"LHR","destination":"JFK"}}],"answer":null,"question":null}`
	confirmPlan = `{"goal":"confirm","steps":[{"id":"s1","tool":"search_flights","arguments":{"origin":"LHR","destination":"JFK"}},` +
		`{"id":"s2","tool":"confirm_with_traveller","arguments":{"flight":{"$from":"s1","path":"/0"}},"depends_on":["s1"]}],"answer":null,"question":null}`
	tripAnswer = `{"goal":"","steps":[],"answer":"BA117 leaves at 09:00.","question":null}`
)

func newTrip(t *testing.T, roundOne string) *trip {
	t.Helper()
	tr := &trip{}
	searchTool := planexec.MustTool("search_flights", "Find flights.", func(ctx context.Context, s search) ([]string, error) {
		tr.searches.Add(1)
		if tr.hold != nil {
			select {
			case <-tr.hold:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return []string{"BA117", "VS3"}, nil
	})
	ex, err := planexec.NewExecutor(planexec.Config{Tools: []*planexec.Tool{searchTool}, Store: memory.New()})
	if err != nil {
		t.Fatal(err)
	}
	model := scripted.Respond(func(req *llm.Request) scripted.Reply {
		switch {
		case req.Output == nil:
			return scripted.Reply{Content: "Hello."}
		case strings.Contains(req.Messages[0].Content, "Round 1 ran"):
			return scripted.Reply{Content: tripAnswer}
		default:
			return scripted.Reply{Content: roundOne}
		}
	})
	srv, err := plannerapi.New(plannerapi.Config{Executor: ex, Models: map[string]llm.Model{"planexec": model}, Agent: planexec.Agent{Name: "trips"}})
	if err != nil {
		t.Fatal(err)
	}
	tr.srv = httptest.NewServer(srv)
	t.Cleanup(tr.srv.Close)
	return tr
}

func (tr *trip) client() openai.Client {
	return openai.NewClient(option.WithBaseURL(tr.srv.URL+"/v1"), option.WithAPIKey("test"), option.WithMaxRetries(0))
}

func planner(session string) []option.RequestOption {
	return []option.RequestOption{option.WithJSONSet("planner_mode", true), option.WithHeader("x-session-id", session)}
}

func TestAPlainCompletionWithTheOfficialClient(t *testing.T) {
	tr := newTrip(t, searchPlan)
	c := tr.client()
	resp, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: "planexec", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hi")}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Choices[0].Message.Content != "Hello." || resp.Object != "chat.completion" || resp.Usage.TotalTokens == 0 {
		t.Errorf("completion %+v", resp)
	}
	models, err := c.Models.List(context.Background())
	if err != nil || len(models.Data) != 1 || models.Data[0].ID != "planexec" {
		t.Errorf("models %+v, %v", models, err)
	}
}

func TestAStreamingPlannerRunReadByTheOfficialClient(t *testing.T) {
	tr := newTrip(t, searchPlan)
	c := tr.client()
	stream := c.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
		Model: "planexec", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("When does the morning flight to New York leave?")},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	}, planner("s-stream")...)
	var acc openai.ChatCompletionAccumulator
	var states []map[string]any
	ids := map[string]bool{}
	for stream.Next() {
		chunk := stream.Current()
		acc.AddChunk(chunk)
		ids[chunk.ID] = true
		if f, ok := chunk.JSON.ExtraFields["metadata"]; ok {
			var m map[string]any
			if err := json.Unmarshal([]byte(f.Raw()), &m); err != nil {
				t.Fatalf("metadata %s: %v", f.Raw(), err)
			}
			if len(chunk.Choices) != 0 {
				t.Errorf("a plan_state chunk with choices: %s", chunk.RawJSON())
			}
			states = append(states, m)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	if len(ids) != 1 {
		t.Errorf("the stream's chunks carry %d ids, want one", len(ids))
	}
	if got := acc.Choices[0].Message.Content; got != "BA117 leaves at 09:00." {
		t.Errorf("content %q", got)
	}
	if acc.Usage.TotalTokens == 0 {
		t.Error("no usage in the stream")
	}
	merged := map[string]any{}
	for _, s := range states {
		merge(merged, s)
	}
	phases, _ := merged["phases"].(map[string]any)
	p0, _ := phases["0"].(map[string]any)
	tasks, _ := p0["tasks"].(map[string]any)
	s1, _ := tasks["s1"].(map[string]any)
	if merged["type"] != "plan_state" || merged["plan_status"] != "completed" || p0["status"] != "completed" || s1["status"] != "completed" || s1["tool"] != "search_flights" {
		t.Errorf("merged plan_state %v", merged)
	}
	// The round shows the planner's goal, and the step what it found.
	if p0["reasoning"] != "find a flight" || s1["summary"] != `["BA117","VS3"]` {
		t.Errorf("phase 0 %v", p0)
	}
	pending := false
	for _, s := range states {
		pending = pending || strings.Contains(fmt.Sprint(s), "pending")
	}
	if !pending {
		t.Error("no task was shown pending before it ran")
	}
}

// merge folds a partial update into what was read so far.
func merge(into, update map[string]any) {
	for k, v := range update {
		if m, ok := v.(map[string]any); ok {
			sub, _ := into[k].(map[string]any)
			if sub == nil {
				sub = map[string]any{}
				into[k] = sub
			}
			merge(sub, m)
			continue
		}
		into[k] = v
	}
}

func TestAToolOfTheClientIsHandedBackAndTheSessionResumes(t *testing.T) {
	tr := newTrip(t, confirmPlan)
	c := tr.client()
	ctx := context.Background()
	params := openai.ChatCompletionNewParams{
		Model:    "planexec",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Book the morning flight once the traveller confirms.")},
		Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{
			Name: "confirm_with_traveller", Description: openai.String("Ask the traveller to confirm."),
			Parameters: openai.FunctionParameters{"type": "object", "properties": map[string]any{"flight": map[string]any{"type": "string"}},
				"required": []string{"flight"}, "additionalProperties": false},
		})},
	}
	first, err := c.Chat.Completions.New(ctx, params, planner("s-tool")...)
	if err != nil {
		t.Fatal(err)
	}
	ch := first.Choices[0]
	if ch.FinishReason != "tool_calls" || len(ch.Message.ToolCalls) != 1 {
		t.Fatalf("first response %+v", first)
	}
	call := ch.Message.ToolCalls[0]
	if call.Function.Name != "confirm_with_traveller" || call.Function.Arguments != `{"flight":"BA117"}` {
		t.Errorf("call %+v", call)
	}
	// A result for a call the session does not await changes nothing.
	stray := params
	stray.Messages = append(append([]openai.ChatCompletionMessageParamUnion(nil), params.Messages...), ch.Message.ToParam(), openai.ToolMessage(`{}`, "call_nothing"))
	_, err = c.Chat.Completions.New(ctx, stray, planner("s-tool")...)
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || apiErr.Param != "messages[2].tool_call_id" {
		t.Fatalf("a stray tool result: %v", err)
	}
	params.Messages = append(params.Messages, ch.Message.ToParam(), openai.ToolMessage(`{"confirmed":true}`, call.ID))
	second, err := c.Chat.Completions.New(ctx, params, planner("s-tool")...)
	if err != nil {
		t.Fatal(err)
	}
	if got := second.Choices[0].Message.Content; got != "BA117 leaves at 09:00." || second.Choices[0].FinishReason != "stop" {
		t.Errorf("second response %+v", second)
	}
	if n := tr.searches.Load(); n != 1 {
		t.Errorf("the search ran %d times, want once: the session resumed where it stopped", n)
	}
}

func TestAPlannerRequestWithoutASessionIs400(t *testing.T) {
	tr := newTrip(t, searchPlan)
	c := tr.client()
	_, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: "planexec", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hi")}},
		option.WithJSONSet("planner_mode", true))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || apiErr.Param != "x-session-id" {
		t.Fatalf("err = %v, want 400 naming x-session-id", err)
	}
	_, err = c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: "gpt-nothing", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hi")}})
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound || apiErr.Code != "model_not_found" {
		t.Fatalf("unknown model: %v", err)
	}
}

func TestBadRequestsGetOpenAIShapedErrors(t *testing.T) {
	tr := newTrip(t, searchPlan)
	for _, tc := range []struct {
		name, body string
		status     int
		param      string
	}{
		{"not JSON", `{"model":`, 400, ""},
		{"a wrong type", `{"model":"planexec","messages":"hi"}`, 400, "messages"},
		{"an unknown field", `{"model":"planexec","messages":[{"role":"user","content":"hi"}],"bogus":1}`, 400, "bogus"},
		{"no messages", `{"model":"planexec","messages":[]}`, 400, "messages"},
		{"a role that is none", `{"model":"planexec","messages":[{"role":"wizard","content":"hi"}]}`, 400, "messages[0].role"},
		{"a huge body", `{"model":"planexec","messages":[{"role":"user","content":"` + strings.Repeat("x", 2<<20) + `"}]}`, 413, ""},
		{"a tool message for an unknown call", `{"model":"planexec","planner_mode":true,"messages":[{"role":"user","content":"hi"},{"role":"tool","tool_call_id":"","content":"x"}]}`, 400, "messages[1].tool_call_id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", tr.srv.URL+"/v1/chat/completions", strings.NewReader(tc.body))
			req.Header.Set("x-session-id", "s-bad")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var body struct {
				Error struct {
					Message string  `json:"message"`
					Type    string  `json:"type"`
					Param   *string `json:"param"`
				} `json:"error"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
				t.Fatalf("the body is not OpenAI's error shape: %v", err)
			}
			param := ""
			if body.Error.Param != nil {
				param = *body.Error.Param
			}
			if resp.StatusCode != tc.status || body.Error.Type == "" || body.Error.Message == "" || param != tc.param {
				t.Errorf("%d %+v (param %q), want %d with param %q", resp.StatusCode, body.Error, param, tc.status, tc.param)
			}
		})
	}
}

// Progress arrives as it happens: the search is held until the stream has
// shown it running.
func TestProgressArrivesBeforeTheRunEnds(t *testing.T) {
	tr := newTrip(t, searchPlan)
	tr.hold = make(chan struct{})
	body := `{"model":"planexec","planner_mode":true,"stream":true,"messages":[{"role":"user","content":"find a flight"}]}`
	req, _ := http.NewRequest("POST", tr.srv.URL+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("x-session-id", "s-live")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	lines := bufio.NewScanner(resp.Body)
	released := false
	done := false
	for lines.Scan() {
		line := lines.Text()
		if strings.Contains(line, `"running"`) && !released {
			close(tr.hold) // the run cannot end before this
			released = true
		}
		if line == "data: [DONE]" {
			done = true
		}
	}
	if !released || !done {
		t.Errorf("released %v, done %v: the running step was not shown while it ran", released, done)
	}
}
