package storetest_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/storetest"
)

func TestJournalStoresConform(t *testing.T) {
	storetest.Run(t, func(t testing.TB, now func() time.Time) storetest.Stores {
		j := openJournal(t, filepath.Join(t.TempDir(), "journal.jsonl"), now)
		return storetest.Stores{Plans: j, Idempotency: j, Approvals: j}
	})
}

// journalEnv names the journal a crash child opens: the one its parent chose.
const journalEnv = "STORETEST_CRASH_JOURNAL"

// crashJournal returns a Durable over one journal file, shared with the
// crash children through the environment. split hides that the journal is
// a StepStore, so the executor writes claims and step records apart.
func crashJournal(t *testing.T, split bool) storetest.Durable {
	if os.Getenv(journalEnv) == "" {
		t.Setenv(journalEnv, filepath.Join(t.TempDir(), "journal.jsonl"))
	}
	return storetest.Durable{Open: func(t testing.TB) (storetest.Stores, storetest.Effects) {
		j := openJournal(t, os.Getenv(journalEnv), time.Now)
		s := storetest.Stores{Plans: j, Idempotency: j, Approvals: j}
		if split {
			s.Plans = plansOnly{j}
		}
		return s, j
	}}
}

// plansOnly shows a store as a PlanStore and nothing more.
type plansOnly struct{ planexec.PlanStore }

func TestCrashAnywhereOverOneStepStore(t *testing.T) {
	storetest.CrashAnywhere(t, crashJournal(t, false), 40)
}

func TestCrashAnywhereOverStoresWritingApart(t *testing.T) {
	storetest.CrashAnywhere(t, crashJournal(t, true), 40)
}

func TestCrashAnywhereInRoundsOverOneStepStore(t *testing.T) {
	storetest.CrashAnywhereInRounds(t, crashJournal(t, false), 42)
}

func TestCrashAnywhereInRoundsOverStoresWritingApart(t *testing.T) {
	storetest.CrashAnywhereInRounds(t, crashJournal(t, true), 49)
}
