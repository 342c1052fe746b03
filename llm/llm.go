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
	"math"
	"net/url"
	"time"
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
	// Images are pictures sent with the text; only a user message may carry
	// them. Adapters send them after checking each with Image.Validate.
	Images []Image
}

// Image is a picture a message carries: its bytes (Data, with MediaType) or
// a URL the provider fetches itself. Exactly one of Data and URL is set.
type Image struct {
	// MediaType is one of image/png, image/jpeg, image/gif and image/webp;
	// required with Data, optional with URL.
	MediaType string
	// Data is the encoded image, at most MaxImageBytes.
	Data []byte
	// URL is an absolute http or https URL, at most MaxImageURLBytes.
	URL string
}

// Bounds on an image, as Image.Validate applies them. MaxImageBytes is the
// smallest per-image limit of the providers adapted here (Anthropic's 5 MB).
const (
	MaxImageBytes    = 5 << 20
	MaxImageURLBytes = 8 << 10
)

// ImageError is an image that cannot be sent; nothing was sent. Message and
// Image are its position (in Request.Messages and in that message's Images)
// when it was found in a request; Why says what is wrong and never holds
// the image itself.
type ImageError struct {
	Message, Image int
	Why            string
}

func (e *ImageError) Error() string {
	return fmt.Sprintf("llm: image %d of message %d cannot be sent: %s", e.Image, e.Message, e.Why)
}

// Validate reports, as an *ImageError, an image that is not exactly one of
// Data and URL, whose media type is not one of the four, whose Data is
// empty or larger than MaxImageBytes, or whose URL is not an absolute http
// or https URL of at most MaxImageURLBytes.
func (im Image) Validate() error {
	fail := func(why string) error { return &ImageError{Why: why} }
	switch {
	case len(im.Data) > 0 && im.URL != "":
		return fail("it has both data and a URL; give one")
	case len(im.Data) == 0 && im.URL == "":
		return fail("it has neither data nor a URL")
	case im.MediaType != "" && !imageTypes[im.MediaType]:
		return fail("its media type is not image/png, image/jpeg, image/gif or image/webp")
	case len(im.Data) > MaxImageBytes:
		return fail(fmt.Sprintf("it is %d bytes, more than the %d allowed", len(im.Data), MaxImageBytes))
	case len(im.Data) > 0 && im.MediaType == "":
		return fail("its data has no media type")
	case len(im.URL) > MaxImageURLBytes:
		return fail(fmt.Sprintf("its URL is longer than %d bytes", MaxImageURLBytes))
	}
	if im.URL != "" {
		u, err := url.Parse(im.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fail("its URL is not an absolute http or https URL")
		}
	}
	return nil
}

var imageTypes = map[string]bool{"image/png": true, "image/jpeg": true, "image/gif": true, "image/webp": true}

// ValidateImages checks every image of r's messages with Image.Validate,
// and that only user messages carry images. The first fault is returned as
// an *ImageError with its position.
func (r *Request) ValidateImages() error {
	for i, m := range r.Messages {
		for j, im := range m.Images {
			err := im.Validate()
			if err == nil && m.Role != RoleUser {
				err = &ImageError{Why: "only a user message may carry images"}
			}
			if ie, ok := err.(*ImageError); ok {
				ie.Message, ie.Image = i, j
				return ie
			}
		}
	}
	return nil
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
	// Temperature, when set, is the sampling temperature the provider is
	// asked for; nil leaves it to the provider.
	Temperature *float64
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

// Add returns the sum of two usages. Each count saturates: a sum past
// math.MaxInt64 is math.MaxInt64 (and one below math.MinInt64 is
// math.MinInt64), so adding many calls never wraps round to a small or
// negative count.
func (u Usage) Add(o Usage) Usage {
	return Usage{
		InputTokens:  addSat(u.InputTokens, o.InputTokens),
		OutputTokens: addSat(u.OutputTokens, o.OutputTokens),
		Calls:        addSat(u.Calls, o.Calls),
	}
}

// Total is input plus output tokens, saturating as Add does.
func (u Usage) Total() int64 { return addSat(u.InputTokens, u.OutputTokens) }

// addSat adds a and b, stopping at the bounds of int64 instead of wrapping.
func addSat(a, b int64) int64 {
	s := a + b
	switch {
	case a > 0 && b > 0 && s < 0:
		return math.MaxInt64
	case a < 0 && b < 0 && s >= 0:
		return math.MinInt64
	}
	return s
}

// MaxTokenCount is the largest token count an adapter accepts for one call
// (2^40, about 1.1 trillion). A provider that reports a negative count, or one
// above this, is misbehaving: the answer is refused with
// ErrMalformedResponse rather than counted.
const MaxTokenCount = 1 << 40

// ProviderError is a failed call to a model provider. It says which provider,
// which HTTP status (0 when the call never got an answer: a timeout, a refused
// connection), whether trying again can help and how long the provider asked
// to wait first. It never holds an API key: its RequestID and every message
// in it are taken from the answer only after the key has been taken out.
//
// What went wrong is said by what it wraps: ErrTruncated (the answer was cut
// off), ErrResponseTooLarge (the answer was bigger than the adapter's bound),
// ErrMalformedResponse (the answer was not in the provider's documented
// shape), context.DeadlineExceeded (no answer in time), or the adapter's own
// API error type for an error status.
//
//	var pe *llm.ProviderError
//	if errors.As(err, &pe) && pe.Retryable {
//		time.Sleep(max(pe.RetryAfter, time.Second))
//		// try again
//	}
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
	// RetryAfter is the wait the provider asked for before the call is tried
	// again (its Retry-After or Retry-After-Ms header), 0 when it asked for
	// none. An adapter returns at once, with RetryAfter set, when that wait is
	// longer than the time its call had left.
	RetryAfter time.Duration
	Err        error
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
	if e.RetryAfter > 0 {
		s += " after " + e.RetryAfter.String()
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

// ErrResponseTooLarge reports an answer whose body, once decompressed, was
// larger than the adapter's bound (see the adapters' WithMaxResponseBytes).
// The rest of the body was not read; trying again will not help unless the
// bound is raised.
var ErrResponseTooLarge = errors.New("llm: the answer is larger than the response bound")

// ErrMalformedResponse reports an answer that is not in the shape the
// provider's API documents: a body that is not the expected JSON object,
// a missing or null member the API always sends, a member of the wrong
// type, or a token count that is negative or above MaxTokenCount. Nothing
// of such an answer is used.
var ErrMalformedResponse = errors.New("llm: the answer is not in the provider's documented shape")
