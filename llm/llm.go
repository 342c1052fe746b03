// Package llm is the one small interface planexec needs from a language model:
// send a conversation, optionally with a JSON Schema the answer must follow, and
// get text and token usage back. It holds no provider code; adapters such as
// llm/scripted implement Model.
package llm

import (
	"context"
	"encoding/json"
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
