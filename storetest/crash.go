package storetest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/store"
)

// Effects records what tools did, durably, in the same backing as the stores, so a kill cannot lose it.
type Effects interface {
	// Record adds one to the count of step's effect in run. It is atomic: a
	// kill leaves it done or not done.
	Record(ctx context.Context, run, step string) error
	// Counts returns how many times each step of run recorded its effect; an
	// empty map (not an error) when none did.
	Counts(ctx context.Context, run string) (map[string]int, error)
}

// Durable opens the same durable backing again each time it is called (in the parent, and in each child process).
type Durable struct {
	// Open returns stores and effects over the backing, with leases on the
	// wall clock. It is called once in the test process and once in each
	// child. A child inherits the test's environment, so a path or URL the
	// test put there (t.Setenv) finds the same backing.
	Open func(t testing.TB) (Stores, Effects)
}

// The child is told who it is through its environment.
const (
	crashEnvTest = "PLANEXEC_STORETEST_CRASH_TEST"
	crashEnvRun  = "PLANEXEC_STORETEST_CRASH_RUN"
)

const (
	// crashWord starts every line the child speaks to the parent.
	crashWord = "planexec-storetest-crash"
	// crashLease is the lease of every claim, in the child and the parent:
	// short, since after a kill the parent waits it out, but long enough
	// that a killed child's commit still on its way to a loaded database
	// lands within it.
	crashLease  = 200 * time.Millisecond
	crashTenant = "crash"
	crashSteps  = 20
	// crashPatience bounds a child's run and the recovery of one kill point.
	// It only turns a hang into a failure.
	crashPatience = 30 * time.Second
)

// point is a place where the child stops and waits for the parent's go-ahead,
// and where the parent may kill it.
type point string

const (
	beforeClaim    point = "before-claim"
	afterClaim     point = "after-claim" // the claim was acquired
	toolStart      point = "tool-start"  // before the effect
	toolEnd        point = "tool-end"    // the effect is recorded; the tool has not returned
	beforeComplete point = "before-complete"
	beforeRecord   point = "before-record"
	afterRecord    point = "after-record"
)

// stepPoint is a point in one step.
type stepPoint struct {
	step string
	at   point
}

// shape is how the executor writes a step's completion over these stores.
type shape struct {
	points []point
	// replay: the points of a step whose effect is on record already, so
	// that its claim gives back the outcome and the tool is not called.
	replay []point
	// attempt: past this point the completion may have been written.
	attempt point
	// written: at this point the completion has been written.
	written point
}

func shapeOf(Stores) shape {
	// CompleteStep writes the claim's completion and the step record at once.
	return shape{points: []point{beforeClaim, afterClaim, toolStart, toolEnd, beforeRecord, afterRecord}, replay: []point{beforeClaim},
		attempt: beforeRecord, written: afterRecord}
}

// The plan: twenty steps in four lanes of dependent steps that run side by
// side, joined by a last step; a third of them irreversible.

type crashArgs struct {
	Step string `json:"step"`
}

const (
	crashReversible   = "crash_reversible"
	crashIrreversible = "crash_irreversible"
)

func crashPlan() planexec.Plan {
	p := planexec.Plan{ID: "crash-plan", Goal: "survive being killed anywhere", Revision: 1}
	for i := 1; i <= crashSteps; i++ {
		id := fmt.Sprintf("s%02d", i)
		tool := crashReversible
		if i%3 == 0 || i == crashSteps {
			tool = crashIrreversible
		}
		var deps []string
		switch {
		case i == crashSteps:
			for j := crashSteps - 4; j < crashSteps; j++ {
				deps = append(deps, fmt.Sprintf("s%02d", j))
			}
		case i > 4:
			deps = []string{fmt.Sprintf("s%02d", i-4)}
		}
		args, _ := json.Marshal(crashArgs{Step: id})
		p.Steps = append(p.Steps, planexec.Step{ID: id, Tool: tool, Arguments: args, DependsOn: deps})
	}
	return p
}

// crashOutcome is what step's tool returns, and what a resolution records.
func crashOutcome(run, step string) string { return run + "/" + step }

// crashTools are the plan's tools. called sees each call, by step id; at
// marks the points inside a tool. The reversible tool looks before it acts,
// as a tool that may safely run again must (it would hand its idempotency
// key to the remote end), and records its effect under the step's id: a
// read that a later round asks for again is a new step, with an effect of
// its own. The irreversible one acts blindly, so that only the executor
// stands between it and a second effect, and records its effect under its
// argument: the effect it names, whichever step asks for it. Both return
// crashOutcome of their argument.
func crashTools(effects Effects, at func(point, string), called func(string)) []*planexec.Tool {
	tool := func(irreversible bool) func(context.Context, crashArgs) (string, error) {
		return func(ctx context.Context, a crashArgs) (string, error) {
			info, _ := planexec.CurrentStep(ctx)
			called(info.StepID)
			at(toolStart, info.StepID)
			effect := a.Step
			if !irreversible {
				effect = info.StepID
				counts, err := effects.Counts(ctx, info.RunID)
				if err != nil {
					return "", fmt.Errorf("reading the effects: %w", err)
				}
				if counts[effect] > 0 {
					at(toolEnd, info.StepID)
					return crashOutcome(info.RunID, a.Step), nil
				}
			}
			if err := effects.Record(ctx, info.RunID, effect); err != nil {
				return "", fmt.Errorf("recording the effect: %w", err)
			}
			at(toolEnd, info.StepID)
			return crashOutcome(info.RunID, a.Step), nil
		}
	}
	return []*planexec.Tool{
		planexec.MustTool(crashReversible, "Do something that may be done again.", tool(false)),
		planexec.MustTool(crashIrreversible, "Do something once.", tool(true), planexec.Irreversible()),
	}
}

func crashExecutor(run, holder string, s Stores, tools []*planexec.Tool, gate planexec.ApprovalGate) (*planexec.Run, error) {
	ex, err := planexec.NewExecutor(planexec.Config{
		Tools:  tools,
		Gate:   gate,
		Store:  s.store(),
		Lease:  crashLease,
		Holder: holder,
	})
	if err != nil {
		return nil, err
	}
	return ex.Run(planexec.Delegation{RunID: run, Tenant: crashTenant, User: "harness", Agent: "crash-harness"})
}

// CrashAnywhere kills a process running a plan over d at kills points, one
// after another, and checks that resuming in a new executor after each kill
// neither loses nor repeats an effect.
//
// For each kill point it starts the test binary again (os.Args[0] with
// -test.run matching t.Name() exactly) with the environment marking it the
// child. The child opens d, runs a 20-step plan of reversible and
// irreversible steps, some side by side and some waiting on others, whose
// tools record their effects in Effects, and stops at each point (before and
// after a claim, in the middle of a tool, before and after a step's
// completion is written) until the parent lets it go on. At the point chosen
// the parent kills it with SIGKILL. Then the parent resumes the run with new
// executors until the plan completes: it waits out the dead child's leases,
// and settles each step that surfaces in doubt by what Effects shows
// (recorded: applied; not recorded: not applied).
//
// It fails the test if an effect is recorded twice or never, if the
// executor runs a step again whose completion the child wrote, if an
// irreversible step the child claimed and never completed does not surface
// as an *IndeterminateOutcomeError, or runs again before that doubt is
// resolved, or if the plan record does not end completed with every outcome.
//
// Each kill point runs under a new run id. In the child, CrashAnywhere runs
// the plan and exits the process; everything the test does before calling
// it runs in the child too, so keep that cheap.
func CrashAnywhere(t *testing.T, d Durable, kills int) {
	stores, effects, sh, parent := crashStart(t, d, kills, "CrashAnywhere", crashChild)
	if !parent {
		return
	}
	ctx := t.Context()
	var targets []stepPoint
	for _, p := range sh.points {
		for i := 1; i <= crashSteps; i++ {
			targets = append(targets, stepPoint{fmt.Sprintf("s%02d", i), p})
		}
	}
	total := killAt(t, "crash", kills, targets, func(run string, log childLog) ([]string, crashStats) {
		r := newRecovery(stores, effects, sh, run, log, crashPlan().Steps)
		r.finish(ctx)
		return r.problems, r.stats
	})
	t.Logf("%d kills: %d steps surfaced in doubt (%d resolved applied, %d not applied), %d resumes waited for a dead holder's lease",
		kills, total.applied+total.notApplied, total.applied, total.notApplied, total.waits)
}

// crashStart begins a crash harness named what: in a child it runs child
// and returns parent false; in the test's own process it opens d and
// returns the stores, their effects and how steps are written over them.
func crashStart(t *testing.T, d Durable, kills int, what string, child func(*testing.T, Durable, string)) (_ Stores, _ Effects, _ shape, parent bool) {
	if name, ok := os.LookupEnv(crashEnvTest); ok {
		if name != t.Name() {
			t.Skipf("this process is the crash child of %s", name)
		}
		child(t, d, os.Getenv(crashEnvRun))
		return Stores{}, nil, shape{}, false
	}
	if kills < 1 {
		t.Fatalf("%s needs at least one kill point, got %d", what, kills)
	}
	stores, effects := d.Open(t)
	if stores.Store == nil || effects == nil {
		t.Fatalf("Durable.Open returned %+v and Effects %v: the harness needs a store and Effects", stores, effects)
	}
	return stores, effects, shapeOf(stores), true
}

// killAt starts kills children, one after another, each under a new run id
// (prefix, a batch and a number), and kills each at one of targets: spread
// over all of them when there are fewer kills than targets, cycling through
// them again when there are more. check resumes and checks each killed run,
// and returns what went wrong and what its recovery did. It stops the test
// after three kill points went wrong.
func killAt(t *testing.T, prefix string, kills int, targets []stepPoint, check func(run string, log childLog) ([]string, crashStats)) crashStats {
	batch := uuid.NewString()[:8]
	var total crashStats
	failed := 0
	for k := range kills {
		target := targets[k%len(targets)]
		if kills < len(targets) {
			target = targets[k*len(targets)/kills]
		}
		run := fmt.Sprintf("%s-%s-%03d", prefix, batch, k)
		log, problems := runChild(t, run, target)
		if problems == nil {
			var stats crashStats
			problems, stats = check(run, log)
			total.add(stats)
		}
		for _, p := range problems {
			t.Errorf("kill %d at %s of %s (run %s): %s", k+1, target.at, target.step, run, p)
		}
		if len(problems) > 0 {
			if failed++; failed == 3 {
				t.Fatalf("stopped after three kill points went wrong")
			}
		}
	}
	return total
}

// crashChild runs the plan as the child, stopping at each point until the
// parent says go on, and exits the process.
func crashChild(t *testing.T, d Durable, run string) {
	c := newChildTalk()
	stores, effects := c.open(t, d, false)
	ex, err := crashExecutor(run, "child", stores, crashTools(effects, c.at, func(string) {}), approveAll())
	if err != nil {
		c.end(1, err.Error())
	}
	res, err := ex.Execute(context.Background(), crashPlan())
	if err != nil {
		c.end(1, err.Error())
	}
	if !res.Complete {
		c.end(1, "the plan ran without an error but is not complete")
	}
	c.end(0, "complete")
}

// childTalk is the child's side of its talk with the parent: it says where
// it is on its standard output, and at each point waits for the go-ahead on
// its standard input.
type childTalk struct {
	in *bufio.Reader
	mu sync.Mutex // one point at a time, so the parent kills at the one it chose
}

func newChildTalk() *childTalk { return &childTalk{in: bufio.NewReader(os.Stdin)} }

// say writes one line to the parent in one write, so that lines from
// goroutines never interleave.
func (c *childTalk) say(words ...string) {
	_, _ = os.Stdout.WriteString(crashWord + " " + strings.Join(words, " ") + "\n")
}

// end tells the parent how the child ended, and exits with code.
func (c *childTalk) end(code int, what string) {
	c.say("end", oneLine(what))
	os.Exit(code)
}

// at says the child is at p of step, and waits for the go-ahead.
func (c *childTalk) at(p point, step string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.say("at", string(p), step)
	if _, err := c.in.ReadString('\n'); err != nil {
		os.Exit(2) // the parent is gone
	}
}

// open opens d with every point of a step marked, and the saves of the
// run's plan record too when saves is true.
func (c *childTalk) open(t *testing.T, d Durable, saves bool) (Stores, Effects) {
	stores, effects := d.Open(t)
	if stores.Store == nil || effects == nil {
		c.end(1, "Durable.Open returned a nil store or nil Effects")
	}
	stores.Store = &markedSteps{Store: stores.Store, at: c.at, saves: saves}
	return stores, effects
}

// approveAll is the child's approval gate: a person who approves every step.
func approveAll() planexec.ApprovalGate {
	return planexec.ApprovalGateFunc(func(_ context.Context, req planexec.ApprovalRequest) (planexec.Decision, error) {
		return req.Approve("harness"), nil
	})
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// markedSteps marks the points of a store's step.
type markedSteps struct {
	store.Store
	at    func(point, string)
	saves bool // mark the saves of plan records too
}

func (m *markedSteps) SavePlan(ctx context.Context, rec *store.PlanRecord) error {
	if !m.saves {
		return m.Store.SavePlan(ctx, rec)
	}
	return markSave(m.at, rec, func() error { return m.Store.SavePlan(ctx, rec) })
}

func (m *markedSteps) Claim(ctx context.Context, req store.ClaimRequest) (store.Claim, error) {
	if req.Peek {
		return m.Store.Claim(ctx, req) // a look, not a step's claim
	}
	m.at(beforeClaim, req.StepID)
	c, err := m.Store.Claim(ctx, req)
	if err == nil && c.State == store.ClaimAcquired {
		m.at(afterClaim, req.StepID)
	}
	return c, err
}

func (m *markedSteps) CompleteStep(ctx context.Context, w *store.StepWrite) error {
	m.at(beforeRecord, w.Record.StepID)
	err := m.Store.CompleteStep(ctx, w)
	if err == nil {
		m.at(afterRecord, w.Record.StepID)
	}
	return err
}

// childLog is what the parent saw of a child.
type childLog struct {
	reached map[stepPoint]bool // the child said it was there
	passed  map[stepPoint]bool // and was told to go on
	killed  bool
}

// runChild runs one child and kills it at target. It returns the problems
// that stop the kill point from being checked.
func runChild(t *testing.T, run string, target stepPoint) (childLog, []string) {
	log := childLog{reached: map[stepPoint]bool{}, passed: map[stepPoint]bool{}}
	cmd := exec.Command(os.Args[0], "-test.run="+exactRun(t.Name()), "-test.count=1")
	cmd.Env = append(os.Environ(), crashEnvTest+"="+t.Name(), crashEnvRun+"="+run)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return log, []string{err.Error()}
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return log, []string{err.Error()}
	}
	if err := cmd.Start(); err != nil {
		return log, []string{fmt.Sprintf("starting the child: %v", err)}
	}
	var hung atomic.Bool
	timer := time.AfterFunc(crashPatience, func() {
		hung.Store(true)
		_ = cmd.Process.Kill()
	})
	var said []string // anything else the child printed, for the report
	end := ""
	sc := bufio.NewScanner(stdout)
read:
	for sc.Scan() {
		words := strings.Fields(sc.Text())
		if len(words) < 2 || words[0] != crashWord {
			said = append(said, sc.Text())
			continue
		}
		switch words[1] {
		case "at":
			if len(words) != 4 {
				said = append(said, sc.Text())
				continue
			}
			p := stepPoint{step: words[3], at: point(words[2])}
			log.reached[p] = true
			if p == target {
				_ = cmd.Process.Kill() // SIGKILL
				log.killed = true
				break read
			}
			log.passed[p] = true
			// A child that died meanwhile shows at the end of its output.
			_, _ = io.WriteString(stdin, "\n")
		case "end":
			end = strings.Join(words[2:], " ")
		}
	}
	_ = stdin.Close()
	waitErr := cmd.Wait()
	timer.Stop()
	switch {
	case hung.Load():
		return log, []string{fmt.Sprintf("the child was still running after %v; it printed: %s", crashPatience, tail(said, stderr.String()))}
	case log.killed:
		return log, nil
	case end == "complete" && waitErr == nil:
		return log, []string{"the child completed the plan without reaching the kill point"}
	case end != "":
		return log, []string{fmt.Sprintf("the child failed before the kill point (%v): %s", waitErr, end)}
	default:
		return log, []string{fmt.Sprintf("the child failed before the kill point (%v); it printed:\n%s", waitErr, tail(said, stderr.String()))}
	}
}

// exactRun is a -test.run pattern matching the test called name and nothing
// else.
func exactRun(name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	return strings.Join(parts, "/")
}

func tail(lines []string, stderr string) string {
	all := slices.Concat(lines, strings.Split(strings.TrimSpace(stderr), "\n"))
	if len(all) > 20 {
		all = all[len(all)-20:]
	}
	return strings.Join(all, "\n")
}

// crashStats counts what recoveries did.
type crashStats struct {
	applied, notApplied, waits int
}

func (s *crashStats) add(o crashStats) {
	s.applied += o.applied
	s.notApplied += o.notApplied
	s.waits += o.waits
}

// recovery resumes one killed run to completion and checks it.
type recovery struct {
	stores       Stores
	effects      Effects
	sh           shape
	run          string
	log          childLog
	steps        []planexec.Step // every step the run has, in every round
	irreversible map[string]bool
	arg          map[string]string // each step's argument

	mu          sync.Mutex
	problems    []string
	calls       map[string]int
	surfaced    map[string]bool // in doubt, seen as *IndeterminateOutcomeError
	resolvedNot map[string]bool // resolved as not applied
	stats       crashStats
}

func newRecovery(stores Stores, effects Effects, sh shape, run string, log childLog, steps []planexec.Step) *recovery {
	r := &recovery{stores: stores, effects: effects, sh: sh, run: run, log: log, steps: steps,
		irreversible: map[string]bool{}, arg: map[string]string{}, calls: map[string]int{}, surfaced: map[string]bool{}, resolvedNot: map[string]bool{}}
	for _, s := range steps {
		var a crashArgs
		_ = json.Unmarshal(s.Arguments, &a)
		r.irreversible[s.ID] = s.Tool == crashIrreversible
		r.arg[s.ID] = a.Step
	}
	return r
}

// effect is the name step's effect is recorded under (see crashTools).
func (r *recovery) effect(step string) string {
	if r.irreversible[step] {
		return r.arg[step]
	}
	return step
}

func (r *recovery) problem(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.problems = append(r.problems, fmt.Sprintf(format, args...))
}

// called checks that the executor may run step again.
func (r *recovery) called(step string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls[step]++
	if r.log.reached[stepPoint{step, r.sh.written}] {
		r.problems = append(r.problems, fmt.Sprintf("step %s ran again although the child had written its completion", step))
	}
	if r.irreversible[step] && r.log.reached[stepPoint{step, afterClaim}] && !r.resolvedNot[step] {
		r.problems = append(r.problems, fmt.Sprintf("irreversible step %s ran again on the executor's own: the child had claimed it and nobody resolved it as not applied", step))
	}
}

// gate is the parent's approval gate: the child's decisions are on record,
// so it should never be asked.
func (r *recovery) gate() planexec.ApprovalGate {
	return planexec.ApprovalGateFunc(func(_ context.Context, req planexec.ApprovalRequest) (planexec.Decision, error) {
		r.problem("step %s was put to a person again: the decision the child stored is lost", req.StepID)
		return req.Approve("harness"), nil
	})
}

func (r *recovery) totalCalls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.calls {
		n += c
	}
	return n
}

// finish resumes the run until it completes, then checks it.
func (r *recovery) finish(ctx context.Context) {
	if r.resume(ctx) {
		r.check(ctx)
	}
}

// resume resumes the run with new executors until the plan completes,
// settling what surfaces in doubt by the effects on record.
func (r *recovery) resume(ctx context.Context) bool {
	tools := crashTools(r.effects, func(point, string) {}, r.called)
	complete := false
	return r.until(ctx, func(attempt int) (*planexec.Run, error) {
		ex, err := crashExecutor(r.run, fmt.Sprintf("parent-%d", attempt), r.stores, tools, r.gate())
		if err != nil {
			return nil, err
		}
		res, err := ex.Resume(ctx)
		if err == nil && !res.Complete {
			r.problem("Resume returned no error but the plan is not complete")
		}
		complete = err == nil && res.Complete
		return ex, err
	}) && complete
}

// until makes attempts (each on a new run, which it returns with the
// attempt's error) until one ends without an error, settling what surfaces
// in doubt by the effects on record and waiting out a dead holder's lease
// between them. It reports false when the run cannot be finished so.
func (r *recovery) until(ctx context.Context, attempt func(n int) (*planexec.Run, error)) bool {
	deadline := time.Now().Add(crashPatience)
	for n := 1; ; n++ {
		ex, err := attempt(n)
		if err == nil {
			return true
		}
		if ex == nil {
			r.problem("NewExecutor: %v", err)
			return false
		}
		wait, ok := r.settle(ctx, ex, n, err)
		if !ok {
			return false
		}
		if time.Now().After(deadline) {
			r.problem("the run was not finished after %d attempts in %v; the last said: %v", n, crashPatience, err)
			return false
		}
		if wait > 0 {
			r.stats.waits++
			time.Sleep(min(wait, time.Second) + 5*time.Millisecond)
		}
	}
}

// settle resolves, through ex, the steps err left in doubt, by what Effects
// shows. It returns how long to wait for a dead holder's lease to run out;
// false when err holds anything else than steps of indeterminate outcome.
func (r *recovery) settle(ctx context.Context, ex *planexec.Run, attempt int, err error) (time.Duration, bool) {
	if errors.Is(err, planexec.ErrRunBusy) {
		// A dead child's execution holds the run: wait until its lease
		// runs out.
		return crashLease, true
	}
	doubts, others := indeterminates(err)
	if len(others) > 0 {
		r.problem("attempt %d: %v", attempt, errors.Join(others...))
		return 0, false
	}
	var wait time.Duration
	for _, ind := range doubts {
		if ind.Err != nil {
			r.problem("step %s failed in the parent: %v", ind.Step, ind.Err)
			return 0, false
		}
		if !ind.InDoubt {
			// A dead child's claim: wait until its lease runs out.
			wait = max(wait, time.Until(ind.LeaseExpires), time.Millisecond)
			continue
		}
		if !r.irreversible[ind.Step] {
			r.problem("reversible step %s surfaced in doubt; a reversible step whose holder died is taken over", ind.Step)
			return 0, false
		}
		r.mu.Lock()
		r.surfaced[ind.Step] = true
		r.mu.Unlock()
		counts, err := r.effects.Counts(ctx, r.run)
		if err != nil {
			r.problem("Effects.Counts: %v", err)
			return 0, false
		}
		res := planexec.Resolution{Applied: counts[r.effect(ind.Step)] > 0}
		if res.Applied {
			res.Outcome, _ = json.Marshal(crashOutcome(r.run, r.arg[ind.Step]))
		}
		switch err := ex.Resolve(ctx, ind.Key, res); {
		case errors.Is(err, store.ErrInFlight):
			wait = max(wait, crashLease)
		case errors.Is(err, store.ErrCompleted) && res.Applied:
			// The dead child's completion reached the database after
			// its lease had run out (a commit in flight when it was
			// killed): the record agrees with the effect.
		case err != nil:
			r.problem("resolving step %s (applied %v): %v", ind.Step, res.Applied, err)
			return 0, false
		case res.Applied:
			r.stats.applied++
		default:
			r.stats.notApplied++
			r.mu.Lock()
			r.resolvedNot[ind.Step] = true
			r.mu.Unlock()
		}
	}
	return wait, true
}

// indeterminates splits err into the steps of indeterminate outcome and the
// rest.
func indeterminates(err error) (doubts []*planexec.IndeterminateOutcomeError, others []error) {
	var walk func(error)
	walk = func(err error) {
		if ind, ok := err.(*planexec.IndeterminateOutcomeError); ok {
			doubts = append(doubts, ind)
			return
		}
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				walk(e)
			}
			return
		}
		others = append(others, err)
	}
	walk(err)
	return doubts, others
}

// checkEffects checks that every effect the run's steps name was recorded
// exactly once, and nothing else, and that every irreversible step the
// child claimed and never completed surfaced in doubt.
func (r *recovery) checkEffects(ctx context.Context) bool {
	counts, err := r.effects.Counts(ctx, r.run)
	if err != nil {
		r.problem("Effects.Counts: %v", err)
		return false
	}
	named := map[string]bool{}
	for _, s := range r.steps {
		effect := r.effect(s.ID)
		if !named[effect] {
			named[effect] = true
			switch n := counts[effect]; {
			case n == 0:
				r.problem("the effect of step %s is lost: the run finished and it was never recorded", s.ID)
			case n > 1:
				r.problem("the effect of step %s was recorded %d times", s.ID, n)
			}
		}
		// The child claimed an irreversible step and never got to write its
		// completion: only a person (here, the effects) may say what happened.
		if r.irreversible[s.ID] && r.log.reached[stepPoint{s.ID, afterClaim}] && !r.log.passed[stepPoint{s.ID, r.sh.attempt}] && !r.surfaced[s.ID] {
			r.problem("irreversible step %s was left claimed and not completed by the child, but no resume surfaced it in doubt", s.ID)
		}
	}
	for effect, n := range counts {
		if !named[effect] {
			r.problem("an effect of %q, which no step names, was recorded %d times", effect, n)
		}
	}
	return true
}

// check checks the completed run: every effect once, every doubt surfaced,
// the record complete, and a further resume replaying all of it.
func (r *recovery) check(ctx context.Context) {
	if !r.checkEffects(ctx) {
		return
	}
	rec, err := r.stores.Store.LoadPlan(ctx, crashTenant, r.run)
	if err != nil {
		r.problem("LoadPlan after the plan completed: %v", err)
		return
	}
	if rec.Status != store.RunCompleted {
		r.problem("the plan record says %q after the plan completed", rec.Status)
	}
	for _, s := range r.steps {
		want, _ := json.Marshal(crashOutcome(r.run, r.arg[s.ID]))
		switch st, ok := rec.Steps[s.ID]; {
		case !ok:
			r.problem("step %s is not on the plan record after the plan completed", s.ID)
		case st.Status != planexec.StepDone || !jsonEqual(st.Outcome, want):
			r.problem("step %s is on the plan record as %q with outcome %s, want done with %s", s.ID, st.Status, st.Outcome, want)
		}
	}

	before := r.totalCalls()
	ex, err := crashExecutor(r.run, "parent-replay", r.stores, crashTools(r.effects, func(point, string) {}, r.called), r.gate())
	if err != nil {
		r.problem("NewExecutor: %v", err)
		return
	}
	res, err := ex.Resume(ctx)
	if err != nil || !res.Complete {
		r.problem("a resume of the completed plan: %+v, %v", res, err)
		return
	}
	for _, s := range r.steps {
		if st := res.Steps[s.ID]; !st.Replayed {
			r.problem("a resume of the completed plan did not replay step %s: %+v", s.ID, st)
		}
	}
	after := r.totalCalls()
	if after != before {
		r.problem("a resume of the completed plan called tools")
	}
}
