package planexec_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/llm/scripted"
)

// ---- helpers (prefixed v to keep clear of other files) ----

// vRefusal asserts that err refuses a plan for reason, both through errors.Is
// and as a *PlanValidationError, and returns the error.
func vRefusal(t *testing.T, err error, reason planexec.Reason) *planexec.PlanValidationError {
	t.Helper()
	if err == nil {
		t.Fatalf("want a %q refusal, got no error", reason)
	}
	if !errors.Is(err, reason) {
		t.Fatalf("want errors.Is(err, %q), got %v", reason, err)
	}
	var pv *planexec.PlanValidationError
	if !errors.As(err, &pv) {
		t.Fatalf("want a *PlanValidationError, got %T: %v", err, err)
	}
	if pv.Reason != reason {
		t.Fatalf("Reason = %q, want %q", pv.Reason, reason)
	}
	return pv
}

// vFindViolation returns the violation at path, failing the test when there
// is none or when its problem does not contain problem.
func vFindViolation(t *testing.T, vs []planexec.Violation, path, problem string) planexec.Violation {
	t.Helper()
	for _, v := range vs {
		if v.Path == path {
			if !strings.Contains(v.Why, problem) {
				t.Fatalf("violation at %q says %q, want it to mention %q (all: %v)", path, v.Why, problem, vs)
			}
			return v
		}
	}
	t.Fatalf("no violation at %q (want one mentioning %q); got %v", path, problem, vs)
	return planexec.Violation{}
}

// vExecuteRefused runs plan through Execute on a fresh executor and asserts
// that it is refused for reason before anything happens: no tool was called,
// no person was asked, and the record holds a single PLAN_REFUSED.
func vExecuteRefused(t *testing.T, plan planexec.Plan, reason planexec.Reason, edit func(*setup)) *planexec.PlanValidationError {
	t.Helper()
	r := &recorder{}
	run, gate := newExecutor(t, r, edit)
	res, err := run.Execute(context.Background(), plan)
	pv := vRefusal(t, err, reason)
	if res != nil {
		t.Errorf("a refused plan returned a result: %+v", res)
	}
	if calls := r.Calls(); len(calls) != 0 {
		t.Errorf("a refused plan called tools: %v", toolNames(calls))
	}
	if asked := gate.Asked(); len(asked) != 0 {
		t.Errorf("a refused plan asked a person %d times", len(asked))
	}
	es := run.Events()
	if got := kinds(es); len(got) != 1 || got[0] != planexec.EventPlanRefused {
		t.Fatalf("events = %v, want exactly [PLAN_REFUSED]", got)
	}
	if es[0].Reason != reason {
		t.Errorf("PLAN_REFUSED reason = %q, want %q", es[0].Reason, reason)
	}
	if es[0].StepID != pv.Step || es[0].Tool != pv.Tool {
		t.Errorf("PLAN_REFUSED names step %q tool %q, the error step %q tool %q", es[0].StepID, es[0].Tool, pv.Step, pv.Tool)
	}
	return pv
}

// vSearches is a plan of n independent, valid searches.
func vSearches(n int) planexec.Plan {
	p := planexec.Plan{Goal: "look around"}
	for i := range n {
		// Each from another airport: two equal searches would be one effect.
		p.Steps = append(p.Steps, step(fmt.Sprintf("s%d", i+1), "search_flights", fmt.Sprintf(`{"origin":"A%02d","destination":"JFK"}`, i)))
	}
	return p
}

// vDeep nests n arrays around a value.
func vDeep(n int, inner string) string {
	return strings.Repeat("[", n) + inner + strings.Repeat("]", n)
}

const vSecret = "hunter2-secret"

// ---- Plan.Step ----

func TestPlanStepFindsAStepByItsIDAndReportsAMissingOne(t *testing.T) {
	p := tripPlan()
	s, ok := p.Step("s2")
	if !ok {
		t.Fatal("Step(\"s2\") found nothing")
	}
	if s.ID != "s2" || s.Tool != "book_flight" || len(s.DependsOn) != 1 || s.DependsOn[0] != "s1" {
		t.Fatalf("Step(\"s2\") = %+v, want the booking step", s)
	}
	if s, ok := p.Step("s3"); ok {
		t.Fatalf("Step(\"s3\") found %+v in a plan without it", s)
	}
	if _, ok := p.Step(""); ok {
		t.Fatal("Step(\"\") found a step")
	}
}

// ---- DecodePlan ----

func TestDecodePlanReadsAPlannersOutputKeepingArgumentsAsWritten(t *testing.T) {
	raw := []byte(`{"goal":"pay","steps":[{"id":"s1","tool":"refund","arguments":{"order":"A1","amount":412.50,"currency":"EUR"},"depends_on":[],"intent":"give it back"}]}`)
	p, err := planexec.DecodePlan(raw, planexec.Limits{})
	if err != nil {
		t.Fatalf("DecodePlan: %v", err)
	}
	if p.ID != "" || p.Revision != 0 {
		t.Errorf("a decoded plan has id %q revision %d; the executor assigns those", p.ID, p.Revision)
	}
	if p.Goal != "pay" || len(p.Steps) != 1 {
		t.Fatalf("plan = %+v", p)
	}
	s := p.Steps[0]
	if s.ID != "s1" || s.Tool != "refund" || s.Intent != "give it back" {
		t.Errorf("step = %+v", s)
	}
	if got := string(s.Arguments); got != `{"order":"A1","amount":412.50,"currency":"EUR"}` {
		t.Errorf("arguments = %s, want them byte for byte as written", got)
	}
}

func TestDecodePlanRefusesNothingAtAllAsEmpty(t *testing.T) {
	for name, raw := range map[string]string{
		"nil":        "",
		"whitespace": " \n\t\r ",
		"null":       "null",
		"null-ws":    "  null\n",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := planexec.DecodePlan([]byte(raw), planexec.Limits{})
			pv := vRefusal(t, err, planexec.ReasonEmpty)
			if !bytes.Equal(pv.Payload, []byte(raw)) {
				t.Errorf("Payload = %q, want the raw output %q", pv.Payload, raw)
			}
		})
	}
}

func TestDecodePlanRefusesOutputThatIsNotAPlanAsMalformed(t *testing.T) {
	cases := []struct {
		name, raw, path, problem string
	}{
		{"not json", `I would book BA117 for you.`, "", "not valid JSON"},
		{"truncated", `{"steps":[{"id":"s1"`, "/steps/0", "not valid JSON"},
		{"an array", `[{"id":"s1","tool":"search_flights","arguments":{}}]`, "", "expected object"},
		{"steps not an array", `{"steps":{"id":"s1"}}`, "/steps", "expected array"},
		{"unknown plan field", `{"steps":[],"budget":10}`, "/budget", "unknown key"},
		{"plan field in the wrong case", `{"Steps":[]}`, "/Steps", "differs only in case"},
		{"unknown step field", `{"steps":[{"id":"s1","tool":"search_flights","arguments":{},"run_now":true}]}`, "/steps/0/run_now", "unknown key"},
		{"arguments missing", `{"steps":[{"id":"s1","tool":"search_flights"}]}`, "/steps/0/arguments", "missing required key"},
		{"arguments null", `{"steps":[{"id":"s1","tool":"search_flights","arguments":null}]}`, "/steps/0/arguments", "null"},
		{"tool a number", `{"steps":[{"id":"s1","tool":7,"arguments":{}}]}`, "/steps/0/tool", "expected string"},
		{"depends_on a string", `{"steps":[{"id":"s1","tool":"search_flights","arguments":{},"depends_on":"s0"}]}`, "/steps/0/depends_on", "expected array"},
		{"duplicate steps key", `{"steps":[],"steps":[]}`, "/steps", "duplicate key"},
		{"trailing garbage", `{"steps":[]} {"steps":[]}`, "", "not valid JSON"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := planexec.DecodePlan([]byte(c.raw), planexec.Limits{})
			pv := vRefusal(t, err, planexec.ReasonMalformed)
			vFindViolation(t, pv.Violations, c.path, c.problem)
			if string(pv.Payload) != c.raw {
				t.Errorf("Payload = %q, want the raw output", pv.Payload)
			}
		})
	}
}

func TestDecodePlanRefusesAPlanWithNoStepsAsEmpty(t *testing.T) {
	for _, raw := range []string{
		`{}`,
		`{"steps":[]}`,
		`{"goal":"x"}`,
		`{"goal":"x","steps":[]}`,
		" \t{ \"steps\" : [ ] }\r\n",
	} {
		t.Run(raw, func(t *testing.T) {
			_, err := planexec.DecodePlan([]byte(raw), planexec.Limits{})
			pv := vRefusal(t, err, planexec.ReasonEmpty)
			if string(pv.Payload) != raw {
				t.Errorf("Payload = %q, want the raw output", pv.Payload)
			}
		})
	}
}

// vValidPlanJSON is a planner's output for one valid search.
const vValidPlanJSON = `{"goal":"look","steps":[{"id":"s1","tool":"search_flights","arguments":{"origin":"LHR","destination":"JFK"}}]}`

func TestDecodePlanAllowsOnlyJSONWhitespaceAroundAPlan(t *testing.T) {
	for name, raw := range map[string]string{
		"space, tab, CR, LF": " \t\r\n" + vValidPlanJSON + "\n\r\t ",
		"none":               vValidPlanJSON,
	} {
		t.Run(name, func(t *testing.T) {
			p, err := planexec.DecodePlan([]byte(raw), planexec.Limits{})
			if err != nil || len(p.Steps) != 1 || p.Steps[0].ID != "s1" {
				t.Fatalf("DecodePlan = %+v, %v; want the one-step plan", p, err)
			}
		})
	}
	// Whitespace JSON does not allow is not a plan's, even when it is all
	// there is: it is malformed, not empty.
	for name, raw := range map[string]string{
		"NBSP around":          "\u00a0" + vValidPlanJSON + "\u00a0",
		"NBSP before":          "\u00a0" + vValidPlanJSON,
		"vertical tab around":  "\v" + vValidPlanJSON + "\v",
		"vertical tab after":   vValidPlanJSON + "\v",
		"form feed before":     "\f" + vValidPlanJSON,
		"line separator after": vValidPlanJSON + "\u2028",
		"only NBSP":            "\u00a0",
		"only a vertical tab":  " \v ",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := planexec.DecodePlan([]byte(raw), planexec.Limits{})
			pv := vRefusal(t, err, planexec.ReasonMalformed)
			if string(pv.Payload) != raw {
				t.Errorf("Payload = %q, want the raw output", pv.Payload)
			}
		})
	}
}

func TestDecodePlanRefusesOutputLargerThanMaxPlanBytesAsMalformed(t *testing.T) {
	raw := []byte(`{"goal":"get them to New York","steps":[{"id":"s1","tool":"search_flights","arguments":{"origin":"LHR","destination":"JFK"}}]}`)
	if _, err := planexec.DecodePlan(raw, planexec.Limits{MaxPlanBytes: len(raw)}); err != nil {
		t.Fatalf("a plan exactly MaxPlanBytes long was refused: %v", err)
	}
	_, err := planexec.DecodePlan(raw, planexec.Limits{MaxPlanBytes: len(raw) - 1})
	pv := vRefusal(t, err, planexec.ReasonMalformed)
	if len(pv.Violations) == 0 || !strings.Contains(pv.Violations[0].Why, "larger than") {
		t.Errorf("violations = %v, want one saying the plan is too large", pv.Violations)
	}
	if !bytes.Equal(pv.Payload, raw) {
		t.Error("the oversized payload does not ride on the error")
	}
}

func TestARefusedPayloadRidesOnTheErrorButNeverInItsMessageOrLog(t *testing.T) {
	// The secret sits in a wrongly typed value, an unknown step field and an
	// argument: DecodePlan refuses the shape, and nothing in the message or
	// the slog rendering may repeat it.
	raw := []byte(`{"goal":42,"steps":[{"id":"s1","tool":"book_flight","arguments":{"flight":"` + vSecret + `","seats":1},"note":"` + vSecret + `"}]}`)
	_, err := planexec.DecodePlan(raw, planexec.Limits{})
	pv := vRefusal(t, err, planexec.ReasonMalformed)
	vFindViolation(t, pv.Violations, "/goal", "expected string")
	vFindViolation(t, pv.Violations, "/steps/0/note", "unknown key")
	if !bytes.Contains(pv.Payload, []byte(vSecret)) {
		t.Fatal("the raw payload is not on the error")
	}
	vAssertNoSecret(t, err)
}

func TestAnArgumentsRefusalNeverQuotesTheArgumentValues(t *testing.T) {
	r := &recorder{}
	run, _ := newExecutor(t, r, nil)
	cases := map[string]planexec.Step{
		"wrong type":   step("s1", "book_flight", `{"flight":"BA117","seats":"`+vSecret+`"}`),
		"unknown key":  step("s1", "book_flight", `{"flight":"BA117","seats":1,"memo":"`+vSecret+`"}`),
		"failed rule":  step("s1", "search_flights", `{"origin":"`+vSecret+`","destination":"JFK"}`),
		"wrong nested": step("s1", "refund", `{"order":"A1","amount":"`+vSecret+`","currency":"EUR"}`),
	}
	for name, s := range cases {
		t.Run(name, func(t *testing.T) {
			err := run.Validate(planexec.Plan{Steps: []planexec.Step{s}})
			pv := vRefusal(t, err, planexec.ReasonArguments)
			if len(pv.Violations) == 0 {
				t.Fatal("an arguments refusal lists no violation")
			}
			vAssertNoSecret(t, err)
			for _, v := range pv.Violations {
				if strings.Contains(v.Why, vSecret) || strings.Contains(v.Path, vSecret) {
					t.Errorf("violation %v quotes the argument value", v)
				}
			}
		})
	}
	// Through Execute the refusal lands on the record without the value either.
	_, err := run.Execute(context.Background(), planexec.Plan{Steps: []planexec.Step{cases["wrong type"]}})
	vRefusal(t, err, planexec.ReasonArguments)
	for _, e := range run.Events() {
		if strings.Contains(fmt.Sprintf("%+v", e), vSecret) {
			t.Errorf("event %s carries the argument value: %+v", e.Kind, e)
		}
	}
	if len(r.Calls()) != 0 {
		t.Errorf("tools were called: %v", toolNames(r.Calls()))
	}
}

// vAssertNoSecret checks that neither err's message nor its slog rendering
// contains vSecret, and that the slog rendering really is the error's.
func vAssertNoSecret(t *testing.T, err error) {
	t.Helper()
	if strings.Contains(err.Error(), vSecret) {
		t.Errorf("Error() contains an argument value: %s", err)
	}
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Error("plan refused", "err", err)
	out := buf.String()
	if strings.Contains(out, vSecret) {
		t.Errorf("the slog rendering contains an argument value: %s", out)
	}
	var pv *planexec.PlanValidationError
	if errors.As(err, &pv) && !strings.Contains(out, `"reason":"`+string(pv.Reason)+`"`) {
		t.Errorf("the slog rendering does not carry the reason, so LogValue was not used: %s", out)
	}
}

// ---- validation order and reasons ----

func TestAPlanWithNoStepsIsRefusedAsEmptyAndRunsNothing(t *testing.T) {
	vExecuteRefused(t, planexec.Plan{Goal: "nothing"}, planexec.ReasonEmpty, nil)
	vExecuteRefused(t, planexec.Plan{Goal: "nothing", Steps: []planexec.Step{}}, planexec.ReasonEmpty, nil)
}

func TestAPlanLongerThanMaxStepsIsRefusedWholeNotTruncated(t *testing.T) {
	run, _ := newExecutor(t, &recorder{}, nil)
	if err := run.Validate(vSearches(24)); err != nil {
		t.Fatalf("24 steps (the default MaxSteps) were refused: %v", err)
	}
	pv := vExecuteRefused(t, vSearches(25), planexec.ReasonTooLong, nil)
	vFindViolation(t, pv.Violations, "/steps", "25")
	if pv.Step != "" {
		t.Errorf("a too_long refusal names step %q; it concerns the whole plan", pv.Step)
	}
}

func TestMaxStepsCanBeLowered(t *testing.T) {
	run, _ := newExecutor(t, &recorder{}, func(c *setup) { c.Limits.MaxSteps = 2 })
	if err := run.Validate(vSearches(2)); err != nil {
		t.Fatalf("2 steps refused with MaxSteps 2: %v", err)
	}
	vRefusal(t, run.Validate(vSearches(3)), planexec.ReasonTooLong)
}

func TestAStepWithoutAUsableIDIsRefusedAsMalformed(t *testing.T) {
	long := strings.Repeat("s", 65)
	// Step names the offending id as it can safely be shown: bounded, with
	// control characters and invalid UTF-8 as U+FFFD.
	cases := map[string]struct{ id, problem, shown string }{
		"empty":         {"", "needs an id", ""},
		"too long":      {long, "longer than 64", long[:64] + "…"},
		"with a space":  {"step 1", "space", "step 1"},
		"with a tab":    {"s\t1", "space", "s\uFFFD1"},
		"with a NUL":    {"s\x001", "control", "s\uFFFD1"},
		"invalid UTF-8": {"s\xff", "UTF-8", "s\uFFFD"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			plan := planexec.Plan{Steps: []planexec.Step{
				step("s0", "search_flights", `{"origin":"LHR","destination":"JFK"}`),
				step(c.id, "search_flights", `{"origin":"LHR","destination":"JFK"}`),
			}}
			pv := vExecuteRefused(t, plan, planexec.ReasonMalformed, nil)
			vFindViolation(t, pv.Violations, "/steps/1/id", c.problem)
			if pv.Step != c.shown {
				t.Errorf("Step = %q, want the offending id shown as %q", pv.Step, c.shown)
			}
		})
	}
	run, _ := newExecutor(t, &recorder{}, nil)
	if err := run.Validate(planexec.Plan{Steps: []planexec.Step{
		step(strings.Repeat("s", 64), "search_flights", `{"origin":"LHR","destination":"JFK"}`),
	}}); err != nil {
		t.Errorf("an id of exactly 64 bytes was refused: %v", err)
	}
}

// vInvisibleIDs are step ids that read as something they are not: each holds
// a character that is not seen, or that changes how the rest is shown. The
// value is what the violation says.
var vInvisibleIDs = map[string]struct{ id, problem string }{
	"bidi override (U+202E)":          {"s1\u202Etxt.exe", "invisible or direction-changing"},
	"bidi isolate (U+2066)":           {"s\u20661", "invisible or direction-changing"},
	"zero-width joiner (U+200D)":      {"s\u200D1", "invisible or direction-changing"},
	"zero-width space (U+200B)":       {"s\u200B1", "invisible or direction-changing"},
	"soft hyphen (U+00AD)":            {"s\u00AD1", "invisible or direction-changing"},
	"variation selector (U+FE0F)":     {"s1\uFE0F", "invisible or direction-changing"},
	"variation selector (U+E0100)":    {"s1\U000E0100", "invisible or direction-changing"},
	"private use (U+E000)":            {"s\uE0001", "invisible or direction-changing"},
	"private use, plane 15":           {"s\U000F00001", "invisible or direction-changing"},
	"byte order mark (U+FEFF)":        {"\uFEFFs1", "invisible or direction-changing"},
	"Hangul filler (U+3164)":          {"s\u31641", "invisible or direction-changing"},
	"unassigned code point (U+0378)":  {"s\u03781", "invisible or direction-changing"},
	"tag character (U+E0041)":         {"s1\U000E0041", "invisible or direction-changing"},
	"Mongolian vowel sep. (U+180E)":   {"s\u180E1", "invisible or direction-changing"},
	"invisible times (U+2062)":        {"s\u20621", "invisible or direction-changing"},
	"interlinear annotation (U+FFF9)": {"s\uFFF91", "invisible or direction-changing"},
	"next-line control (U+0085)":      {"s\u00851", "space or control"},
	"no-break space (U+00A0)":         {"s\u00A01", "space or control"},
	"ideographic space (U+3000)":      {"s\u30001", "space or control"},
}

// vOtherScriptIDs are step ids in other scripts, each shown as what it is.
var vOtherScriptIDs = []string{
	"шаг-1",
	"ステップ",
	"स्टेप-२", // Devanagari, with a virama and a vowel sign (combining marks)
	"خطوة١",   // right-to-left letters, with no direction control
	"βήμα_2",
	"단계",
	"e\u0301tape", // a combining acute accent
	"ä-ß-ø",
}

func TestAStepIDHoldingAnInvisibleOrDirectionChangingCharacterIsRefusedAsMalformed(t *testing.T) {
	for name, c := range vInvisibleIDs {
		t.Run(name, func(t *testing.T) {
			plan := planexec.Plan{Steps: []planexec.Step{
				step("s0", "search_flights", `{"origin":"LHR","destination":"JFK"}`),
				step(c.id, "search_flights", `{"origin":"LGW","destination":"JFK"}`, "s0"),
			}}
			pv := vExecuteRefused(t, plan, planexec.ReasonMalformed, nil)
			vFindViolation(t, pv.Violations, "/steps/1/id", c.problem)
		})
	}
}

func TestStepIDsInOtherScriptsAreAccepted(t *testing.T) {
	r := &recorder{}
	run, _ := newExecutor(t, r, nil)
	plan := planexec.Plan{Goal: "look around"}
	for i, id := range vOtherScriptIDs {
		s := step(id, "search_flights", fmt.Sprintf(`{"origin":"A%02d","destination":"JFK"}`, i))
		if i > 0 {
			s.DependsOn = []string{vOtherScriptIDs[i-1]}
		}
		plan.Steps = append(plan.Steps, s)
	}
	res, err := run.Execute(context.Background(), plan)
	if err != nil {
		t.Fatalf("Execute: %v", err)
	}
	for _, id := range vOtherScriptIDs {
		if res.Steps[id].Status != planexec.StepDone {
			t.Errorf("step %q: %+v, want done", id, res.Steps[id])
		}
	}
	if got := len(r.Calls()); got != len(vOtherScriptIDs) {
		t.Errorf("%d calls, want %d", got, len(vOtherScriptIDs))
	}
}

func TestAPlannersOutputIsRefusedForWhatDecodingAndIDsForbidAndAskedForAgain(t *testing.T) {
	valid := vValidPlanJSON
	withID := func(id string) string {
		return `{"goal":"look","steps":[{"id":` + strconv.Quote(id) + `,"tool":"search_flights","arguments":{"origin":"LHR","destination":"JFK"}}]}`
	}
	cases := []struct {
		name, output string
		reason       planexec.Reason
	}{
		{"an empty object", `{}`, planexec.ReasonEmpty},
		{"no steps", `{"steps":[]}`, planexec.ReasonEmpty},
		{"a goal alone", `{"goal":"x"}`, planexec.ReasonEmpty},
		{"NBSP around", "\u00a0" + valid + "\u00a0", planexec.ReasonMalformed},
		{"vertical tab around", "\v" + valid + "\v", planexec.ReasonMalformed},
		{"a bidi override in an id", withID("s\u202E1"), planexec.ReasonMalformed},
		{"a zero-width joiner in an id", withID("s\u200D1"), planexec.ReasonMalformed},
		{"a soft hyphen in an id", withID("s\u00AD1"), planexec.ReasonMalformed},
		{"a variation selector in an id", withID("s1\uFE0F"), planexec.ReasonMalformed},
		{"a private-use character in an id", withID("s\uE0001"), planexec.ReasonMalformed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			model := scripted.New(scripted.Reply{Content: c.output}, scripted.Reply{Content: valid})
			planner, err := planexec.NewAgentPlanner(model, planexec.Agent{Name: "planner"})
			if err != nil {
				t.Fatal(err)
			}
			run, _ := newExecutor(t, &recorder{}, nil)
			plan, err := run.Plan(context.Background(), planner, "look around")
			if err != nil {
				t.Fatalf("Plan: %v", err)
			}
			if plan.Revision != 2 || len(plan.Steps) != 1 || plan.Steps[0].ID != "s1" {
				t.Errorf("plan = %+v, want the second answer as revision 2", plan)
			}
			es := run.Events()
			if got := kinds(es); !slices.Equal(got, []planexec.EventKind{planexec.EventPlanRefused, planexec.EventReplanned, planexec.EventPlanned}) {
				t.Fatalf("events = %v", got)
			}
			if es[0].Reason != c.reason {
				t.Errorf("PLAN_REFUSED reason = %q, want %q", es[0].Reason, c.reason)
			}
			if len(model.Requests()) != 2 {
				t.Errorf("the model was asked %d times, want 2", len(model.Requests()))
			}
		})
	}
	// JSON's own whitespace around a plan is no reason to ask again.
	model := scripted.New(scripted.Reply{Content: " \t\r\n" + valid + "\n\r\t "})
	planner, _ := planexec.NewAgentPlanner(model, planexec.Agent{Name: "planner"})
	run, _ := newExecutor(t, &recorder{}, nil)
	plan, err := run.Plan(context.Background(), planner, "look around")
	if err != nil || plan.Revision != 1 {
		t.Errorf("a plan with JSON whitespace around it: revision %d, %v; want accepted at once", plan.Revision, err)
	}
	// An id in another script is no reason either.
	model = scripted.New(scripted.Reply{Content: withID("шаг-1")})
	planner, _ = planexec.NewAgentPlanner(model, planexec.Agent{Name: "planner"})
	run, _ = newExecutor(t, &recorder{}, nil)
	if plan, err = run.Plan(context.Background(), planner, "look around"); err != nil || plan.Steps[0].ID != "шаг-1" {
		t.Errorf("a plan with a Cyrillic step id: %+v, %v; want accepted", plan, err)
	}
}

func TestTwoStepsSharingAnIDAreRefusedAsDuplicateID(t *testing.T) {
	plan := planexec.Plan{Steps: []planexec.Step{
		step("s1", "search_flights", `{"origin":"LHR","destination":"JFK"}`),
		step("s1", "book_flight", `{"flight":"BA117","seats":1}`),
	}}
	pv := vExecuteRefused(t, plan, planexec.ReasonDuplicateID, nil)
	if pv.Step != "s1" || pv.Tool != "book_flight" {
		t.Errorf("refusal names step %q tool %q, want the second s1 (book_flight)", pv.Step, pv.Tool)
	}
	vFindViolation(t, pv.Violations, "/steps/1/id", "another step")
}

func TestAStepNamingAToolNobodyRegisteredIsRefusedAsUnknownTool(t *testing.T) {
	plan := planexec.Plan{Steps: []planexec.Step{
		step("s1", "search_flights", `{"origin":"LHR","destination":"JFK"}`),
		step("s2", "teleport", `{"to":"JFK"}`, "s1"),
	}}
	pv := vExecuteRefused(t, plan, planexec.ReasonUnknownTool, nil)
	if pv.Step != "s2" || pv.Tool != "teleport" {
		t.Errorf("refusal names step %q tool %q, want s2 teleport", pv.Step, pv.Tool)
	}
	// A name differing only in case is another name.
	pv = vExecuteRefused(t, planexec.Plan{Steps: []planexec.Step{
		step("s1", "Search_Flights", `{"origin":"LHR","destination":"JFK"}`),
	}}, planexec.ReasonUnknownTool, nil)
	if pv.Tool != "Search_Flights" {
		t.Errorf("Tool = %q", pv.Tool)
	}
}

func TestARegisteredToolOutsideTheDelegationScopeIsRefusedAsNotAllowed(t *testing.T) {
	plan := planexec.Plan{Steps: []planexec.Step{
		step("s1", "search_flights", `{"origin":"LHR","destination":"JFK"}`),
		step("r1", "refund", `{"order":"A1","amount":10,"currency":"EUR"}`),
	}}
	pv := vExecuteRefused(t, plan, planexec.ReasonNotAllowed, withScope("search_flights", "book_flight"))
	if pv.Step != "r1" || pv.Tool != "refund" {
		t.Errorf("refusal names step %q tool %q, want r1 refund", pv.Step, pv.Tool)
	}
}

func TestANarrowerScopeRefusesTheRestAndAnEmptyScopeAllowsNothing(t *testing.T) {
	scoped := withScope("search_flights")
	pv := vExecuteRefused(t, tripPlan(), planexec.ReasonNotAllowed, scoped)
	if pv.Step != "s2" || pv.Tool != "book_flight" {
		t.Errorf("refusal names step %q tool %q, want s2 book_flight", pv.Step, pv.Tool)
	}
	run, _ := newExecutor(t, &recorder{}, scoped)
	if err := run.Validate(vSearches(2)); err != nil {
		t.Errorf("a plan within the scope was refused: %v", err)
	}
	// An empty, non-nil scope allows nothing: every step is refused, and
	// there is nothing to plan with.
	empty := func(s *setup) { s.Delegation.Scope = []string{} } // withScope() would be nil: every tool
	vExecuteRefused(t, vSearches(1), planexec.ReasonNotAllowed, empty)
	run, _ = newExecutor(t, &recorder{}, empty)
	if cat := run.Catalog(); len(cat) != 0 {
		t.Errorf("an empty scope lists %d tools in the catalog", len(cat))
	}
	planner := &vNeverAsked{}
	_, err := run.Plan(context.Background(), planner, "look around")
	var de *planexec.DelegationError
	if !errors.As(err, &de) || de.RunID != "run-1" {
		t.Errorf("planning under an empty scope: err = %v, want a *DelegationError for run-1", err)
	}
	if planner.asked {
		t.Error("the planner was asked for a plan no tool could carry out")
	}
}

// vNeverAsked is a planner that remembers whether it was asked.
type vNeverAsked struct{ asked bool }

func (p *vNeverAsked) Plan(context.Context, planexec.PlanRequest) (*planexec.PlanResponse, error) {
	p.asked = true
	return nil, errors.New("a planner that should not have been asked")
}

func TestAStepWaitingOnAStepNobodyPlannedIsRefusedAsDependency(t *testing.T) {
	plan := planexec.Plan{Steps: []planexec.Step{
		step("s1", "search_flights", `{"origin":"LHR","destination":"JFK"}`),
		step("s2", "book_flight", `{"flight":"BA117","seats":1}`, "s1", "s0"),
	}}
	pv := vExecuteRefused(t, plan, planexec.ReasonDependency, nil)
	if pv.Step != "s2" || pv.Tool != "book_flight" {
		t.Errorf("refusal names step %q tool %q, want the waiting step s2", pv.Step, pv.Tool)
	}
	vFindViolation(t, pv.Violations, "/steps/1/depends_on/1", "nobody planned")
}

func TestStepsWaitingOnEachOtherAreRefusedAsCycle(t *testing.T) {
	plan := planexec.Plan{Steps: []planexec.Step{
		step("s1", "search_flights", `{"origin":"LHR","destination":"JFK"}`, "s2"),
		step("s2", "book_flight", `{"flight":"BA117","seats":1}`, "s1"),
	}}
	pv := vExecuteRefused(t, plan, planexec.ReasonCycle, nil)
	if pv.Step != "s1" && pv.Step != "s2" {
		t.Errorf("refusal names step %q, want one in the loop", pv.Step)
	}
	vFindViolation(t, pv.Violations, "/steps/0", "is in a cycle")
	vFindViolation(t, pv.Violations, "/steps/1", "is in a cycle")
}

func TestAStepWaitingOnItselfIsRefusedAsCycle(t *testing.T) {
	plan := planexec.Plan{Steps: []planexec.Step{
		step("s1", "search_flights", `{"origin":"LHR","destination":"JFK"}`),
		step("s2", "book_flight", `{"flight":"BA117","seats":1}`, "s1", "s2"),
	}}
	pv := vExecuteRefused(t, plan, planexec.ReasonCycle, nil)
	if pv.Step != "s2" {
		t.Errorf("refusal names step %q, want s2", pv.Step)
	}
	vFindViolation(t, pv.Violations, "/steps/1/depends_on/1", "itself")
}

func TestAStepBehindALoopIsNamedAsWaitingOnACycle(t *testing.T) {
	plan := planexec.Plan{Steps: []planexec.Step{
		step("a", "search_flights", `{"origin":"LHR","destination":"JFK"}`),
		step("b", "search_flights", `{"origin":"LGW","destination":"JFK"}`, "a", "c"),
		step("c", "search_flights", `{"origin":"STN","destination":"JFK"}`, "b"),
		step("d", "book_flight", `{"flight":"BA117","seats":1}`, "c"),
	}}
	pv := vExecuteRefused(t, plan, planexec.ReasonCycle, nil)
	if pv.Step != "b" && pv.Step != "c" {
		t.Errorf("refusal names step %q, want one in the loop (b or c)", pv.Step)
	}
	vFindViolation(t, pv.Violations, "/steps/1", "is in a cycle")
	vFindViolation(t, pv.Violations, "/steps/2", "is in a cycle")
	vFindViolation(t, pv.Violations, "/steps/3", "waits on a step in a cycle")
	for _, v := range pv.Violations {
		if v.Path == "/steps/0" {
			t.Errorf("step a, which waits on nothing, is named: %v", v)
		}
	}
}

func TestTheOrderOfStepsDecidesNothingForAValidPlan(t *testing.T) {
	// s2 is written first but waits on s1: valid, and run in dependency order.
	r := &recorder{}
	run, _ := newExecutor(t, r, func(c *setup) { c.Concurrency = 1 })
	p := tripPlan()
	p.Steps[0], p.Steps[1] = p.Steps[1], p.Steps[0]
	if _, err := run.Execute(context.Background(), p); err != nil {
		t.Fatalf("Execute: %v", err)
	}
	if got := toolNames(r.Calls()); len(got) != 2 || got[0] != "search_flights" || got[1] != "book_flight" {
		t.Errorf("calls = %v, want search_flights then book_flight", got)
	}
}

func TestAnUnknownToolIsReportedBeforeACycle(t *testing.T) {
	plan := planexec.Plan{Steps: []planexec.Step{
		step("s1", "teleport", `{}`, "s2"),
		step("s2", "search_flights", `{"origin":"LHR","destination":"JFK"}`, "s1"),
	}}
	pv := vExecuteRefused(t, plan, planexec.ReasonUnknownTool, nil)
	if pv.Step != "s1" {
		t.Errorf("Step = %q, want s1", pv.Step)
	}
}

func TestBadArgumentsAreReportedBeforeAnUnknownDependency(t *testing.T) {
	plan := planexec.Plan{Steps: []planexec.Step{
		step("s1", "book_flight", `{"flight":"BA117","seats":"1"}`, "nowhere"),
	}}
	pv := vExecuteRefused(t, plan, planexec.ReasonArguments, nil)
	vFindViolation(t, pv.Violations, "/seats", "expected integer, got string")
}

func TestPerStepChecksStopAtTheFirstBadStepInPlanOrder(t *testing.T) {
	// Step 1 has bad arguments, step 2 an unknown tool: step 1 is reported.
	plan := planexec.Plan{Steps: []planexec.Step{
		step("s1", "search_flights", `{"origin":"LHR","destination":"JFK"}`),
		step("s2", "book_flight", `{"flight":"BA117","seats":0}`),
		step("s3", "teleport", `{}`),
	}}
	pv := vExecuteRefused(t, plan, planexec.ReasonArguments, nil)
	if pv.Step != "s2" {
		t.Errorf("Step = %q, want s2", pv.Step)
	}
	// Too many steps is reported before anything wrong inside them.
	long := vSearches(25)
	long.Steps[0].Tool = "teleport"
	long.Steps[1].ID = long.Steps[2].ID
	vExecuteRefused(t, long, planexec.ReasonTooLong, nil)
	// A duplicate id is reported before the unknown tool of the same step.
	dup := planexec.Plan{Steps: []planexec.Step{
		step("s1", "search_flights", `{"origin":"LHR","destination":"JFK"}`),
		step("s1", "teleport", `{}`),
	}}
	vExecuteRefused(t, dup, planexec.ReasonDuplicateID, nil)
	// An unknown tool is reported before a tool outside the allowlist later on.
	mixed := planexec.Plan{Steps: []planexec.Step{
		step("s1", "teleport", `{}`),
		step("s2", "refund", `{"order":"A1","amount":1,"currency":"EUR"}`),
	}}
	vExecuteRefused(t, mixed, planexec.ReasonUnknownTool, withScope("search_flights"))
}

func TestValidationNeverPanicsOnANastyPlan(t *testing.T) {
	run, _ := newExecutor(t, &recorder{}, nil)
	search := func(args string) planexec.Plan {
		return planexec.Plan{Steps: []planexec.Step{step("s1", "search_flights", args)}}
	}
	nasty := map[string]struct {
		plan   planexec.Plan
		reason planexec.Reason
	}{
		"nil arguments":      {planexec.Plan{Steps: []planexec.Step{{ID: "s1", Tool: "search_flights"}}}, planexec.ReasonArguments},
		"empty arguments":    {search(""), planexec.ReasonArguments},
		"null arguments":     {search("null"), planexec.ReasonArguments},
		"array arguments":    {search("[]"), planexec.ReasonArguments},
		"number arguments":   {search("42"), planexec.ReasonArguments},
		"truncated":          {search(`{"origin":"LHR"`), planexec.ReasonArguments},
		"two documents":      {search(`{"origin":"LHR","destination":"JFK"}{}`), planexec.ReasonArguments},
		"invalid UTF-8":      {search("{\"origin\":\"\xff\xfe\xfd\",\"destination\":\"JFK\"}"), planexec.ReasonArguments},
		"lone surrogate":     {search(`{"origin":"\ud800AB","destination":"JFK"}`), planexec.ReasonArguments},
		"deep in a value":    {search(`{"origin":` + vDeep(100, "1") + `,"destination":"JFK"}`), planexec.ReasonArguments},
		"deep unknown key":   {search(`{"origin":"LHR","destination":"JFK","x":` + vDeep(100000, "") + `}`), planexec.ReasonArguments},
		"huge seats":         {planexec.Plan{Steps: []planexec.Step{step("s1", "book_flight", `{"flight":"BA117","seats":99999999999999999999999999}`)}}, planexec.ReasonArguments},
		"huge exponent fare": {planexec.Plan{Steps: []planexec.Step{step("s1", "book_flight", `{"flight":"BA117","seats":1,"fare":1e999999999}`)}}, planexec.ReasonArguments},
		"empty dependency":   {planexec.Plan{Steps: []planexec.Step{step("s1", "search_flights", `{"origin":"LHR","destination":"JFK"}`, "")}}, planexec.ReasonDependency},
		"many steps":         {vSearches(100000), planexec.ReasonTooLong},
	}
	for name, c := range nasty {
		t.Run(name, func(t *testing.T) {
			vRefusal(t, run.Validate(c.plan), c.reason)
		})
	}
}

func TestArgumentsNestedPastMaxArgumentDepthAreRefused(t *testing.T) {
	run, _ := newExecutor(t, &recorder{}, nil)
	deep := `{"order":"A1","amount":1,"currency":"EUR","note":` + vDeep(40, "1") + `}`
	pv := vRefusal(t, run.Validate(planexec.Plan{Steps: []planexec.Step{step("s1", "refund", deep)}}), planexec.ReasonArguments)
	found := false
	for _, v := range pv.Violations {
		if strings.Contains(v.Why, "nesting deeper than 32") {
			found = true
		}
	}
	if !found {
		t.Errorf("violations %v do not say the nesting is too deep", pv.Violations)
	}
	// With a lower limit, shallower nesting is refused too.
	run, _ = newExecutor(t, &recorder{}, func(c *setup) { c.Limits.MaxArgumentDepth = 3 })
	shallow := `{"origin":"LHR","destination":"JFK","x":` + vDeep(5, "") + `}`
	pv = vRefusal(t, run.Validate(planexec.Plan{Steps: []planexec.Step{step("s1", "search_flights", shallow)}}), planexec.ReasonArguments)
	found = false
	for _, v := range pv.Violations {
		if strings.Contains(v.Why, "nesting deeper than 3") {
			found = true
		}
	}
	if !found {
		t.Errorf("violations %v do not say the nesting is too deep", pv.Violations)
	}
}

func TestAHugeToolNameIsRefusedAsUnknownToolWithAShortMessage(t *testing.T) {
	name := strings.Repeat("x", 10000)
	plan := planexec.Plan{Steps: []planexec.Step{step("s1", name, `{}`)}}
	pv := vExecuteRefused(t, plan, planexec.ReasonUnknownTool, nil)
	if !strings.HasPrefix(name, strings.TrimSuffix(pv.Tool, "…")) || len(pv.Tool) > 64+len("…") {
		t.Errorf("the refusal carries tool %q: want the start of the name it refused, bounded", pv.Tool)
	}
	if n := len(pv.Error()); n >= 300 {
		t.Errorf("Error() is %d bytes long; a hostile name must not flood a log", n)
	}
	hugeID := strings.Repeat("é", 5000)
	pv = vRefusal(t, func() error {
		run, _ := newExecutor(t, &recorder{}, nil)
		return run.Validate(planexec.Plan{Steps: []planexec.Step{step(hugeID, "search_flights", `{"origin":"LHR","destination":"JFK"}`)}})
	}(), planexec.ReasonMalformed)
	if n := len(pv.Error()); n >= 300 {
		t.Errorf("Error() is %d bytes long for a huge step id", n)
	}
}

func TestARefusalCarriesTheRunAndTenant(t *testing.T) {
	run, _ := newExecutor(t, &recorder{}, nil)
	pv := vRefusal(t, run.Validate(planexec.Plan{ID: "p-7", Revision: 3, Steps: []planexec.Step{step("s1", "teleport", `{}`)}}), planexec.ReasonUnknownTool)
	if pv.RunID != "run-1" || pv.Tenant != "acme" {
		t.Errorf("RunID %q Tenant %q, want run-1 acme", pv.RunID, pv.Tenant)
	}
	if pv.PlanID != "p-7" || pv.Revision != 3 {
		t.Errorf("PlanID %q Revision %d, want p-7 3", pv.PlanID, pv.Revision)
	}
}

func TestAValidPlanPassesValidationAndRuns(t *testing.T) {
	r := &recorder{}
	run, gate := newExecutor(t, r, nil)
	if err := run.Validate(tripPlan()); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	res, err := run.Execute(context.Background(), tripPlan())
	if err != nil {
		t.Fatalf("Execute: %v", err)
	}
	if !res.Complete {
		t.Error("the trip did not complete")
	}
	if got := toolNames(r.Calls()); len(got) != 2 {
		t.Errorf("calls = %v", got)
	}
	if len(gate.Asked()) != 1 {
		t.Errorf("the irreversible booking asked %d times, want once", len(gate.Asked()))
	}
	if count(run.Events(), planexec.EventPlanRefused) != 0 {
		t.Error("a valid plan was recorded as refused")
	}
}
