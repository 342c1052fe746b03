package sqlite_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/store"
	"github.com/planexec/planexec/store/sqlite"
)

const racedKeys = 40

// claimAll claims every raced key once as holder and reports those it
// acquired.
func claimAll(ctx context.Context, s *sqlite.Store, holder string) (acquired []string, err error) {
	for i := range racedKeys {
		k := fmt.Sprint("k", i)
		c, err := s.Claim(ctx, store.ClaimRequest{Key: planexec.Key{Tenant: "acme", Digest: k}, Holder: holder, Lease: time.Hour})
		if err != nil {
			return nil, fmt.Errorf("claim %s: %w", k, err)
		}
		switch c.State {
		case store.ClaimAcquired:
			acquired = append(acquired, k)
		case store.ClaimHeld:
		default:
			return nil, fmt.Errorf("claim %s: state %d, want acquired or held", k, c.State)
		}
	}
	return acquired, nil
}

func TestTwoStoresOnOneFileAcquireEachKeyExactlyOnce(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "shared.db")
	stores := []*sqlite.Store{
		openAt(t, path, sqlite.WithBusyTimeout(time.Minute)),
		openAt(t, path, sqlite.WithBusyTimeout(time.Minute)),
	}
	var (
		mu    sync.Mutex
		wins  = map[string][]string{}
		wg    sync.WaitGroup
		start = make(chan struct{})
	)
	for g := range 16 {
		wg.Go(func() {
			<-start
			holder := fmt.Sprint("g", g)
			got, err := claimAll(ctx, stores[g%2], holder)
			if err != nil {
				t.Errorf("%s: %v", holder, err)
				return
			}
			mu.Lock()
			for _, k := range got {
				wins[k] = append(wins[k], holder)
			}
			mu.Unlock()
		})
	}
	close(start)
	wg.Wait()
	for i := range racedKeys {
		if k := fmt.Sprint("k", i); len(wins[k]) != 1 {
			t.Errorf("key %s acquired by %v, want exactly one holder", k, wins[k])
		}
	}
}

// Of people approving one request at once through two stores on one file
// (two connections), one decision is recorded: each of the others is told
// store.ErrDecided, and both stores read back the one recorded.
func TestTwoStoresOnOneFileRecordOneOfTheDecisionsMadeAtOnce(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "shared.db")
	stores := []*sqlite.Store{
		openAt(t, path, sqlite.WithBusyTimeout(time.Minute)),
		openAt(t, path, sqlite.WithBusyTimeout(time.Minute)),
	}
	const requests, people = 40, 16
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	var (
		mu    sync.Mutex
		wins  = map[string][]string{}
		wg    sync.WaitGroup
		start = make(chan struct{})
	)
	for p := range people {
		wg.Go(func() {
			<-start
			who := fmt.Sprint("person-", p)
			for i := range requests {
				d := planexec.Decision{RequestID: fmt.Sprint("r", i), Status: planexec.Approved, Approver: who, DecidedAt: at, Expires: at.Add(time.Hour)}
				switch err := stores[p%2].SaveDecision(ctx, "acme", d); {
				case err == nil:
					mu.Lock()
					wins[d.RequestID] = append(wins[d.RequestID], who)
					mu.Unlock()
				case err != store.ErrDecided:
					t.Errorf("%s deciding %s: %v, want nil or store.ErrDecided itself", who, d.RequestID, err)
					return
				}
			}
		})
	}
	close(start)
	wg.Wait()
	for i := range requests {
		id := fmt.Sprint("r", i)
		if len(wins[id]) != 1 {
			t.Errorf("request %s: decisions of %v recorded, want exactly one", id, wins[id])
			continue
		}
		for j, s := range stores {
			if got, err := s.Decision(ctx, "acme", id); err != nil || got.Approver != wins[id][0] {
				t.Errorf("store %d reads request %s decided by %q (%v); want %s, whose decision was recorded", j, id, got.Approver, err, wins[id][0])
			}
		}
	}
}

// childEnv names the file a child process of TestProcessesRacing… works on.
const childEnv = "PLANEXEC_SQLITE_CHILD_DB"

// TestChildProcess is the body of a child process: it waits for the start
// signal, opens the file (racing the others to create and migrate it),
// claims every key and prints what it acquired.
func TestChildProcess(t *testing.T) {
	path := os.Getenv(childEnv)
	if path == "" {
		t.Skip("run as a child process by TestProcessesRacingToOpenOneFileMigrateItOnceAndAcquireEachKeyOnce")
	}
	for {
		if _, err := os.Stat(path + ".go"); err == nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	s, err := sqlite.Open(context.Background(), path, sqlite.WithBusyTimeout(time.Minute))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer s.Close()
	got, err := claimAll(context.Background(), s, fmt.Sprint("pid", os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range got {
		fmt.Println("acquired", k)
	}
}

func TestProcessesRacingToOpenOneFileMigrateItOnceAndAcquireEachKeyOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	path := filepath.Join(t.TempDir(), "raced.db")
	const children = 4
	var (
		outs [children]bytes.Buffer
		cmds [children]*exec.Cmd
	)
	for i := range children {
		cmd := exec.Command(os.Args[0], "-test.run=^TestChildProcess$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), childEnv+"="+path)
		cmd.Stdout, cmd.Stderr = &outs[i], &outs[i]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[i] = cmd
	}
	// Every child is waiting on the file; go.
	if err := os.WriteFile(path+".go", nil, 0o600); err != nil {
		t.Fatal(err)
	}
	wins := map[string]int{}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("child %d: %v\n%s", i, err, outs[i].String())
		}
		sc := bufio.NewScanner(&outs[i])
		for sc.Scan() {
			if k, ok := strings.CutPrefix(sc.Text(), "acquired "); ok {
				wins[k]++
			}
		}
	}
	for i := range racedKeys {
		if k := fmt.Sprint("k", i); wins[k] != 1 {
			t.Errorf("key %s acquired %d times across processes, want once", k, wins[k])
		}
	}
	var v int
	if err := rawDB(t, path).QueryRow(`PRAGMA user_version`).Scan(&v); err != nil || v != sqlite.SchemaVersion {
		t.Errorf("schema version after the race = %d, %v; want %d", v, err, sqlite.SchemaVersion)
	}
}
