// Package llm is the one small interface planexec needs from a language model:
// send a conversation, optionally with a JSON Schema the answer must follow, and
// get text and token usage back. It holds no provider code; adapters such as
// llm/scripted implement Model.
package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// Model is a language model. Generate must honour ctx and must not keep req
// after it returns. Implementations are safe for concurrent use.
type Model interface {
	Generate(ctx context.Context, req *Request) (*Response, error)
}

// Role says who wrote a message.
type Role string

// Roles of conversation messages. System instructions travel in Request.System.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
)

// Message is one turn of a conversation.
type Message struct {
	Role    Role
	Content string
}

// Request is one call to a model.
type Request struct {
	// System holds the instructions that frame the conversation.
	System string
	// Messages is the conversation so far, oldest first.
	Messages []Message
	// Output, when set, asks for an answer that is one JSON document
	// following Output.Schema (structured output where the provider has it).
	Output *OutputSchema
	// MaxTokens bounds the answer; 0 leaves it to the adapter.
	MaxTokens int
}

// OutputSchema names the JSON Schema an answer must follow.
type OutputSchema struct {
	Name        string
	Description string
	Schema      json.RawMessage
	// Strict asks the provider to enforce the schema exactly where it can.
	Strict bool
}

// Response is a model's answer.
type Response struct {
	// Content is the text of the answer (the JSON document when Output was set).
	Content string
	// Refusal is the provider's own refusal text, when it declined to answer.
	Refusal string
	// FinishReason is the provider's reason for stopping ("stop", "length", ...).
	FinishReason string
	// Usage is what this call cost.
	Usage Usage
	// Model is the model that answered, as the provider names it.
	Model string
	// RequestID is the provider's id for the call, for support requests.
	RequestID string
}

// Usage counts tokens.
type Usage struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
	// Calls is the number of model calls the usage covers.
	Calls int64 `json:"calls"`
}

// Add returns the sum of two usages.
func (u Usage) Add(o Usage) Usage {
	return Usage{
		InputTokens:  u.InputTokens + o.InputTokens,
		OutputTokens: u.OutputTokens + o.OutputTokens,
		Calls:        u.Calls + o.Calls,
	}
}

// Total is input plus output tokens.
func (u Usage) Total() int64 { return u.InputTokens + u.OutputTokens }

// ProviderError is a failed call to a model provider. It says which provider,
// which HTTP status (0 when the call never got an answer: a timeout, a refused
// connection) and whether trying again can help. It never holds an API key.
type ProviderError struct {
	Provider  string // "openai", "anthropic"
	Status    int
	RequestID string
	// Retryable is true for request timeouts (408), conflicts (409), rate
	// limits (429), server errors (5xx, 529 overloaded included), timeouts and
	// dropped or refused connections: the same call may succeed later. A
	// provider's explicit retry advice (such as an x-should-retry header)
	// takes precedence.
	Retryable bool
	Err       error
}

func (e *ProviderError) Error() string {
	s := "llm: " + e.Provider
	if e.Status != 0 {
		s += fmt.Sprintf(": status %d", e.Status)
	}
	if e.RequestID != "" {
		s += " (request " + e.RequestID + ")"
	}
	if e.Retryable {
		s += ", retryable"
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the underlying error.
func (e *ProviderError) Unwrap() error { return e.Err }

// ErrTruncated reports an answer cut off by the token limit ("length",
// "max_tokens"): what came back is not the whole document.
var ErrTruncated = errors.New("llm: the answer was cut off by the token limit")
