package anthropic_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/llm"
	"github.com/planexec/planexec/llm/anthropic"
)

// testKey is distinctive, so that a leak shows up in any string.
const testKey = "sk-ant-test-DO-NOT-LEAK-5b1f0c9e7d"

// ---- a Messages API on loopback ----

// received is one request the fake API got.
type received struct {
	Method, Path string
	Header       http.Header
	Body         map[string]any
	Raw          []byte
}

// reply writes one answer. hang makes it wait for the client to go away;
// write, when set, writes the body instead of body (one too large to hold).
type reply struct {
	status int
	header map[string]string
	body   string
	hang   bool
	write  func(io.Writer)
}

type fakeAPI struct {
	t   *testing.T
	srv *httptest.Server

	mu      sync.Mutex
	replies []reply
	got     []received
}

// newAPI serves replies in order; the last one repeats.
func newAPI(t *testing.T, replies ...reply) *fakeAPI {
	t.Helper()
	f := &fakeAPI{t: t, replies: replies}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeAPI) serve(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	var body map[string]any
	_ = json.Unmarshal(raw, &body)
	f.mu.Lock()
	n := len(f.got)
	f.got = append(f.got, received{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body, Raw: raw})
	rep := f.replies[min(n, len(f.replies)-1)]
	f.mu.Unlock()
	if rep.hang {
		<-r.Context().Done()
		return
	}
	w.Header().Set("content-type", "application/json")
	w.Header().Set("request-id", fmt.Sprintf("req_%03d", n+1))
	for k, v := range rep.header {
		w.Header().Set(k, v)
	}
	status := rep.status
	if status == 0 {
		status = http.StatusOK
	}
	w.WriteHeader(status)
	if rep.write != nil {
		rep.write(w)
		return
	}
	_, _ = io.WriteString(w, rep.body)
}

func (f *fakeAPI) requests() []received {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]received(nil), f.got...)
}

func (f *fakeAPI) model(t *testing.T, opts ...anthropic.Option) *anthropic.Model {
	t.Helper()
	m, err := anthropic.New("claude-test-1", append([]anthropic.Option{
		anthropic.WithAPIKey(testKey), anthropic.WithBaseURL(f.srv.URL)}, opts...)...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return m
}

// message is a Messages API answer as the API writes it.
func message(stop string, usageIn, usageOut int, content ...any) reply {
	if content == nil {
		content = []any{}
	}
	b, err := json.Marshal(map[string]any{
		"id": "msg_01", "type": "message", "role": "assistant", "model": "claude-test-1-20990101",
		"content": content, "stop_reason": stop, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": usageIn, "output_tokens": usageOut},
	})
	if err != nil {
		panic(err)
	}
	return reply{body: string(b)}
}

func toolUse(name, input string) map[string]any {
	return map[string]any{"type": "tool_use", "id": "toolu_01", "name": name, "input": json.RawMessage(input)}
}

func text(s string) map[string]any { return map[string]any{"type": "text", "text": s} }

// planned answers with a plan through the forced tool call.
func planned(plan string) reply { return message("tool_use", 1200, 90, toolUse("plan", plan)) }

func apiError(status int, kind, msg string, header map[string]string) reply {
	b, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]any{"type": kind, "message": msg}})
	return reply{status: status, body: string(b), header: header}
}

// ---- an executor to plan for ----

type flightSearch struct {
	Origin      string `json:"origin" validate:"len=3"`
	Destination string `json:"destination" validate:"len=3"`
}

type booking struct {
	Flight string `json:"flight"`
	Seats  int    `json:"seats" validate:"min=1,max=9"`
}

func executor(t *testing.T) *planexec.Run {
	t.Helper()
	ex, err := planexec.NewExecutor(planexec.Config{
		Tools: []*planexec.Tool{
			planexec.MustTool("search_flights", "Find flights.", func(ctx context.Context, s flightSearch) ([]string, error) { return []string{"BA117"}, nil }),
			planexec.MustTool("book_flight", "Book seats.", func(ctx context.Context, b booking) (string, error) { return "PNR-" + b.Flight, nil }),
		},
	})
	if err != nil {
		t.Fatalf("NewExecutor: %v", err)
	}
	run, err := ex.Run(planexec.Delegation{RunID: "run-1", Tenant: "acme", Agent: "courier"})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return run
}

func planner(t *testing.T, m llm.Model) *planexec.AgentPlanner {
	t.Helper()
	p, err := planexec.NewAgentPlanner(m, planexec.Agent{Name: "planner"})
	if err != nil {
		t.Fatalf("NewAgentPlanner: %v", err)
	}
	return p
}

const (
	goodPlan = `{"goal":"get them to New York","steps":[` +
		`{"id":"s1","tool":"search_flights","arguments":{"origin":"LHR","destination":"JFK"},"depends_on":[],"intent":"find a flight"},` +
		`{"id":"s2","tool":"book_flight","arguments":{"flight":"BA117","seats":1},"depends_on":["s1"],"intent":"hold the seat"}]}`
	unknownToolPlan = `{"goal":"get them to New York","steps":[` +
		`{"id":"s1","tool":"teleport","arguments":{"to":"JFK"},"depends_on":[],"intent":"skip the queue"}]}`
)

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("not JSON: %v: %s", err, a)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("not JSON: %v: %s", err, b)
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return string(xb) == string(yb)
}

func get(m map[string]any, path ...string) any {
	var v any = m
	for _, p := range path {
		o, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = o[p]
	}
	return v
}

// turns reads the messages of a request body as (role, text) pairs; each
// must be one text block.
func turns(t *testing.T, body map[string]any) [][2]string {
	t.Helper()
	msgs, _ := body["messages"].([]any)
	var out [][2]string
	for i, mm := range msgs {
		m := mm.(map[string]any)
		blocks, ok := m["content"].([]any)
		if !ok || len(blocks) != 1 {
			t.Fatalf("message %d content = %#v, want one block", i, m["content"])
		}
		b := blocks[0].(map[string]any)
		if b["type"] != "text" {
			t.Fatalf("message %d block type = %v, want text", i, b["type"])
		}
		out = append(out, [2]string{m["role"].(string), b["text"].(string)})
	}
	return out
}

func eventsOf(ex *planexec.Run, kind planexec.EventKind) []planexec.Event {
	var out []planexec.Event
	for _, e := range ex.Events() {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

func providerError(t *testing.T, err error) *llm.ProviderError {
	t.Helper()
	pe, ok := errors.AsType[*llm.ProviderError](err)
	if !ok {
		t.Fatalf("err = %v (%T), want a *llm.ProviderError", err, err)
	}
	if pe.Provider != "anthropic" {
		t.Errorf("Provider = %q", pe.Provider)
	}
	return pe
}

func noKey(t *testing.T, what, s string) {
	t.Helper()
	if strings.Contains(s, testKey) {
		t.Errorf("the API key appears in %s: %s", what, s)
	}
}

// ---- the tests ----

func TestTheRequestForcesOnePlanToolOverTheWire(t *testing.T) {
	api := newAPI(t, planned(goodPlan))
	ex := executor(t)
	if _, err := ex.Plan(context.Background(), planner(t, api.model(t, anthropic.WithMaxTokens(3000))), "get them to New York"); err != nil {
		t.Fatalf("Planned: %v", err)
	}
	reqs := api.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(reqs))
	}
	r := reqs[0]
	if r.Method != http.MethodPost || r.Path != "/v1/messages" {
		t.Errorf("request = %s %s, want POST /v1/messages", r.Method, r.Path)
	}
	if got := r.Header.Get("x-api-key"); got != testKey {
		t.Errorf("x-api-key = %q, want the key", got)
	}
	if r.Header.Get("authorization") != "" {
		t.Error("the key was also sent as an authorization header")
	}
	if r.Header.Get("anthropic-version") == "" {
		t.Error("no anthropic-version header")
	}
	if ct := r.Header.Get("content-type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("content-type = %q", ct)
	}
	b := r.Body
	if b["model"] != "claude-test-1" || b["max_tokens"] != float64(3000) {
		t.Errorf("model, max_tokens = %v, %v", b["model"], b["max_tokens"])
	}
	tools, _ := b["tools"].([]any)
	if len(tools) != 1 {
		t.Fatalf("tools = %#v, want exactly one", b["tools"])
	}
	tool := tools[0].(map[string]any)
	if tool["name"] != "plan" {
		t.Errorf("tool name = %v, want plan", tool["name"])
	}
	schema, _ := json.Marshal(tool["input_schema"])
	if !jsonEqual(t, schema, planexec.PlanSchema(ex.Catalog())) {
		t.Errorf("input_schema is not the plan schema:\n got %s\nwant %s", schema, planexec.PlanSchema(ex.Catalog()))
	}
	if _, strict := tool["strict"]; strict {
		t.Error("strict was sent without WithStrictSchema")
	}
	if get(b, "tool_choice", "type") != "tool" || get(b, "tool_choice", "name") != "plan" {
		t.Errorf("tool_choice = %#v, want {type: tool, name: plan}", b["tool_choice"])
	}
	system, _ := b["system"].([]any)
	if len(system) != 1 || !strings.HasPrefix(get(system[0].(map[string]any), "text").(string), "You are a planner.") {
		t.Errorf("system = %#v", b["system"])
	}
	ts := turns(t, b)
	if len(ts) != 1 || ts[0][0] != "user" || !strings.HasPrefix(ts[0][1], "Task: get them to New York") {
		t.Errorf("messages = %q", ts)
	}
}

func TestAGoodPlanComesBackTypedWithUsageModelAndRequestID(t *testing.T) {
	api := newAPI(t, planned(goodPlan))
	ex := executor(t)
	plan, err := ex.Plan(context.Background(), planner(t, api.model(t)), "get them to New York")
	if err != nil {
		t.Fatalf("Planned: %v", err)
	}
	if plan.Goal != "get them to New York" || len(plan.Steps) != 2 || plan.Steps[1].Tool != "book_flight" ||
		len(plan.Steps[1].DependsOn) != 1 || plan.Steps[1].DependsOn[0] != "s1" {
		t.Fatalf("plan = %+v", plan)
	}
	want := llm.Usage{InputTokens: 1200, OutputTokens: 90, Calls: 1}
	if got := ex.Usage(); got != want {
		t.Errorf("ex.Usage() = %+v, want %+v", got, want)
	}
	ev := eventsOf(ex, planexec.EventPlanned)
	if len(ev) != 1 {
		t.Fatalf("%d PLANNED events", len(ev))
	}
	if ev[0].Usage == nil || *ev[0].Usage != want {
		t.Errorf("PLANNED usage = %+v, want %+v", ev[0].Usage, want)
	}
	if ev[0].Model != "claude-test-1-20990101" || ev[0].RequestID != "req_001" {
		t.Errorf("PLANNED model, request id = %q, %q", ev[0].Model, ev[0].RequestID)
	}
	if api.requests()[0].Body["max_tokens"] != float64(anthropic.DefaultMaxTokens) {
		t.Errorf("max_tokens = %v, want the default", api.requests()[0].Body["max_tokens"])
	}
}

func TestARefusedPlanIsSentBackAndTheReplanValidates(t *testing.T) {
	api := newAPI(t, planned(unknownToolPlan), planned(goodPlan))
	ex := executor(t)
	plan, err := ex.Plan(context.Background(), planner(t, api.model(t)), "get them to New York")
	if err != nil {
		t.Fatalf("Planned: %v", err)
	}
	if plan.Revision != 2 || len(plan.Steps) != 2 {
		t.Errorf("plan revision %d with %d steps", plan.Revision, len(plan.Steps))
	}
	refused := eventsOf(ex, planexec.EventPlanRefused)
	if len(refused) != 1 || refused[0].Reason != planexec.ReasonUnknownTool || refused[0].RequestID != "req_001" {
		t.Errorf("PLAN_REFUSED = %+v", refused)
	}
	reqs := api.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	ts := turns(t, reqs[1].Body)
	if len(ts) != 3 || ts[0][0] != "user" || ts[1][0] != "assistant" || ts[2][0] != "user" {
		t.Fatalf("second request turns = %q, want user, assistant, user", ts)
	}
	if !jsonEqual(t, []byte(ts[1][1]), []byte(unknownToolPlan)) {
		t.Errorf("assistant turn = %s, want the refused plan", ts[1][1])
	}
	if !strings.Contains(ts[2][1], "refused (unknown_tool)") || !strings.Contains(ts[2][1], "teleport") {
		t.Errorf("feedback turn = %q", ts[2][1])
	}
	if ex.Usage().Calls != 2 {
		t.Errorf("usage = %+v, want two calls", ex.Usage())
	}
}

func TestARefusalIsAnEmptyAnswerThatIsReplanned(t *testing.T) {
	for name, first := range map[string]reply{
		"stop_reason refusal":           message("refusal", 50, 3),
		"text instead of the tool call": message("end_turn", 50, 12, text("I would rather not plan this.")),
	} {
		t.Run(name, func(t *testing.T) {
			api := newAPI(t, first, planned(goodPlan))
			ex := executor(t)
			if _, err := ex.Plan(context.Background(), planner(t, api.model(t)), "get them to New York"); err != nil {
				t.Fatalf("Planned: %v", err)
			}
			refused := eventsOf(ex, planexec.EventPlanRefused)
			if len(refused) != 1 || refused[0].Reason != planexec.ReasonEmpty {
				t.Fatalf("PLAN_REFUSED = %+v, want one with reason empty", refused)
			}
			ts := turns(t, api.requests()[1].Body)
			if len(ts) != 3 || ts[1][0] != "assistant" || strings.TrimSpace(ts[1][1]) == "" {
				t.Errorf("second request turns = %q: the empty answer must be sent as non-empty text", ts)
			}
		})
	}
}

func TestGenerateReportsARefusal(t *testing.T) {
	api := newAPI(t, reply{body: `{"id":"msg_01","type":"message","role":"assistant","model":"claude-test-1","content":[],` +
		`"stop_reason":"refusal","stop_sequence":null,"stop_details":{"type":"refusal","category":"general_harms","explanation":"Declined."},` +
		`"usage":{"input_tokens":10,"output_tokens":1}}`})
	resp, err := api.model(t).Generate(context.Background(), &llm.Request{
		Messages: []llm.Message{{Role: llm.RoleUser, Content: "x"}},
		Output:   &llm.OutputSchema{Name: "plan", Schema: json.RawMessage(`{"type":"object"}`)},
	})
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	if resp.Content != "" || resp.Refusal != "Declined." || resp.FinishReason != "refusal" || resp.Usage.Calls != 1 {
		t.Errorf("response = %+v", resp)
	}
}

func TestMaxTokensIsATruncationError(t *testing.T) {
	api := newAPI(t, message("max_tokens", 1200, 4096, toolUse("plan", `{"goal":"get them"}`)))
	_, err := executor(t).Plan(context.Background(), planner(t, api.model(t)), "get them to New York")
	pe := providerError(t, err)
	if !errors.Is(err, llm.ErrTruncated) || pe.Retryable || pe.RequestID != "req_001" {
		t.Errorf("err = %v (retryable %v, request %q), want a non-retryable truncation", err, pe.Retryable, pe.RequestID)
	}
	if n := len(api.requests()); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}

	// Generate returns what came back, with its cost, beside the error.
	api = newAPI(t, message("max_tokens", 1200, 4096, toolUse("plan", `{"goal":"get them"}`)))
	resp, err := api.model(t).Generate(context.Background(), &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "plan"}},
		Output: &llm.OutputSchema{Name: "plan", Schema: json.RawMessage(`{"type":"object"}`)}})
	if !errors.Is(err, llm.ErrTruncated) {
		t.Fatalf("err = %v, want ErrTruncated", err)
	}
	if resp == nil {
		t.Fatal("no Response with the truncation")
	}
	if resp.Usage != (llm.Usage{InputTokens: 1200, OutputTokens: 4096, Calls: 1}) || resp.Model != "claude-test-1-20990101" ||
		resp.RequestID != "req_001" || resp.FinishReason != "max_tokens" || resp.Content != `{"goal":"get them"}` {
		t.Errorf("response = %+v", resp)
	}
}

func TestMalformedToolInputIsRefusedAndReplanned(t *testing.T) {
	api := newAPI(t, planned(`{"plan":"fly","steps":"s1 then s2"}`), planned(goodPlan))
	ex := executor(t)
	if _, err := ex.Plan(context.Background(), planner(t, api.model(t)), "get them to New York"); err != nil {
		t.Fatalf("Planned: %v", err)
	}
	refused := eventsOf(ex, planexec.EventPlanRefused)
	if len(refused) != 1 || refused[0].Reason != planexec.ReasonMalformed {
		t.Errorf("PLAN_REFUSED = %+v, want one with reason malformed", refused)
	}
}

func TestARateLimitIsRetriedAfterRetryAfter(t *testing.T) {
	api := newAPI(t, apiError(429, "rate_limit_error", "Number of requests has exceeded your rate limit", map[string]string{"retry-after": "1"}),
		planned(goodPlan))
	start := time.Now()
	if _, err := executor(t).Plan(context.Background(), planner(t, api.model(t)), "get them to New York"); err != nil {
		t.Fatalf("Planned: %v", err)
	}
	if n := len(api.requests()); n != 2 {
		t.Errorf("%d requests, want 2", n)
	}
	if d := time.Since(start); d < 900*time.Millisecond {
		t.Errorf("retried after %s, want retry-after's second", d)
	}
}

func TestOverloadedIsRetried(t *testing.T) {
	api := newAPI(t, apiError(529, "overloaded_error", "Overloaded", nil), planned(goodPlan))
	if _, err := executor(t).Plan(context.Background(), planner(t, api.model(t)), "get them to New York"); err != nil {
		t.Fatalf("Planned: %v", err)
	}
	if n := len(api.requests()); n != 2 {
		t.Errorf("%d requests, want 2", n)
	}
}

func TestAPersistentServerErrorIsARetryableProviderError(t *testing.T) {
	api := newAPI(t, apiError(500, "api_error", "Internal server error", map[string]string{"retry-after-ms": "10"}))
	_, err := executor(t).Plan(context.Background(), planner(t, api.model(t)), "get them to New York")
	pe := providerError(t, err)
	if pe.Status != 500 || !pe.Retryable || pe.RequestID != "req_003" {
		t.Errorf("ProviderError = %+v, want status 500, retryable, the last request id", pe)
	}
	if ae, ok := errors.AsType[*anthropic.APIError](err); !ok || ae.Status != 500 || ae.Type != "api_error" ||
		ae.Message != "Internal server error" || ae.RequestID != "req_003" {
		t.Errorf("no *anthropic.APIError with the status underneath: %v", err)
	}
	if _, ok := errors.AsType[*sdk.Error](err); ok {
		t.Errorf("the SDK's *anthropic.Error, which holds the request, is in the chain: %v", err)
	}
	if n := len(api.requests()); n != 1+anthropic.DefaultMaxRetries {
		t.Errorf("%d requests, want %d", n, 1+anthropic.DefaultMaxRetries)
	}
	if !strings.Contains(err.Error(), "api_error: Internal server error") {
		t.Errorf("message = %q", err)
	}
}

func TestAClientErrorIsNotRetried(t *testing.T) {
	api := newAPI(t, apiError(400, "invalid_request_error", "max_tokens: too large", nil))
	_, err := api.model(t).Generate(context.Background(), &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}})
	pe := providerError(t, err)
	if pe.Status != 400 || pe.Retryable || len(api.requests()) != 1 {
		t.Errorf("ProviderError = %+v after %d requests", pe, len(api.requests()))
	}
}

func TestAHangingServerTimesOutPromptly(t *testing.T) {
	api := newAPI(t, reply{hang: true})
	m := api.model(t, anthropic.WithTimeout(300*time.Millisecond))
	start := time.Now()
	_, err := m.Generate(context.Background(), &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}})
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("returned after %s, want about the 300ms timeout", d)
	}
	pe := providerError(t, err)
	if !pe.Retryable || pe.Status != 0 || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v (%+v), want a retryable timeout", err, pe)
	}
}

func TestCancellationIsHonoured(t *testing.T) {
	api := newAPI(t, reply{hang: true})
	m := api.model(t)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	_, err := m.Generate(ctx, &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	if _, isProvider := errors.AsType[*llm.ProviderError](err); isProvider {
		t.Error("a cancellation was reported as a provider failure")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("returned after %s", d)
	}
	if _, err := m.Generate(ctx, &llm.Request{}); !errors.Is(err, context.Canceled) {
		t.Errorf("with a cancelled context: err = %v", err)
	}
}

func TestTheKeyNeverAppearsInAnError(t *testing.T) {
	api := newAPI(t, apiError(401, "authentication_error", "invalid x-api-key", nil))
	_, err := api.model(t).Generate(context.Background(), &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}})
	pe := providerError(t, err)
	if pe.Status != 401 || pe.Retryable || pe.RequestID != "req_001" {
		t.Errorf("ProviderError = %+v", pe)
	}
	noKeyInChain(t, "401", err)
	if _, ok := errors.AsType[*sdk.Error](err); ok {
		t.Error("the SDK's *anthropic.Error, whose request carries the key, is in the chain")
	}
	if ae, ok := errors.AsType[*anthropic.APIError](err); !ok || ae.Status != 401 || ae.Type != "authentication_error" ||
		ae.Message != "invalid x-api-key" || ae.RequestID != "req_001" {
		t.Errorf("APIError = %+v (%v)", ae, ok)
	}

	// A server that echoes the key in its answer.
	api = newAPI(t, apiError(401, "authentication_error", "invalid x-api-key: "+testKey, nil))
	_, err = api.model(t).Generate(context.Background(), &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}})
	if pe := providerError(t, err); pe.Status != 401 || pe.Retryable {
		t.Errorf("ProviderError = %+v", pe)
	}
	noKeyInChain(t, "echoed 401", err)
	if ae, ok := errors.AsType[*anthropic.APIError](err); !ok || !strings.Contains(ae.Message, "[redacted]") {
		t.Errorf("APIError = %+v, want the key redacted from its message", ae)
	}

	// A connection that never gets an answer.
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	m, err := anthropic.New("claude-test-1", anthropic.WithAPIKey(testKey), anthropic.WithBaseURL(dead.URL), anthropic.WithMaxRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Generate(context.Background(), &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}})
	pe = providerError(t, err)
	if pe.Status != 0 || !pe.Retryable {
		t.Errorf("refused connection: %+v, want status 0, retryable", pe)
	}
	noKeyInChain(t, "the connection error", err)
}

// noKeyInChain checks err and every error reachable from it by Unwrap.
func noKeyInChain(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error", what)
	}
	seen := 0
	var walk func(e error)
	walk = func(e error) {
		if e == nil {
			return
		}
		seen++
		for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
			noKey(t, fmt.Sprintf("%s: %T printed with %s", what, e, verb), fmt.Sprintf(verb, e))
		}
		noKey(t, fmt.Sprintf("%s: %T.Error()", what, e), e.Error())
		switch u := e.(type) {
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		case interface{ Unwrap() []error }:
			for _, c := range u.Unwrap() {
				walk(c)
			}
		}
	}
	walk(err)
	if seen < 2 {
		t.Errorf("%s: %d errors in the chain, want the ProviderError and what it wraps", what, seen)
	}
}

// A redirect to another origin would take x-api-key with it: Go's client
// drops only Authorization. It is refused.
func TestARedirectToAnotherOriginNeverGetsTheKey(t *testing.T) {
	var mu sync.Mutex
	var leaked []string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		leaked = append(leaked, r.Header.Get("x-api-key"))
		mu.Unlock()
		w.Header().Set("content-type", "application/json")
		_, _ = io.WriteString(w, planned(goodPlan).body)
	}))
	t.Cleanup(other.Close)
	otherURL := strings.Replace(other.URL, "127.0.0.1", "localhost", 1)
	if otherURL == other.URL {
		t.Skipf("the second server is not on 127.0.0.1: %s", other.URL)
	}
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, otherURL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(redirector.Close)

	checked := 0
	caller := &http.Client{Timeout: 5 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error {
		checked++
		return nil
	}}
	for name, opts := range map[string][]anthropic.Option{
		"default client": nil,
		"given client":   {anthropic.WithHTTPClient(caller)},
	} {
		m, err := anthropic.New("claude-test-1", append([]anthropic.Option{anthropic.WithAPIKey(testKey),
			anthropic.WithBaseURL(redirector.URL), anthropic.WithMaxRetries(0)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		_, err = m.Generate(context.Background(), &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}})
		pe := providerError(t, err)
		if pe.Retryable {
			t.Errorf("%s: a refused redirect is retryable: %v", name, err)
		}
		noKeyInChain(t, name, err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, k := range leaked {
		if k != "" {
			t.Errorf("the other origin received x-api-key %q", k)
		}
	}
	if len(leaked) != 0 {
		t.Errorf("the other origin received %d requests, want none", len(leaked))
	}
	if caller.CheckRedirect == nil || checked != 0 {
		t.Errorf("the caller's client was changed or consulted for a cross-origin redirect (%d)", checked)
	}

	// A redirect within the origin is still followed, through the caller's own policy.
	api := newAPI(t, planned(goodPlan))
	same := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/messages" {
			http.Redirect(w, r, "/moved/v1/messages", http.StatusTemporaryRedirect)
			return
		}
		r.URL.Path = strings.TrimPrefix(r.URL.Path, "/moved")
		api.serve(w, r)
	}))
	t.Cleanup(same.Close)
	m, err := anthropic.New("claude-test-1", anthropic.WithAPIKey(testKey), anthropic.WithBaseURL(same.URL),
		anthropic.WithMaxRetries(0), anthropic.WithHTTPClient(caller))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Generate(context.Background(), &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}}); err != nil {
		t.Fatalf("same-origin redirect: %v", err)
	}
	if checked != 1 {
		t.Errorf("the caller's CheckRedirect ran %d times, want 1", checked)
	}
}

// A plain-HTTP server behind an https URL is a misconfiguration, not a
// dropped connection: trying again cannot help.
func TestAPlainHTTPServerBehindHTTPSIsNotRetryable(t *testing.T) {
	api := newAPI(t, planned(goodPlan))
	m, err := anthropic.New("claude-test-1", anthropic.WithAPIKey(testKey), anthropic.WithMaxRetries(0),
		anthropic.WithBaseURL(strings.Replace(api.srv.URL, "http://", "https://", 1)))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = m.Generate(context.Background(), &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}})
	if pe := providerError(t, err); pe.Retryable || pe.Status != 0 {
		t.Errorf("err = %v (%+v), want status 0, not retryable", err, pe)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("returned after %s", d)
	}
}

func TestXShouldRetryIsHonoured(t *testing.T) {
	for name, tc := range map[string]struct {
		r    reply
		want bool
	}{
		"400 true":  {apiError(400, "invalid_request_error", "try again", map[string]string{"x-should-retry": "true"}), true},
		"503 false": {apiError(503, "api_error", "do not", map[string]string{"x-should-retry": "false"}), false},
		"529":       {apiError(529, "overloaded_error", "Overloaded", nil), true},
	} {
		api := newAPI(t, tc.r)
		_, err := api.model(t, anthropic.WithMaxRetries(0)).Generate(context.Background(), &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}})
		if pe := providerError(t, err); pe.Retryable != tc.want {
			t.Errorf("%s: err = %v, want Retryable %v", name, err, tc.want)
		}
	}
}

func TestTheToolNameIsSanitised(t *testing.T) {
	for in, want := range map[string]string{
		"":                      "plan",
		"trip plan/v2":          "trip_plan_v2",
		strings.Repeat("a", 70): strings.Repeat("a", 64),
		"plan-1_ok":             "plan-1_ok",
	} {
		api := newAPI(t, message("tool_use", 10, 5, toolUse(want, `{"goal":"x"}`)))
		resp, err := api.model(t).Generate(context.Background(), &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}},
			Output: &llm.OutputSchema{Name: in, Schema: json.RawMessage(`{"type":"object"}`)}})
		if err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		body := api.requests()[0].Body
		tools, _ := body["tools"].([]any)
		if len(tools) != 1 || get(tools[0].(map[string]any), "name") != want || get(body, "tool_choice", "name") != want {
			t.Errorf("%q: tools = %v, tool_choice = %v, want the name %q", in, tools, body["tool_choice"], want)
		}
		if resp.Content != `{"goal":"x"}` {
			t.Errorf("%q: content = %q", in, resp.Content)
		}
	}
}

func TestTheKeyComesFromTheEnvironment(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-from-env")
	api := newAPI(t, message("end_turn", 5, 2, text("hello")))
	m, err := anthropic.New("claude-test-1", anthropic.WithBaseURL(api.srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Generate(context.Background(), &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}}); err != nil {
		t.Fatal(err)
	}
	if got := api.requests()[0].Header.Get("x-api-key"); got != "sk-ant-from-env" {
		t.Errorf("x-api-key = %q", got)
	}
}

func TestWithoutOutputTheAnswerIsText(t *testing.T) {
	api := newAPI(t, message("end_turn", 20, 4, text("Hello, "), text("world.")))
	resp, err := api.model(t).Generate(context.Background(), &llm.Request{
		System:    "Be brief.",
		Messages:  []llm.Message{{Role: llm.RoleUser, Content: "Say hello."}},
		MaxTokens: 64,
	})
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	if resp.Content != "Hello, world." || resp.FinishReason != "end_turn" || resp.RequestID != "req_001" ||
		resp.Usage != (llm.Usage{InputTokens: 20, OutputTokens: 4, Calls: 1}) {
		t.Errorf("response = %+v", resp)
	}
	b := api.requests()[0].Body
	if _, ok := b["tools"]; ok {
		t.Error("tools were sent without an output schema")
	}
	if _, ok := b["tool_choice"]; ok {
		t.Error("tool_choice was sent without an output schema")
	}
	if b["max_tokens"] != float64(64) {
		t.Errorf("max_tokens = %v, want the request's 64", b["max_tokens"])
	}
}

func TestStructuredOutputAndStrictAreOptIn(t *testing.T) {
	api := newAPI(t, message("end_turn", 20, 4, text(`{"goal":"x","steps":[]}`)))
	out := &llm.OutputSchema{Name: "plan", Schema: planexec.PlanSchema(executor(t).Catalog()), Strict: true}
	resp, err := api.model(t, anthropic.WithStructuredOutput(), anthropic.WithStrictSchema()).Generate(context.Background(),
		&llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "plan"}}, Output: out})
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	if resp.Content != `{"goal":"x","steps":[]}` {
		t.Errorf("content = %q", resp.Content)
	}
	b := api.requests()[0].Body
	if _, ok := b["tools"]; ok {
		t.Error("a tool was sent with structured output")
	}
	// The plan schema, with what constrained decoding refuses put into words
	// (see TestConstrainedDecodingIsSentOnlyKeywordsItAcceptsAndTheRestInWords).
	var plan any
	_ = json.Unmarshal(out.Schema, &plan)
	format, _ := json.Marshal(withoutWords(get(b, "output_config", "format", "schema")))
	want, _ := json.Marshal(withoutWords(plan))
	if get(b, "output_config", "format", "type") != "json_schema" || !jsonEqual(t, format, want) {
		t.Errorf("output_config = %#v", b["output_config"])
	}

	api = newAPI(t, planned(goodPlan))
	if _, err := api.model(t, anthropic.WithStrictSchema()).Generate(context.Background(),
		&llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "plan"}}, Output: out}); err != nil {
		t.Fatalf("Generate: %v", err)
	}
	if get(api.requests()[0].Body["tools"].([]any)[0].(map[string]any), "strict") != true {
		t.Errorf("strict not sent on the tool: %s", api.requests()[0].Raw)
	}
}

func TestNewRefusesBadOptions(t *testing.T) {
	for name, opts := range map[string][]anthropic.Option{
		"negative retries": {anthropic.WithMaxRetries(-1)},
		"zero max tokens":  {anthropic.WithMaxTokens(0)},
		"relative base":    {anthropic.WithBaseURL("api.example")},
		"empty key":        {anthropic.WithAPIKey("")},
	} {
		if _, err := anthropic.New("claude-test-1", opts...); err == nil {
			t.Errorf("%s: New accepted it", name)
		}
	}
	if _, err := anthropic.New(" "); err == nil {
		t.Error("New accepted an empty model name")
	}
	m, err := anthropic.New("claude-test-1", anthropic.WithAPIKey(testKey))
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Generate(context.Background(), &llm.Request{Messages: []llm.Message{{Role: "system", Content: "x"}}})
	if err == nil {
		t.Error("a message with role system was accepted")
	}
	_, err = m.Generate(context.Background(), &llm.Request{Output: &llm.OutputSchema{Name: "plan", Schema: json.RawMessage(`{"type":"array"}`)}})
	if err == nil {
		t.Error("a non-object output schema was accepted")
	}
}

func TestATemperatureGoesOverTheWireOnlyWhenSet(t *testing.T) {
	api := newAPI(t, planned(goodPlan))
	m := api.model(t)
	hot := 0.25
	for _, temp := range []*float64{&hot, nil} {
		if _, err := m.Generate(context.Background(), &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "plan"}}, Temperature: temp}); err != nil {
			t.Fatal(err)
		}
	}
	reqs := api.requests()
	if got := reqs[0].Body["temperature"]; got != 0.25 {
		t.Errorf("temperature = %v, want 0.25", got)
	}
	if _, sent := reqs[1].Body["temperature"]; sent {
		t.Errorf("a temperature went over the wire unasked")
	}
}
