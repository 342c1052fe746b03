package store_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/planexec/planexec/store"
)

// The claim machine every store follows: what each request gets from a key
// in each state, and what the row becomes.
func TestAClaimGetsWhatTheKeysRowSays(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	live, expired := now.Add(time.Second), now.Add(-time.Second)
	req := func(takeOver bool) store.ClaimRequest {
		return store.ClaimRequest{Key: store.Key{Tenant: "acme", Digest: "k"}, Holder: "h2", Lease: time.Minute, TakeOver: takeOver}
	}
	for _, c := range []struct {
		name     string
		row      store.ClaimRow
		takeOver bool
		want     store.ClaimState // 0: the caller takes the key
	}{
		{"a key nobody claimed is taken", store.ClaimRow{}, false, 0},
		{"a free key is taken", store.ClaimRow{State: store.ClaimFree, Epoch: 4, Holder: "h1"}, false, 0},
		{"a completed key gives its outcome", store.ClaimRow{State: store.ClaimCompleted, Epoch: 4, Outcome: json.RawMessage(`"PNR"`)}, true, store.ClaimCompleted},
		{"a key in doubt stays in doubt", store.ClaimRow{State: store.ClaimInDoubt, Epoch: 4, Holder: "h1"}, true, store.ClaimInDoubt},
		{"a live holder's key is held", store.ClaimRow{State: store.ClaimAcquired, Epoch: 4, Holder: "h1", LeaseExpires: live}, true, store.ClaimHeld},
		{"an expired holder's key is taken over when allowed", store.ClaimRow{State: store.ClaimAcquired, Epoch: 4, Holder: "h1", LeaseExpires: expired}, true, 0},
		{"an expired holder's key is in doubt when not", store.ClaimRow{State: store.ClaimAcquired, Epoch: 4, Holder: "h1", LeaseExpires: expired}, false, store.ClaimInDoubt},
		{"a lease ending now has ended", store.ClaimRow{State: store.ClaimAcquired, Epoch: 4, Holder: "h1", LeaseExpires: now}, false, store.ClaimInDoubt},
	} {
		t.Run(c.name, func(t *testing.T) {
			row := c.row
			answer, take := row.Answer(req(c.takeOver), now)
			if take != (c.want == 0) {
				t.Fatalf("Answer = %+v, take %v; want take %v", answer, take, c.want == 0)
			}
			if !take {
				if answer.State != c.want || answer.Epoch != c.row.Epoch {
					t.Errorf("Answer = %+v, want state %d at epoch %d", answer, c.want, c.row.Epoch)
				}
				if c.want == store.ClaimCompleted && string(answer.Outcome) != `"PNR"` {
					t.Errorf("the completed key's outcome = %s", answer.Outcome)
				}
				if c.want != store.ClaimCompleted && answer.Holder != "h1" {
					t.Errorf("Answer names holder %q, want h1", answer.Holder)
				}
				return
			}
			got := row.Take(req(c.takeOver), now)
			want := store.Claim{State: store.ClaimAcquired, Epoch: c.row.Epoch + 1, Holder: "h2", LeaseExpires: now.Add(time.Minute)}
			if got.State != want.State || got.Epoch != want.Epoch || got.Holder != want.Holder || !got.LeaseExpires.Equal(want.LeaseExpires) || got.Outcome != nil {
				t.Errorf("Take = %+v, want %+v", got, want)
			}
			if !row.Holds(got.Epoch) || row.Holds(c.row.Epoch) {
				t.Errorf("after Take, the row %+v must be held by epoch %d only", row, got.Epoch)
			}
		})
	}
}

func TestOnlyTheHoldingEpochMayWriteAndReleaseEndsTheHold(t *testing.T) {
	for _, inDoubt := range []bool{false, true} {
		row := store.ClaimRow{State: store.ClaimAcquired, Epoch: 3}
		if row.Holds(2) || !row.Holds(3) {
			t.Fatalf("Holds: epoch 3 holds %+v, epoch 2 does not", row)
		}
		row.Release(inDoubt)
		want := store.ClaimFree
		if inDoubt {
			want = store.ClaimInDoubt
		}
		if row.State != want || row.Epoch != 3 || row.Holds(3) {
			t.Errorf("Release(%v) = %+v, want state %d at epoch 3, held by nobody", inDoubt, row, want)
		}
	}
}

func TestResolvingSettlesAKeyUnlessItIsInFlightOrDone(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	applied := store.Resolution{Applied: true, Outcome: json.RawMessage(`"PNR"`)}
	for _, c := range []struct {
		name string
		row  store.ClaimRow
		res  store.Resolution
		err  error
		want store.ClaimState
	}{
		{"in doubt, applied", store.ClaimRow{State: store.ClaimInDoubt, Epoch: 2}, applied, nil, store.ClaimCompleted},
		{"in doubt, not applied", store.ClaimRow{State: store.ClaimInDoubt, Epoch: 2}, store.Resolution{}, nil, store.ClaimFree},
		{"a lease run out", store.ClaimRow{State: store.ClaimAcquired, Epoch: 2, LeaseExpires: now}, applied, nil, store.ClaimCompleted},
		{"free", store.ClaimRow{State: store.ClaimFree, Epoch: 2}, store.Resolution{}, nil, store.ClaimFree},
		{"a live holder's", store.ClaimRow{State: store.ClaimAcquired, Epoch: 2, LeaseExpires: now.Add(time.Nanosecond)}, applied, store.ErrInFlight, store.ClaimAcquired},
		{"completed", store.ClaimRow{State: store.ClaimCompleted, Epoch: 2, Outcome: json.RawMessage(`1`)}, store.Resolution{}, store.ErrCompleted, store.ClaimCompleted},
	} {
		t.Run(c.name, func(t *testing.T) {
			row := c.row
			row.Run = "run-1"
			if err := row.Resolve("run-2", c.res, now); !errors.Is(err, store.ErrNoRecord) {
				t.Fatalf("Resolve for another run = %v, want ErrNoRecord: only the run that took the key settles it", err)
			}
			err := row.Resolve("run-1", c.res, now)
			if !errors.Is(err, c.err) || (c.err == nil) != (err == nil) {
				t.Fatalf("Resolve = %v, want %v", err, c.err)
			}
			if c.err != nil {
				if row.State != c.row.State || row.Epoch != c.row.Epoch || string(row.Outcome) != string(c.row.Outcome) || row.Run != "run-1" {
					t.Errorf("a refused Resolve changed the row: %+v, was %+v", row, c.row)
				}
				return
			}
			if row.State != c.want || row.Epoch != c.row.Epoch+1 {
				t.Errorf("Resolve left %+v, want state %d at epoch %d", row, c.want, c.row.Epoch+1)
			}
			if wantOutcome := map[bool]string{true: `"PNR"`, false: ""}[c.res.Applied]; string(row.Outcome) != wantOutcome {
				t.Errorf("outcome %s, want %q", row.Outcome, wantOutcome)
			}
		})
	}
}
