package rawjson

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

type step struct {
	ID        string          `json:"id"`
	Arguments json.RawMessage `json:"arguments"`
}

type plan struct {
	Goal  string `json:"goal"`
	Steps []step `json:"steps"`
}

type record struct {
	Version int   `json:"version"`
	Plan    *plan `json:"plan"`
	// Decoy has members named like the path's, which Restore must leave.
	Decoy map[string]any `json:"decoy,omitempty"`
}

// encode writes v as the stores do: no HTML escaping, no final newline.
func encode(t *testing.T, v any) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

var argumentsPath = []string{"plan", "steps", Each, "arguments"}

func arguments(p *plan) []json.RawMessage {
	var raws []json.RawMessage
	if p != nil {
		for _, s := range p.Steps {
			raws = append(raws, s.Arguments)
		}
	}
	return raws
}

func TestRestoredArgumentsComeBackByteForByte(t *testing.T) {
	spaced := json.RawMessage("{\n  \"note\" : \"a \\u0000 b \\/ \u2028 <&>\",\r\n\t\"n\": [ 412.50 , 1e-30 ]\n}")
	tests := []struct {
		name string
		rec  record
	}{
		{"spaced arguments", record{Version: 1, Plan: &plan{Goal: "g", Steps: []step{{ID: "s1", Arguments: spaced}}}}},
		{"compact and spaced arguments side by side", record{Version: 1, Plan: &plan{Goal: `"steps":[` + "\x00", Steps: []step{
			{ID: "s1", Arguments: json.RawMessage(`{"a":1}`)}, {ID: "s2", Arguments: spaced}, {ID: "s3", Arguments: json.RawMessage(` [ true ] `)},
		}}}},
		{"arguments that are not objects", record{Version: 1, Plan: &plan{Steps: []step{
			{ID: "s1", Arguments: json.RawMessage(` "text" `)}, {ID: "s2", Arguments: json.RawMessage("\t-0.0e+1")},
		}}}},
		{"empty arguments stay null", record{Version: 1, Plan: &plan{Steps: []step{{ID: "s1"}, {ID: "s2", Arguments: spaced}}}}},
		{"members named like the path elsewhere", record{Version: 1, Decoy: map[string]any{"steps": []any{map[string]any{"arguments": "x"}}},
			Plan: &plan{Steps: []step{{ID: "arguments", Arguments: spaced}}}}},
		{"no steps", record{Version: 1, Plan: &plan{}}},
		{"no plan", record{Version: 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			doc := encode(t, tc.rec)
			raws := arguments(tc.rec.Plan)
			got, err := Restore(doc, argumentsPath, raws)
			if err != nil {
				t.Fatalf("Restore: %v", err)
			}
			if !json.Valid(got) {
				t.Fatalf("Restore wrote %q, which is not JSON", got)
			}
			var back record
			if err := json.Unmarshal(got, &back); err != nil {
				t.Fatal(err)
			}
			if back.Version != tc.rec.Version || (back.Plan == nil) != (tc.rec.Plan == nil) {
				t.Fatalf("Restore changed the document around the arguments: %s", got)
			}
			for i, raw := range raws {
				want := string(raw)
				if len(raw) == 0 {
					want = "null"
				}
				if g := string(bytes.TrimSpace(back.Plan.Steps[i].Arguments)); g != strings.TrimSpace(want) {
					t.Errorf("step %d arguments came back as %q, want %q", i, g, want)
				}
			}
			if tc.rec.Plan != nil && tc.rec.Plan.Goal != back.Plan.Goal {
				t.Errorf("goal %q, want %q", back.Plan.Goal, tc.rec.Plan.Goal)
			}
			if tc.rec.Decoy != nil && !strings.Contains(string(got), `"decoy":{"steps":[{"arguments":"x"}]}`) {
				t.Errorf("Restore changed a member the path does not lead to: %s", got)
			}
		})
	}
}

func TestRestoreRefusesADocumentThatDoesNotHoldTheRawValues(t *testing.T) {
	rec := record{Version: 1, Plan: &plan{Steps: []step{{ID: "s1", Arguments: json.RawMessage(`{"a": 1}`)}, {ID: "s2", Arguments: json.RawMessage(`[2]`)}}}}
	doc := encode(t, rec)
	tests := []struct {
		name string
		doc  []byte
		path []string
		raws []json.RawMessage
	}{
		{"fewer raw values than the path leads to", doc, argumentsPath, []json.RawMessage{json.RawMessage(`{"a": 1}`)}},
		{"more raw values than the path leads to", doc, argumentsPath, append(arguments(rec.Plan), json.RawMessage(`3`))},
		{"raw values in another order", doc, argumentsPath, []json.RawMessage{json.RawMessage(`[2]`), json.RawMessage(`{"a": 1}`)}},
		{"a raw value that is not JSON", doc, argumentsPath, []json.RawMessage{json.RawMessage(`{"a": `), json.RawMessage(`[2]`)}},
		{"a document written with HTML escaping", []byte(`{"plan":{"steps":[{"arguments":"\u003c"}]}}`), argumentsPath, []json.RawMessage{json.RawMessage(`"<"`)}},
		{"a path through a string", doc, []string{"version", Each}, nil},
		{"a document that is not JSON", []byte(`{"plan":{"steps":[{"arguments":`), argumentsPath, []json.RawMessage{json.RawMessage(`1`)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Restore(tc.doc, tc.path, tc.raws)
			if err == nil {
				t.Fatalf("Restore = %q, want an error", got)
			}
			if got != nil {
				t.Errorf("Restore failed (%v) and still returned %q", err, got)
			}
		})
	}
}

func TestRestoreReturnsACompactDocumentAsItIs(t *testing.T) {
	rec := record{Version: 1, Plan: &plan{Steps: []step{{ID: "s1", Arguments: json.RawMessage(`{"a":1}`)}}}}
	doc := encode(t, rec)
	got, err := Restore(doc, argumentsPath, arguments(rec.Plan))
	if err != nil || !bytes.Equal(got, doc) {
		t.Fatalf("Restore = %s, %v; want the document unchanged", got, err)
	}
}
