package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3/option"
	"github.com/shopspring/decimal"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/llm"
	"github.com/planexec/planexec/llm/openai"
)

const testKey = "sk-test-planexec-7f3a9c41d2e8b6"

// server speaks OpenAI's Chat Completions wire format. Each call is answered
// by the next handler; the last one answers every call after it.
type server struct {
	t        *testing.T
	srv      *httptest.Server
	mu       sync.Mutex
	bodies   [][]byte
	headers  []http.Header
	handlers []http.HandlerFunc
}

func newServer(t *testing.T, handlers ...http.HandlerFunc) *server {
	t.Helper()
	s := &server{t: t, handlers: handlers}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.bodies = append(s.bodies, body)
	s.headers = append(s.headers, r.Header.Clone())
	n := len(s.bodies)
	h := s.handlers[min(n, len(s.handlers))-1]
	s.mu.Unlock()
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		http.Error(w, `{"error":{"message":"not found","type":"invalid_request_error","code":null}}`, http.StatusNotFound)
		return
	}
	h(w, r)
}

func (s *server) url() string { return s.srv.URL + "/v1" }

func (s *server) calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.bodies)
}

// body decodes the n-th request body (from 0).
func (s *server) body(n int) map[string]any {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if n >= len(s.bodies) {
		s.t.Fatalf("request %d was never made (%d made)", n+1, len(s.bodies))
	}
	var m map[string]any
	if err := json.Unmarshal(s.bodies[n], &m); err != nil {
		s.t.Fatalf("request %d: body is not JSON: %v\n%s", n+1, err, s.bodies[n])
	}
	return m
}

func (s *server) header(n int) http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.headers[n]
}

type answer struct {
	content  string // sent as null when empty
	refusal  string // sent as null when empty
	finish   string // default "stop"
	model    string // default "gpt-4o-mini-2024-07-18"
	id       string // x-request-id; default "req_" + a counter
	in, out  int64
	status   int
	noHeader bool
}

var answers struct {
	sync.Mutex
	n int
}

// reply answers with one chat.completion object.
func reply(a answer) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		answers.Lock()
		answers.n++
		n := answers.n
		answers.Unlock()
		nullable := func(s string) any {
			if s == "" {
				return nil
			}
			return s
		}
		if a.finish == "" {
			a.finish = "stop"
		}
		if a.model == "" {
			a.model = "gpt-4o-mini-2024-07-18"
		}
		if a.id == "" {
			a.id = fmt.Sprintf("req_%d", n)
		}
		if a.in == 0 && a.out == 0 {
			a.in, a.out = 812, 96
		}
		body, _ := json.Marshal(map[string]any{
			"id":      fmt.Sprintf("chatcmpl-%d", n),
			"object":  "chat.completion",
			"created": 1767225600,
			"model":   a.model,
			"choices": []any{map[string]any{
				"index":         0,
				"message":       map[string]any{"role": "assistant", "content": nullable(a.content), "refusal": nullable(a.refusal), "annotations": []any{}},
				"logprobs":      nil,
				"finish_reason": a.finish,
			}},
			"usage": map[string]any{
				"prompt_tokens": a.in, "completion_tokens": a.out, "total_tokens": a.in + a.out,
				"prompt_tokens_details":     map[string]any{"cached_tokens": 0, "audio_tokens": 0},
				"completion_tokens_details": map[string]any{"reasoning_tokens": 0, "audio_tokens": 0, "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0},
			},
			"service_tier":       "default",
			"system_fingerprint": "fp_test",
		})
		w.Header().Set("Content-Type", "application/json")
		if !a.noHeader {
			w.Header().Set("x-request-id", a.id)
		}
		w.Header().Set("openai-processing-ms", "321")
		status := a.status
		if status == 0 {
			status = http.StatusOK
		}
		w.WriteHeader(status)
		_, _ = w.Write(body)
	}
}

// apiError answers with OpenAI's error object.
func apiError(status int, typ, code, message string, header map[string]string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		for k, v := range header {
			w.Header().Set(k, v)
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("x-request-id", fmt.Sprintf("req_err_%d", status))
		w.WriteHeader(status)
		var c any
		if code != "" {
			c = code
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": message, "type": typ, "param": nil, "code": c}})
	}
}

// raw answers with status, header and body exactly as given: the shapes
// misbehaving servers write.
func raw(status int, header map[string]string, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		for k, v := range header {
			w.Header().Set(k, v)
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

// hang answers only when the client gives up or the test ends.
func hang(done <-chan struct{}) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-done:
		}
	}
}

func newModel(t *testing.T, s *server, opts ...openai.Option) *openai.Model {
	t.Helper()
	m, err := openai.New("gpt-4o-mini", append([]openai.Option{openai.WithBaseURL(s.url()), openai.WithAPIKey(testKey)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// The trip catalog of the example.

type FlightSearch struct {
	Origin      string `json:"origin" validate:"len=3" jsonschema_description:"IATA airport code"`
	Destination string `json:"destination" validate:"len=3" jsonschema_description:"IATA airport code"`
	Date        string `json:"date" jsonschema_description:"departure date, YYYY-MM-DD"`
}

type Booking struct {
	Flight   string          `json:"flight"`
	Seats    int             `json:"seats" validate:"min=1,max=9"`
	Fare     decimal.Decimal `json:"fare"`
	Currency string          `json:"currency" validate:"len=3"`
}

type RoomHold struct {
	Hotel    string          `json:"hotel"`
	Nights   int             `json:"nights" validate:"min=1,max=30"`
	Total    decimal.Decimal `json:"total"`
	Currency string          `json:"currency" validate:"len=3"`
}

type Itinerary struct {
	To    string `json:"to" validate:"email"`
	Trip  string `json:"trip"`
	Notes string `json:"notes,omitempty"`
}

func tripExecutor(t *testing.T) *planexec.Run {
	t.Helper()
	ex, err := planexec.NewExecutor(planexec.Config{
		Tools: []*planexec.Tool{
			planexec.MustTool("search_flights", "Find flights between two airports on a date.",
				func(ctx context.Context, s FlightSearch) ([]string, error) { return []string{"BA117"}, nil }),
			planexec.MustTool("hold_room", "Hold a hotel room; the hold lapses unless confirmed.",
				func(ctx context.Context, h RoomHold) (string, error) { return "HOLD-1", nil }, planexec.KeyArguments("hotel")),
			planexec.MustTool("book_flight", "Book and pay for seats on a flight. Cannot be undone.",
				func(ctx context.Context, b Booking) (string, error) { return "PNR-" + b.Flight, nil },
				planexec.Irreversible(), planexec.KeyArguments("flight", "seats")),
			planexec.MustTool("send_itinerary", "Email the itinerary.",
				func(ctx context.Context, it Itinerary) (string, error) { return "sent", nil }),
		},
		Gate: planexec.ApprovalGateFunc(func(ctx context.Context, req planexec.ApprovalRequest) (planexec.Decision, error) {
			return req.Deny("nobody", "test"), nil
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	run, err := ex.Run(planexec.Delegation{Agent: "courier"})
	if err != nil {
		t.Fatal(err)
	}
	return run
}

func planner(t *testing.T, m llm.Model) *planexec.AgentPlanner {
	t.Helper()
	p, err := planexec.NewAgentPlanner(m, planexec.Agent{Name: "planner"})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

const (
	goodPlan = `{"goal":"get them to New York","steps":[` +
		`{"id":"s1","tool":"search_flights","arguments":{"origin":"LHR","destination":"JFK","date":"2026-12-14"},"depends_on":null,"intent":"find a fare"},` +
		`{"id":"s2","tool":"book_flight","arguments":{"flight":"BA117","seats":1,"fare":412.50,"currency":"GBP"},"depends_on":["s1"],"intent":null}]}`
	unknownToolPlan = `{"goal":"get them to New York","steps":[` +
		`{"id":"s1","tool":"teleport","arguments":{"to":"JFK"},"depends_on":null,"intent":null}]}`
)

func kinds(evs []planexec.Event) []planexec.EventKind {
	out := make([]planexec.EventKind, len(evs))
	for i, e := range evs {
		out[i] = e.Kind
	}
	return out
}

func messages(t *testing.T, body map[string]any) [][2]string {
	t.Helper()
	raw, _ := body["messages"].([]any)
	out := make([][2]string, len(raw))
	for i, m := range raw {
		mm, _ := m.(map[string]any)
		role, _ := mm["role"].(string)
		content, ok := mm["content"].(string)
		if !ok {
			t.Fatalf("message %d: content is %T, want a string", i, mm["content"])
		}
		out[i] = [2]string{role, content}
	}
	return out
}

func TestRequestCarriesTheStrictPlanSchemaAndTheKey(t *testing.T) {
	s := newServer(t, reply(answer{content: goodPlan}))
	ex := tripExecutor(t)
	if _, err := ex.Plan(context.Background(), planner(t, newModel(t, s)), "get them to New York"); err != nil {
		t.Fatal(err)
	}
	if got := s.header(0).Get("Authorization"); got != "Bearer "+testKey {
		t.Errorf("Authorization = %q", got)
	}
	if got := s.header(0).Get("Content-Type"); got != "application/json" {
		t.Errorf("Content-Type = %q", got)
	}
	body := s.body(0)
	if body["model"] != "gpt-4o-mini" {
		t.Errorf("model = %v", body["model"])
	}
	rf, _ := body["response_format"].(map[string]any)
	js, _ := rf["json_schema"].(map[string]any)
	if rf["type"] != "json_schema" || js["name"] != "plan" || js["strict"] != true {
		t.Fatalf("response_format = %v", rf)
	}
	var want any
	if err := json.Unmarshal(planexec.PlanSchema(ex.Catalog()), &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(js["schema"], want) {
		t.Errorf("schema sent:\n%v\nwant PlanSchema(catalog):\n%v", js["schema"], want)
	}
	msgs := messages(t, body)
	if len(msgs) != 2 || msgs[0][0] != "system" || msgs[1][0] != "user" ||
		!strings.Contains(msgs[0][1], "You are a planner") || !strings.Contains(msgs[1][1], "Task: get them to New York") ||
		!strings.Contains(msgs[1][1], `"book_flight"`) {
		t.Errorf("messages = %q", msgs)
	}
	for _, k := range []string{"max_tokens", "max_completion_tokens", "tools", "n"} {
		if _, ok := body[k]; ok {
			t.Errorf("body sets %q: %v", k, body[k])
		}
	}
}

func TestAGoodPlanComesBackTypedWithUsageModelAndRequestID(t *testing.T) {
	s := newServer(t, reply(answer{content: goodPlan, id: "req_abc123", model: "gpt-4o-mini-2024-07-18", in: 1234, out: 210}))
	ex := tripExecutor(t)
	plan, err := ex.Plan(context.Background(), planner(t, newModel(t, s)), "get them to New York")
	if err != nil {
		t.Fatal(err)
	}
	if plan.Goal != "get them to New York" || len(plan.Steps) != 2 || plan.Steps[1].Tool != "book_flight" ||
		!reflect.DeepEqual(plan.Steps[1].DependsOn, []string{"s1"}) || plan.Revision != 1 {
		t.Errorf("plan = %+v", plan)
	}
	want := llm.Usage{InputTokens: 1234, OutputTokens: 210, Calls: 1}
	if got := ex.Usage(); got != want {
		t.Errorf("Usage() = %+v, want %+v", got, want)
	}
	evs := ex.Events()
	if len(evs) != 1 || evs[0].Kind != planexec.EventPlanned {
		t.Fatalf("events = %v", kinds(evs))
	}
	e := evs[0]
	if e.Usage == nil || *e.Usage != want || e.Model != "gpt-4o-mini-2024-07-18" || e.RequestID != "req_abc123" {
		t.Errorf("PLANNED usage %+v, model %q, request %q", e.Usage, e.Model, e.RequestID)
	}
}

func TestARefusedPlanIsSentBackAsFeedbackAndTheSecondValidates(t *testing.T) {
	s := newServer(t, reply(answer{content: unknownToolPlan, in: 800, out: 40}), reply(answer{content: goodPlan, in: 900, out: 100}))
	ex := tripExecutor(t)
	plan, err := ex.Plan(context.Background(), planner(t, newModel(t, s)), "get them to New York")
	if err != nil {
		t.Fatal(err)
	}
	if plan.Revision != 2 || len(plan.Steps) != 2 {
		t.Errorf("plan = %+v", plan)
	}
	evs := ex.Events()
	if got := kinds(evs); !reflect.DeepEqual(got, []planexec.EventKind{planexec.EventPlanRefused, planexec.EventReplanned, planexec.EventPlanned}) {
		t.Fatalf("events = %v", got)
	}
	if evs[0].Reason != planexec.ReasonUnknownTool {
		t.Errorf("refused for %q", evs[0].Reason)
	}
	if got := ex.Usage(); got != (llm.Usage{InputTokens: 1700, OutputTokens: 140, Calls: 2}) {
		t.Errorf("Usage() = %+v", got)
	}
	first, second := messages(t, s.body(0)), messages(t, s.body(1))
	if len(second) != 4 {
		t.Fatalf("second request has %d messages: %q", len(second), second)
	}
	roles := []string{second[0][0], second[1][0], second[2][0], second[3][0]}
	if !reflect.DeepEqual(roles, []string{"system", "user", "assistant", "user"}) {
		t.Errorf("roles = %v", roles)
	}
	if second[0] != first[0] || second[1] != first[1] {
		t.Error("the system prompt and the task changed between attempts")
	}
	if second[2][1] != unknownToolPlan {
		t.Errorf("assistant turn = %q, want the refused payload", second[2][1])
	}
	fb := second[3][1]
	if !strings.Contains(fb, "refused (unknown_tool)") || !strings.Contains(fb, `"teleport"`) || !strings.Contains(fb, "Write the whole plan again") {
		t.Errorf("feedback turn = %q", fb)
	}
}

func TestAModelRefusalIsAnEmptyPayloadAndIsReplanned(t *testing.T) {
	s := newServer(t, reply(answer{refusal: "I can't help with that."}), reply(answer{content: goodPlan}))
	m := newModel(t, s)
	resp, err := m.Generate(context.Background(), &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}})
	if err != nil || resp.Refusal != "I can't help with that." || resp.Content != "" || resp.FinishReason != "stop" {
		t.Fatalf("Generate = %+v, %v", resp, err)
	}

	s = newServer(t, reply(answer{refusal: "I can't help with that."}), reply(answer{content: goodPlan}))
	ex := tripExecutor(t)
	plan, err := ex.Plan(context.Background(), planner(t, newModel(t, s)), "get them to New York")
	if err != nil {
		t.Fatal(err)
	}
	evs := ex.Events()
	if plan.Revision != 2 || evs[0].Kind != planexec.EventPlanRefused || evs[0].Reason != planexec.ReasonEmpty {
		t.Errorf("revision %d, events %v, first reason %q", plan.Revision, kinds(evs), evs[0].Reason)
	}
}

func TestMalformedContentIsRefusedAndReplanned(t *testing.T) {
	s := newServer(t, reply(answer{content: `{"goal":"get them to New York","steps":[{"id":"s1",`}), reply(answer{content: goodPlan}))
	ex := tripExecutor(t)
	plan, err := ex.Plan(context.Background(), planner(t, newModel(t, s)), "get them to New York")
	if err != nil {
		t.Fatal(err)
	}
	evs := ex.Events()
	if plan.Revision != 2 || evs[0].Reason != planexec.ReasonMalformed {
		t.Errorf("revision %d, events %v, first reason %q", plan.Revision, kinds(evs), evs[0].Reason)
	}
}

func TestATruncatedAnswerIsAnError(t *testing.T) {
	cut := goodPlan[:60]
	s := newServer(t, reply(answer{content: cut, finish: "length", id: "req_cut", in: 700, out: 64}))
	m := newModel(t, s)
	resp, err := m.Generate(context.Background(), &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "plan"}}, MaxTokens: 64})
	if !errors.Is(err, llm.ErrTruncated) {
		t.Fatalf("err = %v, want ErrTruncated", err)
	}
	var pe *llm.ProviderError
	if !errors.As(err, &pe) || pe.Retryable || pe.Provider != "openai" || pe.RequestID != "req_cut" {
		t.Errorf("ProviderError = %+v", pe)
	}
	if resp == nil || resp.Content != cut || resp.FinishReason != "length" || resp.Usage.OutputTokens != 64 {
		t.Errorf("response = %+v", resp)
	}
	if got := s.body(0)["max_completion_tokens"]; got != 64.0 {
		t.Errorf("max_completion_tokens = %v", got)
	}

	ex := tripExecutor(t)
	if _, err := ex.Plan(context.Background(), planner(t, m), "get them to New York"); !errors.Is(err, llm.ErrTruncated) || !errors.As(err, &pe) {
		t.Errorf("Planned err = %v, want a ProviderError wrapping ErrTruncated", err)
	}
}

func TestARateLimitIsRetriedAfterRetryAfter(t *testing.T) {
	s := newServer(t,
		apiError(429, "requests", "rate_limit_exceeded", "Rate limit reached for gpt-4o-mini.", map[string]string{"Retry-After": "1"}),
		reply(answer{content: goodPlan}))
	start := time.Now()
	plan, err := tripExecutor(t).Plan(context.Background(), planner(t, newModel(t, s)), "get them to New York")
	elapsed := time.Since(start)
	if err != nil || len(plan.Steps) != 2 {
		t.Fatalf("Planned = %+v, %v", plan, err)
	}
	if n := s.calls(); n != 2 {
		t.Errorf("%d requests, want 2", n)
	}
	if elapsed < 900*time.Millisecond || elapsed > 20*time.Second {
		t.Errorf("took %s; Retry-After asked for 1s", elapsed)
	}
	if got := s.header(1).Get("X-Stainless-Retry-Count"); got != "1" {
		t.Errorf("retry count header = %q", got)
	}
}

// fastRetries keeps backoff short so retry tests do not wait seconds.
var fastRetries = openai.WithRequestOptions(option.WithMaxRetryDelay(20 * time.Millisecond))

func TestServerErrorsAreRetried(t *testing.T) {
	fail := apiError(500, "server_error", "", "The server had an error while processing your request.", nil)
	s := newServer(t, fail, fail, reply(answer{content: goodPlan}))
	plan, err := tripExecutor(t).Plan(context.Background(), planner(t, newModel(t, s, fastRetries)), "get them to New York")
	if err != nil || len(plan.Steps) != 2 {
		t.Fatalf("Planned = %+v, %v", plan, err)
	}
	if n := s.calls(); n != 3 {
		t.Errorf("%d requests, want 3", n)
	}
}

func TestAPersistentServerErrorIsARetryableProviderError(t *testing.T) {
	s := newServer(t, apiError(500, "server_error", "", "The server had an error while processing your request.", nil))
	_, err := newModel(t, s, fastRetries).Generate(context.Background(), &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}})
	var pe *llm.ProviderError
	if !errors.As(err, &pe) || pe.Status != 500 || !pe.Retryable || pe.Provider != "openai" || pe.RequestID != "req_err_500" {
		t.Fatalf("err = %v (%+v)", err, pe)
	}
	var ae *openai.APIError
	if !errors.As(err, &ae) || ae.Type != "server_error" || !strings.Contains(ae.Message, "server had an error") {
		t.Errorf("APIError = %+v", ae)
	}
	if n := s.calls(); n != 3 {
		t.Errorf("%d requests, want 1 + 2 retries", n)
	}
	if got := err.Error(); !strings.Contains(got, "status 500") || !strings.Contains(got, "retryable") {
		t.Errorf("message = %q", got)
	}
}

func TestClientErrorsAreNotRetried(t *testing.T) {
	s := newServer(t, apiError(400, "invalid_request_error", "invalid_json_schema",
		"Invalid schema for response_format 'plan': In context=(), 'additionalProperties' is required to be supplied and to be false.", nil))
	_, err := newModel(t, s, fastRetries).Generate(context.Background(), &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}})
	var pe *llm.ProviderError
	var ae *openai.APIError
	if !errors.As(err, &pe) || pe.Status != 400 || pe.Retryable || !errors.As(err, &ae) || ae.Code != "invalid_json_schema" {
		t.Fatalf("err = %v", err)
	}
	if !strings.Contains(err.Error(), "additionalProperties") {
		t.Errorf("the API's message is lost: %q", err.Error())
	}
	if n := s.calls(); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
}

func TestAHangingServerTimesOutPromptly(t *testing.T) {
	done := make(chan struct{})
	s := newServer(t, hang(done))
	t.Cleanup(func() { close(done) }) // runs before the server closes
	start := time.Now()
	_, err := newModel(t, s, openai.WithTimeout(200*time.Millisecond)).Generate(context.Background(),
		&llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}})
	elapsed := time.Since(start)
	var pe *llm.ProviderError
	if !errors.As(err, &pe) || !pe.Retryable || pe.Status != 0 || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want a retryable ProviderError wrapping DeadlineExceeded", err)
	}
	if elapsed > 5*time.Second {
		t.Errorf("returned after %s", elapsed)
	}
}

func TestCancellingTheContextStopsTheCall(t *testing.T) {
	done := make(chan struct{})
	s := newServer(t, hang(done))
	t.Cleanup(func() { close(done) })
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	_, err := tripExecutor(t).Plan(ctx, planner(t, newModel(t, s)), "get them to New York")
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	var pe *llm.ProviderError
	if errors.As(err, &pe) {
		t.Errorf("a caller's cancellation is reported as a provider failure: %v", err)
	}
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Errorf("returned after %s", elapsed)
	}
	if _, err := newModel(t, s).Generate(ctx, &llm.Request{}); !errors.Is(err, context.Canceled) {
		t.Errorf("an already cancelled context: %v", err)
	}
}

func TestAnUnreachableServerIsRetryable(t *testing.T) {
	s := newServer(t, reply(answer{content: goodPlan}))
	base := s.url()
	s.srv.Close()
	m, err := openai.New("gpt-4o-mini", openai.WithBaseURL(base), openai.WithAPIKey(testKey), openai.WithMaxRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Generate(context.Background(), &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}})
	var pe *llm.ProviderError
	if !errors.As(err, &pe) || !pe.Retryable || pe.Status != 0 {
		t.Fatalf("err = %v", err)
	}
}

// The key never appears in an error: not in its message, not in any error it
// wraps, not when printed with any verb.
func TestTheKeyNeverAppearsInAnError(t *testing.T) {
	echo := apiError(401, "invalid_request_error", "invalid_api_key",
		"Incorrect API key provided: "+testKey+". You can find your API key at https://platform.openai.com/account/api-keys.", nil)
	masked := apiError(401, "invalid_request_error", "invalid_api_key",
		"Incorrect API key provided: sk-test-********************b6e8.", nil)
	for name, h := range map[string]http.HandlerFunc{"echoed": echo, "masked": masked,
		"429": apiError(429, "requests", "rate_limit_exceeded", "Rate limit reached for key "+testKey, nil),
		"500": apiError(500, "server_error", "", "boom "+testKey, nil),
	} {
		s := newServer(t, h)
		_, err := newModel(t, s, fastRetries).Generate(context.Background(), &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}})
		if err == nil {
			t.Fatalf("%s: no error", name)
		}
		if got := s.header(0).Get("Authorization"); got != "Bearer "+testKey {
			t.Errorf("%s: Authorization = %q", name, got)
		}
		assertNoKey(t, name, err)
		var pe *llm.ProviderError
		if name == "echoed" && (!errors.As(err, &pe) || pe.Status != 401 || pe.Retryable) {
			t.Errorf("401: %+v", pe)
		}
	}
	// A transport failure and a timeout.
	s := newServer(t, reply(answer{content: goodPlan}))
	base := s.url()
	s.srv.Close()
	m, _ := openai.New("gpt-4o-mini", openai.WithBaseURL(base), openai.WithAPIKey(testKey), openai.WithMaxRetries(0))
	_, err := m.Generate(context.Background(), &llm.Request{})
	assertNoKey(t, "unreachable", err)
	done := make(chan struct{})
	s = newServer(t, hang(done))
	t.Cleanup(func() { close(done) })
	_, err = newModel(t, s, openai.WithTimeout(50*time.Millisecond)).Generate(context.Background(), &llm.Request{})
	assertNoKey(t, "timeout", err)
	for _, verb := range []string{"%v", "%+v", "%#v"} {
		if text := fmt.Sprintf(verb, m); strings.Contains(text, testKey[len("sk-"):]) {
			t.Errorf("the key appears in the model printed with %s", verb)
		}
	}
}

func assertNoKey(t *testing.T, name string, err error) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: no error", name)
	}
	secret := testKey[len("sk-"):] // the key with or without its prefix
	for e := err; e != nil; e = errors.Unwrap(e) {
		for _, text := range []string{e.Error(), fmt.Sprintf("%v", e), fmt.Sprintf("%+v", e), fmt.Sprintf("%#v", e)} {
			if strings.Contains(text, secret) {
				t.Errorf("%s: the key appears in %T: %s", name, e, text)
			}
		}
	}
	var pe *llm.ProviderError
	if errors.As(err, &pe) {
		if dump, _ := json.Marshal(pe); strings.Contains(string(dump), secret) {
			t.Errorf("%s: the key appears in the marshalled error", name)
		}
	}
}

func TestJSONObjectModePutsTheSchemaInThePrompt(t *testing.T) {
	s := newServer(t, reply(answer{content: goodPlan}))
	ex := tripExecutor(t)
	plan, err := ex.Plan(context.Background(), planner(t, newModel(t, s, openai.WithMode(openai.ModeJSONObject))), "get them to New York")
	if err != nil || len(plan.Steps) != 2 {
		t.Fatalf("Planned = %+v, %v", plan, err)
	}
	body := s.body(0)
	if rf, _ := body["response_format"].(map[string]any); !reflect.DeepEqual(rf, map[string]any{"type": "json_object"}) {
		t.Errorf("response_format = %v", body["response_format"])
	}
	system := messages(t, body)[0]
	if system[0] != "system" || !strings.Contains(system[1], "You are a planner") ||
		!strings.Contains(system[1], "JSON Schema") || !strings.Contains(system[1], string(planexec.PlanSchema(ex.Catalog()))) {
		t.Errorf("system message = %q", system[1])
	}
}

func TestPromptModeSendsNoResponseFormat(t *testing.T) {
	fenced := "```json\n" + goodPlan + "\n```"
	s := newServer(t, reply(answer{content: fenced}))
	ex := tripExecutor(t)
	plan, err := ex.Plan(context.Background(), planner(t, newModel(t, s, openai.WithMode(openai.ModePrompt))), "get them to New York")
	if err != nil || len(plan.Steps) != 2 {
		t.Fatalf("Planned = %+v, %v", plan, err)
	}
	body := s.body(0)
	if _, ok := body["response_format"]; ok {
		t.Errorf("response_format = %v", body["response_format"])
	}
	if system := messages(t, body)[0]; !strings.Contains(system[1], string(planexec.PlanSchema(ex.Catalog()))) {
		t.Errorf("system message = %q", system[1])
	}
}

func TestMaxTokensField(t *testing.T) {
	s := newServer(t, reply(answer{content: "{}"}))
	req := &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}}
	if _, err := newModel(t, s, openai.WithMaxTokens(900)).Generate(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if _, err := newModel(t, s, openai.WithLegacyMaxTokens()).Generate(context.Background(), &llm.Request{MaxTokens: 300}); err != nil {
		t.Fatal(err)
	}
	if b := s.body(0); b["max_completion_tokens"] != 900.0 || b["max_tokens"] != nil {
		t.Errorf("first body = %v", b)
	}
	if b := s.body(1); b["max_tokens"] != 300.0 || b["max_completion_tokens"] != nil {
		t.Errorf("second body = %v", b)
	}
	if msgs := messages(t, s.body(1)); len(msgs) != 0 {
		t.Errorf("an empty request sent %q", msgs)
	}
}

func TestTheEnvironmentGivesKeyAndBaseURL(t *testing.T) {
	s := newServer(t, reply(answer{content: "{}", noHeader: true}))
	t.Setenv("OPENAI_API_KEY", "sk-from-env-0000")
	t.Setenv("OPENAI_BASE_URL", s.url())
	m, err := openai.New("llama3.1")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := m.Generate(context.Background(), &llm.Request{System: "be brief", Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.header(0).Get("Authorization"); got != "Bearer sk-from-env-0000" {
		t.Errorf("Authorization = %q", got)
	}
	if !strings.HasPrefix(resp.RequestID, "chatcmpl-") {
		t.Errorf("without x-request-id, RequestID = %q, want the completion id", resp.RequestID)
	}
	if got := messages(t, s.body(0)); !reflect.DeepEqual(got, [][2]string{{"system", "be brief"}, {"user", "hi"}}) {
		t.Errorf("messages = %q", got)
	}

	// WithAPIKey("") overrides the environment: a local server needs no key.
	m, _ = openai.New("llama3.1", openai.WithAPIKey(""))
	if _, err := m.Generate(context.Background(), &llm.Request{}); err != nil {
		t.Fatal(err)
	}
	if got := s.header(1).Get("Authorization"); got != "" {
		t.Errorf("Authorization = %q, want none", got)
	}
}

func TestNewRefusesBadOptions(t *testing.T) {
	for name, f := range map[string]func() (*openai.Model, error){
		"no model":   func() (*openai.Model, error) { return openai.New(" ") },
		"timeout":    func() (*openai.Model, error) { return openai.New("m", openai.WithTimeout(-time.Second)) },
		"retries":    func() (*openai.Model, error) { return openai.New("m", openai.WithMaxRetries(-1)) },
		"mode":       func() (*openai.Model, error) { return openai.New("m", openai.WithMode(openai.Mode(7))) },
		"max tokens": func() (*openai.Model, error) { return openai.New("m", openai.WithMaxTokens(-1)) },
	} {
		if m, err := f(); err == nil || m != nil {
			t.Errorf("%s: New = %v, %v", name, m, err)
		}
	}
	s := newServer(t, reply(answer{content: "{}"}))
	if _, err := newModel(t, s).Generate(context.Background(), &llm.Request{Messages: []llm.Message{{Role: "tool", Content: "x"}}}); err == nil {
		t.Error("an unknown role was sent")
	}
	if s.calls() != 0 {
		t.Error("a bad request reached the server")
	}
}

func TestAContentFilterIsARefusal(t *testing.T) {
	s := newServer(t, reply(answer{content: `{"goal":"half`, finish: "content_filter", id: "req_cf"}))
	resp, err := newModel(t, s).Generate(context.Background(), &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "plan"}}})
	if err != nil {
		t.Fatalf("Generate: %v, want no error", err)
	}
	if resp.Content != "" || resp.Refusal != "content filter" || resp.FinishReason != "content_filter" ||
		resp.RequestID != "req_cf" || resp.Usage.Calls != 1 {
		t.Errorf("response = %+v, want an empty refusal", resp)
	}
}

// A plain-HTTP server behind an https URL is a misconfiguration, not a
// dropped connection: trying again cannot help.
func TestAPlainHTTPServerBehindHTTPSIsNotRetryable(t *testing.T) {
	s := newServer(t, reply(answer{content: goodPlan}))
	base := strings.Replace(s.url(), "http://", "https://", 1)
	m, err := openai.New("gpt-4o-mini", openai.WithBaseURL(base), openai.WithAPIKey(testKey), openai.WithMaxRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = m.Generate(context.Background(), &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}})
	var pe *llm.ProviderError
	if !errors.As(err, &pe) || pe.Retryable || pe.Status != 0 {
		t.Fatalf("err = %v (%+v), want a ProviderError that is not retryable", err, pe)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("returned after %s", d)
	}
}

func TestXShouldRetryIsHonoured(t *testing.T) {
	for name, tc := range map[string]struct {
		h    http.HandlerFunc
		want bool
	}{
		"400 true":  {apiError(400, "invalid_request_error", "", "try again", map[string]string{"x-should-retry": "true"}), true},
		"503 false": {apiError(503, "server_error", "", "do not", map[string]string{"x-should-retry": "false"}), false},
		"503":       {apiError(503, "server_error", "", "busy", nil), true},
	} {
		s := newServer(t, tc.h)
		_, err := newModel(t, s, openai.WithMaxRetries(0)).Generate(context.Background(), &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}})
		var pe *llm.ProviderError
		if !errors.As(err, &pe) || pe.Retryable != tc.want {
			t.Errorf("%s: err = %v, want Retryable %v", name, err, tc.want)
		}
	}
}

// llm.ProviderError is tested here, with the adapter that makes most of them.
func TestAProviderErrorWithoutAnErrDoesNotPanic(t *testing.T) {
	pe := &llm.ProviderError{Provider: "openai", Status: 503, RequestID: "req_1", Retryable: true}
	if got, want := pe.Error(), "llm: openai: status 503 (request req_1), retryable"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if pe.Unwrap() != nil {
		t.Error("Unwrap() != nil")
	}
}

func TestATemperatureGoesOverTheWireOnlyWhenSet(t *testing.T) {
	s := newServer(t, reply(answer{content: goodPlan, id: "req_1", in: 10, out: 10}), reply(answer{content: goodPlan, id: "req_2", in: 10, out: 10}))
	m := newModel(t, s)
	hot := 0.25
	for _, temp := range []*float64{&hot, nil} {
		if _, err := m.Generate(context.Background(), &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "plan"}}, Temperature: temp}); err != nil {
			t.Fatal(err)
		}
	}
	if got := s.body(0)["temperature"]; got != 0.25 {
		t.Errorf("temperature = %v, want 0.25", got)
	}
	if _, sent := s.body(1)["temperature"]; sent {
		t.Errorf("a temperature went over the wire unasked: %v", s.body(1)["temperature"])
	}
}
