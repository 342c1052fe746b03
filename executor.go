package planexec

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/planexec/planexec/store"
)

// Config builds an Executor. Every field but Tools is optional.
type Config struct {
	// Tools a plan may call, each with its contract (see NewTool). A run's
	// delegation may narrow them (Delegation.Scope).
	Tools []*Tool
	// Store keeps what a run must not lose: plans and step records, the
	// claims that keep an effect from happening twice, people's decisions,
	// and, where the store has them, histories, ceilings' windows, and what
	// lists, prunes and recovers runs (see package store). Default: a store
	// in memory (store/memory), for the life of the executor.
	Store store.Store
	// Ladder decides the steps of classified tools. Default: none; every
	// step is decided by its contract (Irreversible, RequireApproval).
	Ladder *AutonomyLadder
	// Gate asks a person. NewExecutor requires one when a tool is
	// irreversible or requires approval and no autonomy class covers it; a
	// ladder that escalates with no gate fails the run with a
	// *ConfigurationError.
	Gate ApprovalGate
	// Authorizer is asked before each step whether the delegation still
	// covers it (revocation). Default: none.
	Authorizer Authorizer
	// Observer sees every run's events live. Default: none; Run.Events reads
	// them after, and WithObserver watches one run.
	Observer Observer
	// Concurrency bounds how many steps of one run run at once; 1 runs them
	// one at a time in dependency order. Default: Limits.MaxSteps (24), so no
	// plan the limits accept waits on the bound: tools are mostly remote
	// calls, and a plan's width is its own business.
	Concurrency int
	// MaxReplans bounds how many times Run.Plan asks again after a refusal.
	// Default: 2; NoReplans asks once only.
	MaxReplans int
	// Limits bound what validation accepts. Zero fields take their defaults.
	Limits Limits
	// Lease is how long an idempotency claim holds without renewal; it is
	// renewed while the tool runs. Default: 1 minute.
	Lease time.Duration
	// HandBackLease is how long the claim of a call handed back to the
	// run's caller (NewClientTool) waits for its result: past it, an
	// irreversible call is in doubt to anyone else who asks, and a
	// reversible one may be handed back anew. Default: 24 hours.
	HandBackLease time.Duration
	// Holder names this executor in idempotency claims. Default: host name,
	// process id and a random suffix. Each execution adds its own suffix.
	Holder string
	// Now is the clock. Default: time.Now.
	Now func() time.Time
	// PollInterval is how often Run.Follow asks the store for new events.
	// Default: 250ms.
	PollInterval time.Duration
	// StepTimeout, when positive, bounds each tool's call: past it the
	// call's context is done with ErrStepTimeout as its cause, and a tool
	// that returns then fails the step (in doubt if it is irreversible and
	// does not say ErrNotApplied). Default: none.
	StepTimeout time.Duration
	// MaxRounds bounds a run of rounds (Run.Do): past it, the planner is
	// asked for an answer from the work done. Default: 15.
	MaxRounds int
	// TokenBudget, when positive, bounds the tokens one run of rounds may
	// spend on planning: once spent, the planner is asked for an answer
	// from the work done, as at MaxRounds.
	TokenBudget int64
}

// NoReplans, as Config.MaxReplans, asks the planner once and never again.
const NoReplans = -1

// Executor holds what runs share: the tools, the store and the policy. Build
// one per process; it is safe for concurrent use by any number of runs (see
// Executor.Run).
type Executor struct {
	cfg     Config
	tools   map[string]*Tool
	catalog []ToolSpec // every tool, in Config.Tools order
	st      stores     // the store, and what it can do

	executions atomic.Uint64 // numbers executions, to name their holders
}

// NewExecutor checks cfg and builds an executor. A nil tool, two tools with
// one name, or a tool that needs a person's approval with no gate to ask is a
// *ConfigurationError naming the tool. An executor with no tools is allowed:
// it can still decide, resolve and forget runs in its store.
func NewExecutor(cfg Config) (*Executor, error) {
	ex := &Executor{tools: make(map[string]*Tool, len(cfg.Tools))}
	for _, t := range cfg.Tools {
		if t == nil || t.contract == nil {
			return nil, &ConfigurationError{Why: "a nil tool; build tools with NewTool"}
		}
		if _, dup := ex.tools[t.name]; dup {
			return nil, &ConfigurationError{Tool: t.name, Why: "is registered twice"}
		}
		ex.tools[t.name] = t
		if err := cfg.needsGate(t); err != nil {
			return nil, err
		}
		ex.catalog = append(ex.catalog, t.spec())
	}
	cfg.Limits = cfg.Limits.withDefaults()
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = cfg.Limits.MaxSteps
	}
	if cfg.MaxReplans == 0 {
		cfg.MaxReplans = 2
	} else if cfg.MaxReplans < 0 {
		cfg.MaxReplans = 0
	}
	if cfg.Lease <= 0 {
		cfg.Lease = time.Minute
	}
	if cfg.Holder == "" {
		host, _ := os.Hostname()
		cfg.Holder = fmt.Sprintf("%s/%d/%s", host, os.Getpid(), uuid.NewString()[:8])
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = 250 * time.Millisecond
	}
	if cfg.MaxRounds <= 0 {
		cfg.MaxRounds = defaultMaxRounds
	}
	if cfg.HandBackLease <= 0 {
		cfg.HandBackLease = 24 * time.Hour
	}
	ex.st = storesOf(cfg.Store, cfg.Now)
	ex.cfg = cfg
	return ex, nil
}

// needsGate refuses a tool that needs a person's approval when there is no
// gate to ask: irreversible or requiring approval, and in no action class
// whose grants decide it.
func (cfg *Config) needsGate(t *Tool) error {
	if cfg.Gate != nil || (!t.contract.irreversible && !t.contract.approval) {
		return nil
	}
	if cfg.Ladder != nil {
		if _, classified := cfg.Ladder.Classify(t.name); classified {
			return nil
		}
	}
	return &ConfigurationError{Tool: t.name, Why: "needs a person's approval but no approval gate is configured"}
}

// now is the executor's clock, to the microsecond: every time the executor
// writes or compares is at the precision every store keeps.
func (ex *Executor) now() time.Time { return ex.cfg.Now().Truncate(time.Microsecond) }

// spec describes t to a planner.
func (t *Tool) spec() ToolSpec {
	return ToolSpec{Name: t.name, Description: t.description, Irreversible: t.contract.irreversible,
		Schema: t.contract.schema, Output: t.outSchema, Strict: t.contract.strict}
}

// holder names one execution in the claims it takes: two executions never
// share a name, so one never mistakes the other's claim for its own.
func (ex *Executor) holder() string {
	return ex.cfg.Holder + "/" + strconv.FormatUint(ex.executions.Add(1), 36)
}

// Result is what a run did.
type Result struct {
	RunID    string
	PlanID   string
	Revision int
	// Steps holds each step that finished or failed, by step id.
	Steps map[string]StepResult
	// Complete is true when every step of the plan finished; for a run of
	// rounds (Run.Do), when the planner answered.
	Complete bool
	// Round is the round of a run of rounds the result is of: its plan and
	// steps are that round's.
	Round int
	// Answer is the planner's answer that ended a run of rounds. AtLimit
	// tells that it was asked for at the bound (Config.MaxRounds or
	// TokenBudget), from the work done.
	Answer  string
	AtLimit bool
}

// StepResult is one step's result.
type StepResult struct {
	Tool   string
	Status StepStatus
	// Outcome is what the tool returned, as JSON.
	Outcome json.RawMessage
	// Replayed is true when the outcome came from the record instead of a
	// new call.
	Replayed bool
	// ApprovedBy names the person who cleared the step, if one did.
	ApprovedBy string
	// Grant names the autonomy grant the step acted under, if any.
	Grant string
	// Key is the step's idempotency key: what Run.Resolve takes if the step
	// is left in doubt.
	Key Key
	// Err is the step's error, when it failed.
	Err error
}

// Outcome decodes what step returned into v. A step that did not finish is
// ErrNoOutcome.
func (r *Result) Outcome(step string, v any) error {
	s, ok := r.Steps[step]
	if !ok || s.Status != StepDone {
		return fmt.Errorf("planexec: step %s: %w", quote(step), ErrNoOutcome)
	}
	return json.Unmarshal(s.Outcome, v)
}

// StatusOf is where a run stands after Execute, Resume or Do returned err,
// as the store records it (but for a run of rounds whose planner failed, or
// kept writing refused plans, after its first round: the store keeps it
// planning, for Do to go on with): completed (nil), awaiting approval (an
// *ApprovalPendingError), awaiting a reply (an *AwaitingReplyError),
// awaiting tool results (a *ToolCallPendingError), in doubt (a step's effect may have landed),
// interrupted (the run's context ended, or a live holder has a step: resume
// it later), failed (anything else).
func StatusOf(err error) RunStatus {
	var (
		pending *ApprovalPendingError
		reply   *AwaitingReplyError
		calls   *ToolCallPendingError
	)
	switch {
	case err == nil:
		return RunCompleted
	case errors.Is(err, ErrRunBusy):
		return RunRunning // by another call, or another execution
	case errors.As(err, &pending):
		return RunAwaitingApproval
	case errors.As(err, &reply):
		return RunAwaitingReply
	case errors.As(err, &calls):
		return RunAwaitingTool
	}
	status, _ := endStatus(context.Background(), err)
	return status
}

// endStatus is the status of a run whose execution ended in err: in doubt
// (waiting for its keys to be resolved) when a step's effect may have
// landed, interrupted when ctx ended it or a live holder has a step, failed
// otherwise.
func endStatus(ctx context.Context, err error) (store.RunStatus, []store.Wait) {
	if waits := waitsOf(err); waits != nil {
		return store.RunInDoubt, waits
	}
	if ctx.Err() != nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrInFlight) {
		return store.RunInterrupted, nil
	}
	return store.RunFailed, nil
}

// awaitsCaller returns the approval requests and the tool calls of err's
// *ApprovalPendingErrors and *ToolCallPendingErrors; ok is true when every
// error joined in err is one of them.
func awaitsCaller(err error) (reqs []ApprovalRequest, calls []ToolCall, docs map[string]json.RawMessage, ok bool) {
	if err == nil {
		return nil, nil, nil, false
	}
	for _, e := range joined(err) {
		switch p := e.(type) {
		case *ApprovalPendingError:
			reqs = append(reqs, p.Requests...)
		case *ToolCallPendingError:
			calls = append(calls, p.Calls...)
			if docs == nil {
				docs = map[string]json.RawMessage{}
			}
			maps.Copy(docs, p.docs)
		default:
			return nil, nil, nil, false
		}
	}
	return reqs, calls, docs, true
}

// waitsOf lists the keys in doubt among err's *IndeterminateOutcomeErrors,
// however they are joined or wrapped.
func waitsOf(err error) []store.Wait {
	var waits []store.Wait
	var walk func(error)
	walk = func(err error) {
		switch e := err.(type) {
		case nil:
		case *IndeterminateOutcomeError:
			if e.InDoubt {
				waits = append(waits, store.Wait{StepID: e.Step, Tool: e.Tool, Key: e.Key.Digest})
			}
		case interface{ Unwrap() []error }:
			for _, err := range e.Unwrap() {
				walk(err)
			}
		case interface{ Unwrap() error }:
			walk(e.Unwrap())
		}
	}
	walk(err)
	return waits
}

func countDone(res *Result) int {
	n := 0
	for _, s := range res.Steps {
		if s.Status == StepDone {
			n++
		}
	}
	return n
}
