package openai_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/planexec/planexec/llm"
	"github.com/planexec/planexec/llm/openai"
)

// What Generate takes from an answer to name it (the x-request-id header,
// the completion's id, the model) reaches errors, Responses and planning
// events. It is kept only when it is a short run of plain characters with no
// part of the key in it; otherwise it is dropped, never half shown (a request
// id then falls back to the completion's id).
func TestIdentifiersFromAnAnswerNeverCarryTheKey(t *testing.T) {
	for name, c := range map[string]struct {
		id   string
		want string
	}{
		"plain":                 {"req_8f2c1a", "req_8f2c1a"},
		"a uuid":                {"7f1b6a3e-2d4c-4e8f-9a0b-1c2d3e4f5a6b", "7f1b6a3e-2d4c-4e8f-9a0b-1c2d3e4f5a6b"},
		"the key":               {testKey, ""},
		"the key in an id":      {"req_" + testKey, ""},
		"the key, no prefix":    {"req-" + testKey[3:], ""},
		"a masked key":          {"sk-test-****d2e8b6", ""},
		"too long":              {strings.Repeat("a", 1000), ""},
		"spaces":                {"req 1 <b>hello</b>", ""},
		"not ASCII":             {"req_é", ""},
		"a quote and a percent": {`req"%s`, ""},
	} {
		t.Run(name, func(t *testing.T) {
			s := newServer(t, reply(answer{content: goodPlan, id: c.id}))
			ex := tripExecutor(t)
			if _, err := ex.Plan(context.Background(), planner(t, newModel(t, s)), "get them to New York"); err != nil {
				t.Fatal(err)
			}
			e := ex.Events()[0]
			if c.want == "" && !strings.HasPrefix(e.RequestID, "chatcmpl-") || c.want != "" && e.RequestID != c.want {
				t.Errorf("PLANNED request id = %q, want %q or the completion id", e.RequestID, c.want)
			}
		})
	}

	// Header, completion id and model all carry the key: nothing is kept.
	echo := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("x-request-id", "req_"+testKey)
		fmt.Fprintf(w, `{"id":"chatcmpl-%s","model":"%s","choices":[{"message":{"content":"{}"},"finish_reason":"stop"}]}`, testKey, testKey)
	}
	s := newServer(t, echo)
	resp, err := newModel(t, s).Generate(context.Background(), hi)
	if err != nil {
		t.Fatal(err)
	}
	if resp.RequestID != "" || resp.Model != "gpt-4o-mini" {
		t.Errorf("RequestID %q, Model %q: want none, and the model asked for", resp.RequestID, resp.Model)
	}

	// An error answer that echoes the key in its request id.
	s = newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("x-request-id", "req_"+testKey)
		w.WriteHeader(http.StatusTooManyRequests)
		fmt.Fprintf(w, `{"error":{"message":"slow down","type":"requests","code":"%s"}}`, testKey)
	})
	_, err = newModel(t, s, openai.WithMaxRetries(0)).Generate(context.Background(), hi)
	var pe *llm.ProviderError
	if !errors.As(err, &pe) || pe.Status != 429 || pe.RequestID != "" {
		t.Errorf("err = %v (%+v), want the 429 with no request id", err, pe)
	}
	assertNoKey(t, "an echoed request id", err)
}

// A Model printed with any verb, itself or through a pointer, shows no key.
func TestAModelPrintsNoKey(t *testing.T) {
	m, err := openai.New("gpt-4o-mini", openai.WithAPIKey(testKey), openai.WithBaseURL("http://127.0.0.1:1/v1"))
	if err != nil {
		t.Fatal(err)
	}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x"} {
		for what, v := range map[string]any{"*Model": m, "Model": *m} {
			if text := fmt.Sprintf(verb, v); strings.Contains(text, testKey[3:]) || strings.Contains(text, fmt.Sprintf("%x", testKey[3:])) {
				t.Errorf("%s printed with %s shows the key: %s", what, verb, text)
			}
		}
	}
	if got := fmt.Sprint(m); got != "openai.Model(gpt-4o-mini)" {
		t.Errorf("Sprint = %q", got)
	}
}
