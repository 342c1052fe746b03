package postgres_test

import (
	"testing"

	"github.com/planexec/planexec/storetest"
)

// Random operations over three executors sharing one PostgreSQL schema,
// with a child process killed halfway through an execution now and then,
// never do an irreversible effect twice, pass a ceiling, stretch an
// approval over two effects, or lose an effect from the record.
func TestRandomOperationsKeepTheExecutorsGuarantees(t *testing.T) {
	storetest.Guarantees(t, crashDurable(t), storetest.GuaranteeOptions{Sequences: 12, Crashes: 1})
}
