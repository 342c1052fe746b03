package planexec_test

import (
	"testing"
	"time"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/storetest"
)

func TestMemoryStoresConform(t *testing.T) {
	storetest.Run(t, func(t testing.TB, now func() time.Time) storetest.Stores {
		plans := &planexec.MemoryPlanStore{}
		idem := &planexec.MemoryIdempotencyStore{}
		idem.SetClock(now)
		return storetest.Stores{Plans: plans, Idempotency: idem, Approvals: &plans.MemoryApprovalStore}
	})
}
