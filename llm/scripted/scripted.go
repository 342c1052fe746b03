// Package scripted is a language model that answers from a script. It stands in
// for a real provider in tests and in the example, with no key and no network,
// and records every request so a test can assert what the model was shown.
package scripted

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/planexec/planexec/llm"
)

// ErrScriptExhausted is returned when the model is called more times than it
// has replies.
var ErrScriptExhausted = errors.New("scripted: no reply left in the script")

// Reply is one scripted answer. When Err is set the call fails with it.
type Reply struct {
	Content      string
	FinishReason string // default: "stop"
	Usage        llm.Usage
	Err          error
}

// Model answers each call with the next Reply. It is safe for concurrent use.
type Model struct {
	// Name is reported as Response.Model; default: "scripted".
	Name string

	mu       sync.Mutex
	replies  []Reply
	respond  func(req *llm.Request) Reply
	requests []llm.Request
}

// New returns a model that gives replies in order.
func New(replies ...Reply) *Model {
	return &Model{replies: replies}
}

// Respond returns a model that answers each call with what respond returns
// for its request: a script that follows the conversation (answering once a
// request tells what earlier rounds found, say) rather than counting calls.
// respond is called with the model's lock held, one call at a time.
func Respond(respond func(req *llm.Request) Reply) *Model {
	return &Model{respond: respond}
}

// Generate returns the next reply. When a reply carries no usage, one is
// estimated at four characters per token, so usage figures stay meaningful.
func (m *Model) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.requests = append(m.requests, cloneRequest(req))
	n := len(m.requests)
	var r Reply
	switch {
	case m.respond != nil:
		r = m.respond(req)
	case n > len(m.replies):
		return nil, fmt.Errorf("%w (call %d of %d)", ErrScriptExhausted, n, len(m.replies))
	default:
		r = m.replies[n-1]
	}
	if r.Err != nil {
		return nil, r.Err
	}
	usage := r.Usage
	if usage == (llm.Usage{}) {
		usage = llm.Usage{InputTokens: estimate(req), OutputTokens: int64(len(r.Content)+3) / 4}
	}
	usage.Calls = 1
	finish := r.FinishReason
	if finish == "" {
		finish = "stop"
	}
	name := m.Name
	if name == "" {
		name = "scripted"
	}
	return &llm.Response{
		Content:      r.Content,
		FinishReason: finish,
		Usage:        usage,
		Model:        name,
		RequestID:    fmt.Sprintf("scripted-%d", n),
	}, nil
}

// Requests returns copies of the requests received so far, oldest first,
// with the images each message carried.
func (m *Model) Requests() []llm.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]llm.Request, len(m.requests))
	copy(out, m.requests)
	return out
}

func cloneRequest(req *llm.Request) llm.Request {
	c := *req
	c.Messages = append([]llm.Message(nil), req.Messages...)
	for i, m := range c.Messages {
		// The images too, bytes and all: a caller may reuse its buffers.
		if m.Images != nil {
			c.Messages[i].Images = make([]llm.Image, len(m.Images))
			for j, im := range m.Images {
				im.Data = append([]byte(nil), im.Data...)
				c.Messages[i].Images[j] = im
			}
		}
	}
	if req.Output != nil {
		o := *req.Output
		c.Output = &o
	}
	return c
}

func estimate(req *llm.Request) int64 {
	n := len(req.System)
	for _, m := range req.Messages {
		n += len(m.Content)
	}
	if req.Output != nil {
		n += len(req.Output.Schema)
	}
	return int64(n+3) / 4
}
