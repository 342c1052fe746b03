package planexec

import (
	"time"

	"github.com/planexec/planexec/store"
	"github.com/planexec/planexec/store/memory"
)

// StepStatus is where a finished step stands, in a Result and in the store.
type StepStatus = store.StepStatus

// Step states.
const (
	StepDone    = store.StepDone
	StepFailed  = store.StepFailed
	StepInDoubt = store.StepInDoubt // an irreversible tool failed; its effect may have landed
)

// stores is the executor's store and what it found the store can do, asked
// once, as it was built: the one place that asks.
type stores struct {
	store.Store
	history   store.EventStore   // nil: a run's history lives in the process only
	ceilings  store.CeilingStore // the store's, or the executor's own in memory
	lister    store.RunLister    // nil: Executor.Runs is a *ConfigurationError
	pruner    store.Pruner       // nil: Executor.Prune is a *ConfigurationError
	recoverer store.Recoverer    // nil: Executor.Recover is too, and runs hold no lease
}

// storesOf finds what s can do. A nil s is a store in memory, kept for the
// life of the executor.
func storesOf(s store.Store, now func() time.Time) stores {
	if s == nil {
		s = memory.New(memory.WithClock(now))
	}
	st := stores{Store: s}
	st.history, _ = s.(store.EventStore)
	st.lister, _ = s.(store.RunLister)
	st.pruner, _ = s.(store.Pruner)
	st.recoverer, _ = s.(store.Recoverer)
	var ok bool
	if st.ceilings, ok = s.(store.CeilingStore); !ok {
		st.ceilings = memory.New(memory.WithClock(now))
	}
	return st
}
