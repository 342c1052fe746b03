package memory_test

import (
	"testing"
	"time"

	"github.com/planexec/planexec/store/memory"
	"github.com/planexec/planexec/storetest"
)

// The memory store has every behaviour the conformance suite asks of a
// store, its one-transaction step writes among them: one value is the plan,
// claim and decision store.
func TestTheMemoryStoreConforms(t *testing.T) {
	storetest.Run(t, func(_ testing.TB, now func() time.Time) storetest.Stores {
		s := memory.New(memory.WithClock(now))
		return storetest.Stores{Store: s}
	})
}
