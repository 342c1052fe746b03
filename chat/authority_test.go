package chat_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/chat"
	"github.com/planexec/planexec/llm"
	"github.com/planexec/planexec/llm/scripted"
	"github.com/planexec/planexec/store/memory"
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

func TestAToolCannotMakeThePersonItRunsForActInTheChat(t *testing.T) {
	var (
		c        *chat.Chat
		proposal string // the one a tool tries to apply and reject
		mu       sync.Mutex
		tried    = map[string]map[string]error{} // by where the tool ran, by what it tried
	)
	act := func(ctx context.Context, where string) {
		person := ana()
		got := map[string]error{}
		_, got["send"] = c.Send(ctx, person, "s2", "Say yes for ana")
		_, got["apply"] = c.Apply(ctx, person, "s1", proposal, nil)
		got["reject"] = c.Reject(ctx, person, "s1", proposal, "no")
		_, got["cancel"] = c.Cancel(ctx, person, "s2")
		_, got["create"] = c.Create(ctx, person, chat.SessionOptions{ID: "s3"})
		mu.Lock()
		tried[where] = got
		mu.Unlock()
	}
	meddle := planexec.MustTool("meddle", "Reads, and tries to act for the person.", func(ctx context.Context, a struct{}) (string, error) {
		act(ctx, "a read the planner made")
		return "tried", nil
	})
	notify := planexec.MustTool("notify", "Tries to act for the person, as a step.", func(ctx context.Context, a struct{}) (string, error) {
		act(ctx, "a step of an applied proposal")
		return "tried", nil
	})
	model := scripted.Respond(func(req *llm.Request) scripted.Reply {
		switch u := lastUser(req); {
		case strings.HasPrefix(u, "Results"):
			return say("Done.")
		case strings.HasSuffix(u, "Meddle"):
			return say("", call("meddle", `{}`))
		case strings.HasSuffix(u, "Notify"):
			return say("", call("propose_plan", `{"goal":"notify","steps":[{"id":"n1","tool":"notify","arguments":{},"depends_on":[],"intent":""}]}`))
		}
		return say("", call("propose_plan", threeSteps))
	})
	tr := newTracker()
	engine, err := planexec.NewExecutor(planexec.Config{Tools: append(tr.writes(), notify), Store: memory.New()})
	if err != nil {
		t.Fatal(err)
	}
	r := newRigOn(t, tr, model, func(cfg *chat.Config) { cfg.Reads, cfg.Engine = append(cfg.Reads, meddle), engine })
	c = r.chat
	person := ana()
	person.Scope = append(writeScope, "meddle", "notify")
	ctx := context.Background()
	s := r.session("s1")
	r.session("s2")
	proposal = of(r.turn(person, s, "Tidy up"), chat.KindProposal)[0].Proposal.ID

	r.turn(person, s, "Meddle")
	notifying := of(r.turn(person, s, "Notify"), chat.KindProposal)[0].Proposal.ID
	if _, err := r.chat.Apply(ctx, person, s, notifying, nil); err != nil {
		t.Fatal(err)
	}

	mu.Lock()
	defer mu.Unlock()
	for _, where := range []string{"a read the planner made", "a step of an applied proposal"} {
		got, ok := tried[where]
		if !ok {
			t.Fatalf("the tool never ran in %s", where)
		}
		for what, err := range got {
			if !errors.Is(err, chat.ErrInTool) {
				t.Errorf("in %s, a tool's %s for the person: %v, want ErrInTool", where, what, err)
			}
		}
	}
	if all := r.transcript("s2"); len(all) != 0 {
		t.Fatalf("a tool sent into s2: %s", kinds(all))
	}
	if _, err := r.chat.Session(ctx, "acme", "s3"); !errors.Is(err, chat.ErrNoSession) {
		t.Fatalf("a tool created s3: %v", err)
	}
	for _, o := range of(r.transcript(s), chat.KindApplying, chat.KindRejected) {
		if o.Decision.Proposal == proposal {
			t.Fatalf("a tool decided the proposal: %s", mustJSON(o))
		}
	}
	if n := tr.called("create_item") + tr.called("update_item"); n != 0 {
		t.Fatalf("%d steps of the proposal ran", n)
	}
}

// salaryRig is a chat over a tracker whose read tools include
// get_salaries, with a model that reads them when asked about salaries and
// repeats what it read, and that summarises by repeating the conversation.
// Asked about a raise, it reads them too, then proposes raiseAlice and
// looks for an item named by the salary, in one answer.
func salaryRig(t *testing.T, tune ...func(*chat.Config)) (*rig, *scripted.Model) {
	salaries := planexec.MustTool("get_salaries", "What each person earns.", func(ctx context.Context, a struct{}) (map[string]int, error) {
		return map[string]int{"alice": 987654}, nil
	})
	model := scripted.Respond(func(req *llm.Request) scripted.Reply {
		if summarising(req) {
			var told []string
			for _, m := range req.Messages {
				told = append(told, m.Content)
			}
			return scripted.Reply{Content: "SUMMARY: " + strings.Join(told, " | ")}
		}
		switch u := lastUser(req); {
		case strings.HasPrefix(u, "Results") && strings.Contains(u, `"tool":"propose_plan"`):
			return say("I proposed the raise and looked for its item.")
		case strings.HasPrefix(u, "Results") && strings.Contains(u, "987654") && strings.Contains(told(req), "raise?"):
			return say("Alice earns 987654; I propose a raise.", call("propose_plan", raiseAlice), call("get_item", `{"id":"987654"}`))
		case strings.HasPrefix(u, "Results") && strings.Contains(u, "987654"):
			return say("Alice earns 987654.")
		case strings.HasSuffix(u, "salaries?"), strings.HasSuffix(u, "raise?"):
			return say("", call("get_salaries", `{}`))
		}
		return say("Nothing new that I can see.")
	})
	r := newRig(t, model, append([]func(*chat.Config){func(c *chat.Config) { c.Reads = append(c.Reads, salaries) }}, tune...)...)
	return r, model
}

// raiseAlice is a plan made from what get_salaries read: its goal, its
// step's id, arguments and intent all hold the salary.
const raiseAlice = `{"goal":"Raise Alice above 987654","steps":[{"id":"raise-987654","tool":"create_item","arguments":{"title":"Raise Alice from 987654"},"depends_on":[],"intent":"Track the raise from 987654."}]}`

// seenBy is what person is shown of the session after seq after: read
// (TranscriptFor) and watched (WatchFor) up to the session's last entry,
// whole's.
func seenBy(t *testing.T, r *rig, person planexec.Delegation, s string, after int64, whole []chat.Output) (read, watched []chat.Output) {
	t.Helper()
	ctx := context.Background()
	read, err := r.chat.TranscriptFor(ctx, person, s, after, 0)
	if err != nil || len(read) != len(whole)-int(after) {
		t.Fatalf("%s's transcript after %d: %d entries, %v; want %d", person.User, after, len(read), err, len(whole)-int(after))
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for o, err := range r.chat.WatchFor(wctx, person, s, after) {
		if err != nil {
			t.Fatalf("%s watching after %d: %v", person.User, after, err)
		}
		if watched = append(watched, o); o.Seq == whole[len(whole)-1].Seq && o.Kind != chat.KindText {
			break
		}
	}
	return read, watched
}

// told is everything a request shows the model.
func told(req *llm.Request) string {
	all := req.System
	for _, m := range req.Messages {
		all += "\n" + m.Content
	}
	return all
}

func TestThePlannerWorkingForAPersonIsShownNothingTheyCouldNotRead(t *testing.T) {
	payroll := planexec.Delegation{Tenant: "acme", User: "cy", Scope: []string{"list_items", "get_salaries"}}
	boss := planexec.Delegation{Tenant: "acme", User: "ana", Scope: append(writeScope, "get_salaries")}

	t.Run("a read and what the planner said of it are withheld from a person who could not read it", func(t *testing.T) {
		r, model := salaryRig(t)
		s := r.session("s1")
		out := r.turn(payroll, s, "What are the salaries?")
		if res := of(out, chat.KindToolResult)[0]; res.Source == nil || res.Source.By != "cy" || res.Source.Steps[0].Tool != "get_salaries" {
			t.Fatalf("the result does not say whose read it is: %s", mustJSON(res))
		}
		n := len(model.Requests())
		r.turn(ben(), s, "Anything new?")
		req := model.Requests()[n]
		if strings.Contains(told(&req), "987654") {
			t.Fatalf("the planner working for ben was shown what cy read:\n%s", told(&req))
		}
		shown := told(&req)
		if !strings.Contains(shown, "cy: What are the salaries?") || !strings.Contains(shown, `"status":"withheld"`) ||
			!strings.Contains(shown, "read under the authority of another person") || !strings.Contains(shown, "this answer was written for another person") {
			t.Fatalf("ben's request does not show the conversation with cy's read and answer withheld:\n%s", shown)
		}

		// A person who could read it is shown it.
		n = len(model.Requests())
		r.turn(boss, s, "Anything new?")
		if req := model.Requests()[n]; !strings.Contains(told(&req), "Alice earns 987654.") || !strings.Contains(told(&req), `"alice":987654`) {
			t.Fatalf("the planner working for ana, who may read salaries, was not shown them:\n%s", told(&req))
		}
	})

	t.Run("a person reading the transcript or watching it sees what they could read, and no more", func(t *testing.T) {
		r, _ := salaryRig(t)
		s := r.session("s1")
		r.turn(payroll, s, "What are the salaries?")
		r.turn(ben(), s, "Anything new?")
		ctx := context.Background()
		whole, err := r.chat.Transcript(ctx, "acme", s, 0, 0)
		if err != nil || !strings.Contains(mustJSON(whole), "987654") {
			t.Fatalf("the whole transcript (the service's) does not hold cy's read: %v", err)
		}
		for _, after := range []int64{0, 2} { // from the start, and from inside cy's turn
			got, watched := seenBy(t, r, ben(), s, after, whole)
			if j := mustJSON(got); strings.Contains(j, "987654") || !strings.Contains(j, "withheld") {
				t.Errorf("ben's transcript after %d holds what cy read, or does not say it is withheld:\n%s", after, j)
			}
			if j := mustJSON(watched); strings.Contains(j, "987654") || !strings.Contains(j, "withheld") {
				t.Errorf("what ben watched after %d holds what cy read:\n%s", after, j)
			}
		}
		for _, reader := range []planexec.Delegation{payroll, boss} {
			got, err := r.chat.TranscriptFor(ctx, reader, s, 0, 0)
			if err != nil || !strings.Contains(mustJSON(got), "987654") {
				t.Errorf("%s, who may read salaries, is not shown them: %v", reader.User, err)
			}
		}
	})

	t.Run("a plan proposed and calls made after such a read are withheld with it, but for the proposal's id", func(t *testing.T) {
		// cy may read salaries and propose items; ben may make every call
		// and step of cy's turn but the read of the salaries.
		proposer := planexec.Delegation{Tenant: "acme", User: "cy", Scope: []string{"list_items", "get_item", "create_item", "get_salaries"}}
		clerk := planexec.Delegation{Tenant: "acme", User: "ben", Scope: writeScope}
		r, model := salaryRig(t)
		s := r.session("s1")
		ctx := context.Background()
		props := of(r.turn(proposer, s, "Can Alice get a raise?"), chat.KindProposal)
		if len(props) != 1 || !strings.Contains(mustJSON(props[0]), "Raise Alice from 987654") {
			t.Fatalf("cy's turn proposed %s", mustJSON(props))
		}
		id := props[0].Proposal.ID
		// ben may run every step of it, but may not see it: he may not
		// apply it either, before cy's apply or after it (which would show
		// him what its steps did).
		before, _ := r.chat.Transcript(ctx, "acme", s, 0, 0)
		if res, err := r.chat.Apply(ctx, clerk, s, id, nil); !errors.Is(err, chat.ErrWithheld) || res != nil {
			t.Fatalf("ben applying the proposal withheld from him: %+v, %v; want ErrWithheld", res, err)
		}
		if after, _ := r.chat.Transcript(ctx, "acme", s, 0, 0); len(after) != len(before) {
			t.Errorf("ben's refused apply recorded %d entries", len(after)-len(before))
		}
		if _, err := r.chat.Apply(ctx, proposer, s, id, nil); err != nil {
			t.Fatal(err)
		}
		if res, err := r.chat.Apply(ctx, clerk, s, id, nil); !errors.Is(err, chat.ErrWithheld) || res != nil {
			t.Fatalf("ben applying the proposal cy applied: %+v, %v; want ErrWithheld", res, err)
		}

		n := len(model.Requests())
		r.turn(clerk, s, "Anything new?")
		if req := model.Requests()[n]; strings.Contains(told(&req), "987654") {
			t.Fatalf("the planner working for ben was shown what cy's planner made of cy's read:\n%s", told(&req))
		}

		whole := r.transcript(s)
		var lookup string // the id of the call that looked for the item
		for _, o := range of(whole, chat.KindToolCall) {
			if o.Call.Tool == "get_item" {
				lookup = o.Call.ID
			}
		}
		for _, after := range []int64{0, 2} {
			read, watched := seenBy(t, r, clerk, s, after, whole)
			for what, got := range map[string][]chat.Output{"transcript": read, "watch": watched} {
				if j := mustJSON(got); strings.Contains(j, "987654") {
					t.Fatalf("ben's %s after %d holds what cy read, in a plan, a call's result or an outcome:\n%s", what, after, j)
				}
				props := of(got, chat.KindProposal)
				if len(props) != 1 || props[0].Proposal.ID != id || !strings.HasPrefix(props[0].Proposal.Plan.Goal, "Withheld") ||
					len(props[0].Proposal.Plan.Steps) != 0 || !strings.Contains(mustJSON(props[0]), `"steps":[]`) {
					t.Errorf("ben's %s after %d does not show the proposal %s as withheld:\n%s", what, after, id, mustJSON(props))
				}
				for _, o := range of(got, chat.KindToolResult) {
					if o.Result.Call == lookup && (o.Result.Status != "withheld" || o.Source != nil) {
						t.Errorf("ben's %s after %d shows the result of a call cy's planner made from cy's read: %s", what, after, mustJSON(o))
					}
				}
			}
		}

		// Those who could read the salaries see the plan, the call's result
		// and the outcome.
		for _, reader := range []planexec.Delegation{proposer, boss} {
			read, _ := seenBy(t, r, reader, s, 0, whole)
			j := mustJSON(read)
			if !strings.Contains(j, `"goal":"Raise Alice above 987654"`) || !strings.Contains(j, "no item 987654") || !strings.Contains(j, `"title":"Raise Alice from 987654"`) {
				t.Errorf("%s, who may read salaries, is not shown the plan, the call's result or the outcome:\n%s", reader.User, j)
			}
		}
	})

	t.Run("a summary made for a person is sent for another only if they could read all of it", func(t *testing.T) {
		r, model := salaryRig(t, func(c *chat.Config) { c.CompactAtTokens = 1 })
		s := r.session("s1")
		r.turn(payroll, s, "What are the salaries?")
		r.turn(payroll, s, "Thanks.") // compacts for cy: the summary holds the salaries
		sess, err := r.chat.Session(context.Background(), "acme", s)
		if err != nil {
			t.Fatal(err)
		}
		if sum := sess.Summary; sum == nil || !strings.Contains(sum.Text, "987654") || sum.For != "cy" || len(sum.Sources) != 1 || sum.Sources[0].By != "cy" {
			t.Fatalf("cy's summary: %+v", sess.Summary)
		}
		// A person reading the session is shown the summary as the planner
		// working for them would be sent it.
		for _, tc := range []struct {
			reader planexec.Delegation
			shown  bool
		}{{payroll, true}, {boss, true}, {ben(), false}} {
			got, err := r.chat.SessionFor(context.Background(), tc.reader, s)
			if err != nil || got.Seq != sess.Seq || got.Compactions != 1 {
				t.Fatalf("the session as %s reads it: %+v, %v", tc.reader.User, got, err)
			}
			if shown := got.Summary != nil && got.Summary.Text == sess.Summary.Text; shown != tc.shown || (!tc.shown && strings.Contains(mustJSON(got), "987654")) {
				t.Errorf("the session as %s reads it shows cy's summary: %v, want %v:\n%s", tc.reader.User, shown, tc.shown, mustJSON(got))
			}
		}

		n := len(model.Requests())
		r.turn(ben(), s, "Anything new?")
		reqs := model.Requests()[n:]
		if len(reqs) != 2 || !summarising(&reqs[0]) {
			t.Fatalf("ben's turn made %d requests, want a summary's and the answer's", len(reqs))
		}
		for i := range reqs {
			if strings.Contains(told(&reqs[i]), "987654") {
				t.Fatalf("a request for ben holds what cy read:\n%s", told(&reqs[i]))
			}
		}
		if first := reqs[0].Messages[0].Content; !strings.HasPrefix(first, "cy: What are the salaries?") {
			t.Fatalf("ben's summary was not made from the conversation itself: %q", first)
		}
		if sess, _ := r.chat.Session(context.Background(), "acme", s); sess.Summary.For != "ben" {
			t.Fatalf("the summary made for ben: %+v", sess.Summary)
		}
	})
}
