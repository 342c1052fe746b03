package chat_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/chat"
	"github.com/planexec/planexec/llm"
	"github.com/planexec/planexec/llm/scripted"
)

func TestATurnRunsRoundsOfReadsUntilThePlannerAnswersWithoutACall(t *testing.T) {
	model := scripted.New(
		say("Let me look.", call("list_items", `{}`)),
		say("", call("get_item", `{"id":"T-1"}`)),
		say("T-1 is open: Write the README."),
	)
	r := newRig(t, model)
	s := r.session("s1")

	out := r.turn(ana(), s, "What is open?")

	want := "message text message tool_call tool_result text message tool_call tool_result text message done"
	if got := kinds(out); got != want {
		t.Fatalf("outputs:\n got %s\nwant %s", got, want)
	}
	done := out[len(out)-1].Done
	if done.Reason != chat.EndTurn || done.Rounds != 2 {
		t.Fatalf("done = %+v, want end_turn after 2 rounds", done)
	}
	for _, res := range of(out, chat.KindToolResult) {
		if res.Result.Status != chat.CallOK {
			t.Fatalf("result %+v, want ok", res.Result)
		}
	}
	if got := string(of(out, chat.KindToolResult)[1].Result.Output); !strings.Contains(got, "Write the README") {
		t.Fatalf("get_item's output = %s", got)
	}
	reqs := model.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d model calls, want 3", len(reqs))
	}
	if got := lastUser(&reqs[1]); !strings.Contains(got, "Results of your tool calls") || !strings.Contains(got, `"call":1,"tool":"list_items","status":"ok"`) {
		t.Fatalf("the second call was not told the first call's result:\n%s", got)
	}
	if got := reqs[0].Messages[0].Content; got != "ana: What is open?" {
		t.Fatalf("the first message = %q", got)
	}
	sess, err := r.chat.Session(context.Background(), "acme", s)
	if err != nil {
		t.Fatal(err)
	}
	if sess.Running || sess.Turns != 1 || sess.Usage["scripted"].Calls != 3 {
		t.Fatalf("session = %+v, want idle, 1 turn, 3 calls metered to the model", sess)
	}
}

func TestTheRoundsBoundEndsTheTurnAndItsUnrunCallsAreAnsweredInTheNextRequest(t *testing.T) {
	calls := 0
	model := scripted.Respond(func(req *llm.Request) scripted.Reply {
		calls++
		if strings.Contains(lastUser(req), "go on") {
			return say("Done.")
		}
		return say("", call("list_items", `{}`))
	})
	r := newRig(t, model, func(c *chat.Config) { c.MaxRounds = 3 })
	s := r.session("s1")

	out := r.turn(ana(), s, "Keep looking")

	done := out[len(out)-1].Done
	if done.Reason != chat.MaxRounds || done.Rounds != 3 {
		t.Fatalf("done = %+v, want max_rounds after 3 rounds", done)
	}
	if calls != 4 || r.tracker.called("list_items") != 3 {
		t.Fatalf("%d model calls and %d tool calls, want 4 and 3", calls, r.tracker.called("list_items"))
	}
	results := of(out, chat.KindToolResult)
	last := results[len(results)-1].Result
	if len(results) != 4 || last.Status != chat.CallNotRun || last.Error.Code != "not_run" {
		t.Fatalf("the call past the bound: %+v (of %d results), want not_run", last, len(results))
	}

	out = r.turn(ana(), s, "go on")
	if of(out, chat.KindDone)[0].Done.Reason != chat.EndTurn {
		t.Fatalf("the next turn: %s", kinds(out))
	}
	reqs := model.Requests()
	next := reqs[len(reqs)-1]
	var told string
	for _, m := range next.Messages {
		told += m.Content
	}
	if !strings.Contains(told, `"status":"not_run"`) {
		t.Fatalf("the next request does not answer the unrun call:\n%s", told)
	}
}

func TestACancelStopsTheTurnBeforeItsNextToolCallWithTheTranscriptIntact(t *testing.T) {
	model := scripted.New(
		say("Looking.", call("list_items", `{}`), call("get_item", `{"id":"T-1"}`)),
		say("never asked"),
	)
	r := newRig(t, model)
	r.tracker.release = make(chan struct{})
	r.tracker.started = make(chan string, 4)
	s := r.session("s1")

	sent, err := r.chat.Send(context.Background(), ana(), s, "Look around")
	if err != nil {
		t.Fatal(err)
	}
	if tool := <-r.tracker.started; tool != "list_items" {
		t.Fatalf("first call: %s", tool)
	}
	if _, err := r.chat.Send(context.Background(), ben(), s, "me too"); !errors.Is(err, chat.ErrTurnBusy) {
		t.Fatalf("a send while the turn runs: %v, want ErrTurnBusy", err)
	}
	running, err := r.chat.Cancel(context.Background(), ana(), s)
	if err != nil || !running {
		t.Fatalf("Cancel = %v, %v; want a running turn", running, err)
	}
	close(r.tracker.release)
	out := r.until(s, sent.Seq-1, chat.KindDone)

	if got := out[len(out)-1].Done.Reason; got != chat.Cancelled {
		t.Fatalf("done: %s", got)
	}
	if n := r.tracker.called("get_item"); n != 0 {
		t.Fatalf("get_item was called %d times after the cancel", n)
	}
	results := of(out, chat.KindToolResult)
	if len(results) != 2 || results[1].Result.Status != chat.CallNotRun || results[1].Result.Tool != "get_item" {
		t.Fatalf("results: %+v", results)
	}
	if len(model.Requests()) != 1 {
		t.Fatalf("the model was asked again after the cancel")
	}
	if n := len(of(out, chat.KindMessage)); n != 2 {
		t.Fatalf("%d messages on record, want the person's and the planner's", n)
	}
	// Nothing of ben's refused message was stored.
	all, err := r.chat.Transcript(context.Background(), "acme", s, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range all {
		if o.By == "ben" {
			t.Fatalf("ben's refused message is on record: %+v", o)
		}
	}
}

func TestOnlyAPersonMaySendAMessageOfOneTo100000Characters(t *testing.T) {
	r := newRig(t, scripted.New(say("hi")), func(c *chat.Config) { c.MaxMessageRunes = 10 })
	s := r.session("s1")
	ctx := context.Background()

	agent := ana()
	agent.Agent = "bot"
	if _, err := r.chat.Send(ctx, agent, s, "hello"); !errors.Is(err, chat.ErrNotPerson) {
		t.Fatalf("an agent sending: %v", err)
	}
	for _, text := range []string{"", " \n\t", "ééééééééééé", "bad \xff"} {
		_, err := r.chat.Send(ctx, ana(), s, text)
		var me *chat.MessageError
		if !errors.As(err, &me) {
			t.Fatalf("%q: %v, want a *MessageError", text, err)
		}
	}
	if _, err := r.chat.Send(ctx, ana(), s, "éééééééééé"); err != nil {
		t.Fatalf("ten characters (20 bytes): %v", err)
	}
	if _, err := r.chat.Send(ctx, ana(), "nope", "hi"); !errors.Is(err, chat.ErrNoSession) && !errors.Is(err, chat.ErrTurnBusy) {
		t.Fatalf("an unknown session: %v", err)
	}
	other := ana()
	other.Tenant = "globex"
	if _, err := r.chat.Session(ctx, "globex", s); !errors.Is(err, chat.ErrNoSession) {
		t.Fatalf("another tenant reads the session: %v", err)
	}
	if _, err := r.chat.Send(ctx, other, s, "hi"); !errors.Is(err, chat.ErrNoSession) {
		t.Fatalf("another tenant sends to the session: %v", err)
	}
}

func TestAModelThatCannotAnswerEndsTheTurnInFixedWords(t *testing.T) {
	secret := errors.New("dial tcp 10.0.0.7:443: key sk-live-123 refused")
	r := newRig(t, scripted.New(scripted.Reply{Err: secret}, scripted.Reply{Content: "not json"}))
	s := r.session("s1")

	for _, text := range []string{"first", "second"} {
		out := r.turn(ana(), s, text)
		errs := of(out, chat.KindError)
		if len(errs) != 1 || out[len(out)-1].Done.Reason != chat.Failed {
			t.Fatalf("%s: %s", text, kinds(out))
		}
		if strings.Contains(errs[0].Text, "sk-live") || strings.Contains(errs[0].Text, "10.0.0.7") || !strings.Contains(errs[0].Text, "Send a message") {
			t.Fatalf("the error shown: %q", errs[0].Text)
		}
	}
}

func TestClosingTheChatEndsItsTurnsAsCancelled(t *testing.T) {
	r := newRig(t, scripted.New(say("", call("list_items", `{}`))))
	r.tracker.release = make(chan struct{})
	r.tracker.started = make(chan string, 1)
	s := r.session("s1")
	sent, err := r.chat.Send(context.Background(), ana(), s, "look")
	if err != nil {
		t.Fatal(err)
	}
	<-r.tracker.started
	if err := r.chat.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	out, err := r.chat.Transcript(context.Background(), "acme", s, sent.Seq, 0)
	if err != nil {
		t.Fatal(err)
	}
	if last := out[len(out)-1]; last.Kind != chat.KindDone || last.Done.Reason != chat.Cancelled {
		t.Fatalf("after Close: %s", kinds(out))
	}
	if _, err := r.chat.Send(context.Background(), ana(), s, "again"); !errors.Is(err, chat.ErrClosed) {
		t.Fatalf("a send after Close: %v", err)
	}
}

func TestAnAnswerOutOfFormIsToldBackToTheModelToFix(t *testing.T) {
	const wrong = `{"text":"Looking.","calls":[{"tool":"list_items","arguments":{},"sk_live_secret":1}]}`
	t.Run("fixed: the turn goes on, and what the model wrote wrong is on no record", func(t *testing.T) {
		model := scripted.New(scripted.Reply{Content: wrong}, say("", call("list_items", `{}`)), say("T-1 is open."))
		r := newRig(t, model)
		s := r.session("s1")
		out := r.turn(ana(), s, "What is open?")
		if got := kinds(out); got != "message text message tool_call tool_result text message done" || out[len(out)-1].Done.Reason != chat.EndTurn {
			t.Fatalf("the turn: %s", got)
		}
		reqs := model.Requests()
		fix := lastUser(&reqs[1])
		if !strings.Contains(fix, "not in the expected form at /calls/0/sk_live_secret: unknown key") || !strings.Contains(fix, "Answer again") {
			t.Fatalf("the model was not told what to fix:\n%s", fix)
		}
		if m := reqs[1].Messages; m[len(m)-2].Role != llm.RoleAssistant || m[len(m)-2].Content != wrong {
			t.Fatalf("the model was not shown its answer before the note: %+v", m[len(m)-2])
		}
		if strings.Contains(mustJSON(out), "sk_live_secret") || len(reqs[2].Messages) != len(reqs[0].Messages)+2 {
			t.Fatal("the answer out of form, or the note on it, went on record")
		}
	})
	t.Run("not fixed: after two notes the turn fails in fixed words, and the log holds none of the model's words", func(t *testing.T) {
		var logged strings.Builder
		model := scripted.New(scripted.Reply{Content: wrong}, scripted.Reply{Content: wrong}, scripted.Reply{Content: wrong}, say("never asked"))
		r := newRig(t, model, func(c *chat.Config) { c.Logger = slog.New(slog.NewTextHandler(&logged, nil)) })
		s := r.session("s1")
		out := r.turn(ana(), s, "What is open?")
		if got := kinds(out); got != "message error done" || out[len(out)-1].Done.Reason != chat.Failed {
			t.Fatalf("the turn: %s", got)
		}
		if n := len(model.Requests()); n != 3 {
			t.Fatalf("the model was asked %d times, want the call and two notes", n)
		}
		if !strings.Contains(logged.String(), "unknown key") || strings.Contains(logged.String(), "sk_live_secret") {
			t.Fatalf("the log: %s", logged.String())
		}
	})
}

func TestASessionIdIsLettersDigitsDotsDashesAndUnderscores(t *testing.T) {
	r := newRig(t, scripted.New())
	ctx := context.Background()
	for _, id := range []string{"s1", "release-2026.12_a", strings.Repeat("a", chat.MaxSessionID)} {
		if _, err := r.chat.Create(ctx, ana(), chat.SessionOptions{ID: id}); err != nil {
			t.Errorf("%q: %v", id, err)
		}
	}
	for _, id := range []string{"..", ".hidden", "-x", "a/b", "a?b", "a#b", "a b", "a:b", "é", "a\u0007", strings.Repeat("a", chat.MaxSessionID+1)} {
		var ce *planexec.ConfigurationError
		if _, err := r.chat.Create(ctx, ana(), chat.SessionOptions{ID: id}); !errors.As(err, &ce) {
			t.Errorf("%q: %v, want a *ConfigurationError", id, err)
		}
	}
}

// truncating is a model adapter that answers as the providers' adapters do
// when the answer reaches the token limit: the answer, and an error that
// says it was cut off.
type truncating struct{ llm.Model }

func (m truncating) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	resp, err := m.Model.Generate(ctx, req)
	if err == nil && resp.FinishReason == "max_tokens" {
		return resp, &llm.ProviderError{Provider: "anthropic", Err: llm.ErrTruncated}
	}
	return resp, err
}

func TestAnAnswerCutOffAtTheLengthLimitRunsNoneOfItsCallsAndIsAskedAgain(t *testing.T) {
	cutAnswer := say("Looking, and proposing.", call("list_items", `{}`), call("propose_plan", threeSteps)).Content
	for _, tc := range []struct {
		name  string
		cut   scripted.Reply
		model func(*scripted.Model) llm.Model
	}{
		{"the provider's finish reason length, no error", scripted.Reply{Content: cutAnswer, FinishReason: "length"},
			func(m *scripted.Model) llm.Model { return m }},
		{"the adapter's llm.ErrTruncated", scripted.Reply{Content: cutAnswer, FinishReason: "max_tokens"},
			func(m *scripted.Model) llm.Model { return truncating{m} }},
	} {
		t.Run(tc.name+": answered again, the turn goes on and the cut answer is on no record", func(t *testing.T) {
			model := scripted.New(tc.cut, say("T-1 is open, as far as I know."))
			r := newRig(t, tc.model(model))
			s := r.session("s1")
			out := r.turn(ana(), s, "What is open?")
			if got := kinds(out); got != "message text message done" || out[len(out)-1].Done.Reason != chat.EndTurn {
				t.Fatalf("the turn: %s", got)
			}
			if n := r.tracker.called("list_items"); n != 0 {
				t.Fatalf("a call of the cut-off answer ran %d times", n)
			}
			reqs := model.Requests()
			if fix := lastUser(&reqs[1]); !strings.Contains(fix, "Your last answer was cut off before its end") || !strings.Contains(fix, "Answer again") {
				t.Fatalf("the model was not told its answer was cut off:\n%s", fix)
			}
			if strings.Contains(mustJSON(r.transcript(s)), "Looking, and proposing") {
				t.Fatal("the cut-off answer went on record")
			}
		})
		t.Run(tc.name+": cut off every time, the turn fails in fixed words", func(t *testing.T) {
			model := scripted.New(tc.cut, tc.cut, tc.cut, say("never asked"))
			r := newRig(t, tc.model(model))
			s := r.session("s1")
			out := r.turn(ana(), s, "What is open?")
			if got := kinds(out); got != "message error done" || out[len(out)-1].Done.Reason != chat.Failed {
				t.Fatalf("the turn: %s", got)
			}
			if text := of(out, chat.KindError)[0].Text; text != "The planner's answer was cut off at the model's length limit. Send a message to try again." {
				t.Fatalf("the error shown: %q", text)
			}
			if n := len(model.Requests()); n != 3 {
				t.Fatalf("the model was asked %d times, want the call and two notes", n)
			}
			if n := r.tracker.called("list_items"); n != 0 || len(of(r.transcript(s), chat.KindProposal, chat.KindToolCall)) != 0 {
				t.Fatalf("a cut-off answer was acted on: list_items ran %d times; %s", n, kinds(r.transcript(s)))
			}
		})
	}
}

func TestAConversationStoredWithAnAnswerFirstReachesTheModelWithThePersonFirst(t *testing.T) {
	model := scripted.New(say("Glad to help."))
	r := newRig(t, model)
	s := r.session("s1")
	// A service that greets first stores the planner's greeting itself.
	greeting := json.RawMessage(`{"v":1,"kind":"message","role":"assistant","text":"Hello, I am the tracker's planner."}`)
	if _, err := r.store.AppendEntries(context.Background(), "acme", s, []json.RawMessage{greeting}); err != nil {
		t.Fatal(err)
	}
	r.turn(ana(), s, "Hi")
	msgs := model.Requests()[0].Messages
	if len(msgs) != 1 || msgs[0].Role != llm.RoleUser || !strings.Contains(msgs[0].Content, "Hello, I am the tracker's planner.") ||
		!strings.HasSuffix(msgs[0].Content, "ana: Hi") {
		t.Fatalf("the request: %+v", msgs)
	}
}
