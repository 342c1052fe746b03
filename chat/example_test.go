package chat_test

import (
	"context"
	"fmt"
	"log"
	"strings"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/chat"
	"github.com/planexec/planexec/llm"
	"github.com/planexec/planexec/llm/scripted"
	"github.com/planexec/planexec/store/memory"
)

func Example() {
	ctx := context.Background()
	tr := newTracker()
	st := memory.New()

	// The engine runs what a person applies; the reads are the planner's.
	engine, err := planexec.NewExecutor(planexec.Config{Tools: tr.writes(), Store: st})
	if err != nil {
		log.Fatal(err)
	}
	// A stand-in model: it lists the items, then proposes a plan.
	model := scripted.Respond(func(req *llm.Request) scripted.Reply {
		if strings.Contains(lastUser(req), `"tool":"list_items"`) {
			return say("I propose closing T-1.", call("propose_plan", `{"goal":"close T-1","steps":[{"id":"s1","tool":"update_item","arguments":{"id":"T-1","state":"done","version":1},"depends_on":[],"intent":"close it"}]}`))
		}
		if strings.HasPrefix(lastUser(req), "Results") {
			return say("Apply it when you are ready.")
		}
		return say("Let me look.", call("list_items", `{"state":"open"}`))
	})
	c, err := chat.New(chat.Config{Model: model, Store: st, Reads: tr.reads(), Engine: engine})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close(ctx)

	person := planexec.Delegation{Tenant: "acme", User: "ana", Scope: []string{"list_items", "get_item", "update_item"}}
	if _, err := c.Create(ctx, person, chat.SessionOptions{ID: "release"}); err != nil {
		log.Fatal(err)
	}
	sent, err := c.Send(ctx, person, "release", "Close what is done")
	if err != nil {
		log.Fatal(err)
	}
	var proposal string
	for out, err := range c.Watch(ctx, "acme", "release", sent.Seq-1) {
		if err != nil {
			log.Fatal(err)
		}
		switch out.Kind {
		case chat.KindText:
			fmt.Println("planner:", out.Text)
		case chat.KindToolCall:
			fmt.Println("call:", out.Call.Tool)
		case chat.KindProposal:
			proposal = out.Proposal.ID
			fmt.Println("proposal:", out.Proposal.Plan.Goal)
		case chat.KindDone:
			fmt.Println("done:", out.Done.Reason)
		}
		if out.Kind == chat.KindDone {
			break
		}
	}

	res, err := c.Apply(ctx, person, "release", proposal, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("applied:", res.Steps["s1"].Status, string(res.Steps["s1"].Outcome))
	// Output:
	// planner: Let me look.
	// call: list_items
	// planner: I propose closing T-1.
	// call: propose_plan
	// proposal: close T-1
	// planner: Apply it when you are ready.
	// done: end_turn
	// applied: done {"id":"T-1","title":"Write the README","state":"done","version":2}
}
