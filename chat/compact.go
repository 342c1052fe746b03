package chat

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"unicode/utf8"

	"github.com/planexec/planexec/llm"
)

const summaryInstructions = `You summarise a conversation between people and the planner of a service, so that the planner can go on from the summary alone. Keep every fact, decision, open question and proposal (with its id and whether it was applied or rejected), the people and what each asked for, and what the tools found that still matters. Leave out pleasantries. Write plain text.`

// estimate is the context the model would see at the next call, in tokens:
// the usage the provider reported for the last answer plus a token for
// every four characters added since (rounded down). With no answer since
// the latest compaction (whose usage would count what is no longer sent),
// or a model that reports no usage, everything sent is estimated by its
// characters, as Ballet's planner does.
func (t *turn) estimate() int64 {
	chars := func(msgs []llm.Message) int64 {
		var n int
		for _, m := range msgs {
			n += utf8.RuneCountInString(m.Content)
		}
		return int64(n)
	}
	if t.doc.AnswerTokens > 0 {
		for i := len(t.history) - 1; i >= 0; i-- {
			if o := &t.history[i]; o.Kind == KindMessage && o.Role == "assistant" {
				return t.doc.AnswerTokens + chars(messages(nil, t.history[i+1:]))/4
			}
		}
	}
	system := utf8.RuneCountInString(t.system)
	return (int64(system) + chars(messages(t.summary, t.history))) / 4
}

// compact summarises the conversation before the latest person's message
// when the estimated context is above Config.CompactAtTokens. The current
// turn is never summarised, so its calls and their results stay together. A
// failed compaction is logged and the turn goes on uncompacted.
func (t *turn) compact() {
	limit := t.c.cfg.CompactAtTokens
	if limit < 0 {
		return
	}
	est := t.estimate()
	if est <= limit {
		return
	}
	upTo, done := t.doc.TurnStart-1, t.after()
	n := 0
	for n < len(t.history) && t.history[n].Seq <= upTo {
		n++
	}
	if upTo <= done || n == 0 {
		return // only the current turn is left: MaxRounds bounds it
	}
	msgs := messages(t.summary, t.history[:n])
	ask := "Summarise the conversation above, as the instructions say."
	if last := len(msgs) - 1; last >= 0 && msgs[last].Role == llm.RoleUser {
		msgs[last].Content += "\n\n" + ask
	} else {
		msgs = append(msgs, llm.Message{Role: llm.RoleUser, Content: ask})
	}
	resp, err := t.c.cfg.Model.Generate(t.ctx, &llm.Request{System: summaryInstructions, Messages: msgs})
	if resp != nil {
		t.meter(resp)
	}
	if err == nil && strings.TrimSpace(resp.Content) == "" {
		err = errEmptySummary
	}
	if err != nil {
		t.c.stats.compactionFailures.Add(1)
		t.c.cfg.Logger.LogAttrs(context.WithoutCancel(t.ctx), slog.LevelWarn, "chat: compaction failed; the call goes on uncompacted",
			slog.String("tenant", t.key.tenant), slog.String("session", t.key.id), slog.Int64("estimated_tokens", est), slog.Any("error", err))
		return
	}
	// The summary holds what this person was shown: it says whose reads,
	// so that another person is sent it only if they could read them all.
	sources, unlisted := sourcesOf(t.summary, t.history[:n])
	t.summary = &Summary{Text: resp.Content, UpTo: upTo, EstimatedTokens: est, At: t.c.cfg.Now(),
		For: t.person.User, Sources: sources, Unlisted: unlisted}
	t.doc.Summary = t.summary
	t.doc.Compactions++
	// The last answer's usage counted what is no longer sent: until the
	// next answer, the estimate counts characters.
	t.doc.AnswerTokens = 0
	if !t.write([]Output{{Kind: KindCompacted, Turn: t.number, Compaction: &Compaction{UpTo: upTo, EstimatedTokens: est}}}) {
		return // not stored: the turn stops here
	}
	t.history = t.history[n:] // the compacted entry, written last, stays
	t.c.stats.compactions.Add(1)
	t.c.cfg.Logger.LogAttrs(context.WithoutCancel(t.ctx), slog.LevelInfo, "chat: compacted",
		slog.String("tenant", t.key.tenant), slog.String("session", t.key.id), slog.Int64("up_to", upTo), slog.Int64("estimated_tokens", est))
}

var errEmptySummary = errors.New("the model's summary was empty")
