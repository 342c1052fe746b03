package planexec_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/store/memory"
)

// A ticket system's tool, declared by its schema: the engine runs it.
const ticketSchema = `{"type":"object","properties":{
	"title":{"type":"string","minLength":3},
	"priority":{"type":"integer","minimum":1,"maximum":4}},
	"required":["title"],"additionalProperties":false}`

// ticketTool counts its calls and returns the ticket it opened.
func ticketTool(t *testing.T, calls *atomic.Int32, opts ...planexec.ContractOption) *planexec.Tool {
	t.Helper()
	tool, err := planexec.NewSchemaTool("open_ticket", "Open a ticket.", json.RawMessage(ticketSchema),
		func(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
			calls.Add(1)
			return json.RawMessage(`{"ticket":"T-1","args":` + string(args) + `}`), nil
		}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return tool
}

func ticketPlan(args string) planexec.Plan {
	return planexec.Plan{Goal: "file it", Steps: []planexec.Step{step("s1", "open_ticket", args)}}
}

func TestArgumentsTheSchemaRefusesNameTheStepAndToolAndNothingRuns(t *testing.T) {
	for name, args := range map[string]string{
		"a required argument missing":  `{"priority":2}`,
		"a value out of bounds":        `{"title":"broken printer","priority":9}`,
		"an argument it does not know": `{"title":"broken printer","owner":"dana"}`,
		"a key written twice":          `{"title":"broken printer","title":"other"}`,
	} {
		t.Run(name, func(t *testing.T) {
			var calls atomic.Int32
			run, _ := newExecutor(t, &recorder{}, func(s *setup) { s.Tools = []*planexec.Tool{ticketTool(t, &calls)} })
			_, err := run.Execute(context.Background(), ticketPlan(args))
			var pv *planexec.PlanValidationError
			if !errors.As(err, &pv) || pv.Reason != planexec.ReasonArguments || pv.Step != "s1" || pv.Tool != "open_ticket" || len(pv.Violations) == 0 {
				t.Fatalf("Execute: %v, want ReasonArguments naming s1 and open_ticket", err)
			}
			if calls.Load() != 0 {
				t.Errorf("the tool was called %d times", calls.Load())
			}
		})
	}
}

func TestAnIrreversibleSchemaToolAsksTheGateBeforeItRuns(t *testing.T) {
	var calls atomic.Int32
	var called int32 = -1
	run, gate := newExecutor(t, &recorder{}, func(s *setup) {
		s.Tools = []*planexec.Tool{ticketTool(t, &calls, planexec.Irreversible(), planexec.KeyArguments("title"))}
	})
	gate.answer = func(req planexec.ApprovalRequest) planexec.Decision {
		called = calls.Load()
		return req.Approve("dana")
	}
	res, err := run.Execute(context.Background(), ticketPlan(`{"title":"broken printer"}`))
	if err != nil {
		t.Fatal(err)
	}
	asked := gate.Asked()
	if len(asked) != 1 || called != 0 || calls.Load() != 1 || res.Steps["s1"].ApprovedBy != "dana" {
		t.Errorf("asked %d times, with %d calls made then; %d calls in all; %+v", len(asked), called, calls.Load(), res.Steps["s1"])
	}
}

func TestASchemaToolNeedingApprovalIsRefusedWithoutAGate(t *testing.T) {
	var calls atomic.Int32
	_, err := planexec.NewExecutor(planexec.Config{Tools: []*planexec.Tool{ticketTool(t, &calls, planexec.RequireApproval())}})
	var ce *planexec.ConfigurationError
	if !errors.As(err, &ce) || ce.Tool != "open_ticket" {
		t.Errorf("NewExecutor: %v, want a ConfigurationError naming open_ticket", err)
	}
}

func TestASchemaToolRunsAndItsOutcomeIsRecordedAndReplayed(t *testing.T) {
	ctx := context.Background()
	db := memory.New()
	var calls atomic.Int32
	build := func() *planexec.Run {
		run, _ := newExecutor(t, &recorder{}, func(s *setup) {
			s.Store = db
			s.Tools = []*planexec.Tool{ticketTool(t, &calls)}
		})
		return run
	}
	first, err := build().Execute(ctx, ticketPlan(`{"priority":2, "title":"broken printer"}`))
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"ticket":"T-1","args":{"priority":2,"title":"broken printer"}}`
	if s1 := first.Steps["s1"]; s1.Status != planexec.StepDone || string(s1.Outcome) != want {
		t.Errorf("first run: %s %s, want done with %s (the arguments canonical)", s1.Status, s1.Outcome, want)
	}
	again, err := build().Execute(ctx, ticketPlan(`{"priority":2, "title":"broken printer"}`))
	if err != nil {
		t.Fatal(err)
	}
	if s1 := again.Steps["s1"]; !s1.Replayed || string(s1.Outcome) != want || calls.Load() != 1 {
		t.Errorf("the repeat: replayed %v, %s, %d calls; want the recorded outcome and one call", s1.Replayed, s1.Outcome, calls.Load())
	}
}

func TestASchemaToolIsRefusedWhatItCannotHonour(t *testing.T) {
	noop := func(context.Context, json.RawMessage) (json.RawMessage, error) { return json.RawMessage(`null`), nil }
	for name, build := range map[string]func() (*planexec.Tool, error){
		"no function": func() (*planexec.Tool, error) {
			return planexec.NewSchemaTool("t", "", json.RawMessage(ticketSchema), nil)
		},
		"a schema not of an object": func() (*planexec.Tool, error) {
			return planexec.NewSchemaTool("t", "", json.RawMessage(`{"type":"string"}`), noop)
		},
		"a key argument the schema lacks": func() (*planexec.Tool, error) {
			return planexec.NewSchemaTool("t", "", json.RawMessage(ticketSchema), noop, planexec.KeyArguments("owner"))
		},
		"a precondition": func() (*planexec.Tool, error) {
			return planexec.NewSchemaTool("t", "", json.RawMessage(ticketSchema), noop,
				planexec.Precondition(func(context.Context, planexec.Delegation, json.RawMessage) error { return nil }))
		},
	} {
		t.Run(name, func(t *testing.T) {
			var ce *planexec.ConfigurationError
			if _, err := build(); !errors.As(err, &ce) {
				t.Errorf("got %v, want a ConfigurationError", err)
			}
		})
	}
}

func TestASchemaToolsOutcomeThatIsNotJSONFailsTheStep(t *testing.T) {
	tool, err := planexec.NewSchemaTool("open_ticket", "", json.RawMessage(ticketSchema),
		func(context.Context, json.RawMessage) (json.RawMessage, error) {
			return json.RawMessage(`{"ticket":`), nil
		})
	if err != nil {
		t.Fatal(err)
	}
	run, _ := newExecutor(t, &recorder{}, func(s *setup) { s.Tools = []*planexec.Tool{tool} })
	res, err := run.Execute(context.Background(), ticketPlan(`{"title":"broken printer"}`))
	var se *planexec.StepError
	if !errors.As(err, &se) || se.Step != "s1" || res.Steps["s1"].Status != planexec.StepFailed {
		t.Errorf("Execute: %v, %+v; want the step failed", err, res.Steps["s1"])
	}
}
