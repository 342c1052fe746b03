package anthropic_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/llm"
	"github.com/planexec/planexec/llm/anthropic"
)

// refused are the keywords Anthropic's constrained decoding refuses (minItems
// only above 1).
var refused = []string{"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minLength", "maxLength", "maxItems"}

// findKeywords lists, by path, every refused keyword in a decoded schema.
func findKeywords(node any, at string, found *[]string) {
	switch n := node.(type) {
	case map[string]any:
		for k, v := range n {
			for _, r := range refused {
				if k == r {
					*found = append(*found, at+"/"+k)
				}
			}
			if k == "minItems" {
				if f, _ := v.(float64); f > 1 {
					*found = append(*found, at+"/"+k)
				}
			}
			findKeywords(v, at+"/"+k, found)
		}
	case []any:
		for _, v := range n {
			findKeywords(v, at+"/[]", found)
		}
	}
}

// withoutWords drops refused keywords and descriptions from a decoded
// schema, to compare what is left.
func withoutWords(node any) any {
	switch n := node.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, v := range n {
			drop := k == "description" || k == "minItems"
			for _, r := range refused {
				drop = drop || k == r
			}
			if !drop {
				out[k] = withoutWords(v)
			}
		}
		return out
	case []any:
		out := make([]any, len(n))
		for i, v := range n {
			out[i] = withoutWords(v)
		}
		return out
	}
	return node
}

type ranged struct {
	Seats  int      `json:"seats" validate:"min=1,max=9"`
	Ratio  float64  `json:"ratio" validate:"gt=0,lt=1"`
	Cabin  int      `json:"cabin" validate:"oneof=1 2 3"`
	Legs   []string `json:"legs" validate:"min=1,max=4"`
	Origin string   `json:"origin" validate:"len=3" jsonschema_description:"IATA airport code"`
}

func rangedSchema(t *testing.T) *llm.OutputSchema {
	t.Helper()
	c, err := planexec.NewContract[ranged]("hold")
	if err != nil {
		t.Fatal(err)
	}
	if !c.Strict() {
		t.Fatalf("the contract is not strict: %s", c.Schema())
	}
	spec := planexec.ToolSpec{Name: "hold", Schema: c.Schema(), Strict: true}
	return &llm.OutputSchema{Name: "plan", Schema: planexec.PlanSchema([]planexec.ToolSpec{spec}), Strict: true}
}

// sentSchema returns the schema a request carried: the forced tool's input
// schema, or the structured output format's.
func sentSchema(t *testing.T, body map[string]any) any {
	t.Helper()
	if s := get(body, "output_config", "format", "schema"); s != nil {
		return s
	}
	tools, _ := body["tools"].([]any)
	if len(tools) != 1 {
		t.Fatalf("tools = %v", body["tools"])
	}
	return get(tools[0].(map[string]any), "input_schema")
}

func TestConstrainedDecodingIsSentOnlyKeywordsItAcceptsAndTheRestInWords(t *testing.T) {
	out := rangedSchema(t)
	var want any
	if err := json.Unmarshal(out.Schema, &want); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		opts  []anthropic.Option
		reply reply
	}{
		"structured output": {[]anthropic.Option{anthropic.WithStructuredOutput()}, message("end_turn", 20, 4, text(`{"goal":"x","steps":[]}`))},
		"strict tool":       {[]anthropic.Option{anthropic.WithStrictSchema()}, planned(`{"goal":"x","steps":[]}`)},
	} {
		t.Run(name, func(t *testing.T) {
			api := newAPI(t, tc.reply)
			if _, err := api.model(t, tc.opts...).Generate(context.Background(),
				&llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "plan"}}, Output: out}); err != nil {
				t.Fatalf("Generate: %v", err)
			}
			req := api.requests()[0]
			got := sentSchema(t, req.Body)
			var found []string
			findKeywords(got, "#", &found)
			if found != nil {
				t.Errorf("keywords constrained decoding refuses were sent: %v", found)
			}
			raw := string(req.Raw)
			for _, words := range []string{
				`at least 1; at most 9`, `greater than 0; less than 1`, `at most 4 items`, `"minItems":1`,
				`IATA airport code (exactly 3 characters)`,
			} {
				if !strings.Contains(raw, words) {
					t.Errorf("the request does not say %q: %s", words, raw)
				}
			}
			// Numbers stay numbers (an enum of integers), and nothing else changed.
			if !strings.Contains(raw, `"enum":[1,2,3]`) {
				t.Errorf("the enum of integers did not arrive as numbers: %s", raw)
			}
			gotJSON, _ := json.Marshal(withoutWords(got))
			wantJSON, _ := json.Marshal(withoutWords(want))
			if string(gotJSON) != string(wantJSON) {
				t.Errorf("the schema changed beyond the refused keywords:\n got %s\nwant %s", gotJSON, wantJSON)
			}
		})
	}
}

func TestAToolCallWithoutStrictModeCarriesTheSchemaAsItIs(t *testing.T) {
	out := rangedSchema(t)
	api := newAPI(t, planned(`{"goal":"x","steps":[]}`))
	if _, err := api.model(t).Generate(context.Background(),
		&llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "plan"}}, Output: out}); err != nil {
		t.Fatalf("Generate: %v", err)
	}
	got, _ := json.Marshal(sentSchema(t, api.requests()[0].Body))
	var plan map[string]any
	_ = json.Unmarshal(out.Schema, &plan)
	delete(plan, "type") // the SDK sends the input schema's type itself
	want, _ := json.Marshal(plan)
	var g map[string]any
	_ = json.Unmarshal(got, &g)
	delete(g, "type")
	got, _ = json.Marshal(g)
	if string(got) != string(want) {
		t.Errorf("input_schema changed:\n got %s\nwant %s", got, want)
	}
}
