package postgres_test

import (
	"testing"
	"time"

	"github.com/planexec/planexec/store/postgres"
	"github.com/planexec/planexec/storetest"
)

// The conformance suite every store passes, each of its subtests in a schema
// of its own.
func TestConformance(t *testing.T) {
	t.Parallel()
	sharedPool(t) // skip (or fail under CI) before the suite starts
	storetest.Run(t, func(t testing.TB, now func() time.Time) storetest.Stores {
		s, _ := newStore(t, postgres.WithClock(now))
		return storetest.Stores{Plans: s, Idempotency: s, Approvals: s}
	})
}
