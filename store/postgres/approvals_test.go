package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/store"
	"github.com/planexec/planexec/store/postgres"
)

// Of people approving one request at once through two replicas, each on a
// pool of its own, one decision is recorded: each of the others is told
// store.ErrDecided, and both replicas read back the one recorded.
func TestReplicasDecidingOneRequestAtOnceRecordOneDecision(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, schema := newStore(t) // creates the schema
	replicas := []*postgres.Store{replicaStore(t, schema, 8), replicaStore(t, schema, 8)}
	const requests, people = 40, 16
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	var (
		mu    sync.Mutex
		wins  = map[string][]string{}
		wg    sync.WaitGroup
		start = make(chan struct{})
	)
	for p := range people {
		wg.Go(func() {
			<-start
			who := fmt.Sprint("person-", p)
			for i := range requests {
				d := planexec.Decision{RequestID: fmt.Sprint("r", i), Status: planexec.Approved, Approver: who, DecidedAt: at, Expires: at.Add(time.Hour)}
				switch err := replicas[p%2].SaveDecision(ctx, "acme", d); {
				case err == nil:
					mu.Lock()
					wins[d.RequestID] = append(wins[d.RequestID], who)
					mu.Unlock()
				case err != store.ErrDecided:
					t.Errorf("%s deciding %s: %v, want nil or store.ErrDecided itself", who, d.RequestID, err)
					return
				}
			}
		})
	}
	close(start)
	wg.Wait()
	for i := range requests {
		id := fmt.Sprint("r", i)
		if len(wins[id]) != 1 {
			t.Errorf("request %s: decisions of %v recorded, want exactly one", id, wins[id])
			continue
		}
		for j, s := range replicas {
			if got, err := s.Decision(ctx, "acme", id); err != nil || got.Approver != wins[id][0] {
				t.Errorf("replica %d reads request %s decided by %q (%v); want %s, whose decision was recorded", j, id, got.Approver, err, wins[id][0])
			}
		}
	}
}

// A decision a newer version wrote is not replaced by this older writer,
// whatever it decides and whatever the row's columns say: not even when
// they say it is pending.
func TestADecisionOfANewerVersionIsNotOverwritten(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, schema := newStore(t)
	const doc = `{"version":99,"request_id":"r9","status":"pending","decided_at":"2030-01-01T00:00:00Z"}`
	sqlExec(t, schema, `INSERT INTO approvals (tenant, record_id, version, status, decision, decided_at, expires)
		VALUES ('acme', 'r9', 99, 'pending', convert_to($1, 'UTF8'), '2030-01-01', 'infinity')`, doc)
	for _, st := range []planexec.DecisionStatus{planexec.Approved, planexec.Denied, planexec.Pending} {
		err := s.SaveDecision(ctx, "acme", planexec.Decision{RequestID: "r9", Status: st, Approver: "eve", DecidedAt: time.Date(2030, 1, 2, 0, 0, 0, 0, time.UTC)})
		wantStoreError(t, fmt.Sprintf("SaveDecision (%s) over a version 99 decision", st), err, store.ErrNewerRecord)
	}
	var got []byte
	q := "SELECT decision FROM " + pgx.Identifier{schema, "approvals"}.Sanitize() + " WHERE tenant = 'acme' AND record_id = 'r9'"
	if err := sharedPool(t).QueryRow(ctx, q).Scan(&got); err != nil || string(got) != doc {
		t.Errorf("the newer decision after SaveDecision = %q, %v; want it as it was", got, err)
	}
}

// Expiries are kept to the microsecond, rounded up: an approval is never
// found expired before it expires, even within its last microsecond, and
// is once the microsecond it expires in is over.
func TestAnApprovalIsNeverFoundExpiredBeforeItExpires(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newStore(t)
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	expires := at.Add(time.Hour + 500*time.Nanosecond)
	approval := func(who string, at time.Time) planexec.Decision {
		return planexec.Decision{RequestID: "r1", Status: planexec.Approved, Approver: who, DecidedAt: at}
	}
	first := approval("ana", at)
	first.Expires = expires
	if err := s.SaveDecision(ctx, "acme", first); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveDecision(ctx, "acme", approval("eve", expires.Add(-time.Nanosecond))); err != store.ErrDecided {
		t.Errorf("an approval a nanosecond before the first expires: %v, want store.ErrDecided", err)
	}
	if err := s.SaveDecision(ctx, "acme", approval("eve", expires.Truncate(time.Microsecond).Add(time.Microsecond))); err != nil {
		t.Errorf("an approval once the microsecond the first expires in is over: %v, want it recorded", err)
	}
	if got, err := s.Decision(ctx, "acme", "r1"); err != nil || got.Approver != "eve" {
		t.Errorf("Decision = %+v, %v; want eve's", got, err)
	}
}

// A replica still running the version before, whose SaveDecision writes no
// expiry and replaces any decision, records none once the schema is
// migrated: the statement it runs fails.
func TestAReplicaOfTheSecondSchemaRecordsNoDecision(t *testing.T) {
	t.Parallel()
	_, schema := newStore(t)
	_, err := sharedPool(t).Exec(context.Background(), "INSERT INTO "+pgx.Identifier{schema, "approvals"}.Sanitize()+
		` (tenant, record_id, version, status, decision, decided_at) VALUES ('acme', 'r1', 2, 'approved', '\x7b7d', now())
		ON CONFLICT (tenant, record_id) DO UPDATE SET version = excluded.version, status = excluded.status,
			decision = excluded.decision, decided_at = excluded.decided_at`)
	if pe := (*pgconn.PgError)(nil); !errors.As(err, &pe) || pe.Code != "23502" || pe.ColumnName != "expires" {
		t.Fatalf("the second schema's SaveDecision statement: %v; want it refused for a NULL expires (not_null_violation)", err)
	}
}
