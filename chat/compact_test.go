package chat_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/planexec/planexec/chat"
	"github.com/planexec/planexec/llm"
	"github.com/planexec/planexec/llm/scripted"
)

// summarising reports whether req is a compaction's summary request.
func summarising(req *llm.Request) bool { return strings.HasPrefix(req.System, "You summarise") }

// reporting is a model whose answers report usage tokens each, that reads
// once for a person's question (and answers anything else at once), and that summarises on
// request (or fails to, with summaryErr).
func reporting(usage int64, summaryErr error) *scripted.Model {
	return scripted.Respond(func(req *llm.Request) scripted.Reply {
		if summarising(req) {
			if summaryErr != nil {
				return scripted.Reply{Err: summaryErr}
			}
			return scripted.Reply{Content: "SUMMARY: ana asked about T-1; it is open.", Usage: llm.Usage{InputTokens: 50, OutputTokens: 10}}
		}
		if u := lastUser(req); strings.HasPrefix(u, "Results") || !strings.HasSuffix(u, "?") {
			return scripted.Reply{Content: `{"text":"T-1 is open.","calls":[]}`, Usage: llm.Usage{InputTokens: usage}}
		}
		return scripted.Reply{Content: `{"text":"","calls":[{"tool":"list_items","arguments":{}}]}`, Usage: llm.Usage{InputTokens: usage}}
	})
}

func TestCompactionStartsStrictlyAboveTheThresholdAndKeepsTheCurrentTurnVerbatim(t *testing.T) {
	// After turn 1 the last answer reported 65 tokens; turn 2's first call
	// adds "ana: ab cd efgh" (15 characters: 3 tokens, four characters a
	// token rounded down): 68 estimated.
	for _, tc := range []struct {
		limit   int64
		compact bool
	}{{68, false}, {67, true}} {
		model := reporting(65, nil)
		r := newRig(t, model, func(c *chat.Config) { c.CompactAtTokens = tc.limit })
		s := r.session("s1")
		r.turn(ana(), s, "What is open?")
		sent, err := r.chat.Send(context.Background(), ana(), s, "ab cd efgh")
		if err != nil {
			t.Fatal(err)
		}
		out := r.until(s, sent.Seq-1, chat.KindDone)

		compacted := of(out, chat.KindCompacted)
		if got := len(compacted) == 1; got != tc.compact {
			t.Fatalf("limit %d: compacted = %v (%s), want %v", tc.limit, got, kinds(out), tc.compact)
		}
		sess, err := r.chat.Session(context.Background(), "acme", s)
		if err != nil {
			t.Fatal(err)
		}
		if !tc.compact {
			if sess.Compactions != 0 || r.chat.Stats().Compactions != 0 {
				t.Fatalf("limit %d: %d compactions", tc.limit, sess.Compactions)
			}
			continue
		}
		c := compacted[0].Compaction
		if c.UpTo != sent.Seq-1 || c.EstimatedTokens != 68 {
			t.Fatalf("compaction = %+v, want up to %d (before the person's message), 68 tokens", c, sent.Seq-1)
		}
		if sess.Compactions != 1 || sess.Summary == nil || sess.Summary.UpTo != c.UpTo || r.chat.Stats().Compactions != 1 {
			t.Fatalf("session = %+v, stats %+v", sess, r.chat.Stats())
		}
		// From then on: the summary, then the current turn.
		reqs := model.Requests()
		last := reqs[len(reqs)-1].Messages
		if len(last) != 1 || !strings.HasPrefix(last[0].Content, "Summary of the conversation") || !strings.Contains(last[0].Content, "SUMMARY: ana asked") ||
			!strings.HasSuffix(last[0].Content, "ana: ab cd efgh") {
			t.Fatalf("turn 2's request after compaction:\n%+v", last)
		}
		for _, m := range last {
			if strings.Contains(m.Content, "What is open?") {
				t.Fatal("a compacted message was sent again")
			}
		}
		// The summary request held everything before the person's message.
		var sum *llm.Request
		for i := range reqs {
			if summarising(&reqs[i]) {
				sum = &reqs[i]
			}
		}
		var told string
		for _, m := range sum.Messages {
			told += m.Content
		}
		if !strings.Contains(told, "ana: What is open?") || !strings.Contains(told, "T-1 is open.") || strings.Contains(told, "ab cd efgh") {
			t.Fatalf("the summary request:\n%s", told)
		}
		// The transcript stays complete.
		all, err := r.chat.Transcript(context.Background(), "acme", s, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if all[0].Text != "What is open?" {
			t.Fatalf("the transcript lost its start: %+v", all[0])
		}
	}
}

func TestACompactionNeverRunsInsideTheCurrentTurn(t *testing.T) {
	// Every answer reports more than the limit, but turn 1 has nothing
	// before its message: its rounds go on uncompacted, calls beside
	// their results.
	model := reporting(5000, nil)
	r := newRig(t, model, func(c *chat.Config) { c.CompactAtTokens = 100 })
	s := r.session("s1")
	out := r.turn(ana(), s, "What is open?")
	if len(of(out, chat.KindCompacted)) != 0 {
		t.Fatalf("turn 1 was compacted: %s", kinds(out))
	}
	for _, q := range model.Requests() {
		if summarising(&q) {
			t.Fatal("a summary was asked for with nothing before the current turn")
		}
	}
	// Turn 2 compacts once, before its first call, and not again inside
	// it: its second call sees the summary, then its own call beside its
	// result.
	out = r.turn(ana(), s, "And now?")
	if n := len(of(out, chat.KindCompacted)); n != 1 || out[1].Kind != chat.KindCompacted {
		t.Fatalf("turn 2: %s", kinds(out))
	}
	if n := r.chat.Stats().Compactions; n != 1 {
		t.Fatalf("%d compactions", n)
	}
	reqs := model.Requests()
	last := reqs[len(reqs)-1].Messages
	if len(last) != 3 || !strings.HasPrefix(last[0].Content, "Summary of the conversation") || !strings.HasSuffix(last[0].Content, "ana: And now?") ||
		!strings.Contains(last[1].Content, "list_items") || !strings.HasPrefix(last[2].Content, "Results of your tool calls") {
		t.Fatalf("turn 2's last request:\n%+v", last)
	}
}

func TestAFailedCompactionIsLoggedAndTheCallProceedsUncompacted(t *testing.T) {
	model := reporting(1000, errors.New("provider down"))
	r := newRig(t, model, func(c *chat.Config) { c.CompactAtTokens = 10 })
	s := r.session("s1")
	r.turn(ana(), s, "What is open?")
	out := r.turn(ana(), s, "And now?")

	if len(of(out, chat.KindCompacted)) != 0 || out[len(out)-1].Done.Reason != chat.EndTurn {
		t.Fatalf("turn 2: %s", kinds(out))
	}
	if st := r.chat.Stats(); st.CompactionFailures < 1 || st.Compactions != 0 {
		t.Fatalf("stats = %+v", st)
	}
	reqs := model.Requests()
	last := reqs[len(reqs)-1]
	var told string
	for _, m := range last.Messages {
		told += m.Content
	}
	if !strings.Contains(told, "ana: What is open?") {
		t.Fatal("the call after a failed compaction did not carry the whole conversation")
	}
}

func TestCompactionIsOffWithCompactNever(t *testing.T) {
	model := reporting(1_000_000, nil)
	r := newRig(t, model, func(c *chat.Config) { c.CompactAtTokens = chat.CompactNever })
	s := r.session("s1")
	r.turn(ana(), s, "one")
	out := r.turn(ana(), s, "two")
	if len(of(out, chat.KindCompacted)) != 0 {
		t.Fatal("compacted with compaction off")
	}
}

// unmetered is a model that reports no tokens, as some servers do.
type unmetered struct{ llm.Model }

func (m unmetered) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	resp, err := m.Model.Generate(ctx, req)
	if resp != nil {
		resp.Usage = llm.Usage{Calls: resp.Usage.Calls}
	}
	return resp, err
}

func TestAModelThatReportsNoUsageIsEstimatedByWhatIsSent(t *testing.T) {
	// The system prompt alone is over 1,000 tokens at four characters a
	// token; what a turn adds since the last answer is a few.
	model := unmetered{reporting(0, nil)}
	r := newRig(t, model, func(c *chat.Config) { c.CompactAtTokens = 1000 })
	s := r.session("s1")
	r.turn(ana(), s, "What is open?")
	out := r.turn(ana(), s, "And now?")
	if len(of(out, chat.KindCompacted)) != 1 {
		t.Fatalf("no compaction with a model that reports no usage: %s", kinds(out))
	}
}
