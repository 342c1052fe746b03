// Package anthropic is an [llm.Model] over the Anthropic Messages API
// (POST /v1/messages), built on the official Go SDK.
//
//	model, err := anthropic.New("claude-sonnet-4-5") // key from ANTHROPIC_API_KEY
//	if err != nil {
//		return err
//	}
//	planner, err := planexec.NewAgentPlanner(model, planexec.Agent{Name: "planner"})
//	plan, err := ex.Plan(ctx, planner, "get them to New York")
//
// # How a request is sent
//
// llm.Request.System becomes the system prompt; each message becomes a user
// or assistant turn holding one text block, in order. (A turn with no text,
// such as an empty answer a planner sends back with its refusal, is sent as
// "(no answer)": the API refuses empty text blocks.) max_tokens is
// llm.Request.MaxTokens, or [WithMaxTokens] (default 4096).
//
// # How the plan comes back: a forced tool call
//
// When llm.Request.Output is set, the request declares exactly one tool,
// named Output.Name ("plan" for a planner; characters outside
// [a-zA-Z0-9_-] become "_", it is cut to 64, and "plan" when empty), whose
// input_schema is
// Output.Schema, and forces the model to call it (tool_choice
// {"type": "tool", "name": "plan"}, no parallel calls). The input of that
// tool_use block, raw JSON, is the answer's Content.
//
// This tool is an output channel, nothing more. Nothing runs when the model
// "calls" it, no tool result is ever sent back, and it is not one of the
// tools a plan may use: the planner still holds no tools and cannot dispatch
// what it is planning. Every plan that comes back this way is decoded and
// validated by the executor like any other.
//
// [WithStructuredOutput] asks for the same schema through the API's native
// structured output (output_config.format) instead; [WithStrictSchema] passes
// Output.Strict on to the API. Both are off by default, because neither is
// supported by every model or every schema.
//
// Both use constrained decoding, which accepts only part of JSON Schema:
// numeric bounds (minimum, maximum and their exclusive forms, multipleOf),
// string lengths and array sizes past minItems 1 are refused. They are
// taken out of the schema and said in the description of the schema that
// had them ("at least 1; at most 9"), as Anthropic's own SDKs do; the
// executor checks them either way. The default forced tool call sends the
// schema as it is.
//
// # What comes back
//
// Response.Content is the tool input (or, with no Output, the reply's text);
// FinishReason is the stop_reason; Usage counts input tokens (cache reads and
// writes included), output tokens and one call; Model is the model that
// answered; RequestID is the request-id header, the id Anthropic support asks
// for.
//
// A refusal (stop_reason "refusal"), or an answer that does not call the
// output tool, is not an error: it is a Response with empty Content and
// Refusal set. The executor refuses the empty payload (reason empty) and asks
// again, with the refusal as feedback.
//
// # Errors
//
// Every failed call is a *llm.ProviderError with Provider "anthropic":
//
//   - stop_reason "max_tokens" (or "model_context_window_exceeded"): the
//     answer was cut off; not retryable; it wraps [llm.ErrTruncated], and
//     the Response (usage, model, request id, what came back) is returned
//     with it.
//   - an error answer: Status and RequestID are the API's; Retryable for 408,
//     409, 429, 5xx and 529 (overloaded), unless the server's x-should-retry
//     header says otherwise; RetryAfter is the wait the server asked for. It
//     wraps an [*APIError] with the API's error type, message and request
//     id, read from {"type":"error","error":{...}} or from the other shapes
//     compatible servers write ({"error":"rate limited"}, {"message":...},
//     {"detail":...}); the status is kept whatever the shape. The SDK's own
//     error is not kept.
//   - an answer larger than [WithMaxResponseBytes] (default 8 MiB), counted
//     after gzip decoding: it wraps [llm.ErrResponseTooLarge], is not
//     retryable, and is neither read past the bound nor fetched again.
//   - an answer that is not a Messages API reply: a body that is not one
//     JSON object, no content list, a content block that is not an object,
//     a member of the wrong JSON type, an output tool call whose input is not
//     a JSON object, a body marked gzip that is not, or a token count that is
//     negative or above [llm.MaxTokenCount]. It wraps
//     [llm.ErrMalformedResponse], is not retryable, and no Response comes
//     with it.
//   - no answer: Status 0; Retryable after a timeout ([WithTimeout]) or a
//     dropped, reset or refused connection, not after a TLS or certificate
//     failure, a plain-HTTP server behind an https URL, or a refused
//     redirect.
//
// When ctx is cancelled, or its deadline passes, Generate returns ctx's error.
//
// Before a failure is returned, the SDK retries it itself ([WithMaxRetries],
// default 2) on the same conditions, waiting what the server's
// retry-after-ms or retry-after header asks, or backing off exponentially
// from half a second. The wait counts towards [WithTimeout]. A wait the
// server asks for that is longer than the call has left (before ctx's
// deadline or the timeout), or than two minutes, is not slept: Generate
// returns the error at once, Retryable, with RetryAfter set.
//
// The API key is sent only in the x-api-key header, and never to another
// origin: a redirect to another scheme, host or port is refused. It never
// appears in an error: no error in a ProviderError's chain holds the request
// or the response, and text the server sent is scrubbed of the key (or any
// run of twelve of its characters). A request id, model name or stop reason
// taken from an answer is kept only when it is at most 200 bytes of letters,
// digits and "-_.:/@+=" with no part of the key in it; otherwise it is
// dropped (the model name falls back to the one asked for). A Model prints
// as anthropic.Model(NAME) with any verb. This package writes no logs.
package anthropic
