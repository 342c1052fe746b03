package chat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/internal/lease"
	"github.com/planexec/planexec/llm"
	"github.com/planexec/planexec/store"
)

// Sent says where a person's message went.
type Sent struct {
	// Turn is the number of the turn the message started.
	Turn int64 `json:"turn"`
	// Seq is the message's entry in the transcript: watch after Seq-1 to
	// see it and everything the turn does.
	Seq int64 `json:"seq"`
}

// Send stores a person's message and starts the turn that answers it, which
// runs on after Send returns (until it ends, is cancelled, or the Chat is
// closed); watch the session to follow it.
//
// Only a person may send: a delegation naming an agent is ErrNotPerson, and
// a call from inside a tool's execution (a read the planner made, a step of
// an applied proposal, any step an executor runs) is ErrInTool, so the
// planner acting for a person never makes the person send. The message must
// be valid UTF-8 of 1 to Config.MaxMessageRunes characters, not all white
// space (*MessageError). While a turn of the session runs, on this
// process or another, Send is ErrTurnBusy and stores nothing. A turn whose
// process stopped is repaired first: its calls that never got a result are
// answered as not run, and it is ended, in the same write as the message.
//
// The turn acts for the person: every read runs under the person's
// delegation, narrowed to the agent "planner:<session>", so the planner can
// read exactly what the person may, and of what others read it is shown
// only what the person could have read (see Authority in the package
// documentation). The turn asks Config.Skills, if set, for its skill. The
// turn keeps ctx's values but not its cancellation: it outlives the request
// that started it.
func (c *Chat) Send(ctx context.Context, person planexec.Delegation, session, text string) (Sent, error) {
	if err := c.person(ctx, person); err != nil {
		return Sent{}, err
	}
	if err := c.checkMessage(text); err != nil {
		return Sent{}, err
	}
	planner, err := person.Delegate("planner:"+session, person.Scope, person.Expires)
	if err != nil {
		return Sent{}, err
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return Sent{}, ErrClosed
	}
	c.wg.Add(1) // before the turn is taken: Close waits for it from here
	c.mu.Unlock()
	started := false
	defer func() {
		if !started {
			c.wg.Done()
		}
	}()
	var (
		res store.TurnResult
		rec *store.SessionRecord
		doc *sessionDoc
	)
	// A watcher on another process may repair a dead turn between our read
	// and our write: the epoch moves on, and a fresh read tells.
	for attempt := 0; ; attempt++ {
		if rec, doc, err = c.load(ctx, person.Tenant, session); err != nil {
			return Sent{}, err
		}
		now := c.cfg.Now()
		if rec.Turn.Held(now) {
			return Sent{}, ErrTurnBusy
		}
		var entries []json.RawMessage
		if rec.Turn.Holder != "" {
			if entries, err = c.repairEntries(ctx, rec, doc); err != nil {
				return Sent{}, err
			}
		}
		doc.Turns++
		doc.TurnStart = rec.Seq + int64(len(entries)) + 1
		human := Output{Kind: KindMessage, Turn: doc.Turns, Role: "user", By: person.User, Text: text}
		entries = append(entries, encodeEntry(&human))
		res, err = c.cfg.Store.TakeTurn(ctx, &store.TurnWrite{
			Tenant: person.Tenant, Session: session, Epoch: rec.Turn.Epoch,
			Holder: c.cfg.Holder, Until: now.Add(c.cfg.Lease), Now: now,
			Entries: entries, Doc: doc.encode(),
		})
		if errors.Is(err, store.ErrTurnHeld) && attempt < 2 {
			continue
		}
		if errors.Is(err, store.ErrTurnHeld) {
			return Sent{}, ErrTurnBusy
		}
		if err != nil {
			return Sent{}, err
		}
		break
	}
	k := sessionKey{person.Tenant, session}
	c.notify(k)
	c.stats.turns.Add(1)

	tctx, cancel := context.WithCancelCause(runningTools(context.WithoutCancel(ctx)))
	c.mu.Lock()
	c.turns[k] = cancel
	if c.closed {
		cancel(errServiceStopped)
	}
	c.mu.Unlock()
	now := c.cfg.Now()
	rec.Seq, rec.Updated, rec.Turn = res.Seq, now, store.TurnState{Epoch: res.Epoch, Holder: c.cfg.Holder, Until: now.Add(c.cfg.Lease)}
	t := &turn{
		c: c, key: k, epoch: res.Epoch, number: doc.Turns, doc: doc, session: sessionOf(rec, doc, now),
		person: person, planner: planner, ctx: tctx, cancel: cancel, seq: res.Seq,
	}
	started = true
	go func() {
		defer c.wg.Done()
		defer func() {
			c.mu.Lock()
			delete(c.turns, k)
			c.mu.Unlock()
			cancel(nil)
		}()
		t.run()
	}()
	return Sent{Turn: doc.Turns, Seq: res.Seq}, nil
}

func (c *Chat) checkMessage(text string) error {
	if !utf8.ValidString(text) {
		return &MessageError{Max: c.cfg.MaxMessageRunes, Why: "it is not valid UTF-8"}
	}
	n := utf8.RuneCountInString(text)
	switch {
	case strings.TrimFunc(text, unicode.IsSpace) == "":
		return &MessageError{Runes: n, Max: c.cfg.MaxMessageRunes, Why: "it is empty"}
	case n > c.cfg.MaxMessageRunes:
		return &MessageError{Runes: n, Max: c.cfg.MaxMessageRunes, Why: fmt.Sprintf("it is %d characters long, more than %d", n, c.cfg.MaxMessageRunes)}
	}
	return nil
}

// Cancel asks the session's running turn to stop, on whichever process runs
// it: no tool call starts after the turn learns of it (at its next write, or
// at once in this process), calls not started are recorded as not run, and
// the turn ends cancelled. It reports whether a turn was running. Only a
// person may cancel (see Send).
func (c *Chat) Cancel(ctx context.Context, person planexec.Delegation, session string) (bool, error) {
	if err := c.person(ctx, person); err != nil {
		return false, err
	}
	if err := c.open(); err != nil {
		return false, err
	}
	running, err := c.cfg.Store.CancelTurn(ctx, person.Tenant, session, c.cfg.Now())
	if errors.Is(err, store.ErrNoRecord) {
		return false, ErrNoSession
	}
	if err != nil {
		return false, err
	}
	c.mu.Lock()
	if cancel, ok := c.turns[sessionKey{person.Tenant, session}]; ok {
		cancel(errCancelled)
	}
	c.mu.Unlock()
	return running, nil
}

var (
	errCancelled = errors.New("a person cancelled the turn")
	errFenced    = errors.New("the turn's lease was taken over")
)

// turn is one turn running: the person's message answered round by round.
type turn struct {
	c       *Chat
	key     sessionKey
	epoch   int64
	number  int64
	doc     *sessionDoc
	session Session // as the turn took it
	person  planexec.Delegation
	planner planexec.Delegation
	ctx     context.Context
	cancel  context.CancelCauseFunc

	system string // the system prompt, built once a turn

	mu      sync.Mutex // guards seq and writes' order
	seq     int64      // the session's last entry
	summary *Summary   // the summary the model is sent, if one may be
	history []Output   // what the model is told: entries after the summary
	judge   *judge     // whether the person could have read what others did
	rounds  int
}

// run answers the person's message: ask the model, run the calls it asks
// for, and ask again, until it calls nothing, the bound of rounds, or a
// cancel. Its records are written whatever happens to its context.
func (t *turn) run() {
	stop := t.renew()
	defer stop()
	t.system = t.c.system(t.key.tenant, t.doc.Project, t.skill())
	if err := t.loadHistory(); err != nil {
		t.fail("the conversation could not be read", err)
		return
	}
	for call := 0; ; call++ {
		if t.stopped() {
			t.end(Cancelled, nil)
			return
		}
		t.compact()
		if t.stopped() {
			t.end(Cancelled, nil)
			return
		}
		ans, resp, err := t.ask()
		if err != nil {
			if t.stopped() {
				t.end(Cancelled, nil)
				return
			}
			t.fail(failureText(err), err)
			return
		}
		msg := Output{Kind: KindMessage, Turn: t.number, Role: "assistant", Text: ans.Text, Model: resp.Model, Usage: resp.Usage,
			For: t.person.User, SeenAfter: t.after()}
		entries := []Output{msg}
		calls := make([]Call, len(ans.Calls))
		for i, wc := range ans.Calls {
			calls[i] = Call{ID: fmt.Sprintf("t%dr%dc%d", t.number, t.rounds+1, i+1), Tool: wc.Tool, Arguments: wc.Arguments}
			entries = append(entries, Output{Kind: KindToolCall, Turn: t.number, Call: &calls[i]})
		}
		// The estimate of the next call starts from what this one reported.
		t.doc.AnswerTokens = resp.Usage.Total()
		// An answer that ends the turn goes on record with its end, in one
		// write.
		if len(calls) == 0 {
			t.end(EndTurn, entries)
			return
		}
		if t.rounds == t.c.cfg.MaxRounds {
			t.end(MaxRounds, append(entries, notRun(t.number, calls, fmt.Sprintf("The turn reached its bound of %d rounds of tool calls before this call ran; it was not run. The person sends a message to continue.", t.c.cfg.MaxRounds))...))
			return
		}
		if !t.write(entries) {
			return
		}
		t.rounds++
		for i := range calls {
			if t.stopped() {
				t.end(Cancelled, notRun(t.number, calls[i:], "The turn was cancelled before this call ran; it was not run."))
				return
			}
			out := t.call(&calls[i])
			if len(out) > 1 { // a proposal: index it by its call, in the same write
				if t.doc.Proposals == nil {
					t.doc.Proposals = map[string]int64{}
				}
				t.doc.Proposals[calls[i].ID] = entries[i+1].Seq // the call's own entry
			}
			if !t.write(out) {
				return
			}
		}
	}
}

// skill is the turn's skill: Config.Skills's, or, without it or when it
// fails, the session's stored skill.
func (t *turn) skill() string {
	if t.c.cfg.Skills == nil {
		return t.doc.Skill
	}
	skill, err := t.c.cfg.Skills(t.ctx, t.person, t.session)
	if err != nil {
		t.c.cfg.Logger.LogAttrs(context.WithoutCancel(t.ctx), slog.LevelWarn, "chat: the skill provider failed; the turn goes on with the session's skill",
			slog.String("tenant", t.key.tenant), slog.String("session", t.key.id), slog.Int64("turn", t.number), slog.Any("error", err))
		return t.doc.Skill
	}
	return skill
}

// stopped reports whether the turn was cancelled, in this process or (as
// its last write said) on another.
func (t *turn) stopped() bool { return t.ctx.Err() != nil }

// notRun answers calls that never ran.
func notRun(turn int64, calls []Call, why string) []Output {
	out := make([]Output, len(calls))
	for i, c := range calls {
		out[i] = Output{Kind: KindToolResult, Turn: turn, Result: &Result{Call: c.ID, Tool: c.Tool, Status: CallNotRun, Error: &ToolError{Code: "not_run", Message: why}}}
	}
	return out
}

// failureText says, in fixed words, why the model could not answer.
func failureText(err error) string {
	var pe *llm.ProviderError
	switch {
	case errors.Is(err, errCutOff):
		return "The planner's answer was cut off at the model's length limit. Send a message to try again."
	case errors.Is(err, errMalformedAnswer):
		return "The planner's answer was not in the expected form. Send a message to try again."
	case errors.As(err, &pe) && pe.Retryable:
		return "The model is unavailable for now. Send a message to try again."
	case errors.Is(err, context.DeadlineExceeded):
		return "The model did not answer in time. Send a message to try again."
	}
	return "The model could not answer. Send a message to try again."
}

// fail ends the turn with an error output in fixed words; err, which may
// hold what a person must not see, goes to the log.
func (t *turn) fail(text string, err error) {
	t.c.cfg.Logger.LogAttrs(context.WithoutCancel(t.ctx), slog.LevelError, "chat: turn failed",
		slog.String("tenant", t.key.tenant), slog.String("session", t.key.id), slog.Int64("turn", t.number), slog.Any("error", err))
	t.end(Failed, []Output{{Kind: KindError, Turn: t.number, Text: text}})
}

// end writes the turn's last entries and done, and releases the session.
func (t *turn) end(reason Reason, last []Output) {
	last = append(last, Output{Kind: KindDone, Turn: t.number, Done: &Done{Reason: reason, Rounds: t.rounds}})
	t.writeTurn(last, true)
}

// write appends entries as the turn, with the session's document, and
// reports whether the turn goes on: false when its lease was lost or the
// store failed (the turn then stops where it is, and the next Send repairs
// it). Each entry gets its Seq.
func (t *turn) write(entries []Output) bool {
	return t.writeTurn(entries, false)
}

func (t *turn) writeTurn(entries []Output, end bool) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	raw := make([]json.RawMessage, len(entries))
	for i := range entries {
		raw[i] = encodeEntry(&entries[i])
	}
	w := &store.TurnWrite{
		Tenant: t.key.tenant, Session: t.key.id, Epoch: t.epoch, Holder: t.c.cfg.Holder,
		Until: t.c.cfg.Now().Add(t.c.cfg.Lease), Entries: raw, Doc: t.doc.encode(), End: end,
	}
	res, err := t.c.cfg.Store.WriteTurn(context.WithoutCancel(t.ctx), w)
	if err != nil {
		t.c.cfg.Logger.LogAttrs(context.WithoutCancel(t.ctx), slog.LevelError, "chat: the turn could not write its transcript",
			slog.String("tenant", t.key.tenant), slog.String("session", t.key.id), slog.Int64("turn", t.number), slog.Any("error", err))
		t.cancel(errFenced)
		return false
	}
	first := res.Seq - int64(len(entries)) + 1
	for i := range entries {
		entries[i].Seq = first + int64(i)
	}
	t.seq = res.Seq
	t.history = append(t.history, entries...)
	if res.Cancel {
		t.cancel(errCancelled)
	}
	t.c.notify(t.key)
	return true
}

// renew keeps the turn's lease while it runs, and learns of a cancel asked
// on another process; the returned func stops it and waits.
func (t *turn) renew() (stop func()) {
	var k lease.Keeper
	k.Keep(context.WithoutCancel(t.ctx), t.c.cfg.Lease/3, func(ctx context.Context) bool {
		t.mu.Lock()
		res, err := t.c.cfg.Store.WriteTurn(ctx, &store.TurnWrite{
			Tenant: t.key.tenant, Session: t.key.id, Epoch: t.epoch, Holder: t.c.cfg.Holder,
			Until: t.c.cfg.Now().Add(t.c.cfg.Lease),
		})
		t.mu.Unlock()
		switch {
		case errors.Is(err, store.ErrFenced):
			t.cancel(errFenced)
		case err == nil && res.Cancel:
			t.cancel(errCancelled)
		}
		return true
	})
	return k.Stop
}

// meter counts a model call against the session.
func (t *turn) meter(resp *llm.Response) {
	t.c.stats.modelCalls.Add(1)
	if t.doc.Usage == nil {
		t.doc.Usage = map[string]llm.Usage{}
	}
	model := resp.Model
	if model == "" {
		model = "unknown"
	}
	t.doc.Usage[model] = t.doc.Usage[model].Add(resp.Usage)
}

// loadHistory reads what the model is told: the summary, when the person
// may be sent it, and the entries after it (all of them without it), each
// withheld that the person could not have read.
func (t *turn) loadHistory() error {
	if t.usable(t.doc.Summary) {
		t.summary = t.doc.Summary
	}
	out, err := t.c.transcript(context.WithoutCancel(t.ctx), t.key, t.after(), t.seq)
	if err != nil {
		return err
	}
	t.history = t.shown(out)
	return nil
}

// after is the entry after which the model is sent the transcript: the
// summary's UpTo, 0 without one.
func (t *turn) after() int64 {
	if t.summary == nil {
		return 0
	}
	return t.summary.UpTo
}
