package anthropic_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/planexec/planexec/llm"
	"github.com/planexec/planexec/llm/anthropic"
)

// planRequest asks for a plan through the forced tool call.
var planRequest = &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "plan"}},
	Output: &llm.OutputSchema{Name: "plan", Schema: json.RawMessage(`{"type":"object"}`)}}

// No answer panics Generate or passes for a plan: a 200 whose body is not a
// Messages API reply, whose plan tool call has no object for input, or whose
// counts are impossible, is a *llm.ProviderError wrapping
// llm.ErrMalformedResponse, with its status, not retryable, and no Response.
func TestAShapelessAnswerIsAMalformedResponseError(t *testing.T) {
	const tool = `{"type":"tool_use","id":"toolu_1","name":"plan","input":`
	for name, body := range map[string]string{
		"null":                   `null`,
		"empty object":           `{}`,
		"array":                  `[]`,
		"string":                 `"{\"goal\":\"x\"}"`,
		"empty body":             ``,
		"not JSON":               `<html>502</html>`,
		"cut off":                `{"content":[` + tool + `{"goal":"x"`,
		"two documents":          `{"content":[]} {}`,
		"content null":           `{"type":"message","content":null,"stop_reason":"tool_use"}`,
		"content an object":      `{"content":{"type":"text","text":"hi"}}`,
		"content a string":       `{"content":"hi"}`,
		"a block null":           `{"content":[null],"stop_reason":"end_turn"}`,
		"a block a number":       `{"content":[42],"stop_reason":"end_turn"}`,
		"a type a number":        `{"content":[{"type":7}],"stop_reason":"end_turn"}`,
		"tool input null":        `{"content":[` + tool + `null}],"stop_reason":"tool_use"}`,
		"tool input missing":     `{"content":[{"type":"tool_use","id":"toolu_1","name":"plan"}],"stop_reason":"tool_use"}`,
		"tool input a string":    `{"content":[` + tool + `"{\"goal\":\"x\"}"}],"stop_reason":"tool_use"}`,
		"tool input an array":    `{"content":[` + tool + `[]}],"stop_reason":"tool_use"}`,
		"usage a string":         `{"content":[` + tool + `{}}],"usage":"lots"}`,
		"tokens a string":        `{"content":[` + tool + `{}}],"usage":{"input_tokens":"12","output_tokens":3}}`,
		"negative input tokens":  `{"content":[` + tool + `{}}],"usage":{"input_tokens":-5,"output_tokens":3}}`,
		"negative output tokens": `{"content":[` + tool + `{}}],"usage":{"input_tokens":5,"output_tokens":-3}}`,
		"negative cache tokens":  `{"content":[` + tool + `{}}],"usage":{"input_tokens":5,"output_tokens":3,"cache_read_input_tokens":-100}}`,
		"absurd tokens":          `{"content":[` + tool + `{}}],"usage":{"input_tokens":9223372036854775807,"output_tokens":1}}`,
		"sums past int64":        `{"content":[` + tool + `{}}],"usage":{"input_tokens":4611686018427387904,"output_tokens":1,"cache_read_input_tokens":4611686018427387904}}`,
		"tokens past int64":      `{"content":[` + tool + `{}}],"usage":{"input_tokens":1,"output_tokens":99999999999999999999}}`,
		"fractional tokens":      `{"content":[` + tool + `{}}],"usage":{"input_tokens":1.5,"output_tokens":1}}`,
	} {
		t.Run(name, func(t *testing.T) {
			api := newAPI(t, reply{body: body})
			resp, err := api.model(t, anthropic.WithMaxRetries(0)).Generate(context.Background(), planRequest)
			if !errors.Is(err, llm.ErrMalformedResponse) {
				t.Fatalf("err = %v, want ErrMalformedResponse", err)
			}
			pe := providerError(t, err)
			if pe.Status != http.StatusOK || pe.Retryable || pe.RequestID != "req_001" {
				t.Errorf("ProviderError = %+v", pe)
			}
			if resp != nil {
				t.Errorf("a shapeless answer came back as %+v", resp)
			}
			if len(body) > 8 && strings.Contains(err.Error(), body) {
				t.Errorf("the error quotes the body: %v", err)
			}
		})
	}
}

// Members a reply may leave out or send as null are their zero values: no
// usage, no model, no stop reason, null cache counts. A tool call for another
// tool is not the answer.
func TestAnAnswerMayLeaveOutWhatTheAPIMarksOptional(t *testing.T) {
	api := newAPI(t, reply{body: `{"content":[{"type":"tool_use","name":"other","input":null},{"type":"tool_use","name":"plan","input":{"goal":"x"}}],` +
		`"stop_reason":null,"usage":{"input_tokens":3,"output_tokens":4,"cache_creation_input_tokens":null,"cache_read_input_tokens":null}}`})
	resp, err := api.model(t).Generate(context.Background(), planRequest)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Content != `{"goal":"x"}` || resp.FinishReason != "" || resp.Model != "claude-test-1" ||
		resp.Usage != (llm.Usage{InputTokens: 3, OutputTokens: 4, Calls: 1}) {
		t.Errorf("response = %+v", resp)
	}
}

// Compatible servers write their errors in other shapes than Anthropic's
// {"type":"error","error":{...}}. Whatever the shape, the status, the retry
// advice and the message (without the key) are kept.
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
		"top-level message":               {529, `{"message":"overloaded"}`, true, "overloaded"},
		"detail (FastAPI)":                {404, `{"detail":"Not Found"}`, false, "Not Found"},
		"null":                            {502, `null`, true, ""},
		"HTML from a proxy":               {502, `<html><body>Bad Gateway</body></html>`, true, ""},
		"empty":                           {429, ``, true, ""},
		"the key echoed":                  {429, `{"error":"slow down, ` + testKey + `"}`, true, "slow down, [redacted]"},
		"the key echoed without a prefix": {401, `{"type":"error","error":{"type":"authentication_error","message":"key ` + testKey[7:] + ` revoked"}}`, false, "key [redacted] revoked"},
	} {
		t.Run(name, func(t *testing.T) {
			api := newAPI(t, reply{status: c.status, body: c.body})
			_, err := api.model(t, anthropic.WithMaxRetries(0)).Generate(context.Background(), planRequest)
			pe := providerError(t, err)
			if pe.Status != c.status || pe.Retryable != c.retryable || pe.RequestID != "req_001" {
				t.Fatalf("err = %v (%+v), want status %d, retryable %v", err, pe, c.status, c.retryable)
			}
			if ae, ok := errors.AsType[*anthropic.APIError](err); !ok || ae.Status != c.status || ae.Message != c.message {
				t.Errorf("APIError = %+v, want message %q", ae, c.message)
			}
			noKeyInChain(t, name, err)
			if strings.Contains(err.Error(), testKey[7:]) {
				t.Errorf("the key without its prefix appears: %v", err)
			}
		})
	}
}
