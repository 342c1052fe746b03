package anthropic

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/planexec/planexec/llm"
	"github.com/planexec/planexec/llm/internal/provider"
)

// Provider is the name this adapter gives on every [llm.ProviderError].
const Provider = "anthropic"

// Defaults, where no option says otherwise.
const (
	DefaultTimeout    = 60 * time.Second
	DefaultMaxRetries = 2
	DefaultMaxTokens  = 4096
	// DefaultMaxResponseBytes bounds the body of one answer, counted after
	// decompression: 8 MiB. A plan is at most 1 MiB by default.
	DefaultMaxResponseBytes = provider.DefaultMaxBody
)

// emptyTurn stands in for a turn with no text: the Messages API refuses an
// empty text block, and a planner sends back an empty answer it refused.
const emptyTurn = "(no answer)"

// Model is an [llm.Model] over the Anthropic Messages API. It is safe for
// concurrent use.
type Model struct {
	name       string
	client     sdk.Client
	redact     *provider.Redactor // holds the key, in a closure: printing a Model never shows it
	timeout    time.Duration
	maxTokens  int64
	strict     bool
	structured bool
}

type config struct {
	apiKey     string
	keySet     bool
	baseURL    string
	httpClient *http.Client
	timeout    time.Duration
	maxRetries int
	maxTokens  int
	strict     bool
	structured bool
	maxBody    int64
}

// Option configures a [Model].
type Option func(*config)

// WithAPIKey sets the API key. Without it the key is read from
// ANTHROPIC_API_KEY; when that is unset too, the SDK's own credential chain
// applies (ANTHROPIC_AUTH_TOKEN, a profile, workload identity federation).
// The key is sent in the x-api-key header and never appears in an error.
func WithAPIKey(key string) Option {
	return func(c *config) { c.apiKey, c.keySet = key, true }
}

// WithBaseURL sends requests to base instead of https://api.anthropic.com
// (or ANTHROPIC_BASE_URL): a proxy, a gateway, a test server.
func WithBaseURL(base string) Option {
	return func(c *config) { c.baseURL = base }
}

// WithHTTPClient sends requests through client. The model uses a copy of
// client that refuses to follow a redirect to another origin (scheme, host
// and port), so the key in x-api-key never reaches a host it was not meant
// for; client itself is not changed.
func WithHTTPClient(client *http.Client) Option {
	return func(c *config) { c.httpClient = client }
}

// WithTimeout bounds one Generate call, retries and the waits between them
// included (default [DefaultTimeout]), and each attempt within it. A call
// that runs out of time fails with a retryable *llm.ProviderError.
//
// Zero or less sets no bound of this package's own: the whole call is bounded
// only by the caller's context, but each attempt still gets the SDK's own
// non-streaming timeout (ten minutes), and the SDK refuses, before sending
// anything, a request whose max_tokens it expects to take longer than that
// (about 21,000 tokens and up, or over the model's non-streaming limit).
func WithTimeout(d time.Duration) Option {
	return func(c *config) { c.timeout = d }
}

// WithMaxRetries sets how many times a failed call is tried again (default
// [DefaultMaxRetries]): on 408, 409, 429, 5xx (529 overloaded included),
// dropped connections and per-attempt timeouts. The wait between tries
// honours the server's retry-after-ms and retry-after headers, and otherwise
// backs off exponentially from half a second, with jitter, up to eight.
func WithMaxRetries(n int) Option {
	return func(c *config) { c.maxRetries = n }
}

// WithMaxTokens sets max_tokens, which the Messages API requires, for
// requests that do not set llm.Request.MaxTokens (default
// [DefaultMaxTokens]). An answer cut off by it is an error wrapping
// [llm.ErrTruncated].
func WithMaxTokens(n int) Option {
	return func(c *config) { c.maxTokens = n }
}

// WithStrictSchema passes llm.OutputSchema.Strict on to the API ("strict" on
// the output tool, or on the structured output format), asking it to
// guarantee the schema. It is off by default: strict mode accepts only part
// of JSON Schema and not every model supports it, so a request the API would
// refuse is not sent. The executor validates every plan either way.
func WithStrictSchema() Option {
	return func(c *config) { c.strict = true }
}

// WithStructuredOutput asks for llm.Request.Output through the API's native
// structured output (output_config.format of type json_schema) instead of
// the default forced tool call; the answer is then the text of the reply.
// Use it with models that support structured outputs.
func WithStructuredOutput() Option {
	return func(c *config) { c.structured = true }
}

// WithMaxResponseBytes bounds the body of one answer, counted after any gzip
// decoding, error answers included (default [DefaultMaxResponseBytes], 8
// MiB; it must be positive). A longer answer is not read past the bound:
// Generate returns a *llm.ProviderError, not retryable, wrapping
// [llm.ErrResponseTooLarge].
func WithMaxResponseBytes(n int64) Option {
	return func(c *config) { c.maxBody = n }
}

// New returns a model that calls the Messages API as model (for example
// "claude-sonnet-4-5").
func New(model string, opts ...Option) (*Model, error) {
	if strings.TrimSpace(model) == "" {
		return nil, errors.New("anthropic: a model name is required")
	}
	c := config{timeout: DefaultTimeout, maxRetries: DefaultMaxRetries, maxTokens: DefaultMaxTokens, maxBody: DefaultMaxResponseBytes}
	for _, o := range opts {
		o(&c)
	}
	if c.maxRetries < 0 {
		return nil, fmt.Errorf("anthropic: max retries must not be negative, got %d", c.maxRetries)
	}
	if c.maxTokens <= 0 {
		return nil, fmt.Errorf("anthropic: max tokens must be positive, got %d", c.maxTokens)
	}
	if c.maxBody <= 0 {
		return nil, fmt.Errorf("anthropic: the response bound must be positive, got %d", c.maxBody)
	}
	if !c.keySet {
		c.apiKey = os.Getenv("ANTHROPIC_API_KEY")
	}
	sdkOpts := []option.RequestOption{option.WithMiddleware(provider.Guard(c.maxBody))}
	if c.apiKey != "" {
		// The SDK's key option sends a bearer token; the Messages API documents
		// the x-api-key header, so the key goes there and nowhere else.
		sdkOpts = append(sdkOpts,
			option.WithAPIKey(c.apiKey),
			option.WithHeaderDel("authorization"),
			option.WithHeader("x-api-key", c.apiKey))
	} else if c.keySet {
		return nil, errors.New("anthropic: WithAPIKey was given an empty key")
	}
	if c.baseURL != "" {
		u, err := url.Parse(c.baseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, errors.New("anthropic: the base URL must be an absolute http or https URL")
		}
		sdkOpts = append(sdkOpts, option.WithBaseURL(c.baseURL))
	}
	sdkOpts = append(sdkOpts, option.WithHTTPClient(sameOriginClient(c.httpClient)))
	sdkOpts = append(sdkOpts, option.WithMaxRetries(c.maxRetries))
	return &Model{
		name:       model,
		client:     sdk.NewClient(sdkOpts...),
		redact:     provider.NewRedactor(c.apiKey, keyLike, "sk-ant-[redacted]"),
		timeout:    c.timeout,
		maxTokens:  int64(c.maxTokens),
		strict:     c.strict,
		structured: c.structured,
	}, nil
}

// Name is the model this adapter asks for.
func (m *Model) Name() string { return m.name }

// Format prints the model as anthropic.Model(NAME), with any verb, whether m
// is printed itself or through a pointer: never its key or its client's
// options.
func (m Model) Format(f fmt.State, verb rune) {
	_, _ = fmt.Fprintf(f, "anthropic.Model(%s)", m.name)
}

// Generate sends req as one Messages API call. When req.Output is set, the
// answer is the input of a forced call of a tool named req.Output.Name (see
// the package documentation); otherwise it is the text of the reply.
//
// A refusal, or an answer without the output tool call, is a Response with
// empty Content (and Refusal set), not an error. An answer cut off by
// max_tokens is returned, as far as it came, together with a
// *llm.ProviderError wrapping [llm.ErrTruncated]. A failed
// call is a *llm.ProviderError; a cancelled ctx returns ctx's error.
func (m *Model) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	params, toolName, err := m.params(req)
	if err != nil {
		return nil, err
	}
	callCtx, cancel := ctx, context.CancelFunc(func() {})
	callOpts := []option.RequestOption{}
	if m.timeout > 0 {
		callCtx, cancel = context.WithTimeout(ctx, m.timeout)
		// Also the per-attempt bound, so the SDK does not derive one from max_tokens.
		callOpts = append(callOpts, option.WithRequestTimeout(m.timeout))
	}
	defer cancel()
	callCtx, ex := provider.Track(callCtx)
	var body []byte // the SDK's decoding is lenient: the body is read here
	if req.Temperature != nil {
		// The Messages API takes it; this SDK's parameters do not name it.
		callOpts = append(callOpts, option.WithJSONSet("temperature", *req.Temperature))
	}
	callOpts = append(callOpts, option.WithResponseBodyInto(&body))
	if _, err := m.client.Messages.New(callCtx, params, callOpts...); err != nil {
		return nil, m.failure(ctx, err, ex)
	}
	requestID := m.redact.Token(ex.Header.Get("request-id"))
	var msg message
	if err := provider.DecodeObject(body, &msg); err != nil {
		return nil, &llm.ProviderError{Provider: Provider, Status: ex.Status, RequestID: requestID, Err: err}
	}
	return m.response(&msg, toolName, ex.Status, requestID)
}

// message is what Generate reads of a Messages API reply. A member of the
// wrong JSON type, or a count that does not fit an int64, is a decoding
// error; a missing or null one is its zero value.
type message struct {
	Model       string    `json:"model"`
	Content     *[]*block `json:"content"`
	StopReason  string    `json:"stop_reason"`
	StopDetails *struct {
		Explanation string `json:"explanation"`
	} `json:"stop_details"`
	Usage *struct {
		InputTokens              int64 `json:"input_tokens"`
		OutputTokens             int64 `json:"output_tokens"`
		CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
		CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	} `json:"usage"`
}

// block is one content block of a reply.
type block struct {
	Type  string          `json:"type"`
	Text  string          `json:"text"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

// params maps an llm.Request onto the Messages API.
func (m *Model) params(req *llm.Request) (sdk.MessageNewParams, string, error) {
	p := sdk.MessageNewParams{Model: sdk.Model(m.name), MaxTokens: m.maxTokens}
	if err := req.ValidateImages(); err != nil {
		return p, "", err
	}
	if req.MaxTokens > 0 {
		p.MaxTokens = int64(req.MaxTokens)
	}
	if req.System != "" {
		p.System = []sdk.TextBlockParam{{Text: req.System}}
	}
	for i, msg := range req.Messages {
		text := msg.Content
		if strings.TrimSpace(text) == "" {
			text = emptyTurn
		}
		switch msg.Role {
		case llm.RoleUser:
			// Images first, as the Messages API advises, then the text.
			blocks := make([]sdk.ContentBlockParamUnion, 0, len(msg.Images)+1)
			for _, im := range msg.Images {
				if im.URL != "" {
					blocks = append(blocks, sdk.NewImageBlock(sdk.URLImageSourceParam{URL: im.URL}))
				} else {
					blocks = append(blocks, sdk.NewImageBlockBase64(im.MediaType, base64.StdEncoding.EncodeToString(im.Data)))
				}
			}
			if len(msg.Images) == 0 || strings.TrimSpace(msg.Content) != "" {
				blocks = append(blocks, sdk.NewTextBlock(text))
			}
			p.Messages = append(p.Messages, sdk.NewUserMessage(blocks...))
		case llm.RoleAssistant:
			p.Messages = append(p.Messages, sdk.NewAssistantMessage(sdk.NewTextBlock(text)))
		default:
			return p, "", fmt.Errorf("anthropic: message %d has role %q; want user or assistant", i, msg.Role)
		}
	}
	if req.Output == nil {
		return p, "", nil
	}
	raw := []byte(req.Output.Schema)
	if m.structured || (m.strict && req.Output.Strict) {
		// Constrained decoding: structured output always, a tool when strict.
		var err error
		if raw, err = constrained(raw); err != nil {
			return p, "", errors.New("anthropic: the output schema is not a JSON object")
		}
	}
	var schema map[string]json.RawMessage
	if err := json.Unmarshal(raw, &schema); err != nil || schema == nil {
		return p, "", errors.New("anthropic: the output schema is not a JSON object")
	}
	if t, ok := schema["type"]; ok && string(t) != `"object"` {
		return p, "", errors.New(`anthropic: the output schema must describe an object ("type": "object")`)
	}
	if m.structured {
		// Raw members, so numbers in the schema are sent as numbers.
		format := make(map[string]any, len(schema))
		for k, v := range schema {
			format[k] = v
		}
		p.OutputConfig = sdk.OutputConfigParam{Format: sdk.JSONOutputFormatParam{Schema: format}}
		return p, "", nil
	}
	name := toolName(req.Output.Name)
	input := sdk.ToolInputSchemaParam{ExtraFields: map[string]any{}}
	for k, v := range schema {
		switch k {
		case "type":
		case "properties":
			input.Properties = v
		case "required":
			if err := json.Unmarshal(v, &input.Required); err != nil {
				return p, "", errors.New(`anthropic: the output schema's "required" is not a list of names`)
			}
		default:
			input.ExtraFields[k] = v
		}
	}
	tool := sdk.ToolParam{Name: name, InputSchema: input}
	if req.Output.Description != "" {
		tool.Description = sdk.String(req.Output.Description)
	}
	if m.strict && req.Output.Strict {
		tool.Strict = sdk.Bool(true)
	}
	p.Tools = []sdk.ToolUnionParam{{OfTool: &tool}}
	choice := sdk.ToolChoiceParamOfTool(name)
	choice.OfTool.DisableParallelToolUse = sdk.Bool(true)
	p.ToolChoice = choice
	return p, name, nil
}

// response maps a Messages API reply onto an llm.Response.
func (m *Model) response(msg *message, toolName string, status int, requestID string) (*llm.Response, error) {
	fail := func(err error) error {
		return &llm.ProviderError{Provider: Provider, Status: status, RequestID: requestID, Err: err}
	}
	malformed := func(what string) error { return fail(fmt.Errorf("%w: %s", llm.ErrMalformedResponse, what)) }
	if msg.Content == nil {
		return nil, malformed("the reply has no content")
	}
	resp := &llm.Response{
		FinishReason: m.redact.Token(msg.StopReason),
		Model:        m.redact.Token(msg.Model),
		RequestID:    requestID,
		Usage:        llm.Usage{Calls: 1},
	}
	if u := msg.Usage; u != nil {
		if err := errors.Join(provider.TokenCount("input_tokens", u.InputTokens), provider.TokenCount("output_tokens", u.OutputTokens),
			provider.TokenCount("cache_creation_input_tokens", u.CacheCreationInputTokens),
			provider.TokenCount("cache_read_input_tokens", u.CacheReadInputTokens)); err != nil {
			return nil, fail(err)
		}
		// Each at most llm.MaxTokenCount: the sum cannot overflow.
		resp.Usage.InputTokens = u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens
		resp.Usage.OutputTokens = u.OutputTokens
	}
	if resp.Model == "" {
		resp.Model = m.name
	}
	var text strings.Builder
	var input json.RawMessage
	found := false
	for i, b := range *msg.Content {
		if b == nil {
			return nil, malformed(fmt.Sprintf("content block %d is null", i))
		}
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
		case "tool_use":
			if toolName != "" && b.Name == toolName && !found {
				input, found = b.Input, true
			}
		}
	}
	switch msg.StopReason {
	case string(sdk.StopReasonMaxTokens), string(sdk.StopReasonModelContextWindowExceeded):
		// What came back, with its cost, goes back too: it is not the whole answer.
		if toolName == "" {
			resp.Content = text.String()
		} else {
			resp.Content = string(input)
		}
		return resp, fail(fmt.Errorf("%w (stop_reason %s after %d output tokens)", llm.ErrTruncated, resp.FinishReason, resp.Usage.OutputTokens))
	}
	if msg.StopReason == string(sdk.StopReasonRefusal) {
		if msg.StopDetails != nil {
			resp.Refusal = msg.StopDetails.Explanation
		}
		if resp.Refusal == "" {
			resp.Refusal = text.String()
		}
		if resp.Refusal == "" {
			resp.Refusal = "the model declined to answer (stop_reason refusal)"
		}
		return resp, nil
	}
	if toolName == "" {
		resp.Content = text.String()
		return resp, nil
	}
	if !found {
		// Forced to call the output tool, the model did not: no answer.
		resp.Refusal = text.String()
		if resp.Refusal == "" {
			resp.Refusal = "the answer holds no " + toolName + " tool call"
		}
		return resp, nil
	}
	if !isObject(input) {
		return nil, malformed("the input of the " + toolName + " tool call is not a JSON object")
	}
	resp.Content = string(input)
	return resp, nil
}

// isObject reports whether raw is a JSON object (it is valid JSON already).
func isObject(raw json.RawMessage) bool {
	t := bytes.TrimLeft(raw, " \t\r\n")
	return len(t) > 0 && t[0] == '{'
}

// failure turns an error from the SDK into what Generate returns. ex is what
// the guard saw of the last attempt. The SDK's *anthropic.Error is not kept:
// it prints bodies, and its request carries the key.
func (m *Model) failure(ctx context.Context, err error, ex *provider.Exchange) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	requestID := m.redact.Token(ex.Header.Get("request-id"))
	switch {
	case ex.Err != nil:
		return &llm.ProviderError{Provider: Provider, Status: ex.Status, RequestID: requestID, Err: ex.Err}
	case errors.Is(err, context.DeadlineExceeded):
		return &llm.ProviderError{Provider: Provider, Retryable: true,
			Err: fmt.Errorf("no answer within %s: %w", m.timeout, context.DeadlineExceeded)}
	case ex.Status >= 400:
		// Read from the body here, in whatever shape it came ({"error":"rate
		// limited"} from a compatible server, too).
		b := provider.ParseErrorBody(ex.Body)
		wait, _ := provider.RetryAfter(ex.Header)
		return &llm.ProviderError{Provider: Provider, Status: ex.Status, RequestID: requestID,
			Retryable: ex.Retryable, RetryAfter: wait,
			Err: &APIError{Status: ex.Status, Type: m.redact.Message(b.Type), Message: m.redact.Message(b.Message), RequestID: requestID}}
	}
	retryable := provider.RetryableTransport(err)
	if text := err.Error(); m.redact.Message(text) != text {
		err = errors.New(m.redact.Message(text)) // drop an error that quotes the key
	}
	return &llm.ProviderError{Provider: Provider, Retryable: retryable, Err: err}
}

// keyLike matches Anthropic-style secret keys, masked or not.
var keyLike = regexp.MustCompile(`\bsk-ant-[A-Za-z0-9_*\-.]{3,}`)

// APIError is what the API said about a failed call: its HTTP status, the
// body's {"error":{"type","message"}} (or the message of another shape a
// compatible server writes), with any key taken out, and the request-id
// header, when it is free of the key. It never holds the request, the
// response or the key. A *llm.ProviderError from Generate wraps it.
type APIError struct {
	Status    int
	Type      string // "invalid_request_error", "rate_limit_error", "overloaded_error", ...
	Message   string
	RequestID string
}

func (e *APIError) Error() string {
	s := http.StatusText(e.Status)
	if s == "" && e.Status == 529 {
		s = "Overloaded"
	}
	s = strings.TrimSpace(fmt.Sprintf("anthropic: %d %s", e.Status, s))
	if e.Type != "" {
		s += ": " + e.Type
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// sameOriginClient returns a copy of c (http.DefaultClient when nil) that
// does not follow a redirect to another origin: Go's client drops the
// Authorization header on such a redirect, but not x-api-key.
func sameOriginClient(c *http.Client) *http.Client {
	if c == nil {
		c = http.DefaultClient
	}
	cp := *c
	next := c.CheckRedirect
	cp.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if len(via) > 0 && !sameOrigin(via[0].URL, req.URL) {
			return fmt.Errorf("anthropic: refused a redirect to another origin (%s://%s)", req.URL.Scheme, req.URL.Host)
		}
		if next != nil {
			return next(req, via)
		}
		if len(via) >= 10 {
			return errors.New("anthropic: stopped after 10 redirects")
		}
		return nil
	}
	return &cp
}

func sameOrigin(a, b *url.URL) bool {
	return strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(a.Hostname(), b.Hostname()) &&
		port(a) == port(b)
}

func port(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	switch strings.ToLower(u.Scheme) {
	case "http":
		return "80"
	case "https":
		return "443"
	}
	return ""
}

var nameChars = regexp.MustCompile(`[^a-zA-Z0-9_-]`)

// toolName fits a name to what the API accepts for a tool:
// [a-zA-Z0-9_-]{1,64}, "plan" when empty.
func toolName(s string) string {
	s = nameChars.ReplaceAllString(s, "_")
	if len(s) > 64 {
		s = s[:64]
	}
	if s == "" {
		return "plan"
	}
	return s
}
