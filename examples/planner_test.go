package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/planexec/planexec/examples/internal/trip"
)

func TestTheTripIsReplannedRunsTogetherAndBooksOnceApproved(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), strings.NewReader(""), &out, options{yes: true}); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	text := out.String()
	order := []string{"PLAN_REFUSED", "REPLANNED", "PLANNED", "AUTONOMY_CLEARED", "APPROVAL_REQUIRED", "APPROVAL_GRANTED", "PLAN_COMPLETED",
		"ROUND_COMPLETED     round 1", "PLANNED             round 2", "ANSWERED", "booked: PNR-BA117-", "answer (round 2): Booked BA117"}
	at := 0
	for _, want := range order {
		i := strings.Index(text[at:], want)
		if i < 0 {
			t.Fatalf("%q missing or out of order in:\n%s", want, text)
		}
		at += i
	}
	// The search and the room hold do not depend on each other: both start
	// before either finishes.
	lines := strings.Split(text, "\n")
	started, executed := map[string]int{}, map[string]int{}
	for n, l := range lines {
		for _, id := range []string{"s1", "s2"} {
			if strings.Contains(l, "STEP_STARTED") && strings.Contains(l, " "+id+" ") {
				started[id] = n
			}
			if strings.Contains(l, "STEP_EXECUTED") && strings.Contains(l, " "+id+" ") {
				executed[id] = n
			}
		}
	}
	if len(started) != 2 || len(executed) != 2 {
		t.Fatalf("s1 and s2 did not both run:\n%s", text)
	}
	if max(started["s1"], started["s2"]) > min(executed["s1"], executed["s2"]) {
		t.Errorf("s1 and s2 did not run together:\n%s", text)
	}
}

func TestWithoutATerminalOrYesTheBookingIsDeniedAndNotMade(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), strings.NewReader("y\n"), &out, options{}); err != nil {
		t.Fatalf("run: %v", err)
	}
	text := out.String()
	// The denial goes back to the model, which answers that nothing was
	// booked.
	if !strings.Contains(text, "APPROVAL_DENIED     round 1 rev 2  s3 book_flight") || !strings.Contains(text, "answer (round 2): Not booked") {
		t.Fatalf("the booking was not denied and reported:\n%s", text)
	}
	// The booking reads the flight the search found, so the person is asked
	// once the search has run, with the flight and fare it found. The
	// record says so in its order; the prompt itself may be printed before
	// the observer, which delivers events a little behind the steps, has
	// printed the search's end.
	required := strings.Index(text, "APPROVAL_REQUIRED   round 1 rev 2  s3 book_flight")
	searched := strings.Index(text, "STEP_EXECUTED       round 1 rev 2  s1 search_flights")
	asked := strings.Index(text, "approval needed: step s3 calls book_flight")
	if required < 0 || searched < 0 || asked < 0 || required < searched {
		t.Fatalf("the person was not asked after the search:\n%s", text)
	}
	if !strings.Contains(text[asked:], `"fare":"412.5","flight":"BA117"`) {
		t.Errorf("the approval does not show the flight and fare found:\n%s", text)
	}
	for _, ran := range []string{"s3 book_flight", "s4 send_itinerary"} {
		if strings.Contains(text, "STEP_STARTED        round 1 rev 2  "+ran) {
			t.Errorf("%s ran although the booking was denied:\n%s", ran, text)
		}
	}
}

// The durable stores are not in the default build either: with -store the
// command builds itself again with them and hands over. It is run as a user
// runs it, with each store: interrupted (as Ctrl-C does) once a step has
// run, then run again, when it resumes the stored plan without doing again
// what finished.
func TestAnInterruptedRunIsResumedFromItsStoreWithoutRedoingWhatFinished(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the command with the durable stores")
	}
	bin := filepath.Join(t.TempDir(), "planner")
	if out, err := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "planner.go").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	t.Run("sqlite", func(t *testing.T) {
		interruptAndResume(t, bin, "sqlite:"+filepath.Join(t.TempDir(), "trip.db"))
	})
	t.Run("postgres", func(t *testing.T) {
		interruptAndResume(t, bin, "postgres:"+freshDatabase(t))
	})
}

func interruptAndResume(t *testing.T, bin, store string) {
	args := []string{"-yes", "-store", store, "-run", "trip-1"}
	first, err := runCommand(t, bin, "STEP_EXECUTED", args...)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || !strings.Contains(first, "signal received") {
		t.Fatalf("the interrupted run ended with %v, want a failure saying it was interrupted:\n%s", err, first)
	}
	for _, want := range []string{"building with the durable stores (go build -tags stores)", "STEP_EXECUTED"} {
		if !strings.Contains(first, want) {
			t.Fatalf("the interrupted run does not show %q:\n%s", want, first)
		}
	}
	second, err := runCommand(t, bin, "", args...)
	if err != nil {
		t.Fatalf("resume: %v\n%s", err, second)
	}
	for _, want := range []string{"PLAN_RESUMED", "(replayed)", "PLAN_COMPLETED", "resumed run trip-1", "booked: PNR-BA117-", "ANSWERED"} {
		if !strings.Contains(second, want) {
			t.Errorf("the resumed run does not show %q:\n%s", want, second)
		}
	}
	if strings.Contains(second, "PLANNED             round 1") {
		t.Errorf("the resumed run planned round 1 again:\n%s", second)
	}
}

// runCommand runs bin with args, standard input empty, until it exits, and
// returns what it wrote to standard output and standard error and how it
// exited. With interruptAt, it is interrupted (os.Interrupt, as Ctrl-C
// does) once a line it writes contains interruptAt.
func runCommand(t *testing.T, bin, interruptAt string, args ...string) (string, error) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = w, w
	err = cmd.Start()
	w.Close() // the command's now; the output ends when it and what it started exit
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	lines := bufio.NewScanner(r)
	for lines.Scan() {
		out.WriteString(lines.Text() + "\n")
		if interruptAt != "" && strings.Contains(lines.Text(), interruptAt) {
			interruptAt = ""
			if err := cmd.Process.Signal(os.Interrupt); err != nil {
				t.Error(err)
			}
		}
	}
	return out.String(), cmd.Wait()
}

// freshDatabase returns the DSN of a database of the test's own on the
// server PLANEXEC_POSTGRES_URL names, dropped once the test ends.
func freshDatabase(t *testing.T) string {
	t.Helper()
	dsn := os.Getenv("PLANEXEC_POSTGRES_URL")
	if dsn == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("PLANEXEC_POSTGRES_URL is not set")
		}
		t.Skip("PLANEXEC_POSTGRES_URL is not set")
	}
	name := fmt.Sprintf("planner_%d", time.Now().UnixNano())
	do := func(ctx context.Context, sql string) error {
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, sql)
		return err
	}
	if err := do(t.Context(), "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := do(context.Background(), "DROP DATABASE "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Error(err)
		}
	})
	if !strings.Contains(dsn, "://") {
		return dsn + " dbname=" + name // keyword/value form
	}
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}

// A durable store in the default build asks for the command to be built
// again, before anything runs; with a provider's model too, it asks for
// both at once, so that one build brings in all the run needs.
func TestADurableStoreWithoutTheStoresAsksToBeBuiltWithThem(t *testing.T) {
	if trip.StoresCompiledIn() || trip.ProvidersCompiledIn() {
		t.Skip("built with the stores or the provider adapters")
	}
	db := filepath.Join(t.TempDir(), "trip.db")
	var out bytes.Buffer
	err := run(context.Background(), strings.NewReader(""), &out, options{yes: true, store: "sqlite:" + db})
	if !errors.Is(err, trip.ErrNeedsStores) || errors.Is(err, trip.ErrNeedsProviders) {
		t.Fatalf("run = %v, want trip.ErrNeedsStores alone", err)
	}
	t.Setenv("OPENAI_API_KEY", "test-key")
	err = run(context.Background(), strings.NewReader(""), &out, options{yes: true, store: "sqlite:" + db, model: "openai:some-model"})
	if !errors.Is(err, trip.ErrNeedsStores) || !errors.Is(err, trip.ErrNeedsProviders) {
		t.Fatalf("run = %v, want trip.ErrNeedsStores and trip.ErrNeedsProviders", err)
	}
	if out.Len() > 0 {
		t.Errorf("something was said or ran before the hand-over:\n%s", out.String())
	}
	if _, err := os.Stat(db); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the store was opened before the hand-over: %v", err)
	}
	if err := run(context.Background(), strings.NewReader(""), &out, options{yes: true, store: "mysql:x"}); err == nil || trip.NeedsRebuild(err) {
		t.Errorf("an unknown store: %v, want it refused", err)
	}
}

func TestWithoutItsKeyAProviderModelFallsBackToTheScriptedOneAndSaysSo(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	var out bytes.Buffer
	if err := run(context.Background(), strings.NewReader(""), &out, options{yes: true, model: "openai:some-model"}); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "model: scripted (OPENAI_API_KEY is not set") {
		t.Errorf("the run does not say it fell back:\n%s", out.String())
	}
	if err := run(context.Background(), strings.NewReader(""), &out, options{yes: true, model: "mystery:x"}); err == nil {
		t.Error("an unknown provider was accepted")
	}
}

// An OpenAI-compatible server that answers every chat completion with the
// trip plan, in the API's own wire format. The command is run as a user runs
// it: its default build has no provider adapters, so it builds itself again
// with them and hands over.
func TestTheTripIsPlannedThroughAnOpenAICompatibleEndpoint(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the command with the provider adapters")
	}
	var calls atomic.Int32
	srv := httptest.NewServer(trip.OpenAIStandIn("test-key", &calls))
	defer srv.Close()
	cmd := exec.CommandContext(t.Context(), "go", "run", "planner.go", "-yes", "-model", "openai:trip-model")
	cmd.Env = append(os.Environ(), "OPENAI_API_KEY=test-key", "OPENAI_BASE_URL="+srv.URL)
	cmd.Stdin = strings.NewReader("")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the command failed: %v\n%s", err, out)
	}
	text := string(out)
	for _, want := range []string{"building with the provider adapters", "model: trip-model via the OpenAI-compatible API", "PLANNED", "tokens=1020", "PLAN_COMPLETED", "booked: PNR-BA117-", "answer (round 2)"} {
		if !strings.Contains(text, want) {
			t.Errorf("missing %q:\n%s", want, text)
		}
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("the endpoint was called %d times, want twice: the plan, then the answer", n)
	}
}

func TestAProviderModelWithItsKeyButWithoutTheAdaptersAsksToBeBuiltWithThem(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "test-key")
	var out bytes.Buffer
	err := run(context.Background(), strings.NewReader(""), &out, options{yes: true, model: "openai:some-model"})
	if !errors.Is(err, trip.ErrNeedsProviders) {
		t.Fatalf("run = %v, want trip.ErrNeedsProviders", err)
	}
	if strings.Contains(out.String(), "STEP_STARTED") {
		t.Errorf("something ran before the hand-over:\n%s", out.String())
	}
}
