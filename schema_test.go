package planexec_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/planexec/planexec"
)

// ---- value rules in the schema ----

type sRuled struct {
	Seats    int                `json:"seats" validate:"min=1,max=9"`
	Count    uint16             `json:"count" validate:"gt=0,lt=100"`
	Ratio    float64            `json:"ratio" validate:"gte=0.25,lte=0.75"`
	Fare     decimal.Decimal    `json:"fare" validate:"gt=0,lte=1000.0000000000000001"`
	Tip      *decimal.Decimal   `json:"tip,omitempty" validate:"omitempty,min=0.50,max=50"`
	Rate     decimal.Decimal    `json:"rate" validate:"oneof=0.5 1 2.50"`
	Class    int                `json:"class" validate:"oneof=1 02 3"`
	Cabin    string             `json:"cabin" validate:"oneof=economy 'premium economy' business"`
	Origin   string             `json:"origin" validate:"len=3" jsonschema_description:"IATA airport code"`
	Name     string             `json:"name" validate:"min=2,max=40"`
	Note     string             `json:"note,omitempty" validate:"omitempty,max=200" jsonschema_description:"for the desk, in words"`
	Email    string             `json:"email" validate:"email"`
	Legs     []string           `json:"legs" validate:"min=1,max=4,dive,len=3"`
	Fares    []decimal.Decimal  `json:"fares" validate:"len=2,dive,gte=0"`
	Code     string             `json:"code" validate:"len=3|len=4"`
	Required int                `json:"required" validate:"omitempty,min=5"`
	Wait     time.Duration      `json:"wait" validate:"min=1m"`
	Labels   map[string]float64 `json:"labels,omitempty" validate:"dive,keys,len=2,endkeys,gt=0"`
}

func TestValueRulesAppearInTheSchemaTheModelSees(t *testing.T) {
	c := mustContract[sRuled]("ruled")
	var s map[string]any
	d := json.NewDecoder(strings.NewReader(string(c.Schema())))
	d.UseNumber()
	if err := d.Decode(&s); err != nil {
		t.Fatal(err)
	}
	n := func(v string) json.Number { return json.Number(v) }
	want := map[string]map[string]any{
		"seats":  {"type": "integer", "minimum": n("1"), "maximum": n("9")},
		"count":  {"type": "integer", "exclusiveMinimum": n("0"), "exclusiveMaximum": n("100")},
		"ratio":  {"type": "number", "minimum": n("0.25"), "maximum": n("0.75")},
		"fare":   {"type": "number", "exclusiveMinimum": n("0"), "maximum": n("1000.0000000000000001")},
		"rate":   {"type": "number", "enum": []any{n("0.5"), n("1"), n("2.5")}},
		"class":  {"type": "integer", "enum": []any{n("1"), n("3")}}, // the validator never matches "02"
		"cabin":  {"type": "string", "enum": []any{"economy", "premium economy", "business"}},
		"origin": {"type": "string", "description": "IATA airport code (exactly 3 characters)"},
		"name":   {"type": "string", "description": "2 to 40 characters"},
		"email":  {"type": "string", "format": "email"},
		"legs": {"type": "array", "minItems": n("1"), "maxItems": n("4"),
			"items": map[string]any{"type": "string", "description": "exactly 3 characters"}},
		"fares": {"type": "array", "minItems": n("2"), "maxItems": n("2"),
			"items": map[string]any{"type": "number", "minimum": n("0")}},
		// Not said: alternatives, a rule the empty value skips on a required
		// field, a duration.
		"code":     {"type": "string"},
		"required": {"type": "integer"},
		"wait":     {"type": "integer"},
	}
	for name, w := range want {
		if got := vProp(t, s, name); !reflect.DeepEqual(got, w) {
			t.Errorf("%s = %v, want %v", name, got, w)
		}
	}
	// An optional member: the rules inside, the description once, on the union.
	tip := vProp(t, s, "tip")
	if inner := vNullable(t, tip, "tip"); !reflect.DeepEqual(inner, map[string]any{"type": "number", "minimum": n("0.5"), "maximum": n("50")}) {
		t.Errorf("tip = %v", tip)
	}
	note := vProp(t, s, "note")
	if note["description"] != "for the desk, in words (at most 200 characters)" {
		t.Errorf("note's description = %v", note["description"])
	}
	if inner := vNullable(t, note, "note"); inner["description"] != nil {
		t.Errorf("note's description is said twice: %v", note)
	}
	// Map values after dive (a map is not strict, whatever its rules).
	labels := vNullable(t, vProp(t, s, "labels"), "labels")
	if v := labels["additionalProperties"]; !reflect.DeepEqual(v, map[string]any{"type": "number", "exclusiveMinimum": n("0")}) {
		t.Errorf("labels' values = %v", v)
	}
}

// strictKeywords are the keywords OpenAI's strict mode accepts
// (https://platform.openai.com/docs/guides/structured-outputs, "Supported
// schemas"); llm/openai checks whole plan schemas against all its rules.
var strictKeywords = map[string]bool{
	"type": true, "properties": true, "required": true, "additionalProperties": true, "items": true,
	"anyOf": true, "enum": true, "const": true, "description": true, "title": true, "$defs": true, "$ref": true,
	"pattern": true, "format": true, "minimum": true, "maximum": true, "exclusiveMinimum": true,
	"exclusiveMaximum": true, "multipleOf": true, "minItems": true, "maxItems": true,
}

// sKeywordsOutsideStrict lists the keywords under node strict mode rejects.
func sKeywordsOutsideStrict(node any, at string) []string {
	var out []string
	switch n := node.(type) {
	case map[string]any:
		for k, v := range n {
			if !strictKeywords[k] {
				out = append(out, at+"/"+k)
			}
			switch k {
			case "properties", "$defs":
				for name, p := range v.(map[string]any) {
					out = append(out, sKeywordsOutsideStrict(p, at+"/"+k+"/"+name)...)
				}
			case "enum", "const", "required", "type", "description", "title", "pattern", "format":
			default:
				out = append(out, sKeywordsOutsideStrict(v, at+"/"+k)...)
			}
		}
	case []any:
		for _, x := range n {
			out = append(out, sKeywordsOutsideStrict(x, at)...)
		}
	}
	return out
}

type sStrictAll struct {
	Seats  int               `json:"seats" validate:"min=1,max=9"`
	Code   string            `json:"code" validate:"len=3"`
	Name   string            `json:"name,omitempty" validate:"omitempty,min=1,max=20"`
	Fare   *decimal.Decimal  `json:"fare,omitempty" validate:"omitempty,gt=0,lt=1e6"`
	Legs   []sStrictLeg      `json:"legs" validate:"min=1,max=8,dive"`
	Cabins []string          `json:"cabins" validate:"dive,oneof=economy business"`
	Pins   [3]int            `json:"pins" validate:"dive,gte=0,lte=9"`
	Fees   []decimal.Decimal `json:"fees,omitempty" validate:"omitempty,max=5,dive,gte=0"`
}

type sStrictLeg struct {
	From string `json:"from" validate:"len=3"`
	To   string `json:"to" validate:"len=3,nefield=From"`
	Stop *sStrictLeg
}

func TestRuleKeywordsStayWithinStrictMode(t *testing.T) {
	c := mustContract[sStrictAll]("strict_all")
	s := vDecodeSchema(t, c.Schema())
	vSchemaWalk(t, s, s, "#")
	if bad := sKeywordsOutsideStrict(s, "#"); bad != nil {
		t.Errorf("keywords strict mode rejects: %v\n%s", bad, c.Schema())
	}
	if !c.Strict() {
		t.Errorf("the contract is not strict: %s", c.Schema())
	}
	// A length rule written as a jsonschema keyword is the user's choice, and
	// is not strict (see TestAContractSaysWhetherItsSchemaIsWithinStrictMode).
	if mustContract[vLength]("length").Strict() {
		t.Error("a minLength keyword claims strict mode")
	}
}

type sExtras struct {
	Code string `json:"code" jsonschema_extras:"x-kind=iata"`
}

func TestAJSONSchemaExtraKeywordMakesAContractNonStrict(t *testing.T) {
	c := mustContract[sExtras]("extras")
	if c.Strict() {
		t.Errorf("a contract with an extra keyword claims strict mode: %s", c.Schema())
	}
}

// ---- descriptions ----

type (
	sDescribed struct {
		Date    string `json:"date" jsonschema_description:"departure date, YYYY-MM-DD, local time"`
		Escaped string `json:"escaped" jsonschema:"description=arrival date\\, YYYY-MM-DD,example=2026-12-14"`
		Title   string `json:"title" jsonschema:"title=Passenger,description=as on the passport"`
	}
	sCutDescription struct {
		Date string `json:"date" jsonschema:"description=departure date, YYYY-MM-DD"`
	}
	sCutNested struct {
		Legs []struct {
			Via string `json:"via" jsonschema:"title=Stop, if any"`
		} `json:"legs"`
	}
	sMisspelt struct {
		Code string `json:"code" jsonschema:"minlength=3"`
	}
)

func TestADescriptionWithCommasReachesTheModelWhole(t *testing.T) {
	c := mustContract[sDescribed]("described")
	s := vDecodeSchema(t, c.Schema())
	for name, want := range map[string]string{
		"date":    "departure date, YYYY-MM-DD, local time",
		"escaped": "arrival date, YYYY-MM-DD",
		"title":   "as on the passport",
	} {
		if got := vProp(t, s, name)["description"]; got != want {
			t.Errorf("%s's description = %q, want %q", name, got, want)
		}
	}
}

func TestACommaThatWouldCutADescriptionShortIsAConfigurationError(t *testing.T) {
	for name, c := range map[string]struct {
		build func(string, ...planexec.ContractOption) (*planexec.Contract, error)
		path  string
	}{
		"a description":      {planexec.NewContract[sCutDescription], "/date"},
		"a nested title":     {planexec.NewContract[sCutNested], "/legs/via"},
		"a misspelt keyword": {planexec.NewContract[sMisspelt], "/code"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := c.build("described")
			ce := vConfigError(t, err, "described")
			for _, want := range []string{"field " + c.path + ":", `jsonschema_description:"..."`, `\\,`} {
				if !strings.Contains(ce.Why, want) {
					t.Errorf("the problem does not say %q: %s", want, ce.Why)
				}
			}
		})
	}
}
