package planexec_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/planexec/planexec"
)

// ---- rules checked when the contract is built ----

type rLeg struct {
	Fare decimal.Decimal `json:"fare" validate:"gt=0"`
}

// Each type below has one rule that cannot apply to its field.
type (
	rGtOnBool struct {
		Paid bool `json:"paid" validate:"gt=0"`
	}
	rLenOnDecimal struct {
		Fare decimal.Decimal `json:"fare" validate:"len=3"`
	}
	rUnknownRule struct {
		Code string `json:"code" validate:"required,gtt=3"`
	}
	rMalformedMin struct {
		Code string `json:"code" validate:"min=abc"`
	}
	rMalformedDecimal struct {
		Fare *decimal.Decimal `json:"fare,omitempty" validate:"omitempty,lte=a lot"`
	}
	rStringRuleOnInt struct {
		Seats int `json:"seats" validate:"email"`
	}
	rDiveOnString struct {
		Name string `json:"name" validate:"dive,len=3"`
	}
	rMalformedAfterDive struct {
		Codes []string `json:"codes" validate:"dive,len=three"`
	}
	rDecimalRuleAfterDive struct {
		Fares []decimal.Decimal `json:"fares" validate:"dive,alpha"`
	}
	rNestedDeep struct {
		Trip struct {
			Legs []struct {
				Seats uint8 `json:"seats" validate:"max=-1"`
			} `json:"legs" validate:"dive"`
		} `json:"trip"`
	}
	rRulesWithoutDive struct {
		Legs []rLeg `json:"legs"`
	}
	rMachineRule struct {
		Path string `json:"path" validate:"file"`
	}
	rKeysWithoutDive struct {
		Labels map[string]string `json:"labels" validate:"keys,len=2,endkeys"`
	}
	rEmptyRule struct {
		Code string `json:"code" validate:"required,,len=3"`
	}
	rCrossFieldOnDecimal struct {
		Min decimal.Decimal `json:"min"`
		Max decimal.Decimal `json:"max" validate:"gtfield=Min"`
	}
	rOrOnBool struct {
		Paid bool `json:"paid" validate:"eq=true|gt=1"`
	}
	rEmbeddedRule struct {
		rEmbedded
	}
	rEmbedded struct {
		Tag bool `json:"tag" validate:"min=1"`
	}
)

func TestARuleThatCannotApplyToItsFieldIsAConfigurationErrorNamingTheField(t *testing.T) {
	cases := []struct {
		name   string
		build  func(string, ...planexec.ContractOption) (*planexec.Contract, error)
		path   string
		saying string
	}{
		{"gt on a bool", planexec.NewContract[rGtOnBool], "/paid", `"gt=0" does not apply to bool`},
		{"len on a decimal", planexec.NewContract[rLenOnDecimal], "/fare", `decimals take gt, gte, lt, lte, min, max, eq, ne and oneof`},
		{"an unknown rule", planexec.NewContract[rUnknownRule], "/code", `"gtt=3" is not one go-playground/validator knows`},
		{"a malformed parameter", planexec.NewContract[rMalformedMin], "/code", `"min=abc" cannot run on string: its parameter is malformed`},
		{"a decimal parameter that is no number", planexec.NewContract[rMalformedDecimal], "/fare", `"a lot" is not a decimal number`},
		{"a string rule on an integer", planexec.NewContract[rStringRuleOnInt], "/seats", `"email" does not apply to int`},
		{"dive on a string", planexec.NewContract[rDiveOnString], "/name", `"dive" needs a slice, array or map, not string`},
		{"a malformed parameter after dive", planexec.NewContract[rMalformedAfterDive], "/codes (its elements)", `"len=three"`},
		{"a string rule on decimal elements", planexec.NewContract[rDecimalRuleAfterDive], "/fares (its elements)", `"alpha" does not apply to a decimal`},
		{"a rule deep inside", planexec.NewContract[rNestedDeep], "/trip/legs/seats", `"max=-1" cannot run on uint8: its parameter is malformed`},
		{"rules of elements without dive", planexec.NewContract[rRulesWithoutDive], "/legs", `run only after "dive"`},
		{"a rule that reads the file system", planexec.NewContract[rMachineRule], "/path", `consults the file system or the network`},
		{"keys without dive", planexec.NewContract[rKeysWithoutDive], "/labels", `"keys" must come right after "dive"`},
		{"an empty rule", planexec.NewContract[rEmptyRule], "/code", `empty rule`},
		{"a field comparison on a decimal", planexec.NewContract[rCrossFieldOnDecimal], "/max", `"gtfield=Min" does not apply to a decimal`},
		{"one alternative that cannot apply", planexec.NewContract[rOrOnBool], "/paid", `"gt=1" does not apply to bool`},
		{"a rule in an embedded struct", planexec.NewContract[rEmbeddedRule], "/tag", `"min=1" does not apply to bool`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := c.build("t")
			ce := vConfigError(t, err, "t")
			if !strings.Contains(ce.Why, "field "+c.path+":") {
				t.Errorf("the problem does not name field %s: %q", c.path, ce.Why)
			}
			if !strings.Contains(ce.Why, c.saying) {
				t.Errorf("the problem does not say %q: %q", c.saying, ce.Why)
			}
		})
	}
}

type (
	rFitting struct {
		Fare    decimal.Decimal            `json:"fare" validate:"required,gt=0,lte=1000"`
		Deposit *decimal.Decimal           `json:"deposit,omitempty" validate:"omitempty,min=0.01,max=500,ne=13"`
		Tier    decimal.Decimal            `json:"tier" validate:"oneof=0.5 1 2.50"`
		Fares   []decimal.Decimal          `json:"fares" validate:"max=3,dive,gte=0"`
		ByLeg   map[string]decimal.Decimal `json:"by_leg" validate:"dive,keys,len=3,endkeys,lt=10000"`
		Seats   int                        `json:"seats" validate:"min=1,max=9"`
		Cabin   string                     `json:"cabin" validate:"oneof=economy 'premium economy' business"`
		Code    string                     `json:"code" validate:"len=3|len=4"`
		Ratio   float64                    `json:"ratio" validate:"gt=0,lt=1"`
		Depart  time.Time                  `json:"depart" validate:"gt"`
		Wait    time.Duration              `json:"wait" validate:"min=1m"`
		Email   string                     `json:"email" validate:"required,email"`
		Confirm string                     `json:"confirm" validate:"eqfield=Email"`
		Note    string                     `json:"note,omitempty" validate:"omitempty,max=200"`
		Legs    []rLeg                     `json:"legs" validate:"min=1,dive"`
		Ignored string                     `json:"-"`
	}
)

func TestRulesThatFitTheirFieldsAreAccepted(t *testing.T) {
	if _, err := planexec.NewContract[rFitting]("fitting"); err != nil {
		t.Fatalf("NewContract: %v", err)
	}
}

// ---- decimal rules ----

type rMoney struct {
	Amount  decimal.Decimal   `json:"amount" validate:"gt=0,lte=1000"`
	Tip     *decimal.Decimal  `json:"tip,omitempty" validate:"omitempty,min=0.5,max=50"`
	Rate    decimal.Decimal   `json:"rate" validate:"oneof=0.5 1 2.50"`
	Fixed   decimal.Decimal   `json:"fixed" validate:"eq=412.50"`
	NotZero decimal.Decimal   `json:"not_zero" validate:"ne=0"`
	Floor   decimal.Decimal   `json:"floor" validate:"gte=-0.000000000000000001,lt=1e3"`
	Splits  []decimal.Decimal `json:"splits,omitempty" validate:"dive,gt=0"`
}

// rMoneyExecutor builds an executor over one tool taking rMoney.
func rMoneyExecutor(t *testing.T, r *recorder) *planexec.Run {
	t.Helper()
	run, _ := oneTool(t, "pay", func(ctx context.Context, m rMoney) (string, error) {
		return "paid", r.record(ctx, "pay", m)
	})
	return run
}

// rPay renders the arguments of a pay step, with fields replaced.
func rPay(edit map[string]string) string {
	fields := map[string]string{"amount": "412.50", "rate": "1", "fixed": "412.5", "not_zero": "1", "floor": "0"}
	for k, v := range edit {
		fields[k] = v
	}
	parts := make([]string, 0, len(fields))
	for k, v := range fields {
		if v != "" {
			parts = append(parts, `"`+k+`":`+v)
		}
	}
	return "{" + strings.Join(parts, ",") + "}"
}

func TestDecimalRulesCompareExactly(t *testing.T) {
	ex := rMoneyExecutor(t, &recorder{})
	cases := []struct {
		name string
		edit map[string]string
		path string // "" when the arguments pass
		rule string
	}{
		{"at the upper limit", map[string]string{"amount": "1000"}, "", ""},
		{"at the upper limit written with zeros", map[string]string{"amount": "1000.000"}, "", ""},
		{"one part in 10^16 over the limit", map[string]string{"amount": "1000.0000000000000001"}, "/amount", "lte=1000"},
		{"one part in 10^30 over the limit", map[string]string{"amount": "1000.000000000000000000000000000001"}, "/amount", "lte=1000"},
		{"zero for gt=0", map[string]string{"amount": "0"}, "/amount", "gt=0"},
		{"zero with decimals for gt=0", map[string]string{"amount": "0.000"}, "/amount", "gt=0"},
		{"the smallest positive for gt=0", map[string]string{"amount": "0.000000000000000000000001"}, "", ""},
		{"negative", map[string]string{"amount": "-1"}, "/amount", "gt=0"},
		{"an exponent over the limit", map[string]string{"amount": "1.0000000000000000001e3"}, "/amount", "lte=1000"},
		{"a pointer under min", map[string]string{"tip": "0.49"}, "/tip", "min=0.5"},
		{"a pointer at min", map[string]string{"tip": "0.50"}, "", ""},
		{"a pointer over max", map[string]string{"tip": "50.01"}, "/tip", "max=50"},
		{"a null pointer behind omitempty", map[string]string{"tip": "null"}, "", ""},
		{"one of, equal but written otherwise", map[string]string{"rate": "2.5"}, "", ""},
		{"one of, another value", map[string]string{"rate": "2.4"}, "/rate", "oneof=0.5 1 2.50"},
		{"eq with another scale", map[string]string{"fixed": "412.500"}, "", ""},
		{"eq off by a cent", map[string]string{"fixed": "412.51"}, "/fixed", "eq=412.50"},
		{"ne with another scale", map[string]string{"not_zero": "0.00"}, "/not_zero", "ne=0"},
		{"gte a tiny negative", map[string]string{"floor": "-0.000000000000000001"}, "", ""},
		{"under a tiny negative", map[string]string{"floor": "-0.0000000000000000011"}, "/floor", "gte=-0.000000000000000001"},
		{"lt written as an exponent", map[string]string{"floor": "999.9999999999999999999"}, "", ""},
		{"at lt", map[string]string{"floor": "1000"}, "/floor", "lt=1e3"},
		{"elements after dive", map[string]string{"splits": "[1, 0.01, 0]"}, "/splits/2", "gt=0"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := rPay(c.edit)
			err := ex.Validate(planexec.Plan{Steps: []planexec.Step{step("st", "pay", args)}})
			if c.path == "" {
				if err != nil {
					t.Fatalf("%s: %v", args, err)
				}
				return
			}
			pv := vRefusal(t, err, planexec.ReasonArguments)
			vFindViolation(t, pv.Violations, c.path, "fails rule "+c.rule)
			for _, v := range pv.Violations {
				if v.Why != "fails rule "+c.rule {
					t.Errorf("violation %v, want exactly %q (the rule, never the value)", v, "fails rule "+c.rule)
				}
			}
			if len(pv.Violations) != 1 {
				t.Errorf("violations = %v, want only %s", pv.Violations, c.path)
			}
		})
	}
}

func TestADecimalThatPassesItsRulesReachesTheToolAsWritten(t *testing.T) {
	r := &recorder{}
	ex := rMoneyExecutor(t, r)
	if _, err := ex.Execute(context.Background(), planexec.Plan{Steps: []planexec.Step{
		step("p1", "pay", rPay(map[string]string{"amount": "999.99", "tip": "1.50"})),
	}}); err != nil {
		t.Fatalf("Execute: %v", err)
	}
	calls := r.Calls()
	if len(calls) != 1 {
		t.Fatalf("calls = %v", toolNames(calls))
	}
	m := calls[0].Args.(rMoney)
	if m.Amount.String() != "999.99" || m.Tip == nil || m.Tip.StringFixed(-m.Tip.Exponent()) != "1.50" {
		t.Errorf("the tool received amount %s tip %v", m.Amount, m.Tip)
	}
}

// ---- builtin rules keep their meaning ----

type rBuiltin struct {
	Seats  int       `json:"seats" validate:"min=1,max=9"`
	Count  uint8     `json:"count" validate:"gt=0,lte=3"`
	Ratio  float64   `json:"ratio" validate:"gte=0.5,lt=1"`
	Code   string    `json:"code" validate:"len=3"`
	Name   string    `json:"name" validate:"min=2,max=5"`
	Cabin  string    `json:"cabin" validate:"oneof=economy 'premium economy'"`
	Tags   []string  `json:"tags" validate:"min=1,max=2,dive,ne=x"`
	Ready  bool      `json:"ready" validate:"eq=true"`
	Class  int       `json:"class" validate:"oneof=1 2 3"`
	Depart time.Time `json:"depart" validate:"gt"`
	Wait   int64     `json:"wait" validate:"ne=7"`
}

func TestRulesOnIntegersStringsSlicesAndTimesKeepTheirBuiltinMeaning(t *testing.T) {
	ex, _ := oneTool(t, "b", func(ctx context.Context, _ rBuiltin) (string, error) {
		return "", nil
	})
	future := time.Now().Add(24 * time.Hour).UTC().Format(time.RFC3339)
	past := time.Now().Add(-24 * time.Hour).UTC().Format(time.RFC3339)
	good := map[string]string{
		"seats": "9", "count": "3", "ratio": "0.5", "code": `"ÅÉÎ"`, "name": `"Jo"`, "cabin": `"premium economy"`,
		"tags": `["a","b"]`, "ready": "true", "class": "2", "depart": `"` + future + `"`, "wait": "8",
	}
	render := func(edit map[string]string) string {
		parts := []string{}
		for k, v := range good {
			if e, ok := edit[k]; ok {
				v = e
			}
			parts = append(parts, `"`+k+`":`+v)
		}
		return "{" + strings.Join(parts, ",") + "}"
	}
	if err := ex.Validate(planexec.Plan{Steps: []planexec.Step{step("st", "b", render(nil))}}); err != nil {
		t.Fatalf("valid arguments refused: %v", err)
	}
	for field, bad := range map[string]struct{ value, rule string }{
		"seats":  {"10", "max=9"},
		"count":  {"0", "gt=0"},
		"ratio":  {"1", "lt=1"},
		"code":   {`"ÅÉÎÖ"`, "len=3"},
		"name":   {`"Joanna"`, "max=5"},
		"cabin":  {`"premium"`, "oneof=economy 'premium economy'"},
		"tags":   {`[]`, "min=1"},
		"ready":  {"false", "eq=true"},
		"class":  {"4", "oneof=1 2 3"},
		"depart": {`"` + past + `"`, "gt"},
		"wait":   {"7", "ne=7"},
	} {
		t.Run(field, func(t *testing.T) {
			err := ex.Validate(planexec.Plan{Steps: []planexec.Step{step("st", "b", render(map[string]string{field: bad.value}))}})
			pv := vRefusal(t, err, planexec.ReasonArguments)
			vFindViolation(t, pv.Violations, "/"+field, "fails rule "+bad.rule)
		})
	}
	pv := vRefusal(t, ex.Validate(planexec.Plan{Steps: []planexec.Step{step("st", "b", render(map[string]string{"tags": `["a","x"]`}))}}), planexec.ReasonArguments)
	vFindViolation(t, pv.Violations, "/tags/1", "fails rule ne=x")
}

// ---- where violations are located ----

type rOuter struct {
	rInner
	Trip string `json:"trip" validate:"required"`
}

type rInner struct {
	Ref string `json:"ref" validate:"len=2"`
}

func TestAViolationInAnEmbeddedStructIsLocatedAtItsPromotedPath(t *testing.T) {
	ex, _ := oneTool(t, "o", func(ctx context.Context, _ rOuter) (string, error) {
		return "", nil
	})
	pv := vArgsRefused(t, ex, "o", `{"ref":"abc","trip":""}`)
	vFindViolation(t, pv.Violations, "/ref", "fails rule len=2")
	vFindViolation(t, pv.Violations, "/trip", "fails rule required")
}
