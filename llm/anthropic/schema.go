package anthropic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// constrained returns schema ready for Anthropic's constrained decoding
// (strict tool use and structured outputs), which accepts only part of JSON
// Schema: numeric bounds (minimum, maximum, exclusiveMinimum,
// exclusiveMaximum, multipleOf), string lengths (minLength, maxLength) and
// array sizes other than minItems 0 or 1 (maxItems, larger minItems) are
// refused. Each is moved into the description of the schema that had it,
// in words ("at least 1; at most 9"), as Anthropic's own SDKs do: the model
// is still told, and the executor still checks. Everything else is kept as
// it is, numbers digit for digit.
func constrained(schema []byte) ([]byte, error) {
	var root any
	dec := json.NewDecoder(bytes.NewReader(schema))
	dec.UseNumber()
	if err := dec.Decode(&root); err != nil {
		return nil, err
	}
	loosen(root)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(root); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// unconstrained are the keywords constrained decoding refuses, with how each
// is said in a description.
var unconstrained = []struct{ keyword, words string }{
	{"minimum", "at least %s"},
	{"exclusiveMinimum", "greater than %s"},
	{"maximum", "at most %s"},
	{"exclusiveMaximum", "less than %s"},
	{"multipleOf", "a multiple of %s"},
	{"minLength", "at least %s characters"},
	{"maxLength", "at most %s characters"},
	{"minItems", "at least %s items"},
	{"maxItems", "at most %s items"},
}

// loosen rewrites node, a decoded schema, and the schemas inside it.
func loosen(node any) {
	s, ok := node.(map[string]any)
	if !ok {
		return
	}
	var notes []string
	for _, u := range unconstrained {
		v, ok := s[u.keyword]
		if !ok {
			continue
		}
		if n, _ := v.(json.Number); u.keyword == "minItems" && (n == "0" || n == "1") {
			continue // accepted
		}
		notes = append(notes, fmt.Sprintf(u.words, v))
		delete(s, u.keyword)
	}
	if notes != nil {
		note := strings.Join(notes, "; ")
		if d, _ := s["description"].(string); d != "" {
			s["description"] = d + " (" + note + ")"
		} else {
			s["description"] = note
		}
	}
	for _, k := range []string{"items", "additionalProperties", "not"} {
		loosen(s[k])
	}
	for _, k := range []string{"anyOf", "allOf", "oneOf", "prefixItems"} {
		if list, ok := s[k].([]any); ok {
			for _, x := range list {
				loosen(x)
			}
		}
	}
	for _, k := range []string{"properties", "$defs", "definitions"} {
		if m, ok := s[k].(map[string]any); ok {
			for _, x := range m {
				loosen(x)
			}
		}
	}
}
