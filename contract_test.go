package planexec_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/shopspring/decimal"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/llm/scripted"
)

// ---- contract types of this file ----

type vPassenger struct {
	Name string          `json:"name" validate:"required"`
	Age  int             `json:"age,omitempty"`
	Fare decimal.Decimal `json:"fare,omitzero"`
}

type vContact struct {
	Email string `json:"email" validate:"required"`
}

type vBase struct {
	Ref string `json:"ref"`
}

// vItinerary nests structs, slices of structs, optional structs, decimals and
// an embedded struct.
type vItinerary struct {
	vBase
	Trip       string          `json:"trip"`
	Passengers []vPassenger    `json:"passengers" validate:"dive"`
	Contact    vContact        `json:"contact"`
	Backup     *vContact       `json:"backup,omitempty"`
	Budget     decimal.Decimal `json:"budget"`
	Tags       []string        `json:"tags,omitempty"`
	Note       string          `json:"note,omitempty"`
}

// vNode refers to itself.
type vNode struct {
	Name     string  `json:"name"`
	Children []vNode `json:"children,omitempty"`
}

type vLedger struct {
	Entry  int64           `json:"entry"`
	Amount decimal.Decimal `json:"amount"`
}

type vOrder struct {
	Order string `json:"order,omitempty"`
	Note  string `json:"note"`
}

type vRoster struct {
	Seats map[string]vPassenger `json:"seats" validate:"dive"`
	Codes []string              `json:"codes" validate:"dive,len=3"`
}

// vOwnExecutor builds an executor over the ledger, order and roster tools,
// which record into r, and a run of it.
func vOwnExecutor(t *testing.T, r *recorder) *planexec.Run {
	t.Helper()
	tools := []*planexec.Tool{
		planexec.MustTool("ledger", "Post an entry.", func(ctx context.Context, l vLedger) (string, error) {
			return "posted", r.record(ctx, "ledger", l)
		}),
		planexec.MustTool("order", "Place an order.", func(ctx context.Context, o vOrder) (string, error) {
			return "placed", r.record(ctx, "order", o)
		}, planexec.KeyArguments("order")),
		planexec.MustTool("roster", "Seat people.", func(ctx context.Context, o vRoster) (string, error) {
			return "seated", r.record(ctx, "roster", o)
		}),
		planexec.MustTool("itinerary", "Plan a trip.", func(ctx context.Context, o vItinerary) (string, error) {
			return "planned", r.record(ctx, "itinerary", o)
		}),
	}
	ex, err := planexec.NewExecutor(planexec.Config{Tools: tools})
	if err != nil {
		t.Fatalf("NewExecutor: %v", err)
	}
	run, err := ex.Run(planexec.Delegation{RunID: "run-v", Tenant: "acme", Agent: "clerk"})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return run
}

// vTripContract is the contract of one of the trip's tools.
func vTripContract(tool string) *planexec.Contract {
	for _, t := range (&recorder{}).tools() {
		if t.Name() == tool {
			return t.Contract()
		}
	}
	panic("no trip tool " + tool)
}

// vNewContract builds a contract that must build.
func vNewContract[T any](t testing.TB, tool string, opts ...planexec.ContractOption) *planexec.Contract {
	t.Helper()
	c, err := planexec.NewContract[T](tool, opts...)
	if err != nil {
		t.Fatalf("NewContract(%s): %v", tool, err)
	}
	return c
}

// vConfigError asserts err is a *ConfigurationError about tool.
func vConfigError(t *testing.T, err error, tool string) *planexec.ConfigurationError {
	t.Helper()
	var ce *planexec.ConfigurationError
	if !errors.As(err, &ce) {
		t.Fatalf("want a *ConfigurationError, got %T: %v", err, err)
	}
	if ce.Tool != tool {
		t.Fatalf("ConfigurationError.Tool = %q, want %q (%v)", ce.Tool, tool, err)
	}
	if tool != "" && !strings.Contains(ce.Error(), `"`+tool+`"`) {
		t.Errorf("the message does not name the tool: %v", ce)
	}
	return ce
}

// vArgsRefused validates a one-step plan and asserts an arguments refusal
// naming the step and tool.
func vArgsRefused(t *testing.T, ex *planexec.Run, tool, args string) *planexec.PlanValidationError {
	t.Helper()
	err := ex.Validate(planexec.Plan{Steps: []planexec.Step{step("st", tool, args)}})
	pv := vRefusal(t, err, planexec.ReasonArguments)
	if pv.Step != "st" || pv.Tool != tool {
		t.Errorf("refusal names step %q tool %q, want st %s", pv.Step, pv.Tool, tool)
	}
	return pv
}

// ---- NewContract ----

func TestAContractOverANonStructTypeIsAConfigurationError(t *testing.T) {
	_, err := planexec.NewContract[int]("count")
	vConfigError(t, err, "count")
	_, err = planexec.NewContract[*Booking]("book_by_pointer")
	vConfigError(t, err, "book_by_pointer")
	_, err = planexec.NewContract[map[string]string]("labels")
	vConfigError(t, err, "labels")
}

func TestAContractOverATypeWithAnInterfaceFieldIsAConfigurationError(t *testing.T) {
	type loose struct {
		Flight string `json:"flight"`
		Extra  any    `json:"extra"`
	}
	_, err := planexec.NewContract[loose]("loose")
	vConfigError(t, err, "loose")

	type deepLoose struct {
		Legs []struct {
			Meta any `json:"meta"`
		} `json:"legs"`
	}
	_, err = planexec.NewContract[deepLoose]("deep_loose")
	vConfigError(t, err, "deep_loose")
}

func TestAKeyArgumentThatNamesNoFieldIsAConfigurationError(t *testing.T) {
	_, err := planexec.NewContract[Booking]("book_flight", planexec.KeyArguments("pnr"))
	ce := vConfigError(t, err, "book_flight")
	if !strings.Contains(ce.Why, "pnr") {
		t.Errorf("the problem does not name the key argument: %q", ce.Why)
	}
	// Key arguments are JSON names, not Go field names.
	_, err = planexec.NewContract[Booking]("book_flight", planexec.KeyArguments("Flight"))
	vConfigError(t, err, "book_flight")
	// Promoted fields of an embedded struct are arguments.
	if _, err := planexec.NewContract[vItinerary]("itinerary", planexec.KeyArguments("ref", "trip")); err != nil {
		t.Errorf("a promoted field was not accepted as a key argument: %v", err)
	}
}

func TestMustToolPanicsWhereNewToolWouldFail(t *testing.T) {
	defer func() {
		p := recover()
		err, ok := p.(error)
		if !ok {
			t.Fatalf("MustTool did not panic with an error: %v", p)
		}
		vConfigError(t, err, "count")
	}()
	planexec.MustTool("count", "Count.", func(context.Context, int) (int, error) { return 0, nil })
}

func TestAContractReportsWhatItWasBuiltWith(t *testing.T) {
	bookContract, searchContract := vTripContract("book_flight"), vTripContract("search_flights")
	if bookContract.Tool() != "book_flight" || !bookContract.Irreversible() {
		t.Errorf("book contract: tool %q irreversible %v", bookContract.Tool(), bookContract.Irreversible())
	}
	if searchContract.Irreversible() {
		t.Error("search is reversible but its contract says otherwise")
	}
	if got := bookContract.KeyArguments(); !slices.Equal(got, []string{"flight", "seats"}) {
		t.Errorf("KeyArguments = %v", got)
	}
	if searchContract.KeyArguments() != nil {
		t.Errorf("a contract without key arguments lists %v", searchContract.KeyArguments())
	}
	if bookContract.RequiresApproval() || searchContract.RequiresApproval() {
		t.Error("a contract built without RequireApproval requires approval")
	}
}

// ---- Schema ----

// vSchemaWalk checks every object schema under node: all properties
// required, no additional properties; every $ref resolves within root.
func vSchemaWalk(t *testing.T, root, node any, at string) {
	t.Helper()
	switch n := node.(type) {
	case []any:
		for _, x := range n {
			vSchemaWalk(t, root, x, at)
		}
	case map[string]any:
		if props, ok := n["properties"].(map[string]any); ok {
			var names []string
			for k := range props {
				names = append(names, k)
			}
			var req []string
			if rs, ok := n["required"].([]any); ok {
				for _, r := range rs {
					req = append(req, r.(string))
				}
			}
			sort.Strings(names)
			sort.Strings(req)
			if !slices.Equal(names, req) {
				t.Errorf("%s: required %v, want every property %v", at, req, names)
			}
			if ap, ok := n["additionalProperties"].(bool); !ok || ap {
				t.Errorf("%s: additionalProperties = %v, want false", at, n["additionalProperties"])
			}
			for k, v := range props {
				vSchemaWalk(t, root, v, at+"/properties/"+k)
			}
		}
		if ref, ok := n["$ref"].(string); ok {
			if !vResolves(root, ref) {
				t.Errorf("%s: $ref %q does not resolve within the schema", at, ref)
			}
		}
		for _, k := range []string{"items", "anyOf", "oneOf", "allOf", "$defs", "definitions", "additionalProperties"} {
			if sub, ok := n[k]; ok {
				if defs, ok := sub.(map[string]any); ok && (k == "$defs" || k == "definitions") {
					for name, d := range defs {
						vSchemaWalk(t, root, d, at+"/"+k+"/"+name)
					}
					continue
				}
				vSchemaWalk(t, root, sub, at+"/"+k)
			}
		}
	}
}

// vResolves reports whether the local JSON Pointer reference ref names a
// value in root.
func vResolves(root any, ref string) bool {
	p, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return false
	}
	cur := root
	if p == "" {
		return true
	}
	for _, seg := range strings.Split(strings.TrimPrefix(p, "/"), "/") {
		seg = strings.NewReplacer("~1", "/", "~0", "~").Replace(seg)
		m, ok := cur.(map[string]any)
		if !ok {
			return false
		}
		if cur, ok = m[seg]; !ok {
			return false
		}
	}
	return true
}

func vDecodeSchema(t *testing.T, raw json.RawMessage) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("the schema is not a JSON object: %v", err)
	}
	return m
}

// vProp returns properties[name] of an object schema.
func vProp(t *testing.T, s map[string]any, name string) map[string]any {
	t.Helper()
	props, _ := s["properties"].(map[string]any)
	p, ok := props[name].(map[string]any)
	if !ok {
		t.Fatalf("no property %q in %v", name, s)
	}
	return p
}

// vNullable returns the non-null branch of an optional property's
// anyOf [X, {"type":"null"}], failing when the property is not that.
func vNullable(t *testing.T, p map[string]any, name string) map[string]any {
	t.Helper()
	branches, ok := p["anyOf"].([]any)
	if !ok || len(branches) != 2 {
		t.Fatalf("optional %q is %v, want anyOf [schema, {type: null}]", name, p)
	}
	if null, _ := branches[1].(map[string]any); !reflect.DeepEqual(null, map[string]any{"type": "null"}) {
		t.Fatalf("optional %q: second branch %v, want {type: null}", name, branches[1])
	}
	inner, _ := branches[0].(map[string]any)
	return inner
}

func vNotNullable(t *testing.T, p map[string]any, name string) {
	t.Helper()
	if _, ok := p["anyOf"]; ok {
		t.Errorf("required %q accepts null: %v", name, p)
	}
}

func TestAContractSchemaIsStrictModeReadyAllTheWayDown(t *testing.T) {
	c := vNewContract[vItinerary](t, "itinerary")
	s := vDecodeSchema(t, c.Schema())
	vSchemaWalk(t, s, s, "#")

	if s["type"] != "object" {
		t.Errorf("root type = %v, want object", s["type"])
	}
	// Promoted, required and optional members at the root.
	for _, name := range []string{"ref", "trip", "passengers", "contact", "budget"} {
		vNotNullable(t, vProp(t, s, name), name)
	}
	if b := vProp(t, s, "budget"); !reflect.DeepEqual(b, map[string]any{"type": "number"}) {
		t.Errorf("a decimal is %v, want {type: number}", b)
	}
	backup := vNullable(t, vProp(t, s, "backup"), "backup")
	if backup["type"] != "object" {
		t.Errorf("backup's schema = %v, want an object", backup)
	}
	tags := vNullable(t, vProp(t, s, "tags"), "tags")
	if tags["type"] != "array" {
		t.Errorf("tags' schema = %v, want an array", tags)
	}
	if note := vNullable(t, vProp(t, s, "note"), "note"); note["type"] != "string" {
		t.Errorf("note's schema = %v", note)
	}
	// A slice of structs: the item schema is strict too, optional fields nullable.
	pax := vProp(t, s, "passengers")
	item, _ := pax["items"].(map[string]any)
	if item == nil || item["type"] != "object" {
		t.Fatalf("passengers' items = %v", pax["items"])
	}
	vNotNullable(t, vProp(t, item, "name"), "name")
	vNullable(t, vProp(t, item, "age"), "age")
	if fare := vNullable(t, vProp(t, item, "fare"), "fare"); !reflect.DeepEqual(fare, map[string]any{"type": "number"}) {
		t.Errorf("an optional decimal's schema = %v, want {type: number}", fare)
	}
}

func TestTheBookingSchemaMatchesWhatTheDecoderAccepts(t *testing.T) {
	s := vDecodeSchema(t, vTripContract("book_flight").Schema())
	vSchemaWalk(t, s, s, "#")
	vNotNullable(t, vProp(t, s, "flight"), "flight")
	if seats := vProp(t, s, "seats"); seats["type"] != "integer" {
		t.Errorf("seats = %v, want an integer", seats)
	}
	// fare is omitzero, note omitempty: both optional, both nullable.
	vNullable(t, vProp(t, s, "fare"), "fare")
	vNullable(t, vProp(t, s, "note"), "note")
	// And the decoder agrees: both may be null or absent.
	ex, _ := newExecutor(t, &recorder{}, nil)
	for _, args := range []string{
		`{"flight":"BA117","seats":1,"fare":null,"note":null}`,
		`{"flight":"BA117","seats":1}`,
	} {
		if err := ex.Validate(planexec.Plan{Steps: []planexec.Step{step("s1", "book_flight", args)}}); err != nil {
			t.Errorf("%s: %v", args, err)
		}
	}
}

func TestASchemaForARecursiveTypeResolvesEveryReferenceItMakes(t *testing.T) {
	c := vNewContract[vNode](t, "tree")
	s := vDecodeSchema(t, c.Schema())
	vSchemaWalk(t, s, s, "#")
	if !strings.Contains(string(c.Schema()), `"children"`) {
		t.Errorf("the schema lost the recursive member: %s", c.Schema())
	}
}

// ---- strict arguments ----

func TestStrictArgumentsRefuseEachKindOfMistakeAtItsPath(t *testing.T) {
	ex, _ := newExecutor(t, &recorder{}, nil)
	cases := []struct {
		name, tool, args, path, problem string
	}{
		{"unknown key", "book_flight", `{"flight":"BA117","seats":1,"class":"J"}`, "/class", "unknown key"},
		{"key differing only in case", "book_flight", `{"Flight":"BA117","seats":1}`, "/Flight", `differs only in case from "flight"`},
		{"duplicate key", "book_flight", `{"flight":"BA117","flight":"VS3","seats":1}`, "/flight", "duplicate key"},
		{"missing required key", "book_flight", `{"flight":"BA117"}`, "/seats", "missing required key"},
		{"string for an integer", "book_flight", `{"flight":"BA117","seats":"1"}`, "/seats", "expected integer, got string"},
		{"fraction for an integer", "book_flight", `{"flight":"BA117","seats":1.5}`, "/seats", "expected integer"},
		{"exponent for an integer", "book_flight", `{"flight":"BA117","seats":1e0}`, "/seats", "expected integer"},
		{"number for a string", "book_flight", `{"flight":117,"seats":1}`, "/flight", "expected string, got number"},
		{"null for a required key", "book_flight", `{"flight":null,"seats":1}`, "/flight", "null"},
		{"string for a decimal", "refund", `{"order":"A1","amount":"412.50","currency":"EUR"}`, "/amount", "expected number, got string"},
		{"failed min rule", "book_flight", `{"flight":"BA117","seats":0}`, "/seats", "fails rule min=1"},
		{"failed max rule", "book_flight", `{"flight":"BA117","seats":10}`, "/seats", "fails rule max=9"},
		{"failed len rule", "search_flights", `{"origin":"LHRX","destination":"JFK"}`, "/origin", "fails rule len=3"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pv := vArgsRefused(t, ex, c.tool, c.args)
			vFindViolation(t, pv.Violations, c.path, c.problem)
		})
	}
}

func TestAStepMissingAKeyArgumentIsRefusedRatherThanRunWithoutAKey(t *testing.T) {
	r := &recorder{}
	ex := vOwnExecutor(t, r)
	pv := vArgsRefused(t, ex, "order", `{"note":"no order id"}`)
	vFindViolation(t, pv.Violations, "/order", "key argument missing")
	_, err := ex.Execute(context.Background(), planexec.Plan{Steps: []planexec.Step{step("st", "order", `{"note":"no order id"}`)}})
	vRefusal(t, err, planexec.ReasonArguments)
	if len(r.Calls()) != 0 {
		t.Errorf("the step ran: %v", toolNames(r.Calls()))
	}
	if err := ex.Validate(planexec.Plan{Steps: []planexec.Step{step("st", "order", `{"order":"A1","note":"x"}`)}}); err != nil {
		t.Errorf("a step with its key argument was refused: %v", err)
	}
}

func TestEveryArgumentViolationIsListedNotJustTheFirst(t *testing.T) {
	ex, _ := newExecutor(t, &recorder{}, nil)
	pv := vArgsRefused(t, ex, "book_flight", `{"Flight":"BA117","seats":"1","class":"J"}`)
	vFindViolation(t, pv.Violations, "/Flight", "differs only in case")
	vFindViolation(t, pv.Violations, "/seats", "expected integer")
	vFindViolation(t, pv.Violations, "/class", "unknown key")
	vFindViolation(t, pv.Violations, "/flight", "missing required key")
	if !strings.Contains(pv.Error(), "(and 3 more)") {
		t.Errorf("the message does not count the other violations: %s", pv.Error())
	}
	// Rule failures are all listed too.
	pv = vArgsRefused(t, ex, "search_flights", `{"origin":"LHRX","destination":"JF"}`)
	vFindViolation(t, pv.Violations, "/origin", "len=3")
	vFindViolation(t, pv.Violations, "/destination", "len=3")
}

func TestRuleViolationsInsideNestedValuesAreLocatedByJSONPointer(t *testing.T) {
	ex := vOwnExecutor(t, &recorder{})
	it := `{"ref":"R1","trip":"NY","passengers":[{"name":"Ann"},{"name":""}],"contact":{"email":""},"budget":100}`
	pv := vArgsRefused(t, ex, "itinerary", it)
	vFindViolation(t, pv.Violations, "/passengers/1/name", "fails rule required")
	vFindViolation(t, pv.Violations, "/contact/email", "fails rule required")

	pv = vArgsRefused(t, ex, "roster", `{"seats":{},"codes":["LHR","JF"]}`)
	vFindViolation(t, pv.Violations, "/codes/1", "fails rule len=3")

	// Decoding errors inside nested values are located the same way.
	pv = vArgsRefused(t, ex, "itinerary", `{"ref":"R1","trip":"NY","passengers":[{"name":"Ann","age":"9"}],"contact":{"email":"a@b","phone":"1"},"budget":100}`)
	vFindViolation(t, pv.Violations, "/passengers/0/age", "expected integer")
	vFindViolation(t, pv.Violations, "/contact/phone", "unknown key")
}

func TestARuleViolationUnderAMapKeyIsLocatedByTheWholeKey(t *testing.T) {
	ex := vOwnExecutor(t, &recorder{})
	pv := vArgsRefused(t, ex, "roster", `{"seats":{"12a":{"name":"Ann"},"row.1":{"name":""}},"codes":[]}`)
	vFindViolation(t, pv.Violations, "/seats/row.1/name", "fails rule required")
}

func TestAToolIsCalledWithItsDeclaredGoType(t *testing.T) {
	r := &recorder{}
	ex, _ := newExecutor(t, r, nil)
	if _, err := ex.Execute(context.Background(), tripPlan()); err != nil {
		t.Fatalf("Execute: %v", err)
	}
	calls := r.Calls()
	if len(calls) != 2 {
		t.Fatalf("calls = %v", toolNames(calls))
	}
	s, ok := calls[0].Args.(Search)
	if !ok {
		t.Fatalf("search_flights received %T, want Search", calls[0].Args)
	}
	if s != (Search{Origin: "LHR", Destination: "JFK"}) {
		t.Errorf("search_flights received %+v", s)
	}
	b, ok := calls[1].Args.(Booking)
	if !ok {
		t.Fatalf("book_flight received %T, want Booking", calls[1].Args)
	}
	if b.Flight != "BA117" || b.Seats != 1 || !b.Fare.IsZero() || b.Note != "" {
		t.Errorf("book_flight received %+v", b)
	}
}

func TestADecimalArrivesExactlyAsWritten(t *testing.T) {
	r := &recorder{}
	ex, _ := newExecutor(t, r, nil)
	plan := planexec.Plan{Steps: []planexec.Step{
		step("r1", "refund", `{"order":"A1","amount":412.50,"currency":"EUR"}`),
		step("r2", "refund", `{"order":"A2","amount":12345678901234567.89,"currency":"EUR"}`),
		step("r3", "refund", `{"order":"A3","amount":-0.000000000000000001,"currency":"EUR"}`),
	}}
	if _, err := ex.Execute(context.Background(), plan); err != nil {
		t.Fatalf("Execute: %v", err)
	}
	got := map[string]decimal.Decimal{}
	for _, c := range r.Calls() {
		f, ok := c.Args.(Refund)
		if !ok {
			t.Fatalf("refund received %T", c.Args)
		}
		got[f.Order] = f.Amount
	}
	a1 := got["A1"]
	if !a1.Equal(decimal.RequireFromString("412.50")) {
		t.Errorf("412.50 arrived as %s", a1)
	}
	if a1.Exponent() != -2 || a1.Coefficient().Int64() != 41250 {
		t.Errorf("412.50 arrived as %s×10^%d, want 41250×10^-2 (its written scale)", a1.Coefficient(), a1.Exponent())
	}
	if a1.StringFixed(-a1.Exponent()) != "412.50" {
		t.Errorf("412.50 renders at its own scale as %s", a1.StringFixed(-a1.Exponent()))
	}
	if s := got["A2"].String(); s != "12345678901234567.89" {
		t.Errorf("12345678901234567.89 arrived as %s (a float64 detour?)", s)
	}
	if s := got["A3"].String(); s != "-0.000000000000000001" {
		t.Errorf("-1e-18 arrived as %s", s)
	}
}

func TestALargeIntegerArrivesExactly(t *testing.T) {
	r := &recorder{}
	ex := vOwnExecutor(t, r)
	plan := planexec.Plan{Steps: []planexec.Step{
		step("l1", "ledger", `{"entry":9007199254740993,"amount":1}`),
		step("l2", "ledger", `{"entry":-9223372036854775808,"amount":2}`),
	}}
	if _, err := ex.Execute(context.Background(), plan); err != nil {
		t.Fatalf("Execute: %v", err)
	}
	got := map[string]int64{}
	for _, c := range r.Calls() {
		l, ok := c.Args.(vLedger)
		if !ok {
			t.Fatalf("ledger received %T", c.Args)
		}
		got[l.Amount.String()] = l.Entry
	}
	if got["1"] != 9007199254740993 {
		t.Errorf("2^53+1 arrived as %d", got["1"])
	}
	if got["2"] != -9223372036854775808 {
		t.Errorf("math.MinInt64 arrived as %d", got["2"])
	}
	// One past int64 is refused, not wrapped.
	pv := vArgsRefused(t, ex, "ledger", `{"entry":9223372036854775808,"amount":1}`)
	vFindViolation(t, pv.Violations, "/entry", "out of range")
}

// ---- NewExecutor ----

func TestNewExecutorRefusesAnIrreversibleToolWithNoGate(t *testing.T) {
	r := &recorder{}
	_, err := planexec.NewExecutor(planexec.Config{Tools: r.tools()})
	vConfigError(t, err, "book_flight")
	// Without the irreversible tool no gate is needed.
	tools := r.tools()
	if _, err := planexec.NewExecutor(planexec.Config{Tools: []*planexec.Tool{tools[0], tools[2]}}); err != nil {
		t.Errorf("an executor with only reversible tools needs no gate, got %v", err)
	}
}

func TestNewExecutorRefusesAToolRequiringApprovalWithNoGate(t *testing.T) {
	r := &recorder{}
	tools := r.tools(map[string][]planexec.ContractOption{"refund": {planexec.RequireApproval()}})
	_, err := planexec.NewExecutor(planexec.Config{Tools: []*planexec.Tool{tools[0], tools[2]}})
	vConfigError(t, err, "refund")
}

func TestARunListsOnlyTheToolsItsScopeAllowsInItsCatalog(t *testing.T) {
	ex, _ := newExecutor(t, &recorder{}, withScope("book_flight", "search_flights"))
	cat := ex.Catalog()
	if len(cat) != 2 || cat[0].Name != "search_flights" || cat[1].Name != "book_flight" {
		t.Fatalf("catalog = %+v, want search_flights then book_flight (the executor's order)", cat)
	}
	if cat[0].Irreversible || !cat[1].Irreversible {
		t.Errorf("irreversibility: %v %v", cat[0].Irreversible, cat[1].Irreversible)
	}
	if string(cat[1].Schema) != string(vTripContract("book_flight").Schema()) || cat[1].Description != "Book a flight." {
		t.Errorf("book_flight entry = %+v", cat[1])
	}
}

type vTagged struct {
	Labels map[string]string `json:"labels"`
}

type vRaw struct {
	Extra json.RawMessage `json:"extra"`
}

type vLength struct {
	Code string `json:"code" jsonschema:"minLength=3,default=abc"`
}

func TestAContractSaysWhetherItsSchemaIsWithinStrictMode(t *testing.T) {
	if !vTripContract("book_flight").Strict() || !vTripContract("search_flights").Strict() {
		t.Error("plain structs with decimals and optional fields should be strict-capable")
	}
	for name, c := range map[string]*planexec.Contract{
		"a map":            vNewContract[vTagged](t, "tagged"),
		"a raw JSON value": vNewContract[vRaw](t, "raw"),
		"a length rule":    vNewContract[vLength](t, "length"),
	} {
		if c.Strict() {
			t.Errorf("a contract with %s claims a strict-mode schema: %s", name, c.Schema())
		}
	}
	// Annotations strict modes reject are dropped from every schema.
	if s := string(vNewContract[vLength](t, "length").Schema()); strings.Contains(s, `"default"`) {
		t.Errorf("the schema keeps a default: %s", s)
	}
}

func TestAPlanForAToolWithoutAStrictSchemaIsAskedForWithoutStrictEnforcement(t *testing.T) {
	for _, tc := range []struct {
		tool   *planexec.Tool
		strict bool
	}{
		{planexec.MustTool("tag", "Tag.", func(context.Context, vTagged) (int, error) { return 0, nil }), false},
		{planexec.MustTool("look", "Look.", func(context.Context, Search) (int, error) { return 0, nil }), true},
	} {
		model := scripted.New(scripted.Reply{Content: `{"goal":"g","steps":[]}`})
		planner, _ := planexec.NewAgentPlanner(model, planexec.Agent{Name: "planner"})
		ex, err := planexec.NewExecutor(planexec.Config{Tools: []*planexec.Tool{tc.tool}, MaxReplans: planexec.NoReplans})
		if err != nil {
			t.Fatal(err)
		}
		run, err := ex.Run(planexec.Delegation{Agent: "a"})
		if err != nil {
			t.Fatal(err)
		}
		_, _ = run.Plan(context.Background(), planner, "go")
		if got := model.Requests()[0].Output.Strict; got != tc.strict {
			t.Errorf("tool %s: Output.Strict = %v, want %v", tc.tool.Name(), got, tc.strict)
		}
	}
}
