// Package openai is the llm.Model for OpenAI's Chat Completions API and for
// every server that speaks it: OpenAI itself, ASI:One, Ollama, vLLM,
// OpenRouter, LM Studio and the like. It is built on the official openai-go
// client.
//
// # Planning with it
//
//	model, err := openai.New("gpt-4o-mini") // OPENAI_API_KEY, OPENAI_BASE_URL
//	if err != nil {
//		return err
//	}
//	planner, err := planexec.NewAgentPlanner(model, planexec.Agent{Name: "planner"})
//	if err != nil {
//		return err
//	}
//	plan, err := ex.Plan(ctx, planner, "get them to New York")
//
// The planner asks for a plan that follows planexec.PlanSchema: one branch
// per tool, each with that tool's own argument schema. With OpenAI's
// Structured Outputs the model cannot name a tool outside the catalog or give
// an argument the wrong JSON type. The executor validates the plan in full
// all the same, and sends any refusal back as a follow-up turn.
//
// # Other endpoints
//
// The key and endpoint come from OPENAI_API_KEY and OPENAI_BASE_URL unless
// WithAPIKey and WithBaseURL say otherwise:
//
//	openai.New("llama3.1", openai.WithBaseURL("http://localhost:11434/v1"), openai.WithAPIKey(""))  // Ollama
//	openai.New("Qwen/Qwen2.5-7B-Instruct", openai.WithBaseURL("http://localhost:8000/v1"))          // vLLM
//	openai.New("openai/gpt-4o-mini", openai.WithBaseURL("https://openrouter.ai/api/v1"), openai.WithAPIKey(key))
//	openai.New("asi1-mini", openai.WithBaseURL("https://api.asi1.ai/v1"), openai.WithAPIKey(key))
//
// WithRequestOptions passes anything else to the openai-go client (extra
// headers, an organization, a middleware).
//
// # When a server lacks Structured Outputs
//
// The Mode says how the plan schema reaches the server:
//
//   - ModeJSONSchema (the default) sends response_format json_schema with
//     "strict": true. The server constrains the answer to the schema.
//   - ModeJSONObject sends response_format json_object and writes the schema
//     into the system prompt: the answer is JSON, but only the prompt asks it
//     to follow the schema.
//   - ModePrompt sends no response_format and writes the schema into the
//     system prompt, for servers that reject the field. An answer wrapped in
//     a Markdown code fence is unwrapped.
//
// Fall back from ModeJSONSchema when a server answers 400 to response_format
// (a *llm.ProviderError with Status 400 wrapping an *APIError that says so),
// to ModeJSONObject first and to ModePrompt if that is refused too. Nothing
// else changes: the executor validates every plan the same way whichever mode
// produced it, so a weaker mode only costs more replans, never a wrong step.
//
// # Errors
//
// Generate returns:
//
//   - a Response with Refusal set and Content empty when the model refused
//     (message.refusal), or when its content filter withheld the answer
//     (finish_reason "content_filter", Refusal "content filter"). That is
//     an answer, not an error: the executor refuses the empty plan
//     (ReasonEmpty) and asks again.
//   - the Response and a *llm.ProviderError wrapping llm.ErrTruncated, not
//     retryable, when the answer was cut off by the token limit
//     (finish_reason "length"): half a plan is not worth a replan; raise the
//     limit (Request.MaxTokens, WithMaxTokens) instead.
//   - a *llm.ProviderError for a failed call: Status is the HTTP status (0
//     when no answer came), RequestID the x-request-id header, Retryable true
//     for 408, 409, 429, 5xx, timeouts and dropped, reset or refused
//     connections (not TLS or certificate failures, a plain-HTTP server
//     behind an https URL, or a bad URL), unless the server's x-should-retry
//     header says otherwise, and RetryAfter the wait the server asked for.
//     For an HTTP error it wraps an *APIError with the API's type, code and
//     message, read from {"error":{...}} or from the other shapes compatible
//     servers write ({"error":"rate limited"}, {"message":...},
//     {"detail":...}); the status is kept whatever the shape.
//   - a *llm.ProviderError wrapping llm.ErrResponseTooLarge, not retryable,
//     for an answer whose body is larger than WithMaxResponseBytes (default
//     8 MiB), counted after gzip decoding. The body is not read past the
//     bound, and the call is not retried.
//   - a *llm.ProviderError wrapping llm.ErrMalformedResponse, not
//     retryable, for an answer that is not a chat.completion object: a body
//     that is not one JSON object, no choices, a first choice without a
//     message, a member of the wrong JSON type, a body marked gzip that is
//     not, or a token count that is negative or above llm.MaxTokenCount.
//     No Response comes with it.
//   - ctx.Err() when the caller's context was cancelled or expired.
//
// Rate limits and server errors are retried by the openai-go client before
// Generate returns (WithMaxRetries, default 2), honouring the server's
// Retry-After and Retry-After-Ms headers and backing off exponentially
// otherwise. WithTimeout (default 60s) bounds the whole call, retries
// included; ctx bounds it too. A wait the server asks for that is longer
// than the call has left (before ctx's deadline or the timeout), or than
// two minutes, is not slept: Generate returns the error at once, Retryable,
// with RetryAfter set, so the caller can decide when to come back.
//
// # The key
//
// The API key is sent as a bearer token and nowhere else. It never appears
// in an error: the client's own error (which holds the request and its
// Authorization header) is not kept, and the API's message is scrubbed of
// the key (or any run of twelve of its characters) and of anything shaped
// like one before it is reported. A request id, completion id, model name or
// finish reason taken from an answer is kept only when it is at most 200
// bytes of letters, digits and "-_.:/@+=" with no part of the key in it;
// otherwise it is dropped (the model name falls back to the one asked for).
// A Model prints as openai.Model(NAME) with any verb. This package writes
// no logs.
//
// # Response fields
//
// Content is message.content, Refusal message.refusal, FinishReason
// finish_reason, Usage prompt_tokens and completion_tokens (Calls 1), Model
// the model that answered, and RequestID the x-request-id header, or the
// completion's id on servers that send no such header (or one that cannot
// be kept, see The key).
package openai
