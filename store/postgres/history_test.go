package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/store"
	"github.com/planexec/planexec/store/postgres"
)

// replicaStore opens a store on a pool of its own, as another replica of
// the service would, over schema, with opts.
func replicaStore(t *testing.T, schema string, conns int32, opts ...postgres.Option) *postgres.Store {
	t.Helper()
	pool, err := connect(testDSN(t), conns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s, err := postgres.New(t.Context(), pool, append([]postgres.Option{postgres.WithSchema(schema)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// batchEvent is an event of a test's batch: which writer wrote it, in
// which batch, and where in the batch.
type batchEvent struct {
	Writer string `json:"writer"`
	Batch  int    `json:"batch"`
	I      int    `json:"i"`
	Of     int    `json:"of"`
}

func batchOf(writer string, batch, size int) []json.RawMessage {
	docs := make([]json.RawMessage, size)
	for i := range docs {
		docs[i], _ = json.Marshal(batchEvent{Writer: writer, Batch: batch, I: i + 1, Of: size})
	}
	return docs
}

// checkBatches fails unless history is numbered 1..n and made of whole
// batches, each in order, each once; it returns how many batches.
func checkBatches(t *testing.T, history []store.EventRecord) int {
	t.Helper()
	seen := map[[2]any]bool{}
	for i := 0; i < len(history); {
		var first batchEvent
		if err := json.Unmarshal(history[i].Event, &first); err != nil {
			t.Fatalf("event %d: %v", history[i].Seq, err)
		}
		id := [2]any{first.Writer, first.Batch}
		if first.I != 1 || seen[id] {
			t.Fatalf("event %d is %+v: a batch split, reordered or stored twice", history[i].Seq, first)
		}
		seen[id] = true
		for j := range first.Of {
			if i+j >= len(history) {
				t.Fatalf("the history ends inside batch %v", id)
			}
			e := history[i+j]
			var got batchEvent
			if err := json.Unmarshal(e.Event, &got); err != nil {
				t.Fatalf("event %d: %v", e.Seq, err)
			}
			if e.Seq != int64(i+j+1) {
				t.Fatalf("event %d of the history is numbered %d", i+j+1, e.Seq)
			}
			if got != (batchEvent{Writer: first.Writer, Batch: first.Batch, I: j + 1, Of: first.Of}) {
				t.Fatalf("event %d is %+v, want event %d of batch %v: a batch was split or reordered", e.Seq, got, j+1, id)
			}
		}
		i += first.Of
	}
	return len(seen)
}

// Replicas appending to one run at once, on pools of their own, some by
// AppendEvents and some with a step's joint write, number every event once:
// 1..n, no gap, no number twice, each batch whole and in order. A reader
// following the history meanwhile never misses an event: what it read, page
// after page, is the history as it ends, so no event was ever numbered
// below one it had read.
func TestReplicasAppendingAtOnceNumberEveryEventOnce(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	schema := freshSchema(t, sharedPool(t))
	replicas := []*postgres.Store{replicaStore(t, schema, 4), replicaStore(t, schema, 4)}
	reader := replicaStore(t, schema, 1)
	const tenant, run = "acme", "run-1"
	if err := replicas[0].SavePlan(ctx, record(tenant, run, plan("p1", "s1"), time.Now())); err != nil {
		t.Fatal(err)
	}
	const writersPerReplica, batches = 6, 25
	var (
		wg      sync.WaitGroup
		done    atomic.Bool
		events  atomic.Int64
		errs    = make(chan error, 2*writersPerReplica*batches+1)
		readAll []store.EventRecord
	)
	for r, s := range replicas {
		for w := range writersPerReplica {
			writer := fmt.Sprintf("r%d-w%d", r, w)
			wg.Go(func() {
				for b := range batches {
					size := 1 + (w+b)%4
					docs := batchOf(writer, b, size)
					var err error
					if (w+b)%2 == 0 {
						err = s.AppendEvents(ctx, tenant, run, docs)
					} else {
						step := fmt.Sprintf("%s-b%d", writer, b)
						err = completeStep(ctx, s, tenant, run, step, "key-"+step, docs)
					}
					if err != nil {
						errs <- fmt.Errorf("%s, batch %d: %w", writer, b, err)
						return
					}
					events.Add(int64(size))
				}
			})
		}
	}
	var follow sync.WaitGroup
	follow.Go(func() {
		var after int64
		for last := false; ; {
			page, err := reader.Events(ctx, tenant, run, after, 7)
			if err != nil {
				errs <- fmt.Errorf("reader: %w", err)
				return
			}
			for _, e := range page {
				if e.Seq != after+1 {
					errs <- fmt.Errorf("reader: after event %d came %d", after, e.Seq)
					return
				}
				after = e.Seq
			}
			readAll = append(readAll, page...)
			switch {
			case len(page) > 0:
			case last:
				return
			case done.Load():
				last = true // one more read, after every writer finished
			}
		}
	})
	wg.Wait()
	done.Store(true)
	follow.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	history, err := replicas[1].Events(ctx, tenant, run, 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(history)) != events.Load() {
		t.Fatalf("%d events stored, want %d", len(history), events.Load())
	}
	if n := checkBatches(t, history); n != len(replicas)*writersPerReplica*batches {
		t.Fatalf("%d batches stored, want %d", n, len(replicas)*writersPerReplica*batches)
	}
	if len(readAll) != len(history) {
		t.Fatalf("the reader read %d events, the history holds %d", len(readAll), len(history))
	}
	for i := range history {
		if readAll[i].Seq != history[i].Seq || string(readAll[i].Event) != string(history[i].Event) {
			t.Fatalf("the reader read event %d as %s, the history holds %s: it was numbered after it was read", readAll[i].Seq, readAll[i].Event, history[i].Event)
		}
	}
	rec, err := replicas[0].LoadPlan(ctx, tenant, run)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d events in %d batches, %d of them written with a step", len(history), len(replicas)*writersPerReplica*batches, len(rec.Steps))
}

// completeStep claims key for step and completes it with events, as an
// executor records a finished step.
func completeStep(ctx context.Context, s *postgres.Store, tenant, run, step, digest string, events []json.RawMessage) error {
	key := planexec.Key{Tenant: tenant, Digest: digest}
	c, err := s.Claim(ctx, store.ClaimRequest{Key: key, RunID: run, StepID: step, Tool: "tool", Holder: "h", Lease: time.Minute})
	if err != nil {
		return err
	}
	if c.State != store.ClaimAcquired {
		return fmt.Errorf("claim of %s: %+v", step, c)
	}
	return s.CompleteStep(ctx, &store.StepWrite{Key: key, Epoch: c.Epoch, RunID: run, Outcome: json.RawMessage(`"ok"`),
		Record: store.StepRecord{StepID: step, PlanID: "p1", Tool: "tool", Status: planexec.StepDone, Outcome: json.RawMessage(`"ok"`), Key: key.Digest, Finished: time.Now()},
		Events: events})
}

// Forget, on one replica, while others append to the run, save its plan
// and write its steps: nobody waits for anybody in a circle (PostgreSQL
// would fail one of them), and the history left is numbered 1..n, whole
// batches, its counter at n, so that the next append follows on.
func TestForgetWhileReplicasWriteTheRunLeavesAWholeHistory(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	schema := freshSchema(t, sharedPool(t))
	writer, other := replicaStore(t, schema, 6), replicaStore(t, schema, 3)
	const tenant, run = "acme", "run-1"
	var (
		wg   sync.WaitGroup
		stop atomic.Bool
		errs = make(chan error, 64)
		fail = func(err error) {
			stop.Store(true)
			select {
			case errs <- err:
			default: // enough said
			}
		}
		steps atomic.Int64
	)
	for w := range 3 {
		wg.Go(func() {
			for b := 0; !stop.Load(); b++ {
				if err := writer.AppendEvents(ctx, tenant, run, batchOf(fmt.Sprintf("a%d", w), b, 1+b%3)); err != nil {
					fail(fmt.Errorf("AppendEvents: %w", err))
				}
			}
		})
		wg.Go(func() {
			for b := 0; !stop.Load(); b++ {
				// Steps run again (a release, then another try) rewrite
				// their rows: locked, not only inserted.
				err := completeStep(ctx, writer, tenant, run, fmt.Sprintf("s%d", b%4), fmt.Sprintf("key-%d-%d", w, b), batchOf(fmt.Sprintf("s%d", w), b, 2))
				switch {
				case err == nil:
					steps.Add(1)
				case !errors.Is(err, store.ErrNoRecord): // forgotten meanwhile
					fail(fmt.Errorf("CompleteStep: %w", err))
				}
			}
		})
	}
	wg.Go(func() {
		for i := 0; !stop.Load(); i++ {
			// Now and then a new plan, whose save drops the steps of the
			// one before.
			if err := other.SavePlan(ctx, record(tenant, run, plan(fmt.Sprintf("p%d", 1+i/10%2), "s1"), time.Now())); err != nil {
				fail(fmt.Errorf("SavePlan: %w", err))
			}
			time.Sleep(time.Millisecond)
		}
	})
	for i := 0; i < 40 && !stop.Load(); i++ {
		time.Sleep(5 * time.Millisecond)
		if err := other.Forget(ctx, tenant, run); err != nil {
			fail(fmt.Errorf("Forget: %w", err))
		}
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}
	if steps.Load() == 0 {
		t.Fatalf("no step was written between the Forgets: the test proves nothing")
	}
	for round := range 2 {
		history, err := other.Events(ctx, tenant, run, 0, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		checkBatches(t, history)
		var last *int64
		err = sharedPool(t).QueryRow(ctx, "SELECT (SELECT last_seq FROM "+pgx.Identifier{schema, "histories"}.Sanitize()+" WHERE tenant = $1 AND run_id = $2)", tenant, run).Scan(&last)
		if err != nil {
			t.Fatal(err)
		}
		if n := int64(len(history)); (last == nil && n != 0) || (last != nil && *last != n) {
			t.Fatalf("round %d: the history holds %d events and its counter says %v", round, n, last)
		}
		// The next append follows on.
		if err := other.AppendEvents(ctx, tenant, run, batchOf("after", round, 2)); err != nil {
			t.Fatal(err)
		}
	}
}
