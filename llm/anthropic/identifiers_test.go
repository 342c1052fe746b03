package anthropic_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/llm"
	"github.com/planexec/planexec/llm/anthropic"
)

// What Generate takes from an answer to name it (the request-id header, the
// model) reaches errors, Responses and planning events. It is kept only when
// it is a short run of plain characters with no part of the key in it;
// otherwise it is dropped, never half shown.
func TestIdentifiersFromAnAnswerNeverCarryTheKey(t *testing.T) {
	for name, c := range map[string]struct {
		id   string
		want string
	}{
		"plain":                 {"req_011CSHoEeqs5C35K2UUqR7Fy", "req_011CSHoEeqs5C35K2UUqR7Fy"},
		"the key":               {testKey, ""},
		"the key in an id":      {"req_" + testKey, ""},
		"the key, no prefix":    {"req-" + testKey[7:], ""},
		"a masked key":          {"sk-ant-****0c9e7d", ""},
		"too long":              {strings.Repeat("a", 1000), ""},
		"spaces":                {"req 1 <b>hello</b>", ""},
		"not ASCII":             {"req_é", ""},
		"a quote and a percent": {`req"%s`, ""},
	} {
		t.Run(name, func(t *testing.T) {
			api := newAPI(t, reply{body: planned(goodPlan).body, header: map[string]string{"request-id": c.id}},
				reply{status: 429, body: `{"error":"slow down"}`, header: map[string]string{"request-id": c.id}})
			ex := executor(t)
			if _, err := ex.Plan(context.Background(), planner(t, api.model(t)), "get them to New York"); err != nil {
				t.Fatal(err)
			}
			if e := eventsOf(ex, planexec.EventPlanned); len(e) != 1 || e[0].RequestID != c.want {
				t.Errorf("PLANNED = %+v, want request id %q", e, c.want)
			}
			_, err := api.model(t, anthropic.WithMaxRetries(0)).Generate(context.Background(), planRequest)
			if pe := providerError(t, err); pe.Status != 429 || pe.RequestID != c.want {
				t.Errorf("ProviderError = %+v, want request id %q", pe, c.want)
			}
			noKeyInChain(t, name, err)
		})
	}

	// The model named in the answer carries the key: the model asked for is kept.
	api := newAPI(t, reply{body: `{"model":"` + testKey + `","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn"}`})
	resp, err := api.model(t).Generate(context.Background(), &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}})
	if err != nil || resp.Model != "claude-test-1" {
		t.Errorf("Generate = %+v, %v; want the model asked for", resp, err)
	}
}

// A Model printed with any verb, itself or through a pointer, shows no key.
func TestAModelPrintsNoKey(t *testing.T) {
	m, err := anthropic.New("claude-test-1", anthropic.WithAPIKey(testKey))
	if err != nil {
		t.Fatal(err)
	}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x"} {
		for what, v := range map[string]any{"*Model": m, "Model": *m, "a struct holding one": struct{ m *anthropic.Model }{m}} {
			if text := fmt.Sprintf(verb, v); strings.Contains(text, testKey[7:]) || strings.Contains(text, fmt.Sprintf("%x", testKey[7:])) {
				t.Errorf("%s printed with %s shows the key: %.300s", what, verb, text)
			}
		}
	}
	if got := fmt.Sprint(m); got != "anthropic.Model(claude-test-1)" {
		t.Errorf("Sprint = %q", got)
	}
}
