// Package memory is a planexec store in process memory: plans, step records,
// idempotency claims, approval decisions and conversations (sessions and
// their transcripts) in one value, for tests and single-process services
// that need no durability.
//
// It has every capability the durable stores have, the one-transaction step
// write (store.StepStore) among them, so code tested against it runs the
// same paths against SQLite or Postgres. It does not outlive the process.
package memory

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/planexec/planexec/store"
)

// Store keeps plans, steps, claims, decisions and conversations in memory. It
// is safe for concurrent use. Build one with New.
type Store struct {
	mu        sync.Mutex
	now       func() time.Time
	runs      map[[2]string]*run
	claims    map[store.Key]*claim
	slab      []claim // claims not yet handed out: see newClaim
	decisions map[[2]string]store.Decision
	histories map[[2]string]*history   // each run's events, in order
	spends    map[string][]store.Spend // by grant
	sessions  map[[2]string]*conversation
}

var (
	_ store.StepStore       = (*Store)(nil)
	_ store.ApprovalStore   = (*Store)(nil)
	_ store.TranscriptStore = (*Store)(nil)
)

// Option configures New.
type Option func(*Store)

// WithClock sets the clock against which claim leases are given and run out.
// Default: time.Now.
func WithClock(now func() time.Time) Option { return func(s *Store) { s.now = now } }

// New returns an empty store.
func New(opts ...Option) *Store {
	s := &Store{
		now:       time.Now,
		runs:      map[[2]string]*run{},
		claims:    map[store.Key]*claim{},
		decisions: map[[2]string]store.Decision{},
		histories: map[[2]string]*history{},
		spends:    map[string][]store.Spend{},
		sessions:  map[[2]string]*conversation{},
	}
	for _, o := range opts {
		o(s)
	}
	if s.now == nil {
		s.now = time.Now
	}
	return s
}

// run is what the store keeps of one run: its record, with Steps left nil,
// and its steps, carved from slabs as claims are.
type run struct {
	rec   store.PlanRecord
	steps map[string]*store.StepRecord
	slab  []store.StepRecord // step records not yet handed out
}

// SavePlan implements store.PlanStore. A run another holder keeps, its
// lease running past the save's time (rec.Updated), is ErrFenced, and so is
// a save with Update whose revision (rec.Rev) is no longer the run's; the
// holder is kept only with a lease (a zero LeaseExpires lets the run go).
// The record is stored at revision rec.Rev+1.
func (s *Store) SavePlan(_ context.Context, rec *store.PlanRecord) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := [2]string{rec.Tenant, rec.RunID}
	r, ok := s.runs[k]
	switch {
	case !ok && rec.Update:
		return store.ErrNoRecord
	case ok && rec.Create:
		return store.ErrFenced // made by another execution
	case ok && rec.Update && r.rec.Rev != rec.Rev:
		return store.ErrFenced // saved since the save's revision was read
	case ok && heldByAnother(&r.rec, rec.Holder, savedAt(rec, s.now)):
		return store.ErrFenced
	}
	if ok && r.rec.PlanID == rec.PlanID {
		plan, created := r.rec.Plan, r.rec.Created
		r.rec = *rec
		r.rec.Created = created
		// A run saves its plan as it starts and again as it ends: keep the
		// copy already made when nothing in the plan changed.
		if r.rec.Plan = plan; !bytes.Equal(plan, rec.Plan) {
			r.rec.Plan = clone(rec.Plan)
		}
	} else {
		r = &run{rec: *rec, steps: map[string]*store.StepRecord{}}
		r.rec.Plan = clone(rec.Plan)
		s.runs[k] = r
	}
	if d := r.rec.Delegation; ok && bytes.Equal(d, rec.Delegation) {
		r.rec.Delegation = d
	} else {
		r.rec.Delegation = clone(rec.Delegation)
	}
	r.rec.Waiting = cloneWaits(rec.Waiting)
	r.rec.Steps, r.rec.Events, r.rec.Update, r.rec.Create = nil, nil, false, false
	r.rec.Rev = rec.Rev + 1
	if r.rec.LeaseExpires.IsZero() {
		r.rec.Holder = "" // the run is let go
	}
	s.appendEvents(k, rec.Events)
	return nil
}

// heldByAnother reports whether rec is held, at now, by an execution
// other than holder: its holder's lease has not run out.
func heldByAnother(rec *store.PlanRecord, holder string, now time.Time) bool {
	return rec.Holder != "" && rec.Holder != holder && rec.LeaseExpires.After(now)
}

// SaveStep implements store.PlanStore.
func (s *Store) SaveStep(_ context.Context, tenant, runID string, step store.StepRecord) error {
	step.Outcome = clone(step.Outcome)
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.runs[[2]string{tenant, runID}]
	if !ok {
		return store.ErrNoRecord
	}
	r.saveStep(step)
	return nil
}

// saveStep writes a step record whose outcome is the store's own copy.
// Callers hold the store's mu.
func (r *run) saveStep(step store.StepRecord) {
	p, ok := r.steps[step.StepID]
	if !ok {
		if len(r.slab) == 0 {
			r.slab = make([]store.StepRecord, 16)
		}
		p, r.slab = &r.slab[0], r.slab[1:]
		r.steps[step.StepID] = p
	}
	*p = step
	if step.Finished.After(r.rec.Updated) {
		r.rec.Updated = step.Finished
	}
}

// LoadPlan implements store.PlanStore.
func (s *Store) LoadPlan(_ context.Context, tenant, runID string) (*store.PlanRecord, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.runs[[2]string{tenant, runID}]
	if !ok {
		return nil, store.ErrNoRecord
	}
	c := r.rec
	c.Plan = clone(r.rec.Plan)
	c.Delegation = clone(r.rec.Delegation)
	c.Waiting = cloneWaits(r.rec.Waiting)
	c.Steps = make(map[string]store.StepRecord, len(r.steps))
	for id, st := range r.steps {
		st := *st
		st.Outcome = clone(st.Outcome)
		c.Steps[id] = st
	}
	return &c, nil
}

// Forget implements store.PlanStore.
func (s *Store) Forget(_ context.Context, tenant, runID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.runs, [2]string{tenant, runID})
	delete(s.histories, [2]string{tenant, runID})
	return nil
}

// Decision implements store.ApprovalStore.
func (s *Store) Decision(_ context.Context, tenant, requestID string) (store.Decision, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.decisions[[2]string{tenant, requestID}]
	if !ok {
		return store.Decision{}, store.ErrNoRecord
	}
	return d, nil
}

// SaveDecision implements store.ApprovalStore.
func (s *Store) SaveDecision(_ context.Context, tenant string, d store.Decision) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := [2]string{tenant, d.RequestID}
	if prev, ok := s.decisions[k]; ok && prev.Keeps(d) {
		return store.ErrDecided
	}
	s.decisions[k] = d
	return nil
}

// claim is a key's claim row, with what Prune needs to know of it.
type claim struct {
	store.ClaimRow
	perTenant bool      // an effect once per tenant: never pruned
	updated   time.Time // when it was last written
}

// Claim implements store.IdempotencyStore. A request that peeks
// (req.Peek) is answered from the key's row, or from none, and changes
// nothing.
func (s *Store) Claim(_ context.Context, req store.ClaimRequest) (store.Claim, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	c, ok := s.claims[req.Key]
	var row store.ClaimRow // a key nobody claimed
	if ok {
		row = c.ClaimRow
	}
	if answer, take := row.Answer(req, now); !take {
		answer.Outcome = clone(answer.Outcome)
		return answer, nil
	}
	if !ok {
		c = s.newClaim()
		s.claims[req.Key] = c
	}
	c.perTenant, c.updated = req.PerTenant, now
	return c.Take(req, now), nil
}

// newClaim returns a new claim. Claims are carved from slabs: one
// allocation for many steps' claims (a pruned claim's slot is not reused).
// Callers hold s.mu.
func (s *Store) newClaim() *claim {
	if len(s.slab) == 0 {
		s.slab = make([]claim, 64)
	}
	c := &s.slab[0]
	s.slab = s.slab[1:]
	return c
}

// held returns the claim if epoch still holds it, marked written now.
// Callers hold s.mu.
func (s *Store) held(key store.Key, epoch int64) (*claim, error) {
	c, ok := s.claims[key]
	if !ok {
		return nil, store.ErrNoRecord
	}
	if !c.Holds(epoch) {
		return nil, store.ErrFenced
	}
	c.updated = s.now()
	return c, nil
}

// Extend implements store.IdempotencyStore.
func (s *Store) Extend(_ context.Context, key store.Key, epoch int64, lease time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := s.held(key, epoch)
	if err != nil {
		return err
	}
	c.LeaseExpires = s.now().Add(lease)
	return nil
}

// Complete implements store.IdempotencyStore.
func (s *Store) Complete(_ context.Context, key store.Key, epoch int64, outcome json.RawMessage) error {
	outcome = clone(outcome)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.complete(key, epoch, outcome)
}

// complete records outcome, the store's own copy. Callers hold s.mu.
func (s *Store) complete(key store.Key, epoch int64, outcome json.RawMessage) error {
	c, err := s.held(key, epoch)
	if err != nil {
		return err
	}
	c.State, c.Outcome = store.ClaimCompleted, outcome
	return nil
}

// Release implements store.IdempotencyStore.
func (s *Store) Release(_ context.Context, key store.Key, epoch int64, inDoubt bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.release(key, epoch, inDoubt)
}

func (s *Store) release(key store.Key, epoch int64, inDoubt bool) error {
	c, err := s.held(key, epoch)
	if err != nil {
		return err
	}
	c.Release(inDoubt)
	return nil
}

// Resolve implements store.IdempotencyStore.
func (s *Store) Resolve(_ context.Context, key store.Key, run string, r store.Resolution) error {
	r.Outcome = clone(r.Outcome)
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.claims[key]
	if !ok {
		return store.ErrNoRecord
	}
	now := s.now()
	if err := c.Resolve(run, r, now); err != nil {
		return err
	}
	c.updated = now
	return nil
}

// CompleteStep implements store.StepStore: the claim, the step record and
// the events are written together or not at all.
func (s *Store) CompleteStep(_ context.Context, w *store.StepWrite) error {
	rec, outcome := w.Record, w.Outcome
	// One copy serves the claim and the record: the store hands out
	// neither without copying it again.
	same := bytes.Equal(rec.Outcome, outcome) && (rec.Outcome == nil) == (outcome == nil)
	outcome = clone(outcome)
	if same {
		rec.Outcome = outcome
	} else {
		rec.Outcome = clone(rec.Outcome)
	}
	return s.writeStep(w, rec, true, outcome)
}

// ReleaseStep implements store.StepStore: the claim, the step record and
// the events are written together or not at all.
func (s *Store) ReleaseStep(_ context.Context, w *store.StepWrite) error {
	rec := w.Record
	rec.Outcome = clone(rec.Outcome)
	return s.writeStep(w, rec, false, nil)
}

// writeStep ends w's claim (completed with outcome, or released), then
// writes rec, the store's own copy, and w's events; or, when the claim
// cannot be ended or the run has no record, none of them.
func (s *Store) writeStep(w *store.StepWrite, rec store.StepRecord, complete bool, outcome json.RawMessage) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := [2]string{w.Key.Tenant, w.RunID}
	r, ok := s.runs[k]
	if !ok {
		return store.ErrNoRecord
	}
	var err error
	if complete {
		err = s.complete(w.Key, w.Epoch, outcome)
	} else {
		err = s.release(w.Key, w.Epoch, w.InDoubt)
	}
	if err != nil {
		return err
	}
	r.saveStep(rec)
	s.appendEvents(k, w.Events)
	return nil
}

// history is a run's events: their documents one after another in buf,
// each ending where ends says, so appending costs no allocation of its own.
type history struct {
	buf  []byte
	ends []int
	last time.Time // when an event was last appended
}

// appendEvents copies events onto the run's history. Callers hold s.mu.
func (s *Store) appendEvents(k [2]string, events []json.RawMessage) {
	if len(events) == 0 {
		return
	}
	h := s.histories[k]
	if h == nil {
		h = &history{}
		s.histories[k] = h
	}
	size := 0
	for _, e := range events {
		size += len(e)
	}
	// Doubling: append alone grows a large slice by a quarter at a time,
	// and a long history would be copied over and over.
	if need := len(h.buf) + size; need > cap(h.buf) {
		buf := make([]byte, len(h.buf), max(need, 2*cap(h.buf), 1024))
		copy(buf, h.buf)
		h.buf = buf
	}
	for _, e := range events {
		h.buf = append(h.buf, e...)
		h.ends = append(h.ends, len(h.buf))
	}
	h.last = s.now()
}

// AppendEvents implements store.EventStore.
func (s *Store) AppendEvents(_ context.Context, tenant, runID string, events []json.RawMessage) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.appendEvents([2]string{tenant, runID}, events)
	return nil
}

// Events implements store.EventStore.
func (s *Store) Events(_ context.Context, tenant, runID string, after int64, limit int) ([]store.EventRecord, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.histories[[2]string{tenant, runID}]
	after = max(after, 0)
	if h == nil || after >= int64(len(h.ends)) || limit <= 0 {
		return nil, nil
	}
	last := int64(len(h.ends))
	if int64(limit) < last-after {
		last = after + int64(limit)
	}
	out := make([]store.EventRecord, 0, last-after)
	for i := after; i < last; i++ {
		start := 0
		if i > 0 {
			start = h.ends[i-1]
		}
		out = append(out, store.EventRecord{Seq: i + 1, Event: clone(h.buf[start:h.ends[i]])})
	}
	return out, nil
}

// ListRuns implements store.RunLister. It looks at every run of the
// store: the memory store is for tests and small services.
func (s *Store) ListRuns(_ context.Context, tenant string, q store.RunQuery) ([]store.RunSummary, error) {
	s.mu.Lock()
	var out []store.RunSummary
	for k, r := range s.runs {
		if k[0] != tenant || (len(q.Statuses) > 0 && !slices.Contains(q.Statuses, r.rec.Status)) {
			continue
		}
		if !q.AfterUpdated.IsZero() || q.AfterRunID != "" {
			u := r.rec.Updated
			if u.After(q.AfterUpdated) || (u.Equal(q.AfterUpdated) && r.rec.RunID <= q.AfterRunID) {
				continue
			}
		}
		out = append(out, store.RunSummary{RunID: r.rec.RunID, PlanID: r.rec.PlanID, Status: r.rec.Status,
			Waiting: cloneWaits(r.rec.Waiting), LeaseExpires: r.rec.LeaseExpires, Created: r.rec.Created, Updated: r.rec.Updated})
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b store.RunSummary) int {
		if c := b.Updated.Compare(a.Updated); c != 0 {
			return c
		}
		return strings.Compare(a.RunID, b.RunID)
	})
	return out[:min(len(out), max(q.Limit, 0))], nil
}

// savedAt is when rec is saved, by the saver's clock (rec.Updated), or the
// store's for a record that does not say.
func savedAt(rec *store.PlanRecord, now func() time.Time) time.Time {
	if rec.Updated.IsZero() {
		return now()
	}
	return rec.Updated
}

// cloneWaits copies waits with their details: a wait's detail is a
// document the caller may reuse, as a plan is.
func cloneWaits(waits []store.Wait) []store.Wait {
	out := slices.Clone(waits)
	for i := range out {
		out[i].Detail = clone(out[i].Detail)
	}
	return out
}

func clone(b json.RawMessage) json.RawMessage {
	if b == nil {
		return nil
	}
	return append(json.RawMessage(nil), b...)
}
