package openai_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/planexec/planexec/llm"
	"github.com/planexec/planexec/llm/openai"
)

var hi = &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}}

// No answer panics Generate or passes for a plan: a 200 whose body is not a
// chat.completion object, or whose counts are impossible, is a
// *llm.ProviderError wrapping llm.ErrMalformedResponse, with its status, not
// retryable, and no Response.
func TestAShapelessAnswerIsAMalformedResponseError(t *testing.T) {
	for name, body := range map[string]string{
		"null":                       `null`,
		"empty object":               `{}`,
		"array":                      `[]`,
		"string":                     `"{\"goal\":\"x\"}"`,
		"number":                     `42`,
		"empty body":                 ``,
		"not JSON":                   `<html>502</html>`,
		"cut off":                    `{"choices":[{"message":{"content":"{}"`,
		"two documents":              `{"choices":[{"message":{"content":"{}"}}]} {}`,
		"choices null":               `{"id":"x","choices":null}`,
		"choices empty":              `{"choices":[]}`,
		"choices an object":          `{"choices":{"message":{"content":"{}"}}}`,
		"choice null":                `{"choices":[null]}`,
		"message missing":            `{"choices":[{"finish_reason":"stop"}]}`,
		"message null":               `{"choices":[{"message":null,"finish_reason":"stop"}]}`,
		"message a string":           `{"choices":[{"message":"{}","finish_reason":"stop"}]}`,
		"content a number":           `{"choices":[{"message":{"content":4242},"finish_reason":"stop"}]}`,
		"content an object":          `{"choices":[{"message":{"content":{"goal":"x"}},"finish_reason":"stop"}]}`,
		"usage a string":             `{"choices":[{"message":{"content":"{}"}}],"usage":"lots"}`,
		"tokens a string":            `{"choices":[{"message":{"content":"{}"}}],"usage":{"prompt_tokens":"12","completion_tokens":3}}`,
		"negative prompt tokens":     `{"choices":[{"message":{"content":"{}"}}],"usage":{"prompt_tokens":-5,"completion_tokens":3}}`,
		"negative completion tokens": `{"choices":[{"message":{"content":"{}"}}],"usage":{"prompt_tokens":5,"completion_tokens":-3}}`,
		"absurd tokens":              `{"choices":[{"message":{"content":"{}"}}],"usage":{"prompt_tokens":9223372036854775807,"completion_tokens":1}}`,
		"tokens past int64":          `{"choices":[{"message":{"content":"{}"}}],"usage":{"prompt_tokens":1,"completion_tokens":99999999999999999999}}`,
		"fractional tokens":          `{"choices":[{"message":{"content":"{}"}}],"usage":{"prompt_tokens":1.5,"completion_tokens":1}}`,
	} {
		t.Run(name, func(t *testing.T) {
			s := newServer(t, raw(http.StatusOK, map[string]string{"x-request-id": "req_shape"}, body))
			resp, err := newModel(t, s, openai.WithMaxRetries(0)).Generate(context.Background(), hi)
			if !errors.Is(err, llm.ErrMalformedResponse) {
				t.Fatalf("err = %v, want ErrMalformedResponse", err)
			}
			var pe *llm.ProviderError
			if !errors.As(err, &pe) || pe.Status != http.StatusOK || pe.Retryable || pe.RequestID != "req_shape" || pe.Provider != "openai" {
				t.Errorf("ProviderError = %+v", pe)
			}
			if resp != nil {
				t.Errorf("a shapeless answer came back as %+v", resp)
			}
			if len(body) > 8 && strings.Contains(err.Error(), body) || strings.Contains(err.Error(), "4242") {
				t.Errorf("the error quotes the body: %v", err)
			}
		})
	}
}

// Members an answer may leave out or send as null are their zero values:
// a message with no content and no refusal, no usage, no id, no model.
func TestAnAnswerMayLeaveOutWhatTheAPIMarksOptional(t *testing.T) {
	s := newServer(t, raw(http.StatusOK, nil, `{"choices":[{"message":{"role":"assistant","content":null,"refusal":null},"finish_reason":null}],"usage":null}`))
	resp, err := newModel(t, s).Generate(context.Background(), hi)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Content != "" || resp.Refusal != "" || resp.FinishReason != "" || resp.Model != "gpt-4o-mini" ||
		resp.RequestID != "" || resp.Usage != (llm.Usage{Calls: 1}) {
		t.Errorf("response = %+v", resp)
	}
}

// Compatible servers write their errors in other shapes than OpenAI's
// {"error":{...}}. Whatever the shape, the status, the retry advice and the
// message (without the key) are kept.
func TestAnErrorAnswerOfAnyShapeKeepsItsStatus(t *testing.T) {
	for name, c := range map[string]struct {
		status    int
		body      string
		retryable bool
		message   string
	}{
		"error a string (TGI, LM Studio)": {429, `{"error":"rate limited"}`, true, "rate limited"},
		"error a string, 400":             {400, `{"error":"bad schema"}`, false, "bad schema"},
		"error null":                      {503, `{"error":null}`, true, ""},
		"error a number":                  {500, `{"error":7}`, true, "7"},
		"top-level message":               {503, `{"message":"model is loading"}`, true, "model is loading"},
		"detail (FastAPI)":                {404, `{"detail":"Not Found"}`, false, "Not Found"},
		"null":                            {502, `null`, true, ""},
		"an array":                        {500, `[]`, true, ""},
		"HTML from a proxy":               {502, `<html><body>Bad Gateway</body></html>`, true, ""},
		"empty":                           {429, ``, true, ""},
		"the key echoed":                  {429, `{"error":"slow down, ` + testKey + `"}`, true, "slow down, [redacted]"},
		"the key echoed without a prefix": {401, `{"error":{"message":"key ` + testKey[3:] + ` revoked"}}`, false, "key [redacted] revoked"},
	} {
		t.Run(name, func(t *testing.T) {
			s := newServer(t, raw(c.status, map[string]string{"x-request-id": "req_e"}, c.body))
			_, err := newModel(t, s, openai.WithMaxRetries(0)).Generate(context.Background(), hi)
			var pe *llm.ProviderError
			if !errors.As(err, &pe) || pe.Status != c.status || pe.Retryable != c.retryable || pe.RequestID != "req_e" {
				t.Fatalf("err = %v (%+v), want status %d, retryable %v", err, pe, c.status, c.retryable)
			}
			var ae *openai.APIError
			if !errors.As(err, &ae) || ae.Status != c.status || ae.Message != c.message {
				t.Errorf("APIError = %+v, want message %q", ae, c.message)
			}
			assertNoKey(t, name, err)
		})
	}
}
