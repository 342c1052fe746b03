package storetest_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/planexec/planexec/storetest"
)

func TestJournalStoresConform(t *testing.T) {
	storetest.Run(t, func(t testing.TB, now func() time.Time) storetest.Stores {
		j := openJournal(t, filepath.Join(t.TempDir(), "journal.jsonl"), now)
		return storetest.Stores{Store: j}
	})
}

// journalEnv names the journal a crash child opens: the one its parent chose.
const journalEnv = "STORETEST_CRASH_JOURNAL"

// crashJournal returns a Durable over one journal file, shared with the
// crash children through the environment.
func crashJournal(t *testing.T) storetest.Durable {
	if os.Getenv(journalEnv) == "" {
		t.Setenv(journalEnv, filepath.Join(t.TempDir(), "journal.jsonl"))
	}
	return storetest.Durable{Open: func(t testing.TB) (storetest.Stores, storetest.Effects) {
		j := openJournal(t, os.Getenv(journalEnv), time.Now)
		return storetest.Stores{Store: j}, j
	}}
}

func TestCrashAnywhere(t *testing.T) {
	storetest.CrashAnywhere(t, crashJournal(t), 40)
}

func TestCrashAnywhereInRounds(t *testing.T) {
	storetest.CrashAnywhereInRounds(t, crashJournal(t), 42)
}
