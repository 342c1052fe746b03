package sqlite_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/planexec/planexec/store"
	"github.com/planexec/planexec/store/sqlite"
)

// The children of the tests below are this test binary run again with
// upkeepChildEnv naming what to do ("spend" or "take") and
// upkeepDBEnv the file. Each waits for the file named by the path and
// ".go" before it starts, so that they all start at once.
const (
	upkeepChildEnv = "PLANEXEC_SQLITE_UPKEEP_CHILD"
	upkeepDBEnv    = "PLANEXEC_SQLITE_UPKEEP_DB"
)

// What the children spend against: grants whose windows each hold, before
// they start, 1.00 (and 5.00 spent outside it), under a ceiling of 7.35.
// They all spend at one instant, so that each spend's window holds every
// other (a spend's window ends at its own instant). Each child first
// spends 0.05 on each grant under a key every child uses, then 0.10 at a
// time under keys of its own, on one grant after another. So the key all
// share is recorded once per grant, and exactly 63 spends of 0.10 fit in
// each: 1.00 + 0.05 + 63 × 0.10 = 7.35, the ceiling to the cent (a sum in
// floating point may well miss it). Each grant is a race at its ceiling.
var (
	spendGrants  = []string{"g-refunds", "g-credits", "g-fees", "g-gifts", "g-waivers", "g-rebates"}
	spendWindow  = time.Hour
	spendCeiling = decimal.RequireFromString("7.35")
	spendAt      = time.Date(2030, time.March, 4, 9, 0, 0, 0, time.UTC)
	spendEach    = decimal.RequireFromString("0.10")
	spendShared  = decimal.RequireFromString("0.05")
)

const (
	spendChildren       = 4
	spendersPerChild    = 3
	spendsPerSpender    = 14 // 4 × 3 × 14 = 168 tries at 0.10: more than fit
	wantSpendsOfTenCent = 63
)

// What the children take: stalled runs (interrupted, or running under a
// lease that ran out) and live ones, all at takeAt.
var takeAt = time.Date(2030, time.March, 4, 9, 0, 0, 0, time.UTC)

const (
	takeChildren       = 4
	takeStoresPerChild = 2
	stalledRuns        = 30
	liveRuns           = 6
)

func takeRunIDs() []string {
	var ids []string
	for i := range stalledRuns + liveRuns {
		ids = append(ids, fmt.Sprintf("run-%02d", i))
	}
	return ids
}

// TestUpkeepChildProcess is the body of a child process of the tests
// below; run alone, it skips.
func TestUpkeepChildProcess(t *testing.T) {
	what, path := os.Getenv(upkeepChildEnv), os.Getenv(upkeepDBEnv)
	if what == "" || path == "" {
		t.Skip("run as a child process by TestProcessesSpendingAtOnceNeverPassTheCeilingTogether and TestProcessesTakingStalledRunsTakeEachOnce")
	}
	ctx := context.Background()
	var stores []*sqlite.Store
	n := 1
	if what == "take" {
		n = takeStoresPerChild
	}
	for range n {
		stores = append(stores, openAt(t, path, sqlite.WithBusyTimeout(time.Minute)))
	}
	for {
		if _, err := os.Stat(path + ".go"); err == nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	var (
		mu  sync.Mutex
		out []string
		wg  sync.WaitGroup
	)
	report := func(line string) {
		mu.Lock()
		out = append(out, line)
		mu.Unlock()
	}
	pid := os.Getpid()
	switch what {
	case "spend":
		s := stores[0]
		// The key every child shares goes first: whichever child is
		// first records it with room to spare.
		for _, grant := range spendGrants {
			err := s.Spend(ctx, store.Spend{Tenant: "acme", Grant: grant, Key: "shared", Amount: spendShared, At: spendAt}, spendWindow, spendCeiling)
			if err != nil {
				t.Fatalf("the shared spend on %s: %v", grant, err)
			}
		}
		for g := range spendersPerChild {
			wg.Go(func() {
				for i := range spendsPerSpender {
					for _, grant := range spendGrants {
						key := fmt.Sprintf("p%d-s%d-%d", pid, g, i)
						sp := store.Spend{Tenant: "acme", Grant: grant, Key: key, Amount: spendEach, At: spendAt}
						switch err := s.Spend(ctx, sp, spendWindow, spendCeiling); {
						case err == nil:
							report("spent " + grant + " " + key)
						case errors.Is(err, store.ErrCeiling):
							report("refused " + grant + " " + key)
						default:
							t.Errorf("Spend %s on %s: %v", key, grant, err)
							return
						}
					}
				}
			})
		}
	case "take":
		for i, s := range stores {
			holder := fmt.Sprintf("p%d-s%d", pid, i)
			wg.Go(func() {
				ids := takeRunIDs()
				rand.Shuffle(len(ids), func(a, b int) { ids[a], ids[b] = ids[b], ids[a] })
				for _, id := range ids {
					took, err := s.TakeRun(ctx, store.RunRef{Tenant: "acme", RunID: id}, holder, takeAt, time.Hour)
					if err != nil {
						t.Errorf("TakeRun %s: %v", id, err)
						return
					}
					if took {
						report("took " + id + " " + holder)
					}
				}
			})
		}
	default:
		t.Fatalf("%s=%q: want spend or take", upkeepChildEnv, what)
	}
	wg.Wait()
	for _, line := range out {
		fmt.Println(line)
	}
}

// runUpkeepChildren starts n children doing what on the file at path,
// starts them at once, and returns the lines each printed.
func runUpkeepChildren(t *testing.T, what, path string, n int) []string {
	t.Helper()
	outs := make([]bytes.Buffer, n)
	cmds := make([]*exec.Cmd, n)
	for i := range n {
		cmd := exec.Command(os.Args[0], "-test.run=^TestUpkeepChildProcess$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), upkeepChildEnv+"="+what, upkeepDBEnv+"="+path)
		cmd.Stdout, cmd.Stderr = &outs[i], &outs[i]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[i] = cmd
	}
	if err := os.WriteFile(path+".go", nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var lines []string
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("child %d: %v\n%s", i, err, outs[i].String())
		}
		sc := bufio.NewScanner(&outs[i])
		for sc.Scan() {
			lines = append(lines, sc.Text())
		}
	}
	return lines
}

// Processes spending against windowed ceilings at once, each with
// spenders of its own, never take a grant past its ceiling together:
// exactly the spends that fit go through, no more, the refused ones record
// nothing, the key they all share is recorded once, and each window sums
// to its ceiling exactly.
func TestProcessesSpendingAtOnceNeverPassTheCeilingTogether(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "spends.db")
	s := openAt(t, path)
	for _, grant := range spendGrants {
		for _, sp := range []store.Spend{
			{Tenant: "acme", Grant: grant, Key: "before", Amount: decimal.RequireFromString("1.00"), At: spendAt.Add(-spendWindow / 2)},
			{Tenant: "acme", Grant: grant, Key: "long-ago", Amount: decimal.RequireFromString("5.00"), At: spendAt.Add(-2 * spendWindow)},
		} {
			if err := s.Spend(ctx, sp, spendWindow, spendCeiling); err != nil {
				t.Fatal(err)
			}
		}
	}
	spent, refused := map[string]map[string]int{}, map[string]int{}
	for _, grant := range spendGrants {
		spent[grant] = map[string]int{}
	}
	for _, line := range runUpkeepChildren(t, "spend", path, spendChildren) {
		what, rest, _ := strings.Cut(line, " ")
		grant, key, _ := strings.Cut(rest, " ")
		switch what {
		case "spent":
			spent[grant][key]++
		case "refused":
			refused[grant]++
		}
	}
	db := rawDB(t, path)
	for _, grant := range spendGrants {
		if len(spent[grant]) != wantSpendsOfTenCent {
			t.Errorf("%s: %d spends of 0.10 went through across the processes, want %d", grant, len(spent[grant]), wantSpendsOfTenCent)
		}
		for key, n := range spent[grant] {
			if n != 1 {
				t.Errorf("%s: spend %s went through %d times", grant, key, n)
			}
		}
		if tries := spendChildren * spendersPerChild * spendsPerSpender; len(spent[grant])+refused[grant] != tries {
			t.Errorf("%s: %d spends went through and %d were refused, want %d answered", grant, len(spent[grant]), refused[grant], tries)
		}
		got, err := s.Spent(ctx, grant, spendAt, spendWindow, nil)
		if err != nil || !got.Equal(spendCeiling) {
			t.Errorf("%s: Spent = %s, %v; want the ceiling, %s, exactly", grant, got, err, spendCeiling)
		}
		var rows, shared int
		if err := db.QueryRow(`SELECT count(*), count(*) FILTER (WHERE key = 'shared') FROM spends WHERE grant_id = ?`, grant).
			Scan(&rows, &shared); err != nil || rows != 2+1+wantSpendsOfTenCent || shared != 1 {
			t.Errorf("%s: %d spends recorded, %d of the shared key (%v); want %d and 1", grant, rows, shared, err, 2+1+wantSpendsOfTenCent)
		}
	}
}

// Stores in several processes taking the same stalled runs at once take
// each exactly once, and never a live one; each run's holder is the one
// that took it.
func TestProcessesTakingStalledRunsTakeEachOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "takes.db")
	s := openAt(t, path)
	var recs []*store.PlanRecord
	for i, id := range takeRunIDs() {
		rec := listedRecord(t, "acme", id, store.RunRunning, takeAt.Add(-time.Hour))
		switch {
		case i >= stalledRuns: // live: its lease runs out after takeAt
			rec.Holder, rec.LeaseExpires = "alive", takeAt.Add(time.Nanosecond)
		case i%2 == 0:
			rec.Status = store.RunInterrupted
		default: // its executor died: its lease ran out at takeAt
			rec.Holder, rec.LeaseExpires = "dead", takeAt
		}
		recs = append(recs, rec)
	}
	if err := s.SavePlans(ctx, recs); err != nil {
		t.Fatal(err)
	}
	takers := map[string][]string{}
	for _, line := range runUpkeepChildren(t, "take", path, takeChildren) {
		if rest, ok := strings.CutPrefix(line, "took "); ok {
			id, holder, _ := strings.Cut(rest, " ")
			takers[id] = append(takers[id], holder)
		}
	}
	for i, id := range takeRunIDs() {
		rec, err := s.LoadPlan(ctx, "acme", id)
		if err != nil {
			t.Fatalf("LoadPlan %s: %v", id, err)
		}
		if i >= stalledRuns {
			if len(takers[id]) != 0 || rec.Holder != "alive" {
				t.Errorf("live run %s was taken by %v; its holder is %q", id, takers[id], rec.Holder)
			}
			continue
		}
		if len(takers[id]) != 1 {
			t.Errorf("stalled run %s was taken by %v, want exactly one", id, takers[id])
			continue
		}
		if rec.Status != store.RunRunning || rec.Holder != takers[id][0] || !rec.LeaseExpires.Equal(takeAt.Add(time.Hour)) {
			t.Errorf("run %s is %s, held by %q until %v; want running, held by %s until %v", id, rec.Status, rec.Holder, rec.LeaseExpires,
				takers[id][0], takeAt.Add(time.Hour))
		}
	}
	if left, err := s.Stalled(ctx, takeAt, 100); err != nil || len(left) != 0 {
		t.Errorf("Stalled after the takers = %v, %v; want none", left, err)
	}
}
