package chat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/llm"
	"github.com/planexec/planexec/store"
)

// Defaults of Config, as Ballet's planner has them.
const (
	DefaultMaxRounds       = 20
	DefaultCompactAtTokens = 100_000
	DefaultMaxMessageRunes = 100_000
	DefaultWatchLag        = 1024
	DefaultLease           = 30 * time.Second
	DefaultMaxResultBytes  = 16 << 10
)

// CompactNever, as Config.CompactAtTokens, turns compaction off: what
// Ballet's compact_at_tokens of 0 says (here a zero Config takes the
// default, as every field does).
const CompactNever int64 = -1

// Config builds a Chat. Model and Store are required.
type Config struct {
	// Model is the planner's model. It is asked for one JSON document per
	// call (structured output): text for the person and the tool calls to
	// make, so any llm.Model serves, tool calling or not.
	Model llm.Model
	// Store keeps sessions and transcripts (store/memory, store/sqlite and
	// store/postgres all do).
	Store store.TranscriptStore
	// Reads are the tools the planner calls to read the state of the world,
	// each with its contract. They run as the person who sent the message:
	// the person's delegation scopes them and Authorizer is asked before
	// each call. A read must be reversible and need no approval: the
	// planner changes things only by proposing a plan.
	Reads []*planexec.Tool
	// Engine runs the proposals a person applies, under that person's
	// delegation, with its own store, ladder, gate and authorizer: a
	// proposal is validated and authorized by it (Run.Validate,
	// Run.Authorize) when proposed, and again when applied. Without one
	// the planner cannot propose.
	Engine *planexec.Executor
	// Authorizer is asked before each read call whether the planner,
	// acting for the person, may make it; an error is shown to the model
	// as the fixed forbidden result. Default: none (the delegation's scope
	// decides alone). A service with one policy gives it to the engine
	// too.
	Authorizer planexec.Authorizer
	// Instructions are the service's context, after the built-in planner
	// instructions and before a session's skill.
	Instructions string
	// Skills, when set, is asked at the start of every turn for the
	// turn's skill (the project's process rules, as SessionOptions.Skill),
	// for the person who sent the message and the session as it stands;
	// its text, empty included, is the turn's skill. When it fails, the
	// failure goes to Logger and the turn goes on with the session's stored
	// skill. Default: none (the stored skill).
	Skills func(ctx context.Context, person planexec.Delegation, session Session) (string, error)
	// MaxRounds bounds the rounds of tool calls in one turn. Default:
	// DefaultMaxRounds (20).
	MaxRounds int
	// CompactAtTokens is the estimated context above which the conversation
	// before the latest person's message is summarised. Default:
	// DefaultCompactAtTokens (100,000); CompactNever (or any negative
	// value) turns compaction off.
	CompactAtTokens int64
	// MaxMessageRunes bounds a person's message, in characters. Default:
	// DefaultMaxMessageRunes (100,000).
	MaxMessageRunes int
	// WatchLag is how many outputs a watcher may fall behind the session
	// before it is dropped. Default: DefaultWatchLag (1,024).
	WatchLag int
	// Lease is how long a turn holds its session without renewing; a turn
	// renews it at a third of it. A process that stops mid-turn leaves the
	// session busy for at most this long. Default: DefaultLease (30s).
	Lease time.Duration
	// MaxResultBytes bounds a tool's output, and a *ToolError's message, as
	// the model sees it and the transcript keeps it; a longer one is cut
	// (on a rune boundary) and marked truncated. Default:
	// DefaultMaxResultBytes (16 KiB).
	MaxResultBytes int
	// PollInterval is how often a watcher caught up with its session asks
	// the store whether other processes wrote to it (one read of the
	// session's record; its entries are read only once there are new ones).
	// Writes of this process wake its watchers at once. Default: 250ms.
	PollInterval time.Duration
	// Holder names this process in turn leases. Default: host name, process
	// id and a random suffix.
	Holder string
	// Logger gets what must not reach a person or the model: a tool's or a
	// model's error, a failed compaction. Default: slog.Default().
	Logger *slog.Logger
	// Now is the clock. Default: time.Now.
	Now func() time.Time
}

// Chat runs conversations with the planner: one per session, any number at
// once. Build one per process with New; it is safe for concurrent use. Close
// it to stop its turns.
type Chat struct {
	cfg     Config
	reads   *planexec.Executor
	readOf  map[string]*planexec.Tool
	answer  *llm.OutputSchema   // what the model writes each call
	catalog string              // the tools, as the model is told them
	plans   []planexec.ToolSpec // the engine's tools

	mu       sync.Mutex
	closed   bool
	turns    map[sessionKey]context.CancelCauseFunc // turns running in this process
	holds    map[uint64]context.CancelCauseFunc     // applies and rejects under way
	applying map[proposalKey]chan struct{}          // applies under way, each closed when it ends
	held     uint64                                 // the last hold's number
	wake     map[sessionKey]chan struct{}           // closed when a session gets entries
	wg       sync.WaitGroup

	stats struct {
		turns, modelCalls, compactions, compactionFailures atomic.Int64
	}
}

type sessionKey struct{ tenant, id string }

type proposalKey struct{ tenant, session, id string }

// New checks cfg and builds a Chat. A missing model or store, a read tool
// that is irreversible or needs approval, or one named as the built-in
// propose_plan, is a *planexec.ConfigurationError.
func New(cfg Config) (*Chat, error) {
	switch {
	case cfg.Model == nil:
		return nil, &planexec.ConfigurationError{Why: "the chat needs a model"}
	case cfg.Store == nil:
		return nil, &planexec.ConfigurationError{Why: "the chat needs a store of transcripts"}
	}
	if cfg.MaxRounds <= 0 {
		cfg.MaxRounds = DefaultMaxRounds
	}
	if cfg.CompactAtTokens == 0 {
		cfg.CompactAtTokens = DefaultCompactAtTokens
	}
	if cfg.MaxMessageRunes <= 0 {
		cfg.MaxMessageRunes = DefaultMaxMessageRunes
	}
	if cfg.WatchLag <= 0 {
		cfg.WatchLag = DefaultWatchLag
	}
	if cfg.Lease <= 0 {
		cfg.Lease = DefaultLease
	}
	if cfg.MaxResultBytes <= 0 {
		cfg.MaxResultBytes = DefaultMaxResultBytes
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = 250 * time.Millisecond
	}
	if cfg.Holder == "" {
		host, _ := os.Hostname()
		cfg.Holder = host + ":" + strconv.Itoa(os.Getpid()) + ":" + uuid.NewString()[:8]
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	c := &Chat{cfg: cfg, readOf: map[string]*planexec.Tool{}, turns: map[sessionKey]context.CancelCauseFunc{}, holds: map[uint64]context.CancelCauseFunc{}, applying: map[proposalKey]chan struct{}{}, wake: map[sessionKey]chan struct{}{}}
	for _, t := range cfg.Reads {
		if t == nil {
			return nil, &planexec.ConfigurationError{Why: "a read tool is nil"}
		}
		switch {
		case t.Name() == proposeTool:
			return nil, &planexec.ConfigurationError{Tool: t.Name(), Why: "the name is the planner's own tool for proposing plans"}
		case t.Contract().Irreversible() || t.Contract().RequiresApproval():
			return nil, &planexec.ConfigurationError{Tool: t.Name(), Why: "a read tool must be reversible and need no approval: the planner changes things only by proposing a plan a person applies"}
		}
		c.readOf[t.Name()] = t
	}
	reads, err := planexec.NewExecutor(planexec.Config{Tools: cfg.Reads, Authorizer: cfg.Authorizer, Now: cfg.Now})
	if err != nil {
		return nil, err
	}
	c.reads = reads
	c.answer, c.catalog, err = c.answerSchema()
	if err != nil {
		return nil, err
	}
	return c, nil
}

// Close stops the turns running in this process, each ended as cancelled
// with its transcript intact, and the applies under way (each stops at its
// next step, resumably, as a cancelled run does), and waits for them, or for
// ctx. Create, Send, Cancel, Apply and Reject after Close fail with
// ErrClosed; reading a session or its transcript still works.
func (c *Chat) Close(ctx context.Context) error {
	c.mu.Lock()
	c.closed = true
	for _, cancel := range c.turns {
		cancel(errServiceStopped)
	}
	for _, cancel := range c.holds {
		cancel(errServiceStopped)
	}
	c.mu.Unlock()
	done := make(chan struct{})
	go func() { c.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// errServiceStopped is why Close ends what runs: a cancellation, so that
// a run it stops is told interrupted (planexec.StatusOf), not failed.
var errServiceStopped = fmt.Errorf("the service stopped: %w", context.Canceled)

// hold gives a person's call (an apply, a reject) a context that keeps
// ctx's values but not its cancellation, so that a request that goes away
// does not leave the call's writes half made; Close cancels it and waits
// for done. After Close it is ErrClosed.
func (c *Chat) hold(ctx context.Context) (_ context.Context, done func(), _ error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, nil, ErrClosed
	}
	hctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	c.held++
	n := c.held
	c.holds[n] = cancel
	c.wg.Add(1)
	return hctx, func() {
		c.mu.Lock()
		delete(c.holds, n)
		c.mu.Unlock()
		cancel(nil)
		c.wg.Done()
	}, nil
}

// open is ErrClosed once the Chat is closed.
func (c *Chat) open() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	return nil
}

// Stats are counters of a Chat since it was built.
type Stats struct {
	Turns              int64 // turns started
	ModelCalls         int64 // calls to the model, summaries included
	Compactions        int64
	CompactionFailures int64
}

// Stats returns the Chat's counters.
func (c *Chat) Stats() Stats {
	return Stats{
		Turns:              c.stats.turns.Load(),
		ModelCalls:         c.stats.modelCalls.Load(),
		Compactions:        c.stats.compactions.Load(),
		CompactionFailures: c.stats.compactionFailures.Load(),
	}
}

// SessionOptions shape a new session.
type SessionOptions struct {
	// ID names the session within the tenant: at most MaxSessionID bytes of
	// ASCII letters, digits, '.', '_' and '-', starting with a letter or a
	// digit. Default: a new UUID.
	ID string
	// Skill is the project's planner skill: process rules the planner
	// follows in this session, after the service's instructions
	// (Config.Skills, when set, gives each turn's instead).
	Skill string
	// Project names what the session is about (a project, a context), as
	// the service names it; the planner is told it with the tenant. At
	// most MaxProjectRunes characters of valid UTF-8 and no control
	// characters. Default: none.
	Project string
}

// MaxProjectRunes is the longest SessionOptions.Project, in characters.
const MaxProjectRunes = 200

// Session is where a conversation stands.
type Session struct {
	ID        string    `json:"id"`
	Tenant    string    `json:"tenant"`
	CreatedBy string    `json:"created_by"`
	Skill     string    `json:"skill,omitempty"`
	Project   string    `json:"project,omitempty"`
	Created   time.Time `json:"created"`
	Updated   time.Time `json:"updated"`
	// Seq is the number of the transcript's last entry.
	Seq int64 `json:"seq"`
	// Running reports a turn holding the session.
	Running bool `json:"running"`
	// Turns is how many turns were started.
	Turns int64 `json:"turns"`
	// Usage is what the session's model calls cost, by model.
	Usage map[string]llm.Usage `json:"usage"`
	// Compactions is how many times the conversation was summarised;
	// Summary is the latest summary, if any.
	Compactions int64    `json:"compactions"`
	Summary     *Summary `json:"summary,omitempty"`
}

// Summary is the model's summary of a conversation up to and including
// entry UpTo, made while the planner worked for the person For. Sources are
// the reads and applied outcomes it was made from: the planner working for
// another person is sent it only when that person could read every one
// (see Authority in the package documentation). Unlisted reports more
// sources than MaxSummarySources, not kept: it is sent for For alone.
type Summary struct {
	Text            string    `json:"text"`
	UpTo            int64     `json:"up_to"`
	EstimatedTokens int64     `json:"estimated_tokens"`
	At              time.Time `json:"at"`
	For             string    `json:"for,omitempty"`
	Sources         []Source  `json:"sources,omitempty"`
	Unlisted        bool      `json:"unlisted,omitempty"`
}

// MaxSummarySources is the most sources a summary lists: the session's
// document, which holds it, is written at every step of a turn.
const MaxSummarySources = 256

// docVersion is the layout of the stored session document.
const docVersion = 1

// sessionDoc is the session's document as stored. Only the turn holding the
// session writes it (and Create), so writes never race.
type sessionDoc struct {
	V           int                  `json:"v"`
	CreatedBy   string               `json:"created_by"`
	Skill       string               `json:"skill,omitempty"`
	Project     string               `json:"project,omitempty"`
	Turns       int64                `json:"turns"`
	TurnStart   int64                `json:"turn_start,omitempty"` // seq of the latest turn's first entry
	Summary     *Summary             `json:"summary,omitempty"`
	Compactions int64                `json:"compactions,omitempty"`
	Usage       map[string]llm.Usage `json:"usage,omitempty"`
	// Proposals index the session's proposals: the seq of the call that
	// made each, by proposal id.
	Proposals map[string]int64 `json:"proposals,omitempty"`
	// AnswerTokens is what the call that wrote the latest assistant
	// message reported, the base of the context estimate; 0 when unknown
	// (none yet, a compaction since, a model that reports none).
	AnswerTokens int64 `json:"answer_tokens,omitempty"`
}

func decodeDoc(rec *store.SessionRecord) (*sessionDoc, error) {
	var d sessionDoc
	if err := json.Unmarshal(rec.Doc, &d); err != nil {
		return nil, &store.Error{Op: "load session", Err: fmt.Errorf("%w: session %q: %v", store.ErrCorruptRecord, clip(rec.ID), err)}
	}
	if d.V > docVersion {
		return nil, &store.Error{Op: "load session", Err: fmt.Errorf("%w: session %q has layout %d", store.ErrNewerRecord, clip(rec.ID), d.V)}
	}
	return &d, nil
}

func (d *sessionDoc) encode() json.RawMessage {
	d.V = docVersion
	b, err := json.Marshal(d)
	if err != nil {
		panic(fmt.Sprintf("chat: a session document does not encode: %v", err)) // strings and numbers only
	}
	return b
}

// Create stores a new session for the person. A session with the same id is
// store.ErrExists; an id or a project unfit (see SessionOptions) is a
// *planexec.ConfigurationError. Only a person may create a session (see
// Send).
func (c *Chat) Create(ctx context.Context, person planexec.Delegation, opts SessionOptions) (Session, error) {
	if err := c.person(ctx, person); err != nil {
		return Session{}, err
	}
	if err := c.open(); err != nil {
		return Session{}, err
	}
	if opts.ID == "" {
		opts.ID = uuid.NewString()
	}
	if why := idProblem(opts.ID); why != "" {
		return Session{}, &planexec.ConfigurationError{Why: "the session id " + why}
	}
	if why := projectProblem(opts.Project); why != "" {
		return Session{}, &planexec.ConfigurationError{Why: "the session's project " + why}
	}
	doc := &sessionDoc{CreatedBy: person.User, Skill: opts.Skill, Project: opts.Project}
	now := c.cfg.Now()
	rec := store.SessionRecord{Tenant: person.Tenant, ID: opts.ID, Doc: doc.encode(), Created: now, Updated: now}
	if err := c.cfg.Store.CreateSession(ctx, rec); err != nil {
		return Session{}, err
	}
	return c.Session(ctx, person.Tenant, opts.ID)
}

// Session returns where a session stands. A session not stored for the
// tenant is ErrNoSession. A turn whose process stopped is repaired first
// (see Send), so a session never looks running when no turn runs it.
func (c *Chat) Session(ctx context.Context, tenant, id string) (Session, error) {
	rec, doc, err := c.load(ctx, tenant, id)
	if err != nil {
		return Session{}, err
	}
	if rec.Turn.Holder != "" && !rec.Turn.Held(c.cfg.Now()) {
		if err := c.repair(ctx, rec, doc); err != nil && !errors.Is(err, store.ErrTurnHeld) {
			return Session{}, err
		}
		if rec, doc, err = c.load(ctx, tenant, id); err != nil {
			return Session{}, err
		}
	}
	return sessionOf(rec, doc, c.cfg.Now()), nil
}

// SessionFor is Session as person may see it: its Summary only when the
// planner working for them would be sent it (made for them, or from reads
// and outcomes they could all have read; see Authority in the package
// documentation), otherwise none. A person's client reads the session this
// way; Session is the whole record, for the service.
func (c *Chat) SessionFor(ctx context.Context, person planexec.Delegation, id string) (Session, error) {
	s, err := c.Session(ctx, person.Tenant, id)
	if err != nil || s.Summary == nil {
		return s, err
	}
	j, err := c.judgeFor(ctx, person, id)
	if err != nil {
		return Session{}, err
	}
	if !j.usable(s.Summary) {
		s.Summary = nil
	}
	return s, nil
}

// sessionOf is where a session stands, as stored at now.
func sessionOf(rec *store.SessionRecord, doc *sessionDoc, now time.Time) Session {
	return Session{
		ID: rec.ID, Tenant: rec.Tenant, CreatedBy: doc.CreatedBy, Skill: doc.Skill, Project: doc.Project,
		Created: rec.Created, Updated: rec.Updated, Seq: rec.Seq,
		Running: rec.Turn.Held(now), Turns: doc.Turns, Usage: doc.Usage,
		Compactions: doc.Compactions, Summary: doc.Summary,
	}
}

// load reads a session and its document.
func (c *Chat) load(ctx context.Context, tenant, id string) (*store.SessionRecord, *sessionDoc, error) {
	rec, err := c.cfg.Store.Session(ctx, tenant, id)
	if errors.Is(err, store.ErrNoRecord) {
		return nil, nil, ErrNoSession
	}
	if err != nil {
		return nil, nil, err
	}
	doc, err := decodeDoc(&rec)
	if err != nil {
		return nil, nil, err
	}
	return &rec, doc, nil
}

// person refuses a delegation that is not a person's, and a call made from
// inside a tool's execution (ErrInTool).
func (c *Chat) person(ctx context.Context, d planexec.Delegation) error {
	if inTool(ctx) {
		return ErrInTool
	}
	return c.isPerson(d)
}

// isPerson refuses a delegation that is not a person's.
func (c *Chat) isPerson(d planexec.Delegation) error {
	if d.Agent != "" {
		return ErrNotPerson
	}
	if d.User == "" {
		return &planexec.DelegationError{Why: "the person is not named (Delegation.User)"}
	}
	return nil
}

// toolsKey marks the contexts the chat runs tools under: a turn's, and an
// apply's execution.
type toolsKey struct{}

// runningTools is ctx marked as one the chat runs tools under.
func runningTools(ctx context.Context) context.Context {
	return context.WithValue(ctx, toolsKey{}, true)
}

// inTool reports whether ctx is one a tool runs under: one the chat runs
// tools under, or a step's of any executor.
func inTool(ctx context.Context) bool {
	if ctx.Value(toolsKey{}) != nil {
		return true
	}
	_, ok := planexec.CurrentStep(ctx)
	return ok
}

// projectProblem says what makes a session's project unfit, or "": it goes
// into the planner's instructions, as one line.
func projectProblem(p string) string {
	switch {
	case !utf8.ValidString(p):
		return "is not valid UTF-8"
	case utf8.RuneCountInString(p) > MaxProjectRunes:
		return fmt.Sprintf("is longer than %d characters", MaxProjectRunes)
	case strings.IndexFunc(p, unicode.IsControl) >= 0:
		return "holds a control character"
	}
	return ""
}

// MaxSessionID is the longest session id, in bytes.
const MaxSessionID = 128

// idProblem says what makes a session id unfit, or "". An id is letters,
// digits, '.', '_' and '-': it goes into URLs and run ids as it is, so it
// holds nothing a path, a query or a run id would read as its own.
func idProblem(id string) string {
	if len(id) > MaxSessionID {
		return fmt.Sprintf("is longer than %d bytes", MaxSessionID)
	}
	for i, r := range id {
		switch {
		case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', '0' <= r && r <= '9':
		case i == 0:
			return "does not start with a letter or digit" // "..", say, would read as a path's parent
		case r == '.', r == '_', r == '-':
		default:
			return "holds a character other than letters, digits, '.', '_' and '-'"
		}
	}
	return ""
}

// clip cuts s for an error message.
func clip(s string) string {
	if len(s) <= 64 {
		return s
	}
	cut := 64
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// notify wakes the session's watchers in this process.
func (c *Chat) notify(k sessionKey) {
	c.mu.Lock()
	if ch, ok := c.wake[k]; ok {
		close(ch)
		delete(c.wake, k)
	}
	c.mu.Unlock()
}

// woken returns a channel closed at the session's next entries.
func (c *Chat) woken(k sessionKey) <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch, ok := c.wake[k]
	if !ok {
		ch = make(chan struct{})
		c.wake[k] = ch
	}
	return ch
}
