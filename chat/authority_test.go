package chat_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/chat"
	"github.com/planexec/planexec/llm"
	"github.com/planexec/planexec/llm/scripted"
)

// cy may list items, and nothing else.
func cy() planexec.Delegation {
	return planexec.Delegation{Tenant: "acme", User: "cy", Scope: []string{"list_items"}}
}

func TestAToolThePersonMayNotUseReturnsTheFixedForbiddenResultAndDoesNothing(t *testing.T) {
	model := scripted.Respond(func(req *llm.Request) scripted.Reply {
		if strings.HasPrefix(lastUser(req), "Results") {
			return say("Noted.")
		}
		return say("", call("get_item", `{"id":"T-1"}`))
	})
	r := newRig(t, model)
	s := r.session("s1")

	out := r.turn(cy(), s, "Show me T-1")
	res := of(out, chat.KindToolResult)[0].Result
	if res.Status != chat.CallFailed || res.Error.Code != "forbidden" || res.Error.Message != `The person you act for may not use "get_item"; it was not run.` {
		t.Fatalf("result = %+v %+v", res, res.Error)
	}
	if n := r.tracker.called("get_item"); n != 0 {
		t.Fatalf("get_item ran %d times for a person who may not use it", n)
	}
	if out[len(out)-1].Done.Reason != chat.EndTurn {
		t.Fatalf("the conversation did not go on: %s", kinds(out))
	}

	// A second person in the same session has their own authority.
	out = r.turn(ana(), s, "Show me T-1")
	if res := of(out, chat.KindToolResult)[0].Result; res.Status != chat.CallOK {
		t.Fatalf("ana's call: %+v", res)
	}
	if n := r.tracker.called("get_item"); n != 1 {
		t.Fatalf("get_item ran %d times, want once, for ana", n)
	}
}

func TestTheAuthorizerSeesThePlannerActingForThePersonAndItsRefusalIsForbidden(t *testing.T) {
	var seen []planexec.Delegation
	model := scripted.Respond(func(req *llm.Request) scripted.Reply {
		if strings.HasPrefix(lastUser(req), "Results") {
			return say("Noted.")
		}
		return say("", call("list_items", `{}`), call("get_item", `{"id":"T-1"}`))
	})
	r := newRig(t, model, func(c *chat.Config) {
		c.Authorizer = planexec.AuthorizerFunc(func(ctx context.Context, d planexec.Delegation, s planexec.Step) error {
			seen = append(seen, d)
			if s.Tool == "get_item" {
				return errors.New("policy 7 says no (internal)")
			}
			return nil
		})
	})
	s := r.session("s1")
	out := r.turn(ana(), s, "Look")

	res := of(out, chat.KindToolResult)
	if res[0].Result.Status != chat.CallOK || res[1].Result.Error == nil || res[1].Result.Error.Code != "forbidden" {
		t.Fatalf("results: %+v / %+v", res[0].Result, res[1].Result)
	}
	if strings.Contains(mustJSON(out), "policy 7") {
		t.Fatal("the authorizer's own words reached the transcript")
	}
	if len(seen) == 0 || seen[0].User != "ana" || seen[0].Agent != "planner:s1" {
		t.Fatalf("the authorizer saw %+v, want ana's delegation to planner:s1", seen)
	}
}

func TestAFailingCallGoesBackToTheModelAsAnErrorAndInternalsNeverLeak(t *testing.T) {
	boom := planexec.MustTool("flaky", "Fails.", func(ctx context.Context, a struct{}) (string, error) {
		return "", errors.New("pq: password authentication failed for user admin")
	})
	model := scripted.Respond(func(req *llm.Request) scripted.Reply {
		if strings.HasPrefix(lastUser(req), "Results") {
			return say("Some calls failed.")
		}
		return say("",
			call("flaky", `{}`),
			call("get_item", `{"id":"T-404"}`),
			call("get_item", `{"id":"T-1","extra":true}`),
			call("no_such_tool", `{}`))
	})
	r := newRig(t, model, func(c *chat.Config) { c.Reads = append(c.Reads, boom) })
	s := r.session("s1")
	person := ana()
	person.Scope = append(person.Scope, "flaky")
	out := r.turn(person, s, "Try things")

	res := of(out, chat.KindToolResult)
	want := []string{"failed", "not_found", "invalid_arguments", "unknown_tool"}
	for i, w := range want {
		if res[i].Result.Error == nil || res[i].Result.Error.Code != w {
			t.Fatalf("call %d: %+v, want %s", i+1, res[i].Result, w)
		}
	}
	if got := res[1].Result.Error.Message; got != "no item T-404" {
		t.Fatalf("a tool's own ToolError: %q", got)
	}
	if got := res[2].Result.Error.Message; !strings.Contains(got, "/extra") {
		t.Fatalf("invalid arguments do not name the path: %q", got)
	}
	if strings.Contains(mustJSON(out), "password") {
		t.Fatal("a tool's internal error reached the transcript")
	}
	if out[len(out)-1].Done.Reason != chat.EndTurn {
		t.Fatalf("the conversation did not go on: %s", kinds(out))
	}
}

func TestAReadToolThatCouldChangeThingsIsRefusedAtConstruction(t *testing.T) {
	tr := newTracker()
	for _, tool := range []*planexec.Tool{
		planexec.MustTool("drop", "", func(ctx context.Context, a struct{}) (string, error) { return "", nil }, planexec.Irreversible()),
		planexec.MustTool("ask", "", func(ctx context.Context, a struct{}) (string, error) { return "", nil }, planexec.RequireApproval()),
		planexec.MustTool("propose_plan", "", func(ctx context.Context, a struct{}) (string, error) { return "", nil }),
	} {
		_, err := chat.New(chat.Config{Model: scripted.New(), Store: newRig(t, scripted.New()).store, Reads: append(tr.reads(), tool)})
		var ce *planexec.ConfigurationError
		if !errors.As(err, &ce) || ce.Tool != tool.Name() {
			t.Fatalf("%s: %v", tool.Name(), err)
		}
	}
}
