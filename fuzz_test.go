package planexec_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/planexec/planexec"
)

// vFuzzAllowed is the scope of the fuzzed run; refund is registered but not
// allowed.
var vFuzzAllowed = []string{"search_flights", "book_flight"}

var vKnownReasons = []planexec.Reason{
	planexec.ReasonEmpty, planexec.ReasonMalformed, planexec.ReasonTooLong, planexec.ReasonDuplicateID,
	planexec.ReasonUnknownTool, planexec.ReasonNotAllowed, planexec.ReasonArguments,
	planexec.ReasonDuplicateEffect, planexec.ReasonDependency, planexec.ReasonCycle, planexec.ReasonReference,
}

// vStepJSON renders one step of a planner's output.
func vStepJSON(id, tool, args string, deps ...string) string {
	d := `[]`
	if len(deps) > 0 {
		d = `["` + strings.Join(deps, `","`) + `"]`
	}
	return `{"id":"` + id + `","tool":"` + tool + `","arguments":` + args + `,"depends_on":` + d + `}`
}

func vPlanJSON(steps ...string) string {
	return `{"goal":"get them to New York","steps":[` + strings.Join(steps, ",") + `]}`
}

// FuzzDecodeAndValidate feeds arbitrary planner output through DecodePlan and
// Validate. Neither may panic; every refusal is a *PlanValidationError with a
// known reason; and a plan that passes uses only allowed tools, unique usable
// ids and dependencies on steps of the plan.
func FuzzDecodeAndValidate(f *testing.F) {
	const search = `{"origin":"LHR","destination":"JFK"}`
	const book = `{"flight":"BA117","seats":1}`
	var many []string
	for i := range 25 {
		many = append(many, vStepJSON(fmt.Sprintf("s%d", i), "search_flights", search))
	}
	seeds := []string{
		// valid
		vPlanJSON(vStepJSON("s1", "search_flights", search), vStepJSON("s2", "book_flight", book, "s1")),
		vPlanJSON(vStepJSON("s1", "book_flight", `{"flight":"BA117","seats":9,"fare":412.50,"note":null}`)),
		// empty
		"", "   ", "null", vPlanJSON(),
		// malformed
		"not json", `[]`, `{}`, `{"steps":{}}`, `{"steps":[],"extra":1}`,
		`{"steps":[{"id":"s1","tool":"search_flights","arguments":{},"bogus":1}]}`,
		`{"steps":[{"id":"s1","tool":"search_flights"}]}`,
		`{"steps":[` + strings.Repeat("{", 5) + `]}`,
		vPlanJSON(vStepJSON("", "search_flights", search)),
		vPlanJSON(vStepJSON("a b", "search_flights", search)),
		vPlanJSON(vStepJSON(strings.Repeat("x", 65), "search_flights", search)),
		// too long
		vPlanJSON(many...),
		// duplicate id
		vPlanJSON(vStepJSON("s1", "search_flights", search), vStepJSON("s1", "book_flight", book)),
		// unknown tool, not allowed
		vPlanJSON(vStepJSON("s1", "teleport", `{}`)),
		vPlanJSON(vStepJSON("s1", strings.Repeat("t", 10000), `{}`)),
		vPlanJSON(vStepJSON("s1", "refund", `{"order":"A1","amount":1,"currency":"EUR"}`)),
		// arguments
		vPlanJSON(vStepJSON("s1", "book_flight", `{"flight":"BA117","seats":"1"}`)),
		vPlanJSON(vStepJSON("s1", "book_flight", `{"Flight":"BA117","seats":1}`)),
		vPlanJSON(vStepJSON("s1", "book_flight", `{"flight":"BA117","seats":0}`)),
		vPlanJSON(vStepJSON("s1", "book_flight", `{"flight":"BA117","seats":1.5}`)),
		// dependency, cycles
		vPlanJSON(vStepJSON("s1", "search_flights", search, "s0")),
		vPlanJSON(vStepJSON("s1", "search_flights", search, "s2"), vStepJSON("s2", "book_flight", book, "s1")),
		vPlanJSON(vStepJSON("s1", "search_flights", search, "s1")),
		vPlanJSON(vStepJSON("s1", "search_flights", search, "s2"), vStepJSON("s2", "search_flights", search, "s1"), vStepJSON("s3", "book_flight", book, "s2")),
		vPlanJSON(vStepJSON("s1", "search_flights", search), vStepJSON("s2", "book_flight", book, "s1", "s1")),
		// deep nesting
		vPlanJSON(vStepJSON("s1", "search_flights", `{"origin":"LHR","destination":"JFK","x":`+vDeep(40, "1")+`}`)),
		vPlanJSON(vStepJSON("s1", "search_flights", `{"origin":`+vDeep(31, `"LHR"`)+`,"destination":"JFK"}`)),
		strings.Repeat("[", 5000),
		strings.Repeat(`{"a":`, 2000) + "1" + strings.Repeat("}", 2000),
		// huge numbers
		vPlanJSON(vStepJSON("s1", "book_flight", `{"flight":"BA117","seats":1,"fare":1e999999999}`)),
		vPlanJSON(vStepJSON("s1", "book_flight", `{"flight":"BA117","seats":1,"fare":1e10000}`)),
		vPlanJSON(vStepJSON("s1", "book_flight", `{"flight":"BA117","seats":1,"fare":-1e-10000}`)),
		vPlanJSON(vStepJSON("s1", "book_flight", `{"flight":"BA117","seats":1,"fare":`+strings.Repeat("9", 400)+`.5}`)),
		vPlanJSON(vStepJSON("s1", "book_flight", `{"flight":"BA117","seats":18446744073709551617}`)),
		// invalid UTF-8 and surrogates
		vPlanJSON(vStepJSON("s\xff", "search_flights", search)),
		vPlanJSON(vStepJSON("s1", "search\xfe", search)),
		vPlanJSON(vStepJSON("s1", "search_flights", "{\"origin\":\"\xc3\x28\",\"destination\":\"JFK\"}")),
		vPlanJSON(vStepJSON("s1", "search_flights", `{"origin":"\udc00LH","destination":"JFK"}`)),
		"{\"goal\":\"\xff\",\"steps\":[]}",
		// duplicate keys
		`{"steps":[],"steps":[]}`,
		`{"goal":"a","goal":"b","steps":[` + vStepJSON("s1", "search_flights", search) + `]}`,
		vPlanJSON(`{"id":"s1","id":"s2","tool":"search_flights","arguments":` + search + `}`),
		vPlanJSON(vStepJSON("s1", "search_flights", `{"origin":"LHR","origin":"LGW","destination":"JFK"}`)),
		vPlanJSON(vStepJSON("s1", "book_flight", `{"flight":"BA117","seats":1,"x":1,"x":2}`)),
		// whitespace JSON does not allow
		"\u00a0" + vPlanJSON(vStepJSON("s1", "search_flights", search)) + "\u00a0",
		"\v" + vPlanJSON(vStepJSON("s1", "search_flights", search)),
		" \t\r\n" + vPlanJSON(vStepJSON("s1", "search_flights", search)) + "\n",
		"{}", `{"goal":"x"}`, `{"steps":null}`,
		// ids that are not what they look like, and ids in other scripts
		vPlanJSON(vStepJSON("s\u202e1", "search_flights", search)),
		vPlanJSON(vStepJSON("s\u200d1", "search_flights", search)),
		vPlanJSON(vStepJSON("s\u00ad1", "search_flights", search)),
		vPlanJSON(vStepJSON("s1\ufe0f", "search_flights", search)),
		vPlanJSON(vStepJSON("s\ue0001", "search_flights", search)),
		vPlanJSON(vStepJSON("s\u00a01", "search_flights", search)),
		vPlanJSON(vStepJSON("шаг-1", "search_flights", search), vStepJSON("ステップ", "book_flight", book, "шаг-1")),
		vPlanJSON(vStepJSON("स्टेप", "search_flights", search)),
		// references, answers and questions
		vPlanJSON(vStepJSON("s1", "search_flights", search), vStepJSON("s2", "book_flight", `{"flight":{"$from":"s1","path":"/0"},"seats":1}`)),
		vPlanJSON(vStepJSON("s1", "search_flights", search), vStepJSON("s2", "book_flight", `{"flight":{"$from":"s1","path":"/x"},"seats":1}`)),
		vPlanJSON(vStepJSON("s1", "search_flights", search), vStepJSON("s2", "book_flight", `{"flight":"BA117","seats":{"$from":"s1","path":""}}`)),
		vPlanJSON(vStepJSON("s1", "search_flights", search), vStepJSON("s2", "book_flight", `{"flight":{"$from":"s2","path":""},"seats":1}`)),
		vPlanJSON(vStepJSON("s1", "search_flights", search), vStepJSON("s2", "book_flight", `{"flight":{"$from":"s1","path":"~2"},"seats":1}`)),
		vPlanJSON(vStepJSON("s1", "search_flights", `{"origin":{"\u0024from":"s1","path":"","x":1},"destination":"JFK"}`)),
		`{"goal":"","steps":[],"answer":"done","question":null}`,
		`{"goal":"","steps":[],"answer":null,"question":"which day?"}`,
		`{"goal":"","steps":[` + vStepJSON("s1", "search_flights", search) + `],"answer":"early"}`,
		`{"answer":"a","question":"b"}`,
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}

	run, _ := newExecutor(f, &recorder{}, withScope(vFuzzAllowed...))
	lim := planexec.Limits{}

	f.Fuzz(func(t *testing.T, raw []byte) {
		plan, err := planexec.DecodePlan(raw, lim)
		if err != nil {
			pv := vFuzzRefusal(t, err)
			if pv.Reason != planexec.ReasonEmpty && pv.Reason != planexec.ReasonMalformed {
				t.Fatalf("DecodePlan refused with %q; it only knows empty and malformed", pv.Reason)
			}
			return
		}
		err = run.Validate(plan)
		if err != nil {
			vFuzzRefusal(t, err)
			return
		}
		// The plan passed: check what that promises.
		if n := len(plan.Steps); n == 0 || n > 24 {
			t.Fatalf("a plan of %d steps passed", n)
		}
		ids := make(map[string]bool, len(plan.Steps))
		for _, s := range plan.Steps {
			if s.ID == "" || len(s.ID) > 64 || !utf8.ValidString(s.ID) {
				t.Fatalf("step id %q passed", s.ID)
			}
			for _, c := range s.ID {
				// What a person approving the step could not see, or
				// that would change how the rest of the id is shown.
				if unicode.IsSpace(c) || unicode.IsControl(c) ||
					unicode.In(c, unicode.Cf, unicode.Co, unicode.Variation_Selector, unicode.Other_Default_Ignorable_Code_Point) ||
					!unicode.In(c, unicode.L, unicode.M, unicode.N, unicode.P, unicode.S) {
					t.Fatalf("step id %q passed holding %U", s.ID, c)
				}
			}
			if ids[s.ID] {
				t.Fatalf("step id %q passed twice", s.ID)
			}
			ids[s.ID] = true
			if !slices.Contains(vFuzzAllowed, s.Tool) {
				t.Fatalf("step %q uses tool %q, outside the allowlist %v", s.ID, s.Tool, vFuzzAllowed)
			}
		}
		for _, s := range plan.Steps {
			for _, d := range s.DependsOn {
				if !ids[d] {
					t.Fatalf("step %q waits on %q, which is not a step of the plan", s.ID, d)
				}
				if d == s.ID {
					t.Fatalf("step %q waits on itself and passed", s.ID)
				}
			}
		}
		if !vAcyclic(plan) {
			t.Fatalf("a plan whose steps wait on each other passed")
		}
	})
}

// vAcyclic reports whether every step of plan can run: repeatedly take the
// steps whose dependencies have all run.
func vAcyclic(plan planexec.Plan) bool {
	ran := map[string]bool{}
	for progress := true; progress; {
		progress = false
		for _, s := range plan.Steps {
			if ran[s.ID] {
				continue
			}
			ready := true
			for _, d := range s.DependsOn {
				ready = ready && ran[d]
			}
			if ready {
				ran[s.ID] = true
				progress = true
			}
		}
	}
	return len(ran) == len(plan.Steps)
}

// vFuzzRefusal checks that err is a well-formed refusal and returns it.
func vFuzzRefusal(t *testing.T, err error) *planexec.PlanValidationError {
	t.Helper()
	var pv *planexec.PlanValidationError
	if !errors.As(err, &pv) {
		t.Fatalf("a refusal is %T, not a *PlanValidationError: %v", err, err)
	}
	if !slices.Contains(vKnownReasons, pv.Reason) {
		t.Fatalf("unknown reason %q", pv.Reason)
	}
	if !errors.Is(err, pv.Reason) {
		t.Fatalf("errors.Is(err, %q) is false", pv.Reason)
	}
	_ = pv.Error()
	_ = planexec.Feedback(pv)
	return pv
}
