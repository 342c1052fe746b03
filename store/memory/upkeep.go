package memory

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"github.com/planexec/planexec/store"
)

// Spend implements store.CeilingStore. A spend of a key already recorded
// is moved to sp.At with sp.Amount, checked as a new spend without its
// old record; one recorded at that time and amount already is left as it
// is.
func (s *Store) Spend(_ context.Context, sp store.Spend, window time.Duration, ceiling decimal.Decimal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	spends := s.spends[sp.Grant]
	spent, recorded := decimal.Zero, -1
	for i, old := range spends {
		switch {
		case old.Key != sp.Key:
			if within(old.At, sp.At, window) {
				spent = spent.Add(old.Amount)
			}
		case old.At.Equal(sp.At) && old.Amount.Equal(sp.Amount):
			return nil // this step spent already, as it spends now
		default:
			recorded = i
		}
	}
	switch {
	case spent.Add(sp.Amount).GreaterThan(ceiling):
		return store.ErrCeiling
	case recorded >= 0:
		spends[recorded] = sp
	default:
		s.spends[sp.Grant] = append(spends, sp)
	}
	return nil
}

// Spent implements store.CeilingStore.
func (s *Store) Spent(_ context.Context, grant string, at time.Time, window time.Duration, except []string) (decimal.Decimal, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	spent := decimal.Zero
	for _, old := range s.spends[grant] {
		if within(old.At, at, window) && !slices.Contains(except, old.Key) {
			spent = spent.Add(old.Amount)
		}
	}
	return spent, nil
}

// within reports whether a spend at t counts in the window of a spend at
// at: it was recorded after at-window (a later one counts too).
func within(t, at time.Time, window time.Duration) bool {
	return t.After(at.Add(-window))
}

// Prune implements store.Pruner.
func (s *Store) Prune(_ context.Context, tenant string, before time.Time) (store.Pruned, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var p store.Pruned
	for k, r := range s.runs {
		if k[0] != tenant || !r.rec.Updated.Before(before) || (r.rec.Status != store.RunCompleted && r.rec.Status != store.RunFailed) {
			continue
		}
		delete(s.runs, k)
		delete(s.histories, k)
		p.Runs++
	}
	for k, h := range s.histories {
		if _, ok := s.runs[k]; ok || k[0] != tenant || !h.last.Before(before) {
			continue
		}
		delete(s.histories, k)
		p.Histories++
	}
	for key, c := range s.claims {
		if key.Tenant != tenant || c.perTenant || !c.updated.Before(before) ||
			c.State == store.ClaimInDoubt || c.State == store.ClaimAcquired {
			continue
		}
		if _, ok := s.runs[[2]string{tenant, c.Run}]; ok {
			continue // its run may resume and replay it
		}
		delete(s.claims, key)
		p.Claims++
	}
	for k, d := range s.decisions {
		if k[0] == tenant && d.DecidedAt.Before(before) {
			delete(s.decisions, k)
			p.Decisions++
		}
	}
	for grant, spends := range s.spends {
		kept := slices.DeleteFunc(spends, func(sp store.Spend) bool { return sp.Tenant == tenant && sp.At.Before(before) })
		p.Spends += int64(len(spends) - len(kept))
		s.spends[grant] = kept
	}
	return p, nil
}

// stalled reports whether r stopped without finishing, as of now.
func stalled(r *run, now time.Time) bool {
	return r.rec.Status == store.RunInterrupted || (r.rec.Status == store.RunRunning && !now.Before(r.rec.LeaseExpires))
}

// Stalled implements store.Recoverer.
func (s *Store) Stalled(_ context.Context, now time.Time, limit int) ([]store.RunRef, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []store.RunRef
	for k, r := range s.runs {
		if stalled(r, now) {
			out = append(out, store.RunRef{Tenant: k[0], RunID: k[1]})
		}
	}
	slices.SortFunc(out, func(a, b store.RunRef) int {
		if a.Tenant != b.Tenant {
			return strings.Compare(a.Tenant, b.Tenant)
		}
		return strings.Compare(a.RunID, b.RunID)
	})
	return out[:min(len(out), max(limit, 0))], nil
}

// TakeRun implements store.Recoverer.
func (s *Store) TakeRun(_ context.Context, ref store.RunRef, holder string, now time.Time, lease time.Duration) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.runs[[2]string{ref.Tenant, ref.RunID}]
	if !ok || !stalled(r, now) {
		return false, nil
	}
	r.rec.Status, r.rec.Holder, r.rec.LeaseExpires = store.RunRunning, holder, now.Add(lease)
	return true, nil
}

// ExtendRun implements store.Recoverer.
func (s *Store) ExtendRun(_ context.Context, ref store.RunRef, holder string, expires time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.runs[[2]string{ref.Tenant, ref.RunID}]
	switch {
	case !ok:
		return store.ErrNoRecord
	case r.rec.Holder != holder || (r.rec.Status != store.RunRunning && r.rec.Status != store.RunPlanning):
		return store.ErrFenced
	}
	r.rec.LeaseExpires = expires
	return nil
}
