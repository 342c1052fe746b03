package memory_test

import (
	"testing"
	"time"

	"github.com/planexec/planexec/store/memory"
	"github.com/planexec/planexec/storetest"
)

// The reference store's claims and spends are linearizable: the baseline
// the durable stores are held to.
func TestClaimsAndSpendsAreLinearizableUnderConcurrentClients(t *testing.T) {
	storetest.Linearizable(t, func(_ testing.TB, now func() time.Time) storetest.Stores {
		return storetest.Stores{Store: memory.New(memory.WithClock(now))}
	}, storetest.LinearizableOptions{})
}
