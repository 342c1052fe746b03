// Package memory is a planexec store in process memory: plans, step records,
// idempotency claims and approval decisions in one value, for tests and
// single-process services that need no durability.
//
// It has every capability the durable stores have, the one-transaction step
// write (planexec.StepStore) among them, so code tested against it runs the
// same paths against SQLite or Postgres. It does not outlive the process.
package memory

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"sync"
	"time"

	"github.com/planexec/planexec"
)

// Store keeps plans, steps, claims and decisions in memory. It is safe for
// concurrent use. Build one with New.
type Store struct {
	mu        sync.Mutex
	now       func() time.Time
	runs      map[[2]string]*run
	claims    map[planexec.Key]*claim
	slab      []claim // claims not yet handed out: see newClaim
	decisions map[[2]string]planexec.Decision
}

var (
	_ planexec.StepStore     = (*Store)(nil)
	_ planexec.ApprovalStore = (*Store)(nil)
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
		claims:    map[planexec.Key]*claim{},
		decisions: map[[2]string]planexec.Decision{},
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
	rec   planexec.PlanRecord
	steps map[string]*planexec.StepRecord
	slab  []planexec.StepRecord // step records not yet handed out
}

// SavePlan implements planexec.PlanStore.
func (s *Store) SavePlan(_ context.Context, rec *planexec.PlanRecord) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := [2]string{rec.Tenant, rec.RunID}
	r, ok := s.runs[k]
	if ok && r.rec.Plan.ID == rec.Plan.ID {
		plan, created := r.rec.Plan, r.rec.Created
		r.rec = *rec
		r.rec.Created = created
		// A run saves its plan as it starts and again as it ends: keep the
		// copy already made when nothing in the plan changed.
		if r.rec.Plan = plan; !samePlan(plan, rec.Plan) {
			r.rec.Plan = clonePlan(rec.Plan)
		}
	} else {
		r = &run{rec: *rec, steps: make(map[string]*planexec.StepRecord, len(rec.Plan.Steps))}
		r.rec.Plan = clonePlan(rec.Plan)
		r.slab = make([]planexec.StepRecord, len(rec.Plan.Steps))
		s.runs[k] = r
	}
	r.rec.Steps = nil
	return nil
}

// SaveStep implements planexec.PlanStore.
func (s *Store) SaveStep(_ context.Context, tenant, runID string, step planexec.StepRecord) error {
	step.Outcome = clone(step.Outcome)
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.runs[[2]string{tenant, runID}]
	if !ok {
		return planexec.ErrNoRecord
	}
	r.saveStep(step)
	return nil
}

// saveStep writes a step record whose outcome is the store's own copy.
// Callers hold the store's mu.
func (r *run) saveStep(step planexec.StepRecord) {
	p, ok := r.steps[step.StepID]
	if !ok {
		if len(r.slab) == 0 {
			r.slab = make([]planexec.StepRecord, 16)
		}
		p, r.slab = &r.slab[0], r.slab[1:]
		r.steps[step.StepID] = p
	}
	*p = step
	if step.Finished.After(r.rec.Updated) {
		r.rec.Updated = step.Finished
	}
}

// LoadPlan implements planexec.PlanStore.
func (s *Store) LoadPlan(_ context.Context, tenant, runID string) (*planexec.PlanRecord, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.runs[[2]string{tenant, runID}]
	if !ok {
		return nil, planexec.ErrNoRecord
	}
	c := r.rec
	c.Plan = clonePlan(r.rec.Plan)
	c.Steps = make(map[string]planexec.StepRecord, len(r.steps))
	for id, st := range r.steps {
		st := *st
		st.Outcome = clone(st.Outcome)
		c.Steps[id] = st
	}
	return &c, nil
}

// Forget implements planexec.PlanStore.
func (s *Store) Forget(_ context.Context, tenant, runID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.runs, [2]string{tenant, runID})
	return nil
}

// Decision implements planexec.ApprovalStore.
func (s *Store) Decision(_ context.Context, tenant, requestID string) (planexec.Decision, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.decisions[[2]string{tenant, requestID}]
	if !ok {
		return planexec.Decision{}, planexec.ErrNoRecord
	}
	return d, nil
}

// SaveDecision implements planexec.ApprovalStore.
func (s *Store) SaveDecision(_ context.Context, tenant string, d planexec.Decision) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.decisions[[2]string{tenant, d.RequestID}] = d
	return nil
}

// claimFree marks a key given up; it keeps its epoch so fencing still holds.
const claimFree planexec.ClaimState = 0

type claim struct {
	state   planexec.ClaimState
	epoch   int64
	holder  string
	expires time.Time
	outcome json.RawMessage
}

// Claim implements planexec.IdempotencyStore.
func (s *Store) Claim(_ context.Context, req planexec.ClaimRequest) (planexec.Claim, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	c, ok := s.claims[req.Key]
	if !ok {
		c = s.newClaim()
		s.claims[req.Key] = c
	} else {
		switch c.state {
		case planexec.ClaimCompleted:
			return planexec.Claim{State: planexec.ClaimCompleted, Epoch: c.epoch, Outcome: clone(c.outcome)}, nil
		case planexec.ClaimInDoubt:
			return planexec.Claim{State: planexec.ClaimInDoubt, Epoch: c.epoch, Holder: c.holder}, nil
		case planexec.ClaimAcquired:
			if now.Before(c.expires) {
				return planexec.Claim{State: planexec.ClaimHeld, Epoch: c.epoch, Holder: c.holder, LeaseExpires: c.expires}, nil
			}
			if !req.TakeOver {
				return planexec.Claim{State: planexec.ClaimInDoubt, Epoch: c.epoch, Holder: c.holder, LeaseExpires: c.expires}, nil
			}
		}
	}
	c.state, c.holder, c.expires, c.outcome = planexec.ClaimAcquired, req.Holder, now.Add(req.Lease), nil
	c.epoch++
	return planexec.Claim{State: planexec.ClaimAcquired, Epoch: c.epoch, Holder: c.holder, LeaseExpires: c.expires}, nil
}

// newClaim returns a new claim. Claims are never deleted, so they are
// carved from slabs: one allocation for many steps' claims. Callers hold
// s.mu.
func (s *Store) newClaim() *claim {
	if len(s.slab) == 0 {
		s.slab = make([]claim, 64)
	}
	c := &s.slab[0]
	s.slab = s.slab[1:]
	return c
}

// held returns the claim if epoch still holds it. Callers hold s.mu.
func (s *Store) held(key planexec.Key, epoch int64) (*claim, error) {
	c, ok := s.claims[key]
	if !ok {
		return nil, planexec.ErrNoRecord
	}
	if c.epoch != epoch || c.state != planexec.ClaimAcquired {
		return nil, planexec.ErrFenced
	}
	return c, nil
}

// Extend implements planexec.IdempotencyStore.
func (s *Store) Extend(_ context.Context, key planexec.Key, epoch int64, lease time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := s.held(key, epoch)
	if err != nil {
		return err
	}
	c.expires = s.now().Add(lease)
	return nil
}

// Complete implements planexec.IdempotencyStore.
func (s *Store) Complete(_ context.Context, key planexec.Key, epoch int64, outcome json.RawMessage) error {
	outcome = clone(outcome)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.complete(key, epoch, outcome)
}

// complete records outcome, the store's own copy. Callers hold s.mu.
func (s *Store) complete(key planexec.Key, epoch int64, outcome json.RawMessage) error {
	c, err := s.held(key, epoch)
	if err != nil {
		return err
	}
	c.state, c.outcome = planexec.ClaimCompleted, outcome
	return nil
}

// Release implements planexec.IdempotencyStore.
func (s *Store) Release(_ context.Context, key planexec.Key, epoch int64, inDoubt bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.release(key, epoch, inDoubt)
}

func (s *Store) release(key planexec.Key, epoch int64, inDoubt bool) error {
	c, err := s.held(key, epoch)
	if err != nil {
		return err
	}
	c.state = claimFree
	if inDoubt {
		c.state = planexec.ClaimInDoubt
	}
	return nil
}

// Resolve implements planexec.IdempotencyStore.
func (s *Store) Resolve(_ context.Context, key planexec.Key, r planexec.Resolution) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.claims[key]
	if !ok {
		return planexec.ErrNoRecord
	}
	if c.state == planexec.ClaimAcquired && s.now().Before(c.expires) {
		return planexec.ErrInFlight
	}
	if c.state == planexec.ClaimCompleted {
		return planexec.ErrCompleted
	}
	c.epoch++
	c.state, c.outcome = claimFree, nil
	if r.Applied {
		c.state, c.outcome = planexec.ClaimCompleted, clone(r.Outcome)
	}
	return nil
}

// CompleteStep implements planexec.StepStore: the claim and the step record
// are written together or not at all.
func (s *Store) CompleteStep(_ context.Context, key planexec.Key, epoch int64, outcome json.RawMessage, runID string, rec planexec.StepRecord) error {
	// One copy serves the claim and the record: the store hands out
	// neither without copying it again.
	same := bytes.Equal(rec.Outcome, outcome) && (rec.Outcome == nil) == (outcome == nil)
	outcome = clone(outcome)
	if same {
		rec.Outcome = outcome
	} else {
		rec.Outcome = clone(rec.Outcome)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.runs[[2]string{key.Tenant, runID}]
	if !ok {
		return planexec.ErrNoRecord
	}
	if err := s.complete(key, epoch, outcome); err != nil {
		return err
	}
	r.saveStep(rec)
	return nil
}

// ReleaseStep implements planexec.StepStore: the claim and the step record
// are written together or not at all.
func (s *Store) ReleaseStep(_ context.Context, key planexec.Key, epoch int64, inDoubt bool, runID string, rec planexec.StepRecord) error {
	rec.Outcome = clone(rec.Outcome)
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.runs[[2]string{key.Tenant, runID}]
	if !ok {
		return planexec.ErrNoRecord
	}
	if err := s.release(key, epoch, inDoubt); err != nil {
		return err
	}
	r.saveStep(rec)
	return nil
}

func clone(b json.RawMessage) json.RawMessage {
	if b == nil {
		return nil
	}
	return append(json.RawMessage(nil), b...)
}

// samePlan reports whether copying b would give a, a copy clonePlan made.
func samePlan(a, b planexec.Plan) bool {
	if a.ID != b.ID || a.Goal != b.Goal || a.Revision != b.Revision || len(a.Steps) != len(b.Steps) {
		return false
	}
	for i := range a.Steps {
		x, y := &a.Steps[i], &b.Steps[i]
		if x.ID != y.ID || x.Tool != y.Tool || x.Intent != y.Intent ||
			!bytes.Equal(x.Arguments, y.Arguments) || !slices.Equal(x.DependsOn, y.DependsOn) {
			return false
		}
	}
	return true
}

// clonePlan copies p's steps, their arguments and dependencies. The
// arguments of all steps share one allocation, as do their dependencies;
// each slice is capped at its own length, so appending to one copies it
// rather than writing over the next.
func clonePlan(p planexec.Plan) planexec.Plan {
	size, deps := 0, 0
	for _, st := range p.Steps {
		size += len(st.Arguments)
		deps += len(st.DependsOn)
	}
	args, on := make([]byte, 0, size), make([]string, 0, deps)
	c := p
	c.Steps = make([]planexec.Step, len(p.Steps))
	for i, st := range p.Steps {
		// Empty arguments and dependencies are kept as nil, as a copy by
		// append would keep them.
		a, d := st.Arguments, st.DependsOn
		st.Arguments, st.DependsOn = nil, nil
		if len(a) > 0 {
			args = append(args, a...)
			st.Arguments = args[len(args)-len(a) : len(args) : len(args)]
		}
		if len(d) > 0 {
			on = append(on, d...)
			st.DependsOn = on[len(on)-len(d) : len(on) : len(on)]
		}
		c.Steps[i] = st
	}
	return c
}
