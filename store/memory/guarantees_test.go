package memory_test

import (
	"testing"

	"github.com/planexec/planexec/store/memory"
	"github.com/planexec/planexec/storetest"
)

// Random operations over three executors sharing one memory store (plans,
// rounds, decisions, calls handed back, doubts resolved, recovery,
// pruning, executions abandoned halfway) never do an irreversible effect
// twice, pass a ceiling, stretch an approval over two effects, or lose an
// effect from the record. Each sequence gets a store of its own.
func TestRandomOperationsKeepTheExecutorsGuarantees(t *testing.T) {
	storetest.Guarantees(t, storetest.Durable{Open: func(testing.TB) (storetest.Stores, storetest.Effects) {
		return storetest.Stores{Store: memory.New()}, nil
	}}, storetest.GuaranteeOptions{Sequences: 40, MinOperations: 20, Operations: 40})
}
