package storetest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/planexec/planexec/store"
)

// journal is a durable backing for testing the kit without a database: one
// file of JSON lines, each holding everything one write changed. A write is
// one append of one line, so a kill leaves it whole or torn; a torn last
// line is never applied, and is cut off before the next write. Before it
// acts, a journal applies what other processes appended since it last
// looked. It assumes one process writes at a time, which the crash harness
// arranges: the parent acts only once the child is dead.
type journal struct {
	path string
	now  func() time.Time

	mu        sync.Mutex
	off       int64 // how much of the file is applied
	plans     map[runKey]*store.PlanRecord
	claims    map[store.Key]store.ClaimRow
	decisions map[decisionKey]store.Decision
	effects   map[string]map[string]int
}

type runKey struct{ Tenant, Run string }

type decisionKey struct{ Tenant, Record string }

// entry is one line of the journal: what one write changed.
type entry struct {
	Plan     *planEntry     `json:"plan,omitempty"`
	Step     *stepEntry     `json:"step,omitempty"`
	Forget   *runKey        `json:"forget,omitempty"`
	Claim    *claimEntry    `json:"claim,omitempty"`
	Decision *decisionEntry `json:"decision,omitempty"`
	Effect   *effectEntry   `json:"effect,omitempty"`
}

// planEntry is a plan record as a line holds it. A line has no line break,
// and encoding/json would compact the plan's document: it is kept as a
// string beside the record, byte for byte, and put back when it is read.
type planEntry struct {
	Record *store.PlanRecord `json:"record"`
	Plan   string            `json:"plan"`
}

func newPlanEntry(rec *store.PlanRecord) *planEntry {
	return &planEntry{Record: rec, Plan: string(rec.Plan)}
}

// record is the plan record the entry holds, its plan put back.
func (e *planEntry) record() *store.PlanRecord {
	e.Record.Plan = json.RawMessage(e.Plan)
	return e.Record
}

type stepEntry struct {
	runKey
	Record store.StepRecord
}

type claimEntry struct {
	Key   store.Key
	Claim store.ClaimRow
}

type decisionEntry struct {
	Tenant   string
	Decision store.Decision
}

type effectEntry struct{ Run, Step string }

func openJournal(t testing.TB, path string, now func() time.Time) *journal {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDONLY, 0o644)
	if err != nil {
		t.Fatalf("opening the journal: %v", err)
	}
	f.Close()
	return &journal{path: path, now: now, plans: map[runKey]*store.PlanRecord{}, claims: map[store.Key]store.ClaimRow{},
		decisions: map[decisionKey]store.Decision{}, effects: map[string]map[string]int{}}
}

// sync applies the lines appended since the journal last looked. Callers
// hold j.mu.
func (j *journal) sync() error {
	f, err := os.Open(j.path)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.Seek(j.off, io.SeekStart); err != nil {
		return err
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return err
	}
	for {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			return nil // the rest, if any, is a torn line
		}
		var e entry
		if err := json.Unmarshal(data[:i], &e); err != nil {
			return fmt.Errorf("journal line at byte %d: %w", j.off, err)
		}
		j.apply(e)
		j.off += int64(i + 1)
		data = data[i+1:]
	}
}

// write appends e and applies it. Callers hold j.mu and synced.
func (j *journal) write(e entry) error {
	line, err := json.Marshal(e)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(j.path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Truncate(j.off); err != nil { // a line torn by a killed writer
		return err
	}
	if _, err := f.WriteAt(append(line, '\n'), j.off); err != nil {
		return err
	}
	j.off += int64(len(line) + 1)
	// Apply what was written, decoded, so nothing the caller holds is kept.
	var back entry
	if err := json.Unmarshal(line, &back); err != nil {
		return err
	}
	j.apply(back)
	return nil
}

func (j *journal) apply(e entry) {
	if e.Plan != nil {
		p := e.Plan.record()
		k := runKey{p.Tenant, p.RunID}
		if old := j.plans[k]; old != nil && old.PlanID == p.PlanID {
			p.Steps, p.Created = old.Steps, old.Created
		} else {
			p.Steps = map[string]store.StepRecord{}
		}
		j.plans[k] = p
	}
	if s := e.Step; s != nil {
		if rec := j.plans[s.runKey]; rec != nil {
			rec.Steps[s.Record.StepID] = s.Record
		}
	}
	if e.Forget != nil {
		delete(j.plans, *e.Forget)
	}
	if c := e.Claim; c != nil {
		j.claims[c.Key] = c.Claim
	}
	if d := e.Decision; d != nil {
		j.decisions[decisionKey{d.Tenant, d.Decision.RequestID}] = d.Decision
	}
	if f := e.Effect; f != nil {
		if j.effects[f.Run] == nil {
			j.effects[f.Run] = map[string]int{}
		}
		j.effects[f.Run][f.Step]++
	}
}

// do runs fn on the journal brought up to date.
func (j *journal) do(fn func() error) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := j.sync(); err != nil {
		return err
	}
	return fn()
}

// savedAt is when rec is saved, by the saver's clock, or the store's for a
// record that does not say.
func savedAt(rec *store.PlanRecord, now func() time.Time) time.Time {
	if rec.Updated.IsZero() {
		return now()
	}
	return rec.Updated
}

// SavePlan writes rec at revision rec.Rev+1 unless another holder keeps
// the run, its lease running past the save's time, or the save has Update
// and the run's revision is no longer rec.Rev: then it is ErrFenced. A zero
// lease lets the run go, and no holder is kept. A line written before
// revisions has none, and reads as revision 0.
func (j *journal) SavePlan(_ context.Context, rec *store.PlanRecord) error {
	c := *rec
	c.Steps, c.Update, c.Create, c.Rev = nil, false, false, rec.Rev+1
	if c.LeaseExpires.IsZero() {
		c.Holder = ""
	}
	return j.do(func() error {
		old := j.plans[runKey{rec.Tenant, rec.RunID}]
		switch {
		case old == nil && rec.Update:
			return store.ErrNoRecord
		case old != nil && rec.Create:
			return store.ErrFenced // made by another saver
		case old != nil && rec.Update && old.Rev != rec.Rev:
			return store.ErrFenced // saved since the save's revision was read
		case old != nil && old.Holder != "" && old.Holder != rec.Holder && old.LeaseExpires.After(savedAt(rec, j.now)):
			return store.ErrFenced
		}
		return j.write(entry{Plan: newPlanEntry(&c)})
	})
}

func (j *journal) SaveStep(_ context.Context, tenant, run string, step store.StepRecord) error {
	return j.do(func() error {
		k := runKey{tenant, run}
		if j.plans[k] == nil {
			return store.ErrNoRecord
		}
		return j.write(entry{Step: &stepEntry{k, step}})
	})
}

func (j *journal) LoadPlan(_ context.Context, tenant, run string) (*store.PlanRecord, error) {
	var c store.PlanRecord
	err := j.do(func() error {
		rec := j.plans[runKey{tenant, run}]
		if rec == nil {
			return store.ErrNoRecord
		}
		b, err := json.Marshal(newPlanEntry(rec))
		if err != nil {
			return err
		}
		var e planEntry
		if err := json.Unmarshal(b, &e); err != nil {
			return err
		}
		c = *e.record()
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &c, nil
}

func (j *journal) Forget(_ context.Context, tenant, run string) error {
	return j.do(func() error {
		k := runKey{tenant, run}
		if j.plans[k] == nil {
			return nil
		}
		return j.write(entry{Forget: &k})
	})
}

func (j *journal) Claim(_ context.Context, req store.ClaimRequest) (store.Claim, error) {
	var out store.Claim
	err := j.do(func() error {
		now := j.now()
		c := j.claims[req.Key] // the zero row for a key nobody claimed
		var take bool
		// A request that peeks is never told to take: it writes nothing.
		if out, take = c.Answer(req, now); !take {
			out.Outcome = slices.Clone(out.Outcome)
			return nil
		}
		out = c.Take(req, now)
		return j.write(entry{Claim: &claimEntry{req.Key, c}})
	})
	return out, err
}

// held returns the claim epoch holds. Callers hold j.mu.
func (j *journal) held(key store.Key, epoch int64) (store.ClaimRow, error) {
	c, ok := j.claims[key]
	if !ok {
		return c, store.ErrNoRecord
	}
	if !c.Holds(epoch) {
		return c, store.ErrFenced
	}
	return c, nil
}

func (j *journal) Extend(_ context.Context, key store.Key, epoch int64, lease time.Duration) error {
	return j.do(func() error {
		c, err := j.held(key, epoch)
		if err != nil {
			return err
		}
		c.LeaseExpires = j.now().Add(lease)
		return j.write(entry{Claim: &claimEntry{key, c}})
	})
}

func (j *journal) Complete(ctx context.Context, key store.Key, epoch int64, outcome json.RawMessage) error {
	return j.CompleteStep(ctx, &store.StepWrite{Key: key, Epoch: epoch, Outcome: outcome})
}

func (j *journal) Release(ctx context.Context, key store.Key, epoch int64, inDoubt bool) error {
	return j.ReleaseStep(ctx, &store.StepWrite{Key: key, Epoch: epoch, InDoubt: inDoubt})
}

// finish writes a claim's end and, when run is not "", the step's record
// with it, in one line.
func (j *journal) finish(key store.Key, epoch int64, run string, rec store.StepRecord, end func(*store.ClaimRow)) error {
	return j.do(func() error {
		c, err := j.held(key, epoch)
		if err != nil {
			return err
		}
		e := entry{Claim: &claimEntry{key, c}}
		end(&e.Claim.Claim)
		if run != "" {
			k := runKey{key.Tenant, run}
			if j.plans[k] == nil {
				return store.ErrNoRecord
			}
			e.Step = &stepEntry{k, rec}
		}
		return j.write(e)
	})
}

func (j *journal) CompleteStep(_ context.Context, w *store.StepWrite) error {
	return j.finish(w.Key, w.Epoch, w.RunID, w.Record, func(c *store.ClaimRow) { c.State, c.Outcome = store.ClaimCompleted, w.Outcome })
}

func (j *journal) ReleaseStep(_ context.Context, w *store.StepWrite) error {
	return j.finish(w.Key, w.Epoch, w.RunID, w.Record, func(c *store.ClaimRow) { c.Release(w.InDoubt) })
}

func (j *journal) Resolve(_ context.Context, key store.Key, run string, r store.Resolution) error {
	return j.do(func() error {
		c, ok := j.claims[key]
		if !ok {
			return store.ErrNoRecord
		}
		if err := c.Resolve(run, r, j.now()); err != nil {
			return err
		}
		return j.write(entry{Claim: &claimEntry{key, c}})
	})
}

func (j *journal) Decision(_ context.Context, tenant, requestID string) (store.Decision, error) {
	var d store.Decision
	err := j.do(func() error {
		var ok bool
		if d, ok = j.decisions[decisionKey{tenant, requestID}]; !ok {
			return store.ErrNoRecord
		}
		return nil
	})
	return d, err
}

func (j *journal) SaveDecision(_ context.Context, tenant string, d store.Decision) error {
	return j.do(func() error {
		if prev, ok := j.decisions[decisionKey{tenant, d.RequestID}]; ok && prev.Keeps(d) {
			return store.ErrDecided
		}
		return j.write(entry{Decision: &decisionEntry{tenant, d}})
	})
}

func (j *journal) Record(_ context.Context, run, step string) error {
	return j.do(func() error { return j.write(entry{Effect: &effectEntry{run, step}}) })
}

func (j *journal) Counts(_ context.Context, run string) (map[string]int, error) {
	var c map[string]int
	err := j.do(func() error {
		c = maps.Clone(j.effects[run])
		return nil
	})
	if c == nil && err == nil {
		c = map[string]int{}
	}
	return c, err
}

var _ interface {
	store.PlanStore
	store.IdempotencyStore
	store.StepStore
	store.ApprovalStore
} = (*journal)(nil)
