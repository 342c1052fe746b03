package openai_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/planexec/planexec"
)

// Twelve argument types, as varied as real tools get: strings, integers,
// decimals, booleans, floats, times, nested structs, slices of structs,
// optional fields (omitempty and pointers), enums and a recursive type.

type SearchFlights struct {
	Origin      string `json:"origin" validate:"len=3" jsonschema:"description=IATA airport code"`
	Destination string `json:"destination" validate:"len=3"`
	Date        string `json:"date" jsonschema:"description=YYYY-MM-DD"`
	Cabin       string `json:"cabin,omitempty" jsonschema:"enum=economy,enum=business,enum=first"`
}

type HoldRoom struct {
	Hotel    string          `json:"hotel"`
	Nights   int             `json:"nights" validate:"min=1,max=30"`
	Total    decimal.Decimal `json:"total"`
	Currency string          `json:"currency" validate:"len=3"`
}

type Passenger struct {
	Name     string `json:"name"`
	Age      int    `json:"age,omitempty"`
	Frequent *struct {
		Programme string `json:"programme"`
		Number    string `json:"number"`
	} `json:"frequent,omitempty"`
}

type BookFlight struct {
	Flight     string          `json:"flight"`
	Seats      int             `json:"seats"`
	Fare       decimal.Decimal `json:"fare"`
	Passengers []Passenger     `json:"passengers"`
}

type SendEmail struct {
	To      []string `json:"to"`
	Subject string   `json:"subject"`
	Body    string   `json:"body"`
	CC      []string `json:"cc,omitempty"`
}

type Address struct {
	Line1    string  `json:"line1"`
	Line2    *string `json:"line2,omitempty"`
	City     string  `json:"city"`
	Postcode string  `json:"postcode"`
	Country  string  `json:"country"`
}

type ShipParcel struct {
	From     Address `json:"from"`
	To       Address `json:"to"`
	WeightKg float64 `json:"weight_kg"`
	Express  bool    `json:"express"`
}

type LineItem struct {
	SKU      string          `json:"sku"`
	Quantity int             `json:"quantity"`
	Price    decimal.Decimal `json:"price"`
}

type CreateInvoice struct {
	Customer string          `json:"customer"`
	Items    []LineItem      `json:"items"`
	Discount decimal.Decimal `json:"discount,omitempty"`
	Due      time.Time       `json:"due"`
}

type Refund struct {
	Payment string          `json:"payment"`
	Amount  decimal.Decimal `json:"amount"`
	Reason  *string         `json:"reason,omitempty"`
}

type Schedule struct {
	Title     string    `json:"title"`
	Start     time.Time `json:"start"`
	Minutes   int64     `json:"minutes"`
	Attendees []struct {
		Email    string `json:"email"`
		Optional bool   `json:"optional"`
	} `json:"attendees"`
}

type Category struct {
	Name     string     `json:"name"`
	Children []Category `json:"children"`
}

type Catalogue struct {
	Root Category `json:"root"`
}

type Tag struct {
	Resource string   `json:"resource"`
	Labels   []string `json:"labels"`
	Priority uint8    `json:"priority"`
}

type Survey struct {
	Questions [][]string `json:"questions"`
	Scores    []float32  `json:"scores,omitempty"`
	Anonymous *bool      `json:"anonymous,omitempty"`
}

type Transfer struct {
	From   string          `json:"from"`
	To     string          `json:"to"`
	Amount decimal.Decimal `json:"amount"`
	Memo   string          `json:"memo,omitempty"`
	Legs   []struct {
		Via  string `json:"via"`
		Cost struct {
			Amount   decimal.Decimal `json:"amount"`
			Currency string          `json:"currency"`
		} `json:"cost"`
	} `json:"legs,omitempty"`
}

func noop[T any](name string, opts ...planexec.ContractOption) *planexec.Tool {
	return planexec.MustTool(name, "The "+strings.ReplaceAll(name, "_", " ")+" tool.",
		func(ctx context.Context, _ T) (string, error) { return "ok", nil }, opts...)
}

// twelveTools is a 12-tool catalog over the types above.
func twelveTools(t *testing.T) []planexec.ToolSpec {
	t.Helper()
	irreversible := planexec.Irreversible()
	tools := []*planexec.Tool{
		noop[SearchFlights]("search_flights"), noop[HoldRoom]("hold_room"), noop[BookFlight]("book_flight", irreversible),
		noop[SendEmail]("send_email"), noop[ShipParcel]("ship_parcel"), noop[CreateInvoice]("create_invoice"),
		noop[Refund]("refund", irreversible), noop[Schedule]("schedule_meeting"), noop[Catalogue]("update_catalogue"),
		noop[Tag]("tag_resource"), noop[Survey]("run_survey"), noop[Transfer]("transfer", irreversible),
	}
	ex, err := planexec.NewExecutor(planexec.Config{
		Tools: tools,
		Gate: planexec.ApprovalGateFunc(func(ctx context.Context, req planexec.ApprovalRequest) (planexec.Decision, error) {
			return req.Deny("nobody", "test"), nil
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	run, err := ex.Run(planexec.Delegation{Agent: "ops"})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(run.Catalog()); n != 12 {
		t.Fatalf("catalog has %d tools, want 12", n)
	}
	return run.Catalog()
}

// OpenAI's Structured Outputs rules for strict mode, as its guide states them
// (https://platform.openai.com/docs/guides/structured-outputs#supported-schemas):
//
//  1. The root is an object, not anyOf.
//  2. Every object sets additionalProperties to false and lists every one of
//     its properties in required (optional means a null branch, not absence).
//  3. Only these keywords: type, properties, required, additionalProperties,
//     items, anyOf, enum, const, description, title, $defs, $ref; for strings
//     pattern and format; for numbers minimum, maximum, exclusiveMinimum,
//     exclusiveMaximum, multipleOf; for arrays minItems, maxItems. Not
//     supported: allOf, oneOf, not, if/then/else, patternProperties,
//     minLength/maxLength, minProperties/maxProperties, default,
//     contentEncoding, and free-form maps (additionalProperties as a schema).
//  4. format is one of date-time, time, date, duration, email, hostname,
//     ipv4, ipv6, uuid.
//  5. At most 10 levels of nesting and 5000 object properties in all.
//  6. At most 1000 enum values in all; property names, definition names, enum
//     and const values total at most 120,000 characters.
//  7. Every $ref points into the document (#, #/$defs/...).
var (
	allowedKeywords = map[string]bool{
		"type": true, "properties": true, "required": true, "additionalProperties": true, "items": true,
		"anyOf": true, "enum": true, "const": true, "description": true, "title": true, "$defs": true, "$ref": true,
		"pattern": true, "format": true,
		"minimum": true, "maximum": true, "exclusiveMinimum": true, "exclusiveMaximum": true, "multipleOf": true,
		"minItems": true, "maxItems": true,
	}
	allowedFormats = map[string]bool{"date-time": true, "time": true, "date": true, "duration": true, "email": true,
		"hostname": true, "ipv4": true, "ipv6": true, "uuid": true}
	allowedTypes = map[string]bool{"object": true, "array": true, "string": true, "number": true, "integer": true,
		"boolean": true, "null": true}
)

const (
	maxNesting    = 10
	maxProperties = 5000
	maxEnumValues = 1000
	maxStringSize = 120000
)

type strictReport struct {
	violations []string
	properties int
	depth      int // deepest object nesting, the root being 1
	enums      int
	strings    int
	defs       map[string]any
}

func (r *strictReport) fail(path, format string, args ...any) {
	r.violations = append(r.violations, path+": "+fmt.Sprintf(format, args...))
}

// checkStrict walks a schema and lists every place it breaks the rules above.
func checkStrict(schema []byte) *strictReport {
	var root map[string]any
	r := &strictReport{}
	if err := json.Unmarshal(schema, &root); err != nil {
		r.fail("#", "not a JSON object: %v", err)
		return r
	}
	if root["type"] != "object" {
		r.fail("#", "the root must be type object, got %v", root["type"])
	}
	if _, ok := root["anyOf"]; ok {
		r.fail("#", "the root must not be anyOf")
	}
	r.defs, _ = root["$defs"].(map[string]any)
	for name, d := range r.defs {
		r.strings += len(name)
		r.walk("#/$defs/"+name, d, 1, false) // a definition is counted where it is used
	}
	r.walk("#", root, 0, true)
	if r.depth > maxNesting {
		r.fail("#", "%d levels of nesting, over %d", r.depth, maxNesting)
	}
	if r.properties > maxProperties {
		r.fail("#", "%d properties, over %d", r.properties, maxProperties)
	}
	if r.enums > maxEnumValues {
		r.fail("#", "%d enum values, over %d", r.enums, maxEnumValues)
	}
	if r.strings > maxStringSize {
		r.fail("#", "%d characters of names and values, over %d", r.strings, maxStringSize)
	}
	return r
}

func (r *strictReport) walk(path string, node any, depth int, count bool) {
	s, ok := node.(map[string]any)
	if !ok {
		r.fail(path, "a schema must be an object, got %T", node)
		return
	}
	for k := range s {
		if !allowedKeywords[k] {
			r.fail(path, "keyword %q is not supported in strict mode", k)
		}
		if k == "$defs" && path != "#" {
			r.fail(path, "$defs only at the root")
		}
	}
	types := typesOf(s["type"])
	for _, ty := range types {
		if !allowedTypes[ty] {
			r.fail(path, "type %q is not supported", ty)
		}
	}
	if f, ok := s["format"].(string); ok && !allowedFormats[f] {
		r.fail(path, "format %q is not supported", f)
	}
	if ref, ok := s["$ref"].(string); ok {
		name, isDef := strings.CutPrefix(ref, "#/$defs/")
		if ref != "#" && (!isDef || r.defs[name] == nil) {
			r.fail(path, "$ref %q does not resolve in the document", ref)
		}
	}
	if e, ok := s["enum"].([]any); ok {
		r.enums += len(e)
		for _, v := range e {
			if str, ok := v.(string); ok {
				r.strings += len(str)
			}
		}
	}
	if c, ok := s["const"].(string); ok {
		r.strings += len(c)
	}
	isObject := slices.Contains(types, "object") || s["properties"] != nil
	if isObject {
		depth++
		if count && depth > r.depth {
			r.depth = depth
		}
		switch ap := s["additionalProperties"].(type) {
		case bool:
			if ap {
				r.fail(path, "additionalProperties must be false")
			}
		case nil:
			r.fail(path, "additionalProperties: false is missing")
		default:
			r.fail(path, "additionalProperties is a schema (a free-form map): not supported in strict mode")
		}
		props, _ := s["properties"].(map[string]any)
		required := map[string]bool{}
		if req, ok := s["required"].([]any); ok {
			for _, x := range req {
				if name, ok := x.(string); ok {
					required[name] = true
					if _, ok := props[name]; !ok {
						r.fail(path, "required names %q, which is not a property", name)
					}
				}
			}
		}
		names := make([]string, 0, len(props))
		for name := range props {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			if count {
				r.properties++
				r.strings += len(name)
			}
			if !required[name] {
				r.fail(path, "property %q is not listed in required", name)
			}
			r.walk(path+"/properties/"+name, props[name], depth, count)
		}
	}
	if items, ok := s["items"]; ok {
		r.walk(path+"/items", items, depth, count)
	}
	if anyOf, ok := s["anyOf"].([]any); ok {
		for i, b := range anyOf {
			r.walk(fmt.Sprintf("%s/anyOf/%d", path, i), b, depth, count)
		}
	}
}

func typesOf(v any) []string {
	switch t := v.(type) {
	case string:
		return []string{t}
	case []any:
		out := make([]string, 0, len(t))
		for _, x := range t {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

func TestPlanSchemaFollowsOpenAIStrictRules(t *testing.T) {
	specs := twelveTools(t)
	schema := planexec.PlanSchema(specs)
	r := checkStrict(schema)
	t.Logf("plan schema for %d tools: %d bytes, %d properties, %d levels of object nesting, %d enum values",
		len(specs), len(schema), r.properties, r.depth, r.enums)
	for _, v := range r.violations {
		t.Errorf("strict-mode rule broken at %s", v)
	}
	if len(r.violations) > 0 {
		t.Logf("schema: %s", schema)
	}
}

// The checker itself catches what it is meant to catch.
func TestStrictCheckerFlagsBrokenSchemas(t *testing.T) {
	cases := map[string]string{
		"root anyOf":         `{"anyOf":[{"type":"object","properties":{},"required":[],"additionalProperties":false}]}`,
		"open object":        `{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}`,
		"optional property":  `{"type":"object","properties":{"a":{"type":"string"}},"required":[],"additionalProperties":false}`,
		"free-form map":      `{"type":"object","properties":{"m":{"type":"object","additionalProperties":{"type":"string"}}},"required":["m"],"additionalProperties":false}`,
		"minLength":          `{"type":"object","properties":{"a":{"type":"string","minLength":3}},"required":["a"],"additionalProperties":false}`,
		"allOf":              `{"type":"object","properties":{"a":{"allOf":[{"type":"string"}]}},"required":["a"],"additionalProperties":false}`,
		"unsupported format": `{"type":"object","properties":{"a":{"type":"string","format":"uri"}},"required":["a"],"additionalProperties":false}`,
		"dangling ref":       `{"type":"object","properties":{"a":{"$ref":"#/$defs/x"}},"required":["a"],"additionalProperties":false}`,
		"too deep":           nested(11),
	}
	for name, s := range cases {
		if r := checkStrict([]byte(s)); len(r.violations) == 0 {
			t.Errorf("%s: no violation found in %s", name, s)
		}
	}
	if r := checkStrict([]byte(nested(10))); len(r.violations) != 0 {
		t.Errorf("10 levels: %v", r.violations)
	}
}

func nested(levels int) string {
	s := `{"type":"object","properties":{},"required":[],"additionalProperties":false}`
	for i := 1; i < levels; i++ {
		s = `{"type":"object","properties":{"x":` + s + `},"required":["x"],"additionalProperties":false}`
	}
	return s
}

// Two recursive types reached through slices: each slice type needs its own
// definition. A strict provider follows the schema exactly, so a definition
// shared by both would make it write one tree in the other's shape, and the
// executor would refuse every such plan.
type TreeNode struct {
	Name string     `json:"name"`
	Kids []TreeNode `json:"kids"`
}

type TreeLink struct {
	URL  string     `json:"url"`
	Next []TreeLink `json:"next"`
}

type TwoTrees struct {
	Nodes []TreeNode `json:"nodes"`
	Links []TreeLink `json:"links"`
}

func TestRecursiveSliceTypesKeepTheirOwnDefinitions(t *testing.T) {
	schema := noop[TwoTrees]("two_trees").Contract().Schema()
	var doc map[string]any
	if err := json.Unmarshal(schema, &doc); err != nil {
		t.Fatal(err)
	}
	defs, _ := doc["$defs"].(map[string]any)
	// resolve follows $ref into $defs.
	resolve := func(s any) map[string]any {
		for range 8 {
			m, _ := s.(map[string]any)
			ref, ok := m["$ref"].(string)
			if !ok {
				return m
			}
			s = defs[strings.TrimPrefix(ref, "#/$defs/")]
		}
		return nil
	}
	props, _ := doc["properties"].(map[string]any)
	for field, want := range map[string]string{"nodes": "name", "links": "url"} {
		arr := resolve(props[field])
		item := resolve(arr["items"])
		itemProps, _ := item["properties"].(map[string]any)
		if _, ok := itemProps[want]; !ok {
			t.Errorf("/%s: items are described as %v, not as objects with %q", field, keys(itemProps), want)
		}
	}
	if t.Failed() {
		t.Logf("schema: %s", schema)
	}
}

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
