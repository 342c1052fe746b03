package planexec

import (
	"encoding/json"
	"reflect"
	"strings"
	"unicode"

	"github.com/invopop/jsonschema"
	"github.com/shopspring/decimal"
)

var decimalType = reflect.TypeFor[decimal.Decimal]()

// strictSchema generates the JSON Schema of t with invopop/jsonschema and
// makes it strict-mode ready.
//
// A recursive type cannot be inlined: its schema refers to definitions in
// "$defs", named "<tool>.<Type>" so that the definitions of several tools can
// share one document (see PlanSchema).
func strictSchema(t reflect.Type, tool string) (schema json.RawMessage, strict bool, err error) {
	rec := recursive(t, map[reflect.Type]bool{})
	r := &jsonschema.Reflector{
		Anonymous:      true,
		DoNotReference: !rec,
		ExpandedStruct: true,
		Namer:          func(t reflect.Type) string { return tool + "." + definitionName(t) },
		Mapper: func(t reflect.Type) *jsonschema.Schema {
			if t == decimalType {
				return &jsonschema.Schema{Type: "number"}
			}
			return nil
		},
	}
	s := r.ReflectFromType(t)
	s.Version = ""
	seen := map[*jsonschema.Schema]bool{}
	strict = strictify(s, seen)
	if rec {
		// The root is expanded in place, but a recursive type refers to
		// itself by name: give it a definition too.
		name := tool + "." + definitionName(t)
		if s.Definitions == nil {
			s.Definitions = jsonschema.Definitions{}
		}
		if _, ok := s.Definitions[name]; !ok {
			self := *s
			self.Definitions = nil
			seen[&self] = true
			s.Definitions[name] = &self
		}
	}
	for _, d := range s.Definitions {
		if !strictify(d, seen) {
			strict = false
		}
	}
	schema, err = json.Marshal(s)
	return schema, strict, err
}

// strictify lists every property as required and lets the optional ones be
// null, which is how strict structured-output modes express "optional" (it
// matches the decoder: an optional field may be absent or null), and drops
// annotations strict modes reject. It reports whether the schema is within
// what strict modes accept: a map, a raw JSON value or a length rule is not.
func strictify(s *jsonschema.Schema, seen map[*jsonschema.Schema]bool) (strict bool) {
	if s == nil || seen[s] {
		return true
	}
	seen[s] = true
	strict = true
	sub := func(x *jsonschema.Schema) {
		if x == jsonschema.TrueSchema || (x != nil && x.Type == "" && x.Ref == "" && x.AnyOf == nil && x.Enum == nil && x.Const == nil && x.Properties == nil) {
			strict = false // any JSON value at all: strict modes cannot say it
		}
		if !strictify(x, seen) {
			strict = false
		}
	}
	// Annotations strict modes reject and nothing here relies on.
	s.Default, s.Examples, s.ContentEncoding, s.ContentMediaType = nil, nil, "", ""
	s.Deprecated, s.ReadOnly, s.WriteOnly = false, false, false
	if s.OneOf != nil || s.AllOf != nil || s.Not != nil || s.If != nil || s.PatternProperties != nil ||
		s.MinLength != nil || s.MaxLength != nil || s.MinProperties != nil || s.MaxProperties != nil || s.UniqueItems {
		strict = false
	}
	if s.Properties != nil {
		required := map[string]bool{}
		for _, r := range s.Required {
			required[r] = true
		}
		all := make([]string, 0, s.Properties.Len())
		for pair := s.Properties.Oldest(); pair != nil; pair = pair.Next() {
			all = append(all, pair.Key)
			sub(pair.Value)
			if !required[pair.Key] {
				pair.Value = &jsonschema.Schema{
					Description: pair.Value.Description,
					AnyOf:       []*jsonschema.Schema{pair.Value, {Type: "null"}},
				}
				s.Properties.Set(pair.Key, pair.Value)
			}
		}
		s.Required = all
		if s.AdditionalProperties == nil {
			s.AdditionalProperties = jsonschema.FalseSchema
		}
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties != jsonschema.FalseSchema {
		// A map: its keys are free, which strict modes cannot express.
		strict = false
		if s.AdditionalProperties != jsonschema.TrueSchema {
			strictify(s.AdditionalProperties, seen)
		}
	}
	if s.Items != nil {
		sub(s.Items)
	}
	for _, x := range s.AnyOf {
		sub(x)
	}
	for _, x := range s.OneOf {
		strictify(x, seen)
	}
	for _, x := range s.AllOf {
		strictify(x, seen)
	}
	return strict
}

// definitionName names a type's definition: its own name, or for an unnamed
// type (a slice of a recursive struct, say) its spelling with the characters
// a definition name should not hold replaced, so two such types never share a
// definition.
func definitionName(t reflect.Type) string {
	if t.Name() != "" {
		return t.Name()
	}
	return strings.Map(func(r rune) rune {
		if r == '_' || r == '.' || unicode.IsLetter(r) || unicode.IsDigit(r) {
			return r
		}
		return '_'
	}, t.String())
}

// recursive reports whether t refers to itself, in which case the schema must
// use references instead of inlining.
func recursive(t reflect.Type, visiting map[reflect.Type]bool) bool {
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Map:
		return recursive(t.Elem(), visiting)
	case reflect.Struct:
		if t == decimalType {
			return false
		}
		if visiting[t] {
			return true
		}
		visiting[t] = true
		defer delete(visiting, t)
		for i := 0; i < t.NumField(); i++ {
			if recursive(t.Field(i).Type, visiting) {
				return true
			}
		}
	}
	return false
}
