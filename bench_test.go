package planexec_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/store/memory"
)

type benchArgs struct {
	N    int    `json:"n"`
	Name string `json:"name"`
}

// benchExecutor builds an executor over one tool, "noop", calling fn, with
// room for plans of steps steps; edit adjusts the config first.
func benchExecutor(b *testing.B, steps int, fn func(context.Context, benchArgs) (int, error), edit func(*planexec.Config)) *planexec.Executor {
	b.Helper()
	cfg := planexec.Config{
		Tools:  []*planexec.Tool{planexec.MustTool("noop", "Does nothing.", fn)},
		Limits: planexec.Limits{MaxSteps: steps},
	}
	if edit != nil {
		edit(&cfg)
	}
	ex, err := planexec.NewExecutor(cfg)
	if err != nil {
		b.Fatal(err)
	}
	return ex
}

// benchRun makes a run of ex.
func benchRun(b *testing.B, ex *planexec.Executor, id string) *planexec.Run {
	run, err := ex.Run(planexec.Delegation{RunID: id, Tenant: "bench", Agent: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	return run
}

// benchPlan builds n steps; deps(i) lists the indexes step i waits on.
func benchPlan(n int, deps func(i int) []int) planexec.Plan {
	p := planexec.Plan{Goal: "bench", Steps: make([]planexec.Step, n)}
	for i := range n {
		s := planexec.Step{ID: fmt.Sprintf("s%d", i), Tool: "noop",
			Arguments: fmt.Appendf(nil, `{"n":%d,"name":"step number %d"}`, i, i)}
		for _, d := range deps(i) {
			s.DependsOn = append(s.DependsOn, fmt.Sprintf("s%d", d))
		}
		p.Steps[i] = s
	}
	return p
}

func noop(context.Context, benchArgs) (int, error) { return 0, nil }

// benchMallocs is the number of heap allocations so far.
func benchMallocs() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.Mallocs
}

// BenchmarkValidate100Steps validates a 100-step plan whose steps each wait on
// the one before and one further back.
func BenchmarkValidate100Steps(b *testing.B) {
	run := benchRun(b, benchExecutor(b, 100, noop, nil), "validate")
	plan := benchPlan(100, func(i int) []int {
		if i == 0 {
			return nil
		}
		return []int{i - 1, i / 2}
	})
	b.ReportAllocs()
	for b.Loop() {
		if err := run.Validate(plan); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/plan")
}

// BenchmarkExecuteOverhead runs a 1,000-step DAG of no-op tools with the
// memory store (plans, step records and claims) and an observer: what is
// left is the executor's own cost per step.
func BenchmarkExecuteOverhead(b *testing.B) {
	const n = 1000
	plan := benchPlan(n, func(i int) []int {
		if i < 4 {
			return nil
		}
		return []int{i - 4, i / 3}
	})
	events := 0
	b.ReportAllocs()
	before := benchMallocs()
	for b.Loop() {
		ex := benchExecutor(b, n, noop, func(c *planexec.Config) {
			c.Store = memory.New()
			c.Observer = func(planexec.Event) { events++ }
		})
		res, err := benchRun(b, ex, "overhead").Execute(context.Background(), plan)
		if err != nil || !res.Complete {
			b.Fatal(err)
		}
	}
	steps := float64(b.N * n)
	b.ReportMetric(float64(b.Elapsed().Microseconds())/steps, "µs/step")
	b.ReportMetric(float64(benchMallocs()-before)/steps, "allocs/step")
}

// BenchmarkConcurrentRuns runs 1,000 runs of a 5-step plan at once on one
// executor over the memory store, as a service holding one executor would:
// runs per second, allocations per run and the 99th percentile of a run's
// latency (from its goroutine's start to Execute's return).
func BenchmarkConcurrentRuns(b *testing.B) {
	const runs = 1000
	plan := benchPlan(5, func(i int) []int {
		switch i {
		case 0:
			return nil
		case 4:
			return []int{1, 2, 3}
		}
		return []int{0}
	})
	var (
		mu        sync.Mutex
		latencies []time.Duration
	)
	b.ReportAllocs()
	before := benchMallocs()
	iteration := 0
	for b.Loop() {
		iteration++
		ex := benchExecutor(b, 5, noop, func(c *planexec.Config) { c.Store = memory.New() })
		var wg sync.WaitGroup
		for i := range runs {
			wg.Go(func() {
				start := time.Now()
				run, err := ex.Run(planexec.Delegation{RunID: fmt.Sprintf("run-%d-%d", iteration, i), Tenant: "bench", Agent: "bench"})
				if err != nil {
					b.Error(err)
					return
				}
				res, err := run.Execute(context.Background(), plan)
				took := time.Since(start)
				if err != nil || !res.Complete {
					b.Errorf("run %d: complete %v, %v", i, res != nil && res.Complete, err)
					return
				}
				mu.Lock()
				latencies = append(latencies, took)
				mu.Unlock()
			})
		}
		wg.Wait()
	}
	total := float64(b.N * runs)
	b.ReportMetric(total/b.Elapsed().Seconds(), "runs/s")
	b.ReportMetric(float64(benchMallocs()-before)/total, "allocs/run")
	slices.Sort(latencies)
	if len(latencies) > 0 {
		p99 := latencies[min(len(latencies)-1, len(latencies)*99/100)]
		b.ReportMetric(float64(p99.Microseconds()), "µs-p99/run")
	}
}

// BenchmarkExecuteWideDAG runs 20 layers of 10 steps, each 5 ms, each waiting
// on the whole layer before it. The critical path is 20 × 5 ms; a sequential
// executor would take ten times that. Beside makespan/critical it reports
// bare/critical: the same layers run as bare goroutines and a WaitGroup, in
// the same iterations, which is the floor the timers of this machine allow.
func BenchmarkExecuteWideDAG(b *testing.B) {
	const layers, width, each = 20, 10, 5 * time.Millisecond
	plan := benchPlan(layers*width, func(i int) []int {
		layer := i / width
		if layer == 0 {
			return nil
		}
		deps := make([]int, width)
		for k := range deps {
			deps[k] = (layer-1)*width + k
		}
		return deps
	})
	sleep := func(ctx context.Context, _ benchArgs) (int, error) {
		time.Sleep(each)
		return 0, nil
	}
	var executed, bare time.Duration
	for b.Loop() {
		ex := benchExecutor(b, layers*width, sleep, func(c *planexec.Config) {
			c.Concurrency = width
			c.Store = memory.New()
		})
		start := time.Now()
		if _, err := benchRun(b, ex, "wide").Execute(context.Background(), plan); err != nil {
			b.Fatal(err)
		}
		executed += time.Since(start)

		start = time.Now()
		for range layers {
			var wg sync.WaitGroup
			for range width {
				wg.Go(func() { time.Sleep(each) })
			}
			wg.Wait()
		}
		bare += time.Since(start)
	}
	critical := float64(time.Duration(layers)*each) * float64(b.N)
	b.ReportMetric(float64(executed)/critical, "makespan/critical")
	b.ReportMetric(float64(bare)/critical, "bare/critical")
}

type benchAmounts struct {
	Step    int               `json:"step"`
	Amounts []decimal.Decimal `json:"amounts"`
}

// BenchmarkValidateHostileNumbers validates plans of about 1 MiB whose
// arguments are numbers a hostile or runaway model might write, and reports
// what validation allocates and spends per byte of plan: it must stay linear,
// whatever the numbers.
func BenchmarkValidateHostileNumbers(b *testing.B) {
	const planBytes, steps = 1 << 20, 24
	ex, err := planexec.NewExecutor(planexec.Config{
		Tools:  []*planexec.Tool{planexec.MustTool("pay", "Pay amounts.", func(context.Context, benchAmounts) (int, error) { return 0, nil })},
		Limits: planexec.Limits{MaxPlanBytes: 2 * planBytes},
	})
	if err != nil {
		b.Fatal(err)
	}
	run := benchRun(b, ex, "hostile")
	for _, c := range []struct {
		name, number string
		refused      bool
	}{
		{"huge exponents", "1e10000", true},
		{"long digit strings", strings.Repeat("9", 4000), true},
		{"longest accepted", "12345678901234567890.123456789012345678", false},
		{"small", "412.50", false},
	} {
		b.Run(c.name, func(b *testing.B) {
			per := planBytes / steps
			var args bytes.Buffer
			args.WriteString(`{"amounts":[`)
			for args.Len()+len(c.number)+3 < per {
				if args.Len() > len(`{"amounts":[`) {
					args.WriteByte(',')
				}
				args.WriteString(c.number)
			}
			args.WriteString(`]}`)
			plan := planexec.Plan{Steps: make([]planexec.Step, steps)}
			size := 0
			for i := range plan.Steps {
				a := fmt.Appendf(nil, `{"step":%d,`, i)
				a = append(a, args.Bytes()[1:]...)
				plan.Steps[i] = planexec.Step{ID: fmt.Sprintf("s%d", i), Tool: "pay", Arguments: a}
				size += len(a)
			}
			if err := run.Validate(plan); (err != nil) != c.refused || (c.refused && !errors.Is(err, planexec.ReasonArguments)) {
				b.Fatalf("Validate = %v, want refused: %v", err, c.refused)
			}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			b.ResetTimer()
			for b.Loop() {
				_ = run.Validate(plan)
			}
			b.StopTimer()
			runtime.ReadMemStats(&after)
			n := float64(b.N)
			b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/n/float64(size), "allocB/plan-B")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n/float64(size), "ns/plan-B")
			b.ReportMetric(float64(size), "plan-B")
		})
	}
}
