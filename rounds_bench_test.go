package planexec_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/shopspring/decimal"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/llm"
	"github.com/planexec/planexec/llm/scripted"
)

// A task of five steps, each needing what the one before found: look up an
// order, find its customer, refund to the customer's account, email the
// customer the refund, note the email on the order.

type (
	chainOrder struct {
		Order string `json:"order"`
	}
	chainOrderInfo struct {
		Customer string          `json:"customer"`
		Amount   decimal.Decimal `json:"amount"`
	}
	chainCustomer struct {
		Customer string `json:"customer"`
	}
	chainPerson struct {
		Email   string `json:"email"`
		Account string `json:"account"`
	}
	chainRefund struct {
		Account string          `json:"account"`
		Amount  decimal.Decimal `json:"amount"`
	}
	chainRefunded struct {
		Refund string `json:"refund"`
	}
	chainEmail struct {
		To     string `json:"to"`
		Refund string `json:"refund"`
	}
	chainSent struct {
		Message string `json:"message"`
	}
	chainNote struct {
		Order   string `json:"order"`
		Message string `json:"message"`
	}
)

// chainTools are the task's tools; before, when set, runs before each
// tool's call (an executor agent's model calls, in the loop that plans
// after every step).
func chainTools(before func(ctx context.Context, tool string)) []*planexec.Tool {
	hook := func(ctx context.Context, tool string) {
		if before != nil {
			before(ctx, tool)
		}
	}
	return []*planexec.Tool{
		planexec.MustTool("lookup_order", "Look up an order.", func(ctx context.Context, a chainOrder) (chainOrderInfo, error) {
			hook(ctx, "lookup_order")
			return chainOrderInfo{Customer: "c-77", Amount: decimal.RequireFromString("49.90")}, nil
		}),
		planexec.MustTool("find_customer", "Find a customer.", func(ctx context.Context, a chainCustomer) (chainPerson, error) {
			hook(ctx, "find_customer")
			return chainPerson{Email: "ana@example.com", Account: "acct-9"}, nil
		}),
		planexec.MustTool("refund", "Refund to an account.", func(ctx context.Context, a chainRefund) (chainRefunded, error) {
			hook(ctx, "refund")
			return chainRefunded{Refund: "rf-1"}, nil
		}, planexec.Irreversible()),
		planexec.MustTool("email_refund", "Email a customer their refund.", func(ctx context.Context, a chainEmail) (chainSent, error) {
			hook(ctx, "email_refund")
			return chainSent{Message: "msg-3"}, nil
		}),
		planexec.MustTool("note", "Note a message on an order.", func(ctx context.Context, a chainNote) (string, error) {
			hook(ctx, "note")
			return "noted", nil
		}),
	}
}

// The steps, each as written with a reference to the step before, and with
// the value a model copies from what it was told.
var chainSteps = []struct{ tool, refs, literal string }{
	{"lookup_order", `{"order":"o-1"}`, `{"order":"o-1"}`},
	{"find_customer", `{"customer":{"$from":"s1","path":"/customer"}}`, `{"customer":"c-77"}`},
	{"refund", `{"account":{"$from":"s2","path":"/account"},"amount":{"$from":"s1","path":"/amount"}}`, `{"account":"acct-9","amount":49.90}`},
	{"email_refund", `{"to":{"$from":"s2","path":"/email"},"refund":{"$from":"s3","path":"/refund"}}`, `{"to":"ana@example.com","refund":"rf-1"}`},
	{"note", `{"order":"o-1","message":{"$from":"s4","path":"/message"}}`, `{"order":"o-1","message":"msg-3"}`},
}

const chainAnswer = `{"goal":"","steps":[],"answer":"Refunded 49.90 to acct-9, emailed ana@example.com, noted it on o-1.","question":null}`

func chainStep(i int, args string, deps bool) string {
	dep := ""
	if deps && i > 0 {
		dep = fmt.Sprintf(`,"depends_on":["s%d"]`, i)
	}
	return fmt.Sprintf(`{"id":"s%d","tool":%q,"arguments":%s%s}`, i+1, chainSteps[i].tool, args, dep)
}

// chainModel writes what a model following each strategy writes: the whole
// plan with references, or one step per round with the values it was told.
func chainModel(strategy string) *scripted.Model {
	return scripted.Respond(func(req *llm.Request) scripted.Reply {
		told := req.Messages[0].Content
		done := strings.Count(told, "ran (goal")
		if strategy == "references" {
			if done > 0 {
				return scripted.Reply{Content: chainAnswer}
			}
			steps := make([]string, len(chainSteps))
			for i, s := range chainSteps {
				steps[i] = chainStep(i, s.refs, false)
			}
			return scripted.Reply{Content: `{"goal":"refund o-1","steps":[` + strings.Join(steps, ",") + `],"answer":null,"question":null}`}
		}
		if done == len(chainSteps) {
			return scripted.Reply{Content: chainAnswer}
		}
		return scripted.Reply{Content: `{"goal":"next step","steps":[` + chainStep(done, chainSteps[done].literal, false) + `],"answer":null,"question":null}`}
	})
}

// BenchmarkDependentTask runs the five-step task three ways and reports the
// model calls and tokens (the scripted model counts four characters a
// token, prompts and schemas included) each took:
//
//   - references: one plan wires each step to the outcome before it, and a
//     second round answers;
//   - rounds: the planner writes one step a round, copying what it was told;
//   - per-step-agent: rounds as above, and each step's tool call made by an
//     executor agent in two model calls (choose the call, read the result),
//     as a plan-execute-replan loop does (eino's planexecute: a planner, an
//     executor and a replanner, 16 calls for 5 steps).
func BenchmarkDependentTask(b *testing.B) {
	specs, err := json.Marshal(chainCatalog(b))
	if err != nil {
		b.Fatal(err)
	}
	for _, strategy := range []string{"references", "rounds", "per-step-agent"} {
		b.Run(strategy, func(b *testing.B) {
			var used llm.Usage
			for b.Loop() {
				// An executor agent's two calls per step: its instructions,
				// the step and every tool's schema; then the tool's result.
				var agent llm.Usage
				var before func(ctx context.Context, tool string)
				if strategy == "per-step-agent" {
					executor := scripted.Respond(func(*llm.Request) scripted.Reply { return scripted.Reply{Content: `{"done":true}`} })
					before = func(ctx context.Context, tool string) {
						for _, turn := range []string{"Call the tool for step " + tool + ".", "The tool returned. Report its result."} {
							resp, err := executor.Generate(ctx, &llm.Request{System: "You execute one step of a plan with the tools given.",
								Messages: []llm.Message{{Role: llm.RoleUser, Content: turn + "\nTools:\n" + string(specs)}}})
							if err == nil {
								agent = agent.Add(resp.Usage)
							}
						}
					}
				}
				ex, err := planexec.NewExecutor(planexec.Config{Tools: chainTools(before), Gate: planexec.ApprovalGateFunc(
					func(_ context.Context, req planexec.ApprovalRequest) (planexec.Decision, error) {
						return req.Approve("bench"), nil
					})})
				if err != nil {
					b.Fatal(err)
				}
				run, err := ex.Run(planexec.Delegation{Tenant: "bench"})
				if err != nil {
					b.Fatal(err)
				}
				planner, err := planexec.NewAgentPlanner(chainModel(strategy), planexec.Agent{Name: "support"})
				if err != nil {
					b.Fatal(err)
				}
				res, err := run.Do(context.Background(), planner, "Refund order o-1 to its customer, email them, and note it on the order.")
				if err != nil || res.Answer == "" {
					b.Fatalf("Do: %+v, %v", res, err)
				}
				used = run.Usage().Add(agent)
			}
			b.ReportMetric(float64(used.Calls), "model-calls")
			b.ReportMetric(float64(used.Total()), "tokens")
		})
	}
}

// chainCatalog is what the task's tools look like to a model.
func chainCatalog(b *testing.B) []planexec.ToolSpec {
	ex, err := planexec.NewExecutor(planexec.Config{Tools: chainTools(nil), Gate: planexec.DecideLater})
	if err != nil {
		b.Fatal(err)
	}
	run, err := ex.Run(planexec.Delegation{Tenant: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	return run.Catalog()
}
