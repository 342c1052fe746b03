package planexec_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/planexec/planexec"
)

type benchArgs struct {
	N    int    `json:"n"`
	Name string `json:"name"`
}

var benchContract = planexec.MustContract[benchArgs]("noop")

func benchExecutor(b *testing.B, steps int, fn func(context.Context, benchArgs) (int, error), edit func(*planexec.Config)) *planexec.Executor {
	b.Helper()
	cfg := planexec.Config{
		Tools:     []planexec.Tool{planexec.NewTool("noop", "Does nothing.", fn)},
		Contracts: []*planexec.Contract{benchContract},
		Agent:     planexec.Agent{Name: "bench", Tools: []string{"noop"}},
		Limits:    planexec.Limits{MaxSteps: steps},
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

// BenchmarkValidate100Steps validates a 100-step plan whose steps each wait on
// the one before and one further back.
func BenchmarkValidate100Steps(b *testing.B) {
	ex := benchExecutor(b, 100, noop, nil)
	plan := benchPlan(100, func(i int) []int {
		if i == 0 {
			return nil
		}
		return []int{i - 1, i / 2}
	})
	b.ReportAllocs()
	for b.Loop() {
		if err := ex.Validate(plan); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/plan")
}

// BenchmarkExecuteOverhead runs a 1,000-step DAG of no-op tools with the
// in-memory plan and idempotency stores and an observer: what is left is the
// executor's own cost per step.
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
	for b.Loop() {
		ex := benchExecutor(b, n, noop, func(c *planexec.Config) {
			c.Plans = &planexec.MemoryPlanStore{}
			c.Idempotency = &planexec.MemoryIdempotencyStore{}
			c.Observer = func(planexec.Event) { events++ }
		})
		res, err := ex.Execute(context.Background(), plan)
		if err != nil || !res.Complete {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*n), "µs/step")
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
			c.Plans = &planexec.MemoryPlanStore{}
			c.Idempotency = &planexec.MemoryIdempotencyStore{}
		})
		start := time.Now()
		if _, err := ex.Execute(context.Background(), plan); err != nil {
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
