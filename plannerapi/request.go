package plannerapi

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/planexec/planexec/llm"
)

// chatRequest is a chat-completions request: OpenAI's parameters, and
// planner mode's.
type chatRequest struct {
	Model               string          `json:"model"`
	Messages            []chatMessage   `json:"messages"`
	Stream              bool            `json:"stream"`
	StreamOptions       *streamOptions  `json:"stream_options"`
	Tools               []chatTool      `json:"tools"`
	ToolChoice          json.RawMessage `json:"tool_choice"`
	ParallelToolCalls   *bool           `json:"parallel_tool_calls"`
	Temperature         *float64        `json:"temperature"`
	TopP                *float64        `json:"top_p"`
	MaxTokens           *int64          `json:"max_tokens"`
	MaxCompletionTokens *int64          `json:"max_completion_tokens"`
	ResponseFormat      json.RawMessage `json:"response_format"`
	N                   *int            `json:"n"`
	Stop                json.RawMessage `json:"stop"`
	Seed                *int64          `json:"seed"`
	PresencePenalty     *float64        `json:"presence_penalty"`
	FrequencyPenalty    *float64        `json:"frequency_penalty"`
	User                string          `json:"user"`
	Metadata            json.RawMessage `json:"metadata"`
	Store               *bool           `json:"store"`
	// OpenAI's parameters this server takes and leaves to the model's
	// provider defaults.
	Logprobs        *bool           `json:"logprobs"`
	TopLogprobs     *int            `json:"top_logprobs"`
	LogitBias       json.RawMessage `json:"logit_bias"`
	ServiceTier     string          `json:"service_tier"`
	ReasoningEffort string          `json:"reasoning_effort"`
	Verbosity       string          `json:"verbosity"`
	Modalities      json.RawMessage `json:"modalities"`
	Prediction      json.RawMessage `json:"prediction"`
	SafetyID        string          `json:"safety_identifier"`
	PromptCacheKey  string          `json:"prompt_cache_key"`

	// Planner mode's own.
	PlannerMode bool       `json:"planner_mode"`
	Agents      []string   `json:"agents"`
	Decisions   []decision `json:"decisions"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// chatMessage is one message of the conversation.
type chatMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	Name       string          `json:"name"`
	ToolCalls  []toolCall      `json:"tool_calls"`
	ToolCallID string          `json:"tool_call_id"`
	Refusal    *string         `json:"refusal"`

	images []llm.Image // read from its image_url parts by decodeRequest
}

// UnmarshalJSON reads a message leniently: members other than those a
// chat message has (the "parsed" an SDK's accumulator adds, say) are left
// aside, as OpenAI leaves them, so that a client may send back the message
// its SDK built.
func (m *chatMessage) UnmarshalJSON(b []byte) error {
	type plain chatMessage
	return json.Unmarshal(b, (*plain)(m))
}

// text is a message's content as text: a string, or its text parts (its
// image_url parts left aside: see images).
func (m *chatMessage) text() (string, bool) {
	c := bytes.TrimSpace(m.Content)
	if len(c) == 0 || string(c) == "null" {
		return "", true
	}
	var s string
	if json.Unmarshal(c, &s) == nil {
		return s, true
	}
	parts, ok := m.parts()
	if !ok {
		return "", false
	}
	var b strings.Builder
	for _, p := range parts {
		switch p.Type {
		case "text":
			b.WriteString(p.Text)
		case "image_url":
		default:
			return "", false
		}
	}
	return b.String(), true
}

// contentPart is one part of a message's content.
type contentPart struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	ImageURL *struct {
		URL    string `json:"url"`
		Detail string `json:"detail"`
	} `json:"image_url"`
}

// parts is a message's content as parts; false when it is not a list of
// them.
func (m *chatMessage) parts() ([]contentPart, bool) {
	var parts []contentPart
	if json.Unmarshal(bytes.TrimSpace(m.Content), &parts) != nil {
		return nil, false
	}
	return parts, true
}

// readImages reads the image_url parts of message i into m.images: a data
// URL is decoded (base64, one of the media types llm.Image takes, at most
// llm.MaxImageBytes), an http or https URL is passed on as a URL. Only a
// user message may carry images. The problem names the part at fault.
func (m *chatMessage) readImages(i int) *problem {
	parts, ok := m.parts()
	if !ok {
		return nil // a string, or null
	}
	for j, p := range parts {
		if p.Type != "image_url" {
			continue
		}
		param := fmt.Sprintf("messages[%d].content[%d].image_url.url", i, j)
		if m.Role != "user" {
			return badRequest(fmt.Sprintf("messages[%d].content[%d]", i, j), "Only a user message may carry images.")
		}
		if p.ImageURL == nil || p.ImageURL.URL == "" {
			return badRequest(param, "An image_url part needs a url.")
		}
		im, why := image(p.ImageURL.URL)
		if why == "" {
			if err := im.Validate(); err != nil {
				why = err.(*llm.ImageError).Why
			}
		}
		if why != "" {
			return badRequest(param, fmt.Sprintf("The image cannot be taken: %s.", why))
		}
		m.images = append(m.images, im)
	}
	return nil
}

// image reads an image_url's url: a base64 data URL, or an http or https
// URL. why says what is wrong, in words that hold nothing of the url.
func image(u string) (im llm.Image, why string) {
	rest, ok := strings.CutPrefix(u, "data:")
	if !ok {
		if !strings.HasPrefix(u, "https://") && !strings.HasPrefix(u, "http://") {
			return im, "the url is neither a data URL nor an http or https URL"
		}
		return llm.Image{URL: u}, ""
	}
	meta, data, ok := strings.Cut(rest, ",")
	mediaType, ok64 := strings.CutSuffix(meta, ";base64")
	if !ok || !ok64 {
		return im, "a data URL must be data:<media type>;base64,<data>"
	}
	if base64.StdEncoding.DecodedLen(len(data)) > llm.MaxImageBytes+2 {
		return im, fmt.Sprintf("it is larger than the %d bytes allowed", llm.MaxImageBytes)
	}
	b, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		return im, "its data is not valid base64"
	}
	return llm.Image{MediaType: mediaType, Data: b}, ""
}

// chatTool is a tool the client passes: a function it runs.
type chatTool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
		Strict      *bool           `json:"strict"`
	} `json:"function"`
}

type toolCall struct {
	Index    *int   `json:"index,omitempty"`
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// decision is a client's decision on an approval request, in the
// follow-up request of a session that paused for one.
type decision struct {
	Request  string `json:"request"`
	Approved bool   `json:"approved"`
	By       string `json:"by"`
	Reason   string `json:"reason"`
}

// decodeRequest reads and checks a request's body.
func decodeRequest(w http.ResponseWriter, r *http.Request, limit int64) (*chatRequest, *problem) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return nil, &problem{status: http.StatusRequestEntityTooLarge, reason: "request_too_large",
			message: fmt.Sprintf("The request body is larger than %d bytes.", limit)}
	}
	if err != nil {
		return nil, badRequest("", "The request body could not be read.")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var req chatRequest
	if err := dec.Decode(&req); err != nil {
		return nil, decodeProblem(err)
	}
	if dec.More() {
		return nil, badRequest("", "The request body holds more than one JSON value.")
	}
	switch {
	case req.Model == "":
		return nil, badRequest("model", "You must provide a model parameter.")
	case len(req.Messages) == 0:
		return nil, badRequest("messages", "'messages' must contain at least one message.")
	case req.N != nil && *req.N != 1:
		return nil, badRequest("n", "Only n = 1 is supported.")
	}
	for i, m := range req.Messages {
		switch m.Role {
		case "system", "developer", "user", "assistant", "tool":
		default:
			return nil, badRequest(fmt.Sprintf("messages[%d].role", i), fmt.Sprintf("Invalid value for 'messages[%d].role': %s.", i, quoteName(m.Role)))
		}
		if _, ok := m.text(); !ok {
			return nil, badRequest(fmt.Sprintf("messages[%d].content", i), "Only text and image_url content parts are supported.")
		}
		if p := req.Messages[i].readImages(i); p != nil {
			return nil, p
		}
		if m.Role == "tool" && m.ToolCallID == "" {
			return nil, badRequest(fmt.Sprintf("messages[%d].tool_call_id", i), "A tool message needs a tool_call_id.")
		}
	}
	for i, t := range req.Tools {
		if t.Type != "function" || t.Function.Name == "" {
			return nil, badRequest(fmt.Sprintf("tools[%d]", i), "A tool is {\"type\": \"function\", \"function\": {\"name\": ..., \"parameters\": ...}}.")
		}
	}
	return &req, nil
}

// decodeProblem says what is wrong with a body that did not decode, as
// OpenAI says it.
func decodeProblem(err error) *problem {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &typeErr):
		return badRequest(typeErr.Field, fmt.Sprintf("Invalid type for '%s': expected %s.", typeErr.Field, typeErr.Type))
	case errors.As(err, &syntaxErr), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return badRequest("", "We could not parse the JSON body of your request. The body must be one JSON object.")
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		field := strings.TrimPrefix(err.Error(), "json: unknown field ")
		return badRequest(strings.Trim(field, `"`), fmt.Sprintf("Unrecognized request argument supplied: %s", strings.Trim(field, `"`)))
	}
	return badRequest("", "The request body is not a chat completion request.")
}
