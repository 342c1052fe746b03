package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/shopspring/decimal"

	"github.com/planexec/planexec/store"
)

// LinearizableOptions tunes [Linearizable]. The zero value is the
// defaults.
type LinearizableOptions struct {
	// Clients is how many goroutines call the store at once. Default 8.
	Clients int
	// Ops is how many operations each client does in each of the two
	// checks. Default 80.
	Ops int
	// Cancel is the fraction of operations whose context is cancelled 0 to
	// 2ms after the call starts. Default 0.2; a negative value cancels none.
	Cancel float64
	// Kill, if set, kills the store's connections to its database (and no
	// one else's). It is called from a goroutine of its own at random
	// moments while the clients run, KillEvery apart at most. Any
	// operation may then fail, so a failure is an unknown outcome whichever
	// operation it is; without Kill only a cancelled operation may fail.
	Kill func(ctx context.Context) error
	// KillEvery is the longest pause between two kills. Default 200ms.
	KillEvery time.Duration
}

func (o LinearizableOptions) withDefaults() LinearizableOptions {
	if o.Clients <= 0 {
		o.Clients = 8
	}
	if o.Ops <= 0 {
		o.Ops = 80
	}
	if o.Cancel == 0 {
		o.Cancel = 0.2
	}
	if o.KillEvery <= 0 {
		o.KillEvery = 200 * time.Millisecond
	}
	return o
}

// Linearizable checks, with porcupine, that a store's claims and its spends
// are linearizable: that concurrent clients, some of whose calls are
// cancelled part way (and whose connections o.Kill kills), get answers that
// one sequential claim of each key (store.ClaimRow's state machine) and one
// sequential ledger of each grant could have given, in an order that keeps
// every call that returned before another started ahead of it. A call that
// failed with no typed error may or may not have taken effect: it is
// checked as a call that never returns, whose effect may land at any point
// after it started, or not at all.
//
// Claims run in phases on a clock only the check moves, between phases, so
// each call's time is known and leases run out when the check says: some
// leases outlast a phase or two, some the whole check. Keys change every
// few phases, so that completed keys do not settle the whole check; each
// key has a twin of the same digest in a second tenant. Spends need no
// clock: each names its own time.
//
// The check fails too when the history is too thin to mean much: too few
// known outcomes, or an answer the state machine can give (held, in doubt,
// fenced, in flight…) never seen. On a failure the history of each key or
// grant that no order explains is logged, and porcupine's visualization of
// the whole history is written to the test's artifact directory.
func Linearizable(t *testing.T, open Open, o LinearizableOptions) {
	o = o.withDefaults()
	t.Run("Claims", func(t *testing.T) { linearizableClaims(t, open, o) })
	t.Run("Spends", func(t *testing.T) { linearizableSpends(t, open, o) })
}

// The operations the checks call.
type linKind int

const (
	linClaim linKind = iota
	linExtend
	linComplete
	linRelease
	linResolve
	linSpend
	linSpent
)

// linIn is an operation's input: what was called, with the clock's time
// during the call.
type linIn struct {
	kind    linKind
	key     store.Key
	now     time.Time
	req     store.ClaimRequest // Claim
	epoch   int64              // Extend, Complete, Release
	lease   time.Duration      // Extend
	outcome json.RawMessage    // Complete
	inDoubt bool               // Release
	run     string             // Resolve
	res     store.Resolution   // Resolve

	spend  store.Spend // Spend; Spent's grant and time
	except []string    // Spent
}

// linOut is what an operation returned. unknown marks a failure that says
// nothing of whether the operation took effect.
type linOut struct {
	claim   store.Claim
	spent   decimal.Decimal
	err     error
	unknown bool
}

// linKnown are the errors a store answers with when it did what it was asked
// and found it not allowed: outcomes the model must explain.
var linKnown = map[string]error{"ErrNoRecord": store.ErrNoRecord, "ErrFenced": store.ErrFenced, "ErrInFlight": store.ErrInFlight,
	"ErrCompleted": store.ErrCompleted, "ErrCeiling": store.ErrCeiling}

// linErrName names err by the known error it is, or "" for none.
func linErrName(err error) string {
	for name, known := range linKnown {
		if errors.Is(err, known) {
			return name
		}
	}
	return ""
}

func linTyped(err error) bool { return linErrName(err) != "" }

// linOpNames name the operations in the counts of outcomes.
var linOpNames = map[linKind]string{linClaim: "claim", linExtend: "extend", linComplete: "complete", linRelease: "release",
	linResolve: "resolve", linSpend: "spend", linSpent: "spent"}

// linOp is one recorded operation.
type linOp struct {
	client      int
	in          linIn
	out         linOut
	call, ret   int64
	faulted     bool
	failedPlain bool // failed with an error that is no *store.Error
}

// linHistory collects one check's operations and faults.
type linHistory struct {
	t     *testing.T
	o     LinearizableOptions
	start time.Time
	mu    sync.Mutex
	ops   []linOp
}

func (h *linHistory) since() int64 { return int64(time.Since(h.start)) }

// do runs fn as an operation of client, cancelling its context shortly after
// the call for a fraction of operations, and records it.
func (h *linHistory) do(ctx context.Context, rng *rand.Rand, client int, in linIn, fn func(ctx context.Context) linOut) linOut {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var stop func()
	faulted := rng.Float64() < h.o.Cancel
	if faulted {
		fired := make(chan struct{})
		tm := time.AfterFunc(time.Duration(rng.Int64N(int64(2*time.Millisecond)+1)), func() {
			cancel()
			close(fired)
		})
		stop = func() {
			if !tm.Stop() {
				<-fired // so that no timer's goroutine outlives the call
			}
		}
	}
	call := h.since()
	out := fn(ctx)
	ret := h.since()
	if stop != nil {
		stop()
	}
	op := linOp{client: client, in: in, out: out, call: call, ret: ret, faulted: faulted}
	if out.err != nil && !linTyped(out.err) {
		var se *store.Error
		op.failedPlain = !errors.As(out.err, &se)
		op.out.unknown = true
		op.ret = math.MaxInt64 // it may take effect at any time after its call, or never
	}
	h.mu.Lock()
	h.ops = append(h.ops, op)
	h.mu.Unlock()
	return op.out
}

// killing calls o.Kill at random moments until the returned stop is called;
// stop waits for the killer and returns how often it killed.
func (h *linHistory) killing(seed uint64) (stop func() int) {
	if h.o.Kill == nil {
		return func() int { return 0 }
	}
	ctx, cancel := context.WithCancel(h.t.Context())
	done := make(chan struct{})
	var kills int
	var failed error
	go func() {
		defer close(done)
		rng := rand.New(rand.NewPCG(seed, 0xdead))
		tm := time.NewTimer(0)
		defer tm.Stop()
		for {
			tm.Reset(time.Duration(rng.Int64N(int64(h.o.KillEvery) + 1)))
			select {
			case <-ctx.Done():
				return
			case <-tm.C:
			}
			if err := h.o.Kill(ctx); err != nil {
				if ctx.Err() == nil {
					failed = err
				}
				return
			}
			kills++
		}
	}()
	return func() int {
		cancel()
		<-done
		if failed != nil {
			h.t.Errorf("killing connections: %v", failed)
		}
		return kills
	}
}

// check runs porcupine over the history, checks it is thick enough, and
// reports what it saw.
func (h *linHistory) check(model porcupine.Model, partitionOf func(linIn) string, label func(linOp) string, want []string, kills int) {
	t := h.t
	t.Helper()
	var ops []porcupine.Operation
	counts := map[string]int{}
	unknown, faulted := 0, 0
	for _, op := range h.ops {
		// A read that failed changed nothing and told nothing: left out, it
		// spares the checker a branch.
		if !(op.out.unknown && op.in.kind == linSpent) {
			ops = append(ops, porcupine.Operation{ClientId: op.client, Input: op.in, Call: op.call, Output: op.out, Return: op.ret})
		}
		if op.faulted {
			faulted++
		}
		switch {
		case op.out.unknown:
			unknown++
			if op.failedPlain {
				t.Errorf("%s failed with %v, not a *store.Error", model.DescribeOperation(op.in, op.out), op.out.err)
			}
			if !op.faulted && h.o.Kill == nil {
				t.Errorf("%s failed, though neither cancelled nor killed: %v", model.DescribeOperation(op.in, op.out), op.out.err)
			}
		default:
			counts[label(op)]++
		}
	}
	t.Logf("%d operations: %d cancelled 0-2ms after the call, %d connection kills, %d unknown outcomes; known: %v",
		len(h.ops), faulted, kills, unknown, counts)

	began := time.Now()
	res, info := porcupine.CheckOperationsVerbose(model, ops, linCheckTimeout)
	t.Logf("porcupine: %s in %v", res, time.Since(began).Round(time.Millisecond))
	if res != porcupine.Ok {
		why := "not linearizable"
		if res == porcupine.Unknown {
			// Not proven wrong, but a check that cannot decide shows nothing.
			why = fmt.Sprintf("not decided within %v", linCheckTimeout)
		} else {
			h.explain(model, partitionOf)
		}
		path := filepath.Join(t.ArtifactDir(), "history.html")
		if err := porcupine.VisualizePath(model, info, path); err != nil {
			t.Errorf("writing the visualization: %v", err)
		}
		t.Errorf("the history is %s; porcupine's visualization: %s", why, path)
	}

	// A history of failures, or one that never reached an answer, would
	// pass without showing anything.
	if known := len(h.ops) - unknown; known < len(h.ops)/2 {
		t.Errorf("only %d of %d operations have a known outcome", known, len(h.ops))
	}
	for _, w := range want {
		if counts[w] == 0 {
			t.Errorf("no operation had the outcome %q: the history does not show that the store gets it right", w)
		}
	}
}

// linCheckTimeout bounds porcupine's search. Histories here take it
// milliseconds; the bound only keeps a pathological one from hanging CI.
const linCheckTimeout = 30 * time.Second

// linExplained is how many histories of keys or grants explain logs in full.
const linExplained = 3

// explain logs the history of each key or grant that porcupine finds no
// order for, in the order the calls were made: the first few in full, the
// others by name.
func (h *linHistory) explain(model porcupine.Model, partitionOf func(linIn) string) {
	parts := map[string][]porcupine.Operation{}
	var names []string
	for _, op := range h.ops {
		p := partitionOf(op.in)
		if _, ok := parts[p]; !ok {
			names = append(names, p)
		}
		parts[p] = append(parts[p], porcupine.Operation{ClientId: op.client, Input: op.in, Call: op.call, Output: op.out, Return: op.ret})
	}
	one := model
	one.Partition = nil
	var shown int
	var others []string
	for _, p := range names {
		ops := parts[p]
		if porcupine.CheckOperationsTimeout(one, ops, linCheckTimeout) == porcupine.Ok {
			continue
		}
		if shown == linExplained {
			others = append(others, p)
			continue
		}
		shown++
		sort.SliceStable(ops, func(i, j int) bool { return ops[i].Call < ops[j].Call })
		var b strings.Builder
		for _, op := range ops {
			ret := "never"
			if op.Return != math.MaxInt64 {
				ret = fmt.Sprintf("%.3fms", float64(op.Return)/1e6)
			}
			fmt.Fprintf(&b, "\n  client %d [%.3fms, %s] %s", op.ClientId, float64(op.Call)/1e6, ret, model.DescribeOperation(op.Input, op.Output))
		}
		h.t.Errorf("no sequential order explains the history of %s:%s", p, b.String())
	}
	if len(others) > 0 {
		h.t.Errorf("nor those of %s", strings.Join(others, ", "))
	}
}

// Claims.

// The claims check's clock moves a second between phases; leases run out a
// phase or two after they are taken, or never.
const (
	linPhase        = time.Second
	linOpsPerPhase  = 4
	linPhasesPerGen = 3
)

var linLeases = []time.Duration{500 * time.Millisecond, 1500 * time.Millisecond, time.Hour}

// linKeys are the keys of a generation: three digests, each in two tenants.
func linKeys(gen int) []store.Key {
	var keys []store.Key
	for _, d := range []string{"a", "b", "c"} {
		for _, tenant := range []string{"acme", "globex"} {
			keys = append(keys, store.Key{Tenant: tenant, Digest: fmt.Sprintf("gen%d-%s", gen, d)})
		}
	}
	return keys
}

// linUnclaimed is a key of the generation that is never claimed: writes
// to it are ErrNoRecord.
func linUnclaimed(gen int) store.Key {
	return store.Key{Tenant: "acme", Digest: fmt.Sprintf("gen%d-unclaimed", gen)}
}

// linClaimState is one key's claim: no row, or its row.
type linClaimState struct {
	exists bool
	row    store.ClaimRow
}

// linStepClaim is the sequential model: what in gets from st, and what st
// becomes. It is store.ClaimRow's state machine, with a key that has no row
// answering writes and resolutions with ErrNoRecord.
func linStepClaim(st linClaimState, in linIn) (linClaimState, linOut) {
	row := st.row // Outcome is shared, never written to
	switch in.kind {
	case linClaim:
		if !st.exists {
			row = store.ClaimRow{}
		} else if c, take := row.Answer(in.req, in.now); !take {
			return st, linOut{claim: c}
		}
		c := row.Take(in.req, in.now)
		return linClaimState{true, row}, linOut{claim: c}
	case linResolve:
		if !st.exists {
			return st, linOut{err: store.ErrNoRecord}
		}
		if err := row.Resolve(in.run, in.res, in.now); err != nil {
			return st, linOut{err: err}
		}
		return linClaimState{true, row}, linOut{}
	}
	switch {
	case !st.exists:
		return st, linOut{err: store.ErrNoRecord}
	case !row.Holds(in.epoch):
		return st, linOut{err: store.ErrFenced}
	}
	switch in.kind {
	case linExtend:
		row.LeaseExpires = in.now.Add(in.lease)
	case linComplete:
		row.State, row.Outcome = store.ClaimCompleted, in.outcome
	case linRelease:
		row.Release(in.inDoubt)
	}
	return linClaimState{true, row}, linOut{}
}

// linSameClaim reports whether a store's answer is the model's: the same
// state, epoch and holder, the lease to the millisecond, the outcome as the
// same JSON.
func linSameClaim(want, got store.Claim) bool {
	if want.State != got.State || want.Epoch != got.Epoch || want.Holder != got.Holder || !sameInstant(want.LeaseExpires, got.LeaseExpires) {
		return false
	}
	if len(want.Outcome) == 0 {
		return len(got.Outcome) == 0
	}
	return jsonEqual(want.Outcome, got.Outcome)
}

func linSameErr(want, got error) bool {
	if want == nil || got == nil {
		return want == got
	}
	return errors.Is(got, want)
}

func linClaimModel(base time.Time) porcupine.Model {
	return porcupine.Model{
		Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
			return linPartition(history, func(in linIn) string { return linKeyName(in.key) })
		},
		Init: func() any { return linClaimState{} },
		Step: func(state, input, output any) (bool, any) {
			in, out := input.(linIn), output.(linOut)
			next, want := linStepClaim(state.(linClaimState), in)
			if out.unknown {
				return true, next
			}
			return linSameErr(want.err, out.err) && (in.kind != linClaim || out.err != nil || linSameClaim(want.claim, out.claim)), next
		},
		Equal: func(a, b any) bool {
			x, y := a.(linClaimState), b.(linClaimState)
			r, s := x.row, y.row
			return x.exists == y.exists && r.State == s.State && r.Epoch == s.Epoch && r.Holder == s.Holder && r.Run == s.Run &&
				r.LeaseExpires.Equal(s.LeaseExpires) && bytes.Equal(r.Outcome, s.Outcome)
		},
		Hash: func(state any) uint64 {
			st := state.(linClaimState)
			return uint64(st.row.Epoch)<<3 | uint64(st.row.State)
		},
		DescribeOperation: func(input, output any) string { return linDescribeClaimOp(base, input.(linIn), output.(linOut)) },
		DescribeState: func(state any) string {
			st := state.(linClaimState)
			if !st.exists {
				return "no row"
			}
			r := st.row
			return fmt.Sprintf("%s epoch %d holder %s run %s lease until %s outcome %s",
				linStateName(r.State), r.Epoch, r.Holder, r.Run, linAt(base, r.LeaseExpires), r.Outcome)
		},
	}
}

// linPartition splits a history by key or grant: each is checked alone.
func linPartition(history []porcupine.Operation, of func(linIn) string) [][]porcupine.Operation {
	index := map[string]int{}
	var parts [][]porcupine.Operation
	for _, op := range history {
		p := of(op.Input.(linIn))
		i, ok := index[p]
		if !ok {
			i = len(parts)
			index[p] = i
			parts = append(parts, nil)
		}
		parts[i] = append(parts[i], op)
	}
	return parts
}

func linKeyName(k store.Key) string { return k.Tenant + "/" + k.Digest }

func linStateName(s store.ClaimState) string {
	switch s {
	case store.ClaimFree:
		return "free"
	case store.ClaimAcquired:
		return "acquired"
	case store.ClaimCompleted:
		return "completed"
	case store.ClaimHeld:
		return "held"
	case store.ClaimInDoubt:
		return "in doubt"
	}
	return fmt.Sprintf("state %d", s)
}

// linAt renders a time as an offset from the check's clock's start.
func linAt(base, at time.Time) string {
	if at.IsZero() {
		return "-"
	}
	return "+" + at.Sub(base).String()
}

func linDescribeClaimOp(base time.Time, in linIn, out linOut) string {
	var call string
	switch in.kind {
	case linClaim:
		call = fmt.Sprintf("Claim(%s, holder %s, run %s, lease %v, takeover %v)", linKeyName(in.key), in.req.Holder, in.req.RunID, in.req.Lease, in.req.TakeOver)
	case linExtend:
		call = fmt.Sprintf("Extend(%s, epoch %d, lease %v)", linKeyName(in.key), in.epoch, in.lease)
	case linComplete:
		call = fmt.Sprintf("Complete(%s, epoch %d, %s)", linKeyName(in.key), in.epoch, in.outcome)
	case linRelease:
		call = fmt.Sprintf("Release(%s, epoch %d, in doubt %v)", linKeyName(in.key), in.epoch, in.inDoubt)
	case linResolve:
		call = fmt.Sprintf("Resolve(%s, run %s, applied %v)", linKeyName(in.key), in.run, in.res.Applied)
	}
	call += " at " + linAt(base, in.now)
	switch {
	case out.unknown:
		return call + " -> unknown (" + out.err.Error() + ")"
	case out.err != nil:
		return call + " -> " + out.err.Error()
	case in.kind == linClaim:
		c := out.claim
		return fmt.Sprintf("%s -> %s epoch %d holder %s until %s %s", call, linStateName(c.State), c.Epoch, c.Holder, linAt(base, c.LeaseExpires), c.Outcome)
	}
	return call + " -> ok"
}

// linHints is what the clients of the claims check tell one another: each
// key's last acquisition they saw. It only steers what they ask (a
// resolution by the run that took the key, a write under its newest epoch),
// so that asks succeed often enough to show something; it is no part of
// the check.
type linHints struct {
	mu   sync.Mutex
	last map[store.Key]linTaken
}

type linTaken struct {
	epoch int64
	run   string
}

func (h *linHints) took(key store.Key, epoch int64, run string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if epoch > h.last[key].epoch {
		h.last[key] = linTaken{epoch, run}
	}
}

func (h *linHints) get(key store.Key) (linTaken, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	l, ok := h.last[key]
	return l, ok
}

// linClaimant is one client of the claims check: a holder of its own run,
// remembering the epochs it was given and saw.
type linClaimant struct {
	id        int
	holder    string
	run       string
	rng       *rand.Rand
	hints     *linHints
	held      map[store.Key]int64   // the epoch of its last acquisition of each key
	seen      map[store.Key][]int64 // epochs it saw in answers
	clients   int
	completes int
}

// next picks and runs one operation on the generation's keys at now.
func (c *linClaimant) next(ctx context.Context, h *linHistory, idem store.IdempotencyStore, gen int, now time.Time) {
	rng := c.rng
	keys := linKeys(gen)
	key := keys[rng.IntN(len(keys))]
	// A client goes on mostly with keys it took.
	var mine []store.Key
	for _, k := range keys {
		if _, ok := c.held[k]; ok {
			mine = append(mine, k)
		}
	}
	if len(mine) > 0 && rng.IntN(10) < 6 {
		key = mine[rng.IntN(len(mine))]
	}
	in := linIn{key: key, now: now}
	// Of a hundred operations: 35 claims, 25 resolutions, 13 extensions, 10
	// completions, 17 releases.
	r := rng.IntN(100)
	switch {
	case r < 35:
		in.kind = linClaim
		in.req = store.ClaimRequest{Key: key, RunID: c.run, StepID: "step", Tool: "tool", Holder: c.holder,
			Lease: linLeases[rng.IntN(len(linLeases))], TakeOver: rng.IntN(2) == 0}
		out := h.do(ctx, rng, c.id, in, func(ctx context.Context) linOut {
			cl, err := idem.Claim(ctx, in.req)
			return linOut{claim: cl, err: err}
		})
		switch {
		case out.err != nil:
		case out.claim.State == store.ClaimAcquired:
			c.held[key] = out.claim.Epoch
			c.hints.took(key, out.claim.Epoch, c.run)
		case out.claim.Holder != c.holder:
			delete(c.held, key) // another holder took it since
		}
		if out.err == nil {
			c.seen[key] = append(c.seen[key], out.claim.Epoch)
		}
		return
	case r < 60:
		// Mostly by the run that took the key last, which may resolve it;
		// else by another, which may not.
		in.kind = linResolve
		in.run = c.run
		last, ok := c.hints.get(key)
		switch n := rng.IntN(20); {
		case n == 0:
			in.run = "run-nobody" // a run that never claims
		case n < 4:
			in.run = fmt.Sprintf("run-%d", rng.IntN(c.clients))
		case n < 17 && ok:
			in.run = last.run
		}
		in.res.Applied = rng.IntN(3) == 0
		if in.res.Applied {
			in.res.Outcome = json.RawMessage(fmt.Sprintf(`{"resolved by":%q,"n":%d}`, in.run, rng.IntN(1000)))
		}
		h.do(ctx, rng, c.id, in, func(ctx context.Context) linOut {
			return linOut{err: idem.Resolve(ctx, key, in.run, in.res)}
		})
		return
	}
	// A write under the epoch the client holds, or the newest one taken, or
	// one it saw (often fenced), as an executor's writes are. A client that
	// knows none writes under an early epoch, to the key (whose first claim
	// may be committing meanwhile) or to a key nobody claims.
	last, ok := c.hints.get(key)
	mineEpoch, held := c.held[key]
	n := rng.IntN(4)
	if r >= 73 && r < 83 {
		n /= 2 // a completion mostly by the holder
	}
	switch {
	case held && n < 2:
		in.epoch = mineEpoch
	case ok && n < 3:
		in.epoch = last.epoch
	case len(c.seen[key]) > 0:
		in.epoch = c.seen[key][rng.IntN(len(c.seen[key]))]
	case held:
		in.epoch = mineEpoch
	case ok:
		in.epoch = last.epoch
	case rng.IntN(2) == 0:
		in.epoch = 1 + rng.Int64N(2)
	default:
		key, in.key, in.epoch = linUnclaimed(gen), linUnclaimed(gen), 1+rng.Int64N(2)
	}
	switch {
	case r < 73:
		in.kind = linExtend
		in.lease = linLeases[rng.IntN(len(linLeases))]
		h.do(ctx, rng, c.id, in, func(ctx context.Context) linOut {
			return linOut{err: idem.Extend(ctx, key, in.epoch, in.lease)}
		})
	case r < 83:
		in.kind = linComplete
		c.completes++
		in.outcome = json.RawMessage(fmt.Sprintf(`{"by": %q, "n": %d}`, c.holder, c.completes))
		h.do(ctx, rng, c.id, in, func(ctx context.Context) linOut {
			return linOut{err: idem.Complete(ctx, key, in.epoch, in.outcome)}
		})
	default:
		in.kind = linRelease
		in.inDoubt = rng.IntN(2) == 0
		h.do(ctx, rng, c.id, in, func(ctx context.Context) linOut {
			return linOut{err: idem.Release(ctx, key, in.epoch, in.inDoubt)}
		})
	}
}

func linearizableClaims(t *testing.T, open Open, o LinearizableOptions) {
	clk := NewClock()
	base := clk.Now()
	s := open(t, clk.Now)
	if s.Store == nil {
		t.Fatalf("Open returned no store")
	}
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	h := &linHistory{t: t, o: o, start: time.Now()}
	clients := make([]*linClaimant, o.Clients)
	hints := &linHints{last: map[store.Key]linTaken{}}
	for i := range clients {
		clients[i] = &linClaimant{id: i, holder: fmt.Sprintf("holder-%d", i), run: fmt.Sprintf("run-%d", i), hints: hints,
			rng: rand.New(rand.NewPCG(seed, uint64(i))), held: map[store.Key]int64{}, seen: map[store.Key][]int64{}, clients: o.Clients}
	}
	stopKilling := h.killing(seed)
	phases := (o.Ops + linOpsPerPhase - 1) / linOpsPerPhase
	for p := range phases {
		gen, now := p/linPhasesPerGen, clk.Now()
		var wg sync.WaitGroup
		for _, c := range clients {
			wg.Go(func() {
				for range linOpsPerPhase {
					c.next(t.Context(), h, s.Store, gen, now)
				}
			})
		}
		// The clock moves only once every call of the phase returned, so
		// each call ran at the phase's time. (A statement a server still
		// runs for a call that gave up runs at its call's time too: stores
		// send their clock's time with it.)
		wg.Wait()
		clk.Advance(linPhase)
	}
	kills := stopKilling()

	label := func(op linOp) string {
		in, out := op.in, op.out
		switch {
		case out.err != nil:
			return linOpNames[in.kind] + ": " + linErrName(out.err)
		case in.kind == linClaim:
			return "claim: " + linStateName(out.claim.State)
		}
		return linOpNames[in.kind] + ": ok"
	}
	want := []string{"claim: acquired", "claim: held", "claim: in doubt", "claim: completed",
		"extend: ok", "complete: ok", "release: ok", "resolve: ok",
		"extend: ErrFenced", "complete: ErrFenced", "release: ErrFenced",
		"resolve: ErrInFlight", "resolve: ErrCompleted", "resolve: ErrNoRecord"}
	h.check(linClaimModel(base), func(in linIn) string { return "key " + linKeyName(in.key) }, label, want, kills)
}

// Spends.

// The spends check's grants: each counts spends within linWindow of a
// spend's time up to linCeiling, over times linSlots half-seconds apart, so
// some spends fit and some do not. Keys repeat, with other amounts.
const (
	linWindow     = 2 * time.Second
	linSlots      = 12
	linSpendKeys  = 8
	linOpsPerGen  = 6
	linGrantsEach = 3
)

var (
	linCeiling = decimal.RequireFromString("4")
	linAmounts = []decimal.Decimal{decimal.RequireFromString("0.5"), decimal.RequireFromString("1"),
		decimal.RequireFromString("1.25"), decimal.RequireFromString("2"), decimal.RequireFromString("2.75")}
)

// linStepSpend is the sequential ledger of one grant: the spends recorded,
// in key order. A spend of a recorded key records nothing and succeeds; one
// that would take the window's sum past the ceiling is ErrCeiling.
func linStepSpend(st []store.Spend, in linIn) ([]store.Spend, linOut) {
	sum := func(at time.Time, except []string) decimal.Decimal {
		total := decimal.Zero
		for _, sp := range st {
			if sp.At.After(at.Add(-linWindow)) && !slices.Contains(except, sp.Key) {
				total = total.Add(sp.Amount)
			}
		}
		return total
	}
	if in.kind == linSpent {
		return st, linOut{spent: sum(in.spend.At, in.except)}
	}
	i, found := slices.BinarySearchFunc(st, in.spend.Key, func(sp store.Spend, key string) int { return strings.Compare(sp.Key, key) })
	switch {
	case found && st[i].At.Equal(in.spend.At) && st[i].Amount.Equal(in.spend.Amount):
		return st, linOut{} // the same spend again: recorded already
	case sum(in.spend.At, []string{in.spend.Key}).Add(in.spend.Amount).GreaterThan(linCeiling):
		return st, linOut{err: store.ErrCeiling}
	case found:
		// A recorded key moves to the new time and amount.
		next := slices.Clone(st)
		next[i] = in.spend
		return next, linOut{}
	}
	return slices.Insert(slices.Clone(st), i, in.spend), linOut{}
}

func linSpendModel(base time.Time) porcupine.Model {
	return porcupine.Model{
		Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
			return linPartition(history, func(in linIn) string { return in.spend.Grant })
		},
		Init: func() any { return []store.Spend(nil) },
		Step: func(state, input, output any) (bool, any) {
			in, out := input.(linIn), output.(linOut)
			next, want := linStepSpend(state.([]store.Spend), in)
			if out.unknown {
				return true, next
			}
			return linSameErr(want.err, out.err) && (in.kind != linSpent || out.err != nil || want.spent.Equal(out.spent)), next
		},
		Equal: func(a, b any) bool {
			return slices.EqualFunc(a.([]store.Spend), b.([]store.Spend), func(x, y store.Spend) bool {
				return x.Key == y.Key && x.Amount.Equal(y.Amount) && x.At.Equal(y.At)
			})
		},
		Hash: func(state any) uint64 {
			var h uint64
			for _, sp := range state.([]store.Spend) {
				h = h*31 + uint64(len(sp.Key)) + uint64(sp.Key[len(sp.Key)-1])
			}
			return h
		},
		DescribeOperation: func(input, output any) string {
			in, out := input.(linIn), output.(linOut)
			sp := in.spend
			var call, ret string
			if in.kind == linSpent {
				call = fmt.Sprintf("Spent(%s, at %s, except %v)", sp.Grant, linAt(base, sp.At), in.except)
				ret = out.spent.String()
			} else {
				call = fmt.Sprintf("Spend(%s, key %s, %s at %s)", sp.Grant, sp.Key, sp.Amount, linAt(base, sp.At))
				ret = "ok"
			}
			switch {
			case out.unknown:
				ret = "unknown (" + out.err.Error() + ")"
			case out.err != nil:
				ret = out.err.Error()
			}
			return call + " -> " + ret
		},
		DescribeState: func(state any) string {
			var parts []string
			for _, sp := range state.([]store.Spend) {
				parts = append(parts, fmt.Sprintf("%s:%s@%s", sp.Key, sp.Amount, linAt(base, sp.At)))
			}
			return "{" + strings.Join(parts, " ") + "}"
		},
	}
}

func linearizableSpends(t *testing.T, open Open, o LinearizableOptions) {
	clk := NewClock()
	base := clk.Now()
	s := open(t, clk.Now)
	ceilings, ok := s.Store.(store.CeilingStore)
	if !ok {
		t.Skip("the store keeps no spends (it is no store.CeilingStore)")
	}
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	h := &linHistory{t: t, o: o, start: time.Now()}
	stopKilling := h.killing(seed)
	var wg sync.WaitGroup
	for c := range o.Clients {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(c)))
			for i := range o.Ops {
				// Grants change every few operations of each client, so that
				// no grant's history grows long.
				grant := fmt.Sprintf("grant-%d-%d", i/linOpsPerGen, rng.IntN(linGrantsEach))
				at := base.Add(time.Duration(rng.IntN(linSlots)) * linWindow / 4)
				in := linIn{spend: store.Spend{Grant: grant, At: at}}
				if rng.IntN(5) == 0 {
					// Reads reach past the last spend's window too.
					at = base.Add(time.Duration(rng.IntN(linSlots+8)) * linWindow / 4)
					in.spend.At = at
					in.kind = linSpent
					for k := range linSpendKeys {
						if rng.IntN(8) == 0 {
							in.except = append(in.except, fmt.Sprintf("key-%d", k))
						}
					}
					h.do(t.Context(), rng, c, in, func(ctx context.Context) linOut {
						d, err := ceilings.Spent(ctx, grant, at, linWindow, in.except)
						return linOut{spent: d, err: err}
					})
					continue
				}
				in.kind = linSpend
				// Spends of one grant are counted together whichever
				// tenant's run spent.
				in.spend.Tenant = []string{"acme", "globex"}[rng.IntN(2)]
				in.spend.Key = fmt.Sprintf("key-%d", rng.IntN(linSpendKeys))
				in.spend.Amount = linAmounts[rng.IntN(len(linAmounts))]
				h.do(t.Context(), rng, c, in, func(ctx context.Context) linOut {
					return linOut{err: ceilings.Spend(ctx, in.spend, linWindow, linCeiling)}
				})
			}
		})
	}
	wg.Wait()
	kills := stopKilling()

	label := func(op linOp) string {
		switch {
		case op.in.kind == linSpent && op.out.spent.IsZero():
			return "spent: zero"
		case op.in.kind == linSpent:
			return "spent: more than zero"
		case op.out.err != nil:
			return "spend: " + linErrName(op.out.err)
		}
		return "spend: ok"
	}
	want := []string{"spend: ok", "spend: ErrCeiling", "spent: zero", "spent: more than zero"}
	h.check(linSpendModel(base), func(in linIn) string { return "grant " + in.spend.Grant }, label, want, kills)
}
