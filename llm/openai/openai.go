package openai

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/planexec/planexec/llm"
	"github.com/planexec/planexec/llm/internal/provider"
)

// Provider is the name this adapter gives itself in *llm.ProviderError.
const Provider = "openai"

// Defaults, where no option says otherwise.
const (
	DefaultTimeout    = 60 * time.Second
	DefaultMaxRetries = 2
	// DefaultMaxResponseBytes bounds the body of one answer, counted after
	// decompression: 8 MiB. A plan is at most 1 MiB by default; written as
	// a JSON string its escapes can make it several times that.
	DefaultMaxResponseBytes = provider.DefaultMaxBody
)

// Mode says how a Request's Output schema reaches the server.
type Mode int

const (
	// ModeJSONSchema sends the schema as response_format
	// {"type":"json_schema","json_schema":{"name","strict","schema"}}: the
	// server constrains decoding to it (Structured Outputs). The default, and
	// the right one for OpenAI and for servers that implement it (vLLM,
	// Ollama, most of OpenRouter's models).
	ModeJSONSchema Mode = iota
	// ModeJSONObject sends response_format {"type":"json_object"} (the answer
	// is some JSON object) and puts the schema in the system prompt. For
	// servers that have JSON mode but not json_schema.
	ModeJSONObject
	// ModePrompt sends no response_format at all and puts the schema in the
	// system prompt. For servers that reject response_format. An answer
	// wrapped in a Markdown code fence is unwrapped.
	ModePrompt
)

func (m Mode) String() string {
	switch m {
	case ModeJSONSchema:
		return "json_schema"
	case ModeJSONObject:
		return "json_object"
	case ModePrompt:
		return "prompt"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// Option configures a Model.
type Option func(*config)

type config struct {
	baseURL         string
	apiKey          string
	apiKeySet       bool
	httpClient      *http.Client
	timeout         time.Duration
	maxRetries      int
	mode            Mode
	maxTokens       int
	legacyMaxTokens bool
	maxBody         int64
	extra           []option.RequestOption
}

// WithBaseURL sets the endpoint, e.g. "https://api.openai.com/v1",
// "http://localhost:11434/v1" (Ollama), "http://localhost:8000/v1" (vLLM),
// "https://openrouter.ai/api/v1". Default: OPENAI_BASE_URL, else OpenAI.
func WithBaseURL(url string) Option { return func(c *config) { c.baseURL = url } }

// WithAPIKey sets the bearer key. Default: OPENAI_API_KEY. An empty key sends
// no Authorization header (a local server needs none).
func WithAPIKey(key string) Option {
	return func(c *config) { c.apiKey, c.apiKeySet = key, true }
}

// WithHTTPClient sets the HTTP client (a proxy, a custom transport, tracing).
func WithHTTPClient(h *http.Client) Option { return func(c *config) { c.httpClient = h } }

// WithTimeout bounds each Generate call, retries and their waits included.
// Default: DefaultTimeout; 0 leaves the bound to the caller's context.
func WithTimeout(d time.Duration) Option { return func(c *config) { c.timeout = d } }

// WithMaxRetries sets how many times a call is retried after a rate limit
// (429), a server error (5xx), a 408 or 409, or a dropped connection.
// Default: DefaultMaxRetries; 0 never retries.
func WithMaxRetries(n int) Option { return func(c *config) { c.maxRetries = n } }

// WithMode sets how the output schema is sent. Default: ModeJSONSchema.
func WithMode(m Mode) Option { return func(c *config) { c.mode = m } }

// WithMaxTokens bounds answers of requests whose MaxTokens is 0. Default: 0,
// the server's own limit.
func WithMaxTokens(n int) Option { return func(c *config) { c.maxTokens = n } }

// WithLegacyMaxTokens sends the bound as "max_tokens" instead of
// "max_completion_tokens", for servers that only know the older field.
// OpenAI's reasoning models refuse "max_tokens".
func WithLegacyMaxTokens() Option { return func(c *config) { c.legacyMaxTokens = true } }

// WithMaxResponseBytes bounds the body of one answer, counted after any gzip
// decoding, error answers included. A longer answer is not read past the
// bound: Generate returns a *llm.ProviderError, not retryable, wrapping
// llm.ErrResponseTooLarge. Default: DefaultMaxResponseBytes (8 MiB); it
// must be positive.
func WithMaxResponseBytes(n int64) Option { return func(c *config) { c.maxBody = n } }

// WithRequestOptions passes options to the underlying openai-go client, after
// this package's own: extra headers (OpenRouter's HTTP-Referer), an
// organization or project, a middleware.
func WithRequestOptions(opts ...option.RequestOption) Option {
	return func(c *config) { c.extra = append(c.extra, opts...) }
}

// Model is an llm.Model over an OpenAI-compatible Chat Completions endpoint.
// It is safe for concurrent use.
type Model struct {
	model           string
	client          oai.Client
	redact          *provider.Redactor // holds the key, in a closure: printing a Model never shows it
	timeout         time.Duration
	mode            Mode
	maxTokens       int
	legacyMaxTokens bool
}

var _ llm.Model = (*Model)(nil)

// New returns a model that calls the named model ("gpt-4o-mini",
// "llama3.1", "openai/gpt-4o" on OpenRouter).
func New(model string, opts ...Option) (*Model, error) {
	cfg := config{timeout: DefaultTimeout, maxRetries: DefaultMaxRetries, maxBody: DefaultMaxResponseBytes}
	for _, o := range opts {
		o(&cfg)
	}
	switch {
	case strings.TrimSpace(model) == "":
		return nil, errors.New("openai: a model name is required")
	case cfg.timeout < 0:
		return nil, fmt.Errorf("openai: negative timeout %s", cfg.timeout)
	case cfg.maxRetries < 0:
		return nil, fmt.Errorf("openai: negative retry count %d", cfg.maxRetries)
	case cfg.maxTokens < 0:
		return nil, fmt.Errorf("openai: negative max tokens %d", cfg.maxTokens)
	case cfg.mode < ModeJSONSchema || cfg.mode > ModePrompt:
		return nil, fmt.Errorf("openai: unknown mode %d", int(cfg.mode))
	case cfg.maxBody <= 0:
		return nil, fmt.Errorf("openai: the response bound must be positive, got %d", cfg.maxBody)
	}
	// The guard comes first, so it wraps every other middleware and sees the
	// body the SDK will read.
	ro := []option.RequestOption{option.WithMiddleware(provider.Guard(cfg.maxBody)), option.WithMaxRetries(cfg.maxRetries)}
	if cfg.baseURL != "" {
		ro = append(ro, option.WithBaseURL(cfg.baseURL))
	}
	key := envKey()
	if cfg.apiKeySet {
		key = cfg.apiKey
		ro = append(ro, option.WithAPIKey(cfg.apiKey))
	}
	if cfg.httpClient != nil {
		ro = append(ro, option.WithHTTPClient(cfg.httpClient))
	}
	ro = append(ro, cfg.extra...)
	return &Model{
		model:           model,
		client:          oai.NewClient(ro...),
		redact:          provider.NewRedactor(key, keyLike, "sk-[redacted]"),
		timeout:         cfg.timeout,
		mode:            cfg.mode,
		maxTokens:       cfg.maxTokens,
		legacyMaxTokens: cfg.legacyMaxTokens,
	}, nil
}

// Name is the model the adapter asks for.
func (m *Model) Name() string { return m.model }

// Format prints the model as openai.Model(NAME), with any verb, whether m
// is printed itself or through a pointer: never its key or its client's
// options.
func (m Model) Format(f fmt.State, verb rune) {
	_, _ = fmt.Fprintf(f, "openai.Model(%s)", m.model)
}

// Generate sends req as one Chat Completions call.
//
// It returns a Response for every answer, a refusal included: a refusal
// (message.refusal, or finish_reason "content_filter") has Refusal set and
// Content empty, and is not an error.
// An answer cut off by the token limit (finish_reason "length") is returned
// with an error as well: a *llm.ProviderError, not retryable, wrapping
// llm.ErrTruncated. Other failures are a *llm.ProviderError (Status is the
// HTTP status, 0 when no answer came; Retryable for 408, 409, 429, 5xx,
// timeouts and dropped or refused connections, or as the server's
// x-should-retry header says, after the client's own retries), except
// that a cancelled or expired ctx is returned as ctx.Err().
func (m *Model) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	if req == nil {
		return nil, errors.New("openai: nil request")
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	params, err := m.params(req)
	if err != nil {
		return nil, err
	}
	call := ctx
	if m.timeout > 0 {
		var cancel context.CancelFunc
		call, cancel = context.WithTimeout(ctx, m.timeout)
		defer cancel()
	}
	call, ex := provider.Track(call)
	var body []byte // the SDK's decoding is lenient: the body is read here
	if _, err := m.client.Chat.Completions.New(call, params, option.WithResponseBodyInto(&body)); err != nil {
		return nil, m.failure(ctx, call, err, ex)
	}
	requestID := m.redact.Token(ex.Header.Get("x-request-id"))
	var c completion
	if err := provider.DecodeObject(body, &c); err != nil {
		return nil, &llm.ProviderError{Provider: Provider, Status: ex.Status, RequestID: requestID, Err: err}
	}
	if requestID == "" {
		requestID = m.redact.Token(c.ID) // servers without x-request-id: the completion's id
	}
	fail := func(format string, args ...any) error {
		return &llm.ProviderError{Provider: Provider, Status: ex.Status, RequestID: requestID,
			Err: fmt.Errorf("%w: "+format, append([]any{llm.ErrMalformedResponse}, args...)...)}
	}
	if len(c.Choices) == 0 {
		return nil, fail("the answer has no choices")
	}
	choice := c.Choices[0]
	if choice == nil || choice.Message == nil {
		return nil, fail("the first choice has no message")
	}
	usage := llm.Usage{Calls: 1}
	if c.Usage != nil {
		usage.InputTokens, usage.OutputTokens = c.Usage.PromptTokens, c.Usage.CompletionTokens
		if err := errors.Join(provider.TokenCount("prompt_tokens", usage.InputTokens),
			provider.TokenCount("completion_tokens", usage.OutputTokens)); err != nil {
			return nil, &llm.ProviderError{Provider: Provider, Status: ex.Status, RequestID: requestID, Err: err}
		}
	}
	model := m.redact.Token(c.Model)
	if model == "" {
		model = m.model
	}
	resp := &llm.Response{
		Content:      choice.Message.Content,
		Refusal:      choice.Message.Refusal,
		FinishReason: m.redact.Token(choice.FinishReason),
		Usage:        usage,
		Model:        model,
		RequestID:    requestID,
	}
	if m.mode == ModePrompt && req.Output != nil {
		resp.Content = unfence(resp.Content)
	}
	if resp.FinishReason == "content_filter" {
		// The provider's filter withheld the answer: a refusal, not an error.
		resp.Content = ""
		if resp.Refusal == "" {
			resp.Refusal = "content filter"
		}
		return resp, nil
	}
	if resp.FinishReason == "length" {
		return resp, &llm.ProviderError{Provider: Provider, Status: ex.Status, RequestID: requestID,
			Err: fmt.Errorf("finish_reason %q after %d output tokens: %w", resp.FinishReason, usage.OutputTokens, llm.ErrTruncated)}
	}
	return resp, nil
}

// completion is what Generate reads of a chat.completion object. A member
// of the wrong JSON type, or a count that does not fit an int64, is a decoding
// error; a missing or null one is its zero value.
type completion struct {
	ID      string    `json:"id"`
	Model   string    `json:"model"`
	Choices []*choice `json:"choices"`
	Usage   *struct {
		PromptTokens     int64 `json:"prompt_tokens"`
		CompletionTokens int64 `json:"completion_tokens"`
	} `json:"usage"`
}

type choice struct {
	Message *struct {
		Content string `json:"content"`
		Refusal string `json:"refusal"`
	} `json:"message"`
	FinishReason string `json:"finish_reason"`
}

func (m *Model) params(req *llm.Request) (oai.ChatCompletionNewParams, error) {
	p := oai.ChatCompletionNewParams{Model: shared.ChatModel(m.model)}
	if err := req.ValidateImages(); err != nil {
		return p, err
	}
	system := req.System
	if req.Output != nil {
		switch m.mode {
		case ModeJSONSchema:
			js := shared.ResponseFormatJSONSchemaJSONSchemaParam{
				Name:   schemaName(req.Output.Name),
				Strict: oai.Bool(req.Output.Strict),
				Schema: req.Output.Schema,
			}
			if req.Output.Description != "" {
				js.Description = oai.String(req.Output.Description)
			}
			p.ResponseFormat = oai.ChatCompletionNewParamsResponseFormatUnion{
				OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{JSONSchema: js}}
		case ModeJSONObject:
			p.ResponseFormat = oai.ChatCompletionNewParamsResponseFormatUnion{
				OfJSONObject: &shared.ResponseFormatJSONObjectParam{}}
			system = withSchema(system, req.Output)
		case ModePrompt:
			system = withSchema(system, req.Output)
		}
	}
	if system != "" {
		p.Messages = append(p.Messages, oai.SystemMessage(system))
	}
	for i, msg := range req.Messages {
		switch msg.Role {
		case llm.RoleUser:
			if len(msg.Images) == 0 {
				p.Messages = append(p.Messages, oai.UserMessage(msg.Content))
				break
			}
			// Text first, then each image as an image_url part: a data URL
			// for bytes, or the image's own URL.
			var parts []oai.ChatCompletionContentPartUnionParam
			if msg.Content != "" {
				parts = append(parts, oai.TextContentPart(msg.Content))
			}
			for _, im := range msg.Images {
				u := im.URL
				if u == "" {
					u = "data:" + im.MediaType + ";base64," + base64.StdEncoding.EncodeToString(im.Data)
				}
				parts = append(parts, oai.ImageContentPart(oai.ChatCompletionContentPartImageImageURLParam{URL: u}))
			}
			p.Messages = append(p.Messages, oai.UserMessage(parts))
		case llm.RoleAssistant:
			p.Messages = append(p.Messages, oai.AssistantMessage(msg.Content))
		default:
			return p, fmt.Errorf("openai: message %d has unknown role %q", i, msg.Role)
		}
	}
	if req.Temperature != nil {
		p.Temperature = oai.Float(*req.Temperature)
	}
	if n := req.MaxTokens; n > 0 || m.maxTokens > 0 {
		if n <= 0 {
			n = m.maxTokens
		}
		if m.legacyMaxTokens {
			p.MaxTokens = oai.Int(int64(n))
		} else {
			p.MaxCompletionTokens = oai.Int(int64(n))
		}
	}
	return p, nil
}

// withSchema appends the output schema to the system prompt, for the modes
// where the server does not enforce it.
func withSchema(system string, o *llm.OutputSchema) string {
	var b strings.Builder
	if system != "" {
		b.WriteString(system)
		b.WriteString("\n\n")
	}
	b.WriteString("Answer with one JSON document and nothing else: no prose, no code fence.")
	if o.Description != "" {
		b.WriteString(" It is ")
		b.WriteString(strings.TrimSuffix(lowerFirst(o.Description), "."))
		b.WriteString(".")
	}
	b.WriteString(" It must follow this JSON Schema exactly:\n")
	b.Write(o.Schema)
	return b.String()
}

func lowerFirst(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	if r >= 'A' && r <= 'Z' && !(len(s) > n && s[n] >= 'A' && s[n] <= 'Z') {
		return string(r+'a'-'A') + s[n:]
	}
	return s
}

var nameChars = regexp.MustCompile(`[^a-zA-Z0-9_-]`)

// schemaName fits a name to what the API accepts: [a-zA-Z0-9_-]{1,64}.
func schemaName(s string) string {
	s = nameChars.ReplaceAllString(s, "_")
	if len(s) > 64 {
		s = s[:64]
	}
	if s == "" {
		return "output"
	}
	return s
}

// unfence strips one Markdown code fence around the whole answer.
func unfence(s string) string {
	t := strings.TrimSpace(s)
	if !strings.HasPrefix(t, "```") || !strings.HasSuffix(t, "```") || len(t) < 6 {
		return s
	}
	t = strings.TrimSuffix(t[3:], "```")
	if i := strings.IndexByte(t, '\n'); i >= 0 && !strings.ContainsAny(t[:i], "{[\"") {
		t = t[i+1:] // the language tag line: ```json
	}
	return strings.TrimSpace(t)
}

// failure turns what the client returned into the error Generate reports.
// ex is what the guard saw of the last attempt. The client's own error is
// never kept: it holds the request, Authorization header and all.
func (m *Model) failure(ctx, call context.Context, err error, ex *provider.Exchange) error {
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	requestID := m.redact.Token(ex.Header.Get("x-request-id"))
	switch {
	case ex.Err != nil:
		return &llm.ProviderError{Provider: Provider, Status: ex.Status, RequestID: requestID, Err: ex.Err}
	case call.Err() != nil:
		return &llm.ProviderError{Provider: Provider, Retryable: true,
			Err: fmt.Errorf("no answer within %s: %w", m.timeout, context.DeadlineExceeded)}
	case ex.Status >= 400:
		// Read from the body here, in whatever shape it came: the client
		// drops the status of an answer whose "error" is not an object.
		b := provider.ParseErrorBody(ex.Body)
		wait, _ := provider.RetryAfter(ex.Header)
		return &llm.ProviderError{Provider: Provider, Status: ex.Status, RequestID: requestID,
			Retryable: ex.Retryable, RetryAfter: wait,
			Err: &APIError{Status: ex.Status, Type: m.redact.Message(b.Type), Code: m.redact.Message(b.Code),
				Param: m.redact.Message(b.Param), Message: m.redact.Message(b.Message)}}
	}
	retryable := provider.RetryableTransport(err)
	if text := err.Error(); m.redact.Message(text) != text {
		err = errors.New(m.redact.Message(text)) // drop an error that quotes the key
	}
	return &llm.ProviderError{Provider: Provider, Retryable: retryable, Err: err}
}

// keyLike matches OpenAI-style secret keys, masked or not, as some errors
// echo them ("Incorrect API key provided: sk-proj-****abcd").
var keyLike = regexp.MustCompile(`\bsk-[A-Za-z0-9_*\-.]{3,}`)

// APIError is what the API said about a failed call: its HTTP status and the
// body's {"error":{"message","type","code","param"}} (or the message of
// another shape a compatible server writes), with any key taken out. It
// never holds the request or the key. A *llm.ProviderError from Generate
// wraps it.
type APIError struct {
	Status  int
	Type    string
	Code    string
	Param   string
	Message string
}

func (e *APIError) Error() string {
	s := "openai: " + strings.TrimSpace(fmt.Sprintf("%d %s", e.Status, http.StatusText(e.Status)))
	if e.Type != "" {
		s += " " + e.Type
	}
	if e.Code != "" && e.Code != e.Type {
		s += " (" + e.Code + ")"
	}
	if e.Param != "" {
		s += " param " + e.Param
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

func envKey() string { return os.Getenv("OPENAI_API_KEY") }
