package planexec

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
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
	(&ruleKeywords{defs: s.Definitions, seen: map[*jsonschema.Schema]bool{}}).walk(t, s)
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

// outcomeSchema is the JSON Schema of what a tool returning t records, as
// json.Marshal writes it (a decimal as a string), for the planner to see
// what a reference may read.
func outcomeSchema(t reflect.Type, tool string) (_ json.RawMessage, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%v", p) // a type JSON cannot hold (a channel, a function)
		}
	}()
	r := &jsonschema.Reflector{
		Anonymous:      true,
		DoNotReference: !recursive(t, map[reflect.Type]bool{}),
		ExpandedStruct: true,
		Namer:          func(t reflect.Type) string { return tool + ".outcome." + definitionName(t) },
		Mapper: func(t reflect.Type) *jsonschema.Schema {
			if t == decimalType {
				return &jsonschema.Schema{Type: "string", Description: "a decimal number"}
			}
			return nil
		},
	}
	s := r.ReflectFromType(t)
	s.Version = ""
	return json.Marshal(s)
}

// strictify lists every property as required and lets the optional ones be
// null, which is how strict structured-output modes express "optional" (it
// matches the decoder: an optional field may be absent or null), and drops
// annotations strict modes reject. It reports whether the schema is within
// what strict modes accept: a map, a raw JSON value, a length rule written
// in a jsonschema tag or a jsonschema_extras keyword is not.
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
		s.MinLength != nil || s.MaxLength != nil || s.MinProperties != nil || s.MaxProperties != nil || s.UniqueItems ||
		len(s.Extras) > 0 {
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
				// The description moves to the union: said once, where the
				// member is.
				inner := pair.Value
				pair.Value = &jsonschema.Schema{
					Description: inner.Description,
					AnyOf:       []*jsonschema.Schema{inner, {Type: "null"}},
				}
				inner.Description = ""
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

// ruleKeywords writes the value rules of `validate:` tags into the schema
// the model sees, so that it is told the rules the contract enforces. It
// writes only what strict structured output accepts (OpenAI's rules for
// strict mode, https://platform.openai.com/docs/guides/structured-outputs,
// "Supported schemas"), so that a contract stays Strict:
//
//   - numbers and decimals: min and gte → minimum, max and lte → maximum,
//     gt → exclusiveMinimum, lt → exclusiveMaximum, oneof → enum;
//   - strings: oneof → enum; email, uuid, ipv4, ipv6 → format;
//   - slices and arrays: len, min, max, gt, gte, lt, lte → minItems, maxItems.
//
// A length rule on a string (len, min, max, gt, gte, lt, lte) would be
// minLength and maxLength, which are not in that list (OpenAI itself is
// reported to accept them, but servers that speak its API document them as
// unsupported): it is written into the description instead ("exactly 3
// characters"), which every mode accepts. Anthropic's constrained decoding
// accepts less still; llm/anthropic moves the rest into words the same way.
// Rules joined with "|", rules on map keys and rules behind omitempty (the
// empty value passes them) are not written, except omitempty on an optional
// field, whose empty value the model writes as null. The validator stays
// the authority: a keyword tells the model, it does not replace the check.
type ruleKeywords struct {
	defs jsonschema.Definitions
	seen map[*jsonschema.Schema]bool
}

// walk follows type t and its schema s together.
func (k *ruleKeywords) walk(t reflect.Type, s *jsonschema.Schema) {
	s = k.resolve(s)
	if s == nil || k.seen[s] {
		return
	}
	k.seen[s] = true
	t = deref(t)
	switch t.Kind() {
	case reflect.Struct:
		if t == decimalType || t.ConvertibleTo(timeType) {
			return
		}
		k.fields(t, s)
	case reflect.Slice, reflect.Array:
		k.walk(t.Elem(), s.Items)
	case reflect.Map:
		k.walk(t.Elem(), s.AdditionalProperties)
	}
}

// fields applies the rules of struct type t's fields to the properties of
// s, as invopop/jsonschema names them (embedded structs promoted).
func (k *ruleKeywords) fields(t reflect.Type, s *jsonschema.Schema) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || strings.HasPrefix(f.Tag.Get("jsonschema"), "-") {
			continue
		}
		if f.Anonymous && name == "" && structKind(f.Type) || slices.Contains(strings.Split(opts, ","), "inline") {
			k.fields(deref(f.Type), s)
			continue
		}
		if !f.IsExported() && !f.Anonymous {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if s.Properties == nil {
			return
		}
		prop, ok := s.Properties.Get(name)
		if !ok {
			continue
		}
		k.field(f, prop)
		k.walk(f.Type, prop)
	}
}

// field writes the keywords of f's validate tag: the rules before the first
// dive into prop, those after it into the item schema, and so on.
func (k *ruleKeywords) field(f reflect.StructField, prop *jsonschema.Schema) {
	tag := f.Tag.Get("validate")
	if tag == "" || tag == "-" {
		return
	}
	_, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
	optional := slices.Contains(strings.Split(opts, ","), "omitempty") || slices.Contains(strings.Split(opts, ","), "omitzero")
	node, t := prop, f.Type
	for depth, level := range ruleLevels(tag) {
		if depth > 0 {
			c := deref(t)
			switch c.Kind() {
			case reflect.Slice, reflect.Array:
				node = node.Items
			case reflect.Map:
				node = node.AdditionalProperties
			default:
				return
			}
			t = c.Elem()
		}
		node = k.resolve(node)
		if node == nil || node.Ref != "" || node == jsonschema.TrueSchema || node == jsonschema.FalseSchema {
			return
		}
		if level.omit && !(depth == 0 && optional) {
			continue
		}
		applyRules(node, deref(t), level.rules)
	}
}

// resolve leaves a schema as it is: a reference is not followed for the
// rules of a field (a definition is shared by every field that refers to
// it), only when walking into a type.
func (k *ruleKeywords) resolve(s *jsonschema.Schema) *jsonschema.Schema {
	if s == nil || s.Ref == "" {
		return s
	}
	if d, ok := k.defs[strings.TrimPrefix(s.Ref, "#/$defs/")]; ok {
		return d
	}
	return nil
}

// ruleLevel is the rules of one level of a validate tag: the field's own,
// or after a dive its elements'. Each rule is a name and its parameter.
type ruleLevel struct {
	rules [][2]string
	omit  bool // the level says omitempty, omitnil or omitzero
}

// ruleLevels splits a validate tag (one NewContract checked) at its dives.
// Rules joined with "|" and rules on map keys are left out.
func ruleLevels(tag string) []ruleLevel {
	levels := []ruleLevel{{}}
	keys := false
	for _, it := range strings.Split(tag, ",") {
		cur := &levels[len(levels)-1]
		switch {
		case it == "keys":
			keys = true
		case it == "endkeys":
			keys = false
		case keys:
		case it == "dive":
			levels = append(levels, ruleLevel{})
		case it == "omitempty" || it == "omitnil" || it == "omitzero":
			cur.omit = true
		case strings.Contains(it, "|"):
		default:
			name, param, _ := strings.Cut(it, "=")
			param = paramUnescaper.Replace(param)
			cur.rules = append(cur.rules, [2]string{name, param})
		}
	}
	return levels
}

// applyRules writes the keywords rules say about a value of type t (pointers
// followed) into s.
func applyRules(s *jsonschema.Schema, t reflect.Type, rules [][2]string) {
	switch class := ruleClass(t); {
	case (class == "number" || class == "decimal") && t != reflect.TypeFor[time.Duration]():
		for _, r := range rules {
			n, ok := numberParam(t, r[1])
			switch r[0] {
			case "min", "gte":
				if ok {
					s.Minimum = tighter(s.Minimum, n, 1)
				}
			case "gt":
				if ok {
					s.ExclusiveMinimum = tighter(s.ExclusiveMinimum, n, 1)
				}
			case "max", "lte":
				if ok {
					s.Maximum = tighter(s.Maximum, n, -1)
				}
			case "lt":
				if ok {
					s.ExclusiveMaximum = tighter(s.ExclusiveMaximum, n, -1)
				}
			case "oneof":
				if enum := numberEnum(t, r[1]); enum != nil {
					s.Enum = enum
				}
			}
		}
	case class == "string":
		lo, hi := int64(-1), int64(-1)
		for _, r := range rules {
			n, err := strconv.ParseInt(r[1], 0, 64) // as the validator reads a length
			ok := err == nil && n >= 0
			switch r[0] {
			case "len":
				if ok {
					lo, hi = max(lo, n), minLimit(hi, n)
				}
			case "min", "gte":
				if ok {
					lo = max(lo, n)
				}
			case "gt":
				if ok {
					lo = max(lo, n+1)
				}
			case "max", "lte":
				if ok {
					hi = minLimit(hi, n)
				}
			case "lt":
				if ok && n > 0 {
					hi = minLimit(hi, n-1)
				}
			case "oneof":
				var enum []any
				for _, v := range oneofWords.FindAllString(r[1], -1) {
					enum = append(enum, strings.ReplaceAll(v, "'", ""))
				}
				if enum != nil {
					s.Enum = enum
				}
			case "email", "uuid", "ipv4", "ipv6":
				s.Format = r[0]
			}
		}
		if note := lengthNote(lo, hi); note != "" {
			if s.Description == "" {
				s.Description = note
			} else {
				s.Description += " (" + note + ")"
			}
		}
	case class == "collection" && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) && t.Elem().Kind() != reflect.Uint8:
		for _, r := range rules {
			n, err := strconv.ParseInt(r[1], 0, 64)
			if err != nil || n < 0 {
				continue
			}
			u := uint64(n)
			switch r[0] {
			case "len":
				s.MinItems, s.MaxItems = &u, &u
			case "min", "gte":
				s.MinItems = &u
			case "gt":
				u++
				s.MinItems = &u
			case "max", "lte":
				s.MaxItems = &u
			case "lt":
				if u > 0 {
					u--
					s.MaxItems = &u
				}
			}
		}
	}
}

// oneofWords splits a oneof parameter as the validator does: words, or
// several words in single quotes.
var oneofWords = regexp.MustCompile(`'[^']*'|\S+`)

// numberParam reads a rule's parameter as the validator (or, for decimals,
// decimalRule) does, and renders it as a JSON number.
func numberParam(t reflect.Type, param string) (json.Number, bool) {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, err := strconv.ParseInt(param, 0, 64)
		return json.Number(strconv.FormatInt(n, 10)), err == nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		n, err := strconv.ParseUint(param, 0, 64)
		return json.Number(strconv.FormatUint(n, 10)), err == nil
	case reflect.Float32, reflect.Float64:
		f, err := strconv.ParseFloat(param, 64)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return "", false
		}
		return json.Number(strconv.FormatFloat(f, 'g', -1, 64)), true
	}
	if t == decimalType {
		d, err := decimal.NewFromString(param)
		return json.Number(d.String()), err == nil
	}
	return "", false
}

// numberEnum is the enum a oneof rule allows for a number type: the values
// a value of t can equal. The validator compares integers as base-10 text,
// so a word it could never match ("01") is left out; decimals compare by
// value.
func numberEnum(t reflect.Type, param string) []any {
	var enum []any
	for _, w := range strings.Fields(param) {
		switch {
		case t == decimalType:
			if d, err := decimal.NewFromString(w); err == nil {
				enum = append(enum, json.Number(d.String()))
			}
		case t.Kind() >= reflect.Int && t.Kind() <= reflect.Int64:
			if n, err := strconv.ParseInt(w, 10, 64); err == nil && strconv.FormatInt(n, 10) == w {
				enum = append(enum, json.Number(w))
			}
		case t.Kind() >= reflect.Uint && t.Kind() <= reflect.Uintptr:
			if n, err := strconv.ParseUint(w, 10, 64); err == nil && strconv.FormatUint(n, 10) == w {
				enum = append(enum, json.Number(w))
			}
		}
	}
	return enum
}

// tighter returns the tighter of two bounds: the larger when sign is 1 (a
// lower bound), the smaller when it is -1.
func tighter(old, n json.Number, sign int) json.Number {
	if old == "" {
		return n
	}
	a, errA := decimal.NewFromString(string(old))
	b, errB := decimal.NewFromString(string(n))
	if errA != nil || errB != nil || b.Cmp(a) == sign {
		return n
	}
	return old
}

// minLimit is min for an upper limit where -1 means none.
func minLimit(hi, n int64) int64 {
	if hi < 0 {
		return n
	}
	return min(hi, n)
}

// lengthNote says a string length range in words.
func lengthNote(lo, hi int64) string {
	lo = max(lo, 0)
	switch {
	case hi < 0 && lo == 0:
		return ""
	case hi < 0:
		return fmt.Sprintf("at least %d characters", lo)
	case lo == hi:
		return fmt.Sprintf("exactly %d characters", lo)
	case lo == 0:
		return fmt.Sprintf("at most %d characters", hi)
	}
	return fmt.Sprintf("%d to %d characters", lo, hi)
}

// schemaTagKeys are the keys invopop/jsonschema reads from a jsonschema tag
// (key=value); required and nullable are its flags.
var schemaTagKeys = set("title", "description", "type", "anchor", "oneof_required", "anyof_required", "oneof_ref",
	"oneof_type", "anyof_ref", "anyof_type", "minLength", "maxLength", "pattern", "format", "readOnly", "writeOnly",
	"default", "example", "enum", "multipleOf", "minimum", "maximum", "exclusiveMaximum", "exclusiveMinimum",
	"minItems", "maxItems", "uniqueItems")

// checkSchemaTags refuses a jsonschema tag with a part invopop/jsonschema
// does not read. Its parser splits the tag at every comma that is not
// escaped, so `jsonschema:"description=departure date, YYYY-MM-DD"` would
// describe the field as "departure date" and drop the rest without a word;
// a misspelt key is dropped the same way.
func checkSchemaTags(t reflect.Type) error {
	done := map[reflect.Type]bool{}
	var walk func(t reflect.Type, at string) error
	walk = func(t reflect.Type, at string) error {
		t = deref(t)
		switch t.Kind() {
		case reflect.Slice, reflect.Array, reflect.Map:
			return walk(t.Elem(), at)
		case reflect.Struct:
		default:
			return nil
		}
		if done[t] || t == decimalType || t.ConvertibleTo(timeType) {
			return nil
		}
		done[t] = true
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if !f.IsExported() && !f.Anonymous {
				continue
			}
			path := fieldPath(at, f)
			parts := splitSchemaTag(f.Tag.Get("jsonschema"))
			if parts[0] == "-" {
				continue
			}
			for _, p := range parts {
				key, _, hasValue := strings.Cut(p, "=")
				if p == "" || p == "required" || p == "nullable" || hasValue && schemaTagKeys[key] {
					continue
				}
				if len(p) > 40 {
					p = p[:40] + "…"
				}
				return fmt.Errorf("field %s: the jsonschema tag has a part invopop/jsonschema does not read, %q; "+
					"if a comma in a description or title ended there, write the description in its own tag, "+
					`jsonschema_description:"...", or escape each comma in the jsonschema tag as \\,`, pathOrRoot(path), p)
			}
			if err := walk(f.Type, path); err != nil {
				return err
			}
		}
		return nil
	}
	return walk(t, "")
}

// splitSchemaTag splits a jsonschema tag as invopop/jsonschema does: at each
// comma not preceded by a backslash (which escapes it).
func splitSchemaTag(tag string) []string {
	parts := []string{}
	for _, p := range strings.Split(tag, ",") {
		if n := len(parts); n > 0 && strings.HasSuffix(parts[n-1], `\`) {
			parts[n-1] = strings.TrimSuffix(parts[n-1], `\`) + "," + p
			continue
		}
		parts = append(parts, p)
	}
	return parts
}
