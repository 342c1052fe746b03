package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/store"
)

// Tamper writes into a durable store's backing what the store itself never
// would: a record of a newer layout, as a newer version of the package
// writes it during a rolling upgrade, or a damaged one, as a bad restore or
// an operator's hand may leave it. A store's tests give it to the suite in
// [Stores], acting on the same backing; the suite then checks that the
// store refuses such records whenever it reads them, with a
// [*store.Error] wrapping [store.ErrNewerRecord] or
// [store.ErrCorruptRecord], and never replays, runs or overwrites what
// it cannot read.
type Tamper interface {
	// SetVersion marks a stored record as written in layout version v,
	// everywhere the store keeps a record's version.
	SetVersion(ctx context.Context, r Record, v int) error
	// SetStatus sets a stored record's status (a claim's state) to
	// status, as the store spells statuses, everywhere the store keeps it.
	SetStatus(ctx context.Context, r Record, status string) error
	// SetOutcome sets a stored claim's outcome to outcome, byte for byte;
	// nil stores none at all (SQL NULL).
	SetOutcome(ctx context.Context, key planexec.Key, outcome []byte) error
}

// RecordKind says what a stored record is.
type RecordKind int

// The kinds of stored record.
const (
	KindPlan RecordKind = iota + 1
	KindStep
	KindDecision
	KindClaim
)

// String names the kind: "plan", "step", "decision" or "claim".
func (k RecordKind) String() string {
	switch k {
	case KindPlan:
		return "plan"
	case KindStep:
		return "step"
	case KindDecision:
		return "decision"
	case KindClaim:
		return "claim"
	}
	return fmt.Sprintf("RecordKind(%d)", int(k))
}

// Record names one stored record.
type Record struct {
	Kind   RecordKind
	Tenant string
	// ID is a plan's or a step's run id, a decision's record id, a claim's
	// key digest.
	ID string
	// Step is a step record's step id.
	Step string
}

// read is something the suite asks of a store, which must be refused.
type read struct {
	name string
	do   func(k kit) error
	// orElse is a refusal as good as the one the case wants: a store need
	// not read a record to refuse what is asked of it.
	orElse error
}

var (
	loadRun = read{name: "LoadPlan", do: func(k kit) error {
		_, err := k.Plans.LoadPlan(k.ctx, "acme", "run-1")
		return err
	}}
	saveRunAgain = read{name: "SavePlan over it", do: func(k kit) error {
		return k.Plans.SavePlan(k.ctx, sampleRecord("acme", "run-1", samplePlan("plan-1"), store.RunCompleted, k.clk.Now()))
	}}
	readDecision = read{name: "Decision", do: func(k kit) error {
		_, err := k.Approvals.Decision(k.ctx, "acme", "rec-1")
		return err
	}}
)

// claimKey asks for theKey, taking it over if takeOver, and is refused
// only if it gets an error: a claim of any state would replay, run or wait
// on what the store could not read.
func claimKey(takeOver bool) read {
	return read{name: fmt.Sprintf("Claim (TakeOver %v)", takeOver), do: func(k kit) error {
		c, err := k.Idempotency.Claim(k.ctx, store.ClaimRequest{Key: theKey, RunID: "run-1", StepID: "s1", Tool: "book_flight",
			Holder: "reader", Lease: lease, TakeOver: takeOver})
		if err == nil {
			return fmt.Errorf("answered %s", showClaim(c))
		}
		return err
	}}
}

func resolveKey(applied bool, orElse error) read {
	return read{name: fmt.Sprintf("Resolve (applied %v)", applied), orElse: orElse, do: func(k kit) error {
		return k.Idempotency.Resolve(k.ctx, theKey, "run-1", planexec.Resolution{Applied: applied, Outcome: json.RawMessage(`"resolved"`)})
	}}
}

// Ways to leave a record on file before it is tampered with.
var (
	savedRun = func(t *testing.T, k kit) Record {
		if err := k.Plans.SavePlan(k.ctx, sampleRecord("acme", "run-1", samplePlan("plan-1"), store.RunRunning, k.clk.Now())); err != nil {
			t.Fatalf("SavePlan: %v", err)
		}
		return Record{Kind: KindPlan, Tenant: "acme", ID: "run-1"}
	}
	savedStep = func(t *testing.T, k kit) Record {
		savedRun(t, k)
		if err := k.Plans.SaveStep(k.ctx, "acme", "run-1", doneStep("s1", "plan-1", k.clk.Now())); err != nil {
			t.Fatalf("SaveStep: %v", err)
		}
		return Record{Kind: KindStep, Tenant: "acme", ID: "run-1", Step: "s1"}
	}
	savedDecision = func(t *testing.T, k kit) Record {
		d := planexec.Decision{RequestID: "rec-1", Status: planexec.Approved, Approver: "dana", DecidedAt: k.clk.Now()}
		if err := k.Approvals.SaveDecision(k.ctx, "acme", d); err != nil {
			t.Fatalf("SaveDecision: %v", err)
		}
		return Record{Kind: KindDecision, Tenant: "acme", ID: "rec-1"}
	}
	// freedClaim is a key given up: anyone may take it, unless the store
	// cannot read it.
	freedClaim = func(t *testing.T, k kit) Record {
		c := k.acquire(t, theKey, "worker-a", false)
		if err := k.Idempotency.Release(k.ctx, theKey, c.Epoch, false); err != nil {
			t.Fatalf("Release: %v", err)
		}
		return Record{Kind: KindClaim, Tenant: theKey.Tenant, ID: theKey.Digest}
	}
	// completedClaim is a key whose effect is done: every claim replays its
	// outcome, unless the store cannot read it.
	completedClaim = func(t *testing.T, k kit) Record {
		c := k.acquire(t, theKey, "worker-a", false)
		if err := k.Idempotency.Complete(k.ctx, theKey, c.Epoch, json.RawMessage(`{"pnr":"PNR-1"}`)); err != nil {
			t.Fatalf("Complete: %v", err)
		}
		return Record{Kind: KindClaim, Tenant: theKey.Tenant, ID: theKey.Digest}
	}
)

func setVersion(v int) func(context.Context, Tamper, Record) error {
	return func(ctx context.Context, tp Tamper, r Record) error { return tp.SetVersion(ctx, r, v) }
}

func setStatus(s string) func(context.Context, Tamper, Record) error {
	return func(ctx context.Context, tp Tamper, r Record) error { return tp.SetStatus(ctx, r, s) }
}

func setOutcome(b []byte) func(context.Context, Tamper, Record) error {
	return func(ctx context.Context, tp Tamper, r Record) error {
		return tp.SetOutcome(ctx, planexec.Key{Tenant: r.Tenant, Digest: r.ID}, b)
	}
}

func runDamagedRecords(t *testing.T, open Open) {
	if setup(t, open).Tamper == nil {
		t.Skip("no Tamper: the stores keep no rows the suite can reach")
	}
	claimsAndResolves := []read{claimKey(false), claimKey(true), resolveKey(true, nil), resolveKey(false, nil), claimKey(true)}
	// A completed key is refused by Resolve whether or not the store reads
	// its outcome.
	claimsOfACompletedKey := []read{claimKey(false), claimKey(true), resolveKey(false, store.ErrCompleted), claimKey(true)}
	cases := []struct {
		name   string
		leave  func(t *testing.T, k kit) Record
		damage func(context.Context, Tamper, Record) error
		want   error
		reads  []read
	}{
		{"A plan record of a newer layout is refused, and not overwritten", savedRun, setVersion(99), store.ErrNewerRecord,
			[]read{loadRun, saveRunAgain, loadRun}},
		{"A step record of a newer layout is refused", savedStep, setVersion(99), store.ErrNewerRecord, []read{loadRun}},
		{"A decision of a newer layout is refused", savedDecision, setVersion(99), store.ErrNewerRecord, []read{readDecision}},
		{"A claim of a newer layout is refused, not taken or resolved", freedClaim, setVersion(99), store.ErrNewerRecord, claimsAndResolves},

		{"A plan with a status never written is corrupt", savedRun, setStatus("archived"), store.ErrCorruptRecord, []read{loadRun}},
		{"A step with a status never written is corrupt, not a step that never ran", savedStep, setStatus("skipped"), store.ErrCorruptRecord,
			[]read{loadRun}},
		{"A decision with a status never written is corrupt", savedDecision, setStatus("maybe"), store.ErrCorruptRecord, []read{readDecision}},
		{"A claim in a state never written is corrupt, not taken or resolved", completedClaim, setStatus("settled"), store.ErrCorruptRecord,
			claimsAndResolves},
		{"A completed claim whose outcome is not JSON is corrupt, never replayed", completedClaim, setOutcome([]byte(`{"pnr":`)),
			store.ErrCorruptRecord, claimsOfACompletedKey},
		{"A completed claim whose outcome is bytes of another format is corrupt, never replayed", completedClaim,
			setOutcome([]byte("gob\x00\x1f\x8b")), store.ErrCorruptRecord, claimsOfACompletedKey},
		{"A completed claim without an outcome is corrupt, never replayed", completedClaim, setOutcome(nil),
			store.ErrCorruptRecord, claimsOfACompletedKey},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k := setup(t, open)
			r := tc.leave(t, k)
			if err := tc.damage(k.ctx, k.Tamper, r); err != nil {
				t.Fatalf("tampering with the %s record: %v", r.Kind, err)
			}
			k.clk.Advance(lease + time.Second) // no lease stands in the way of a take-over
			for _, rd := range tc.reads {
				err := rd.do(k)
				var se *store.Error
				switch {
				case rd.orElse != nil && errors.Is(err, rd.orElse):
				case !errors.As(err, &se) || !errors.Is(err, tc.want):
					t.Errorf("%s: %v; want a *store.Error wrapping %v", rd.name, err, tc.want)
				case tc.want == store.ErrNewerRecord && errors.Is(err, store.ErrCorruptRecord):
					t.Errorf("%s: %v; a newer record is not corrupt", rd.name, err)
				}
			}
		})
	}
}

// SetMember returns doc, a JSON object, with its member name set to value
// (added if it has none): for Tamper implementations that rewrite a stored
// document. The rest of the document keeps its JSON values, not
// necessarily its bytes.
func SetMember(doc []byte, name string, value any) ([]byte, error) {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(doc, &members); err != nil {
		return nil, fmt.Errorf("storetest: the document is not a JSON object: %w", err)
	}
	v, err := json.Marshal(value)
	if err != nil {
		return nil, err
	}
	members[name] = v
	return json.Marshal(members)
}
