package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/planexec/planexec"
)

// ConcurrentRuns measures a store under a service's load: runs runs of a
// five-step plan (one step, three after it side by side, one after those),
// all started at once on one executor over the store that open returns for
// each iteration. It reports runs per second, allocations per run and the
// 99th percentile of a run's latency (from its start to Execute's return).
func ConcurrentRuns(b *testing.B, runs int, open func(b *testing.B) planexec.PlanStore) {
	tool := planexec.MustTool("errand", "Run an errand.", func(ctx context.Context, a errand) (string, error) {
		return "done " + a.Item, nil
	})
	plan := planexec.Plan{Goal: "five errands", Steps: []planexec.Step{
		{ID: "s0", Tool: "errand", Arguments: json.RawMessage(`{"item":"0"}`)},
		{ID: "s1", Tool: "errand", Arguments: json.RawMessage(`{"item":"1"}`), DependsOn: []string{"s0"}},
		{ID: "s2", Tool: "errand", Arguments: json.RawMessage(`{"item":"2"}`), DependsOn: []string{"s0"}},
		{ID: "s3", Tool: "errand", Arguments: json.RawMessage(`{"item":"3"}`), DependsOn: []string{"s0"}},
		{ID: "s4", Tool: "errand", Arguments: json.RawMessage(`{"item":"4"}`), DependsOn: []string{"s1", "s2", "s3"}},
	}}
	var (
		mu        sync.Mutex
		latencies []time.Duration
		mallocs   uint64
	)
	iteration := 0
	for b.Loop() {
		iteration++
		b.StopTimer()
		ex, err := planexec.NewExecutor(planexec.Config{Tools: []*planexec.Tool{tool}, Store: open(b)})
		if err != nil {
			b.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		b.StartTimer()
		var wg sync.WaitGroup
		for i := range runs {
			wg.Go(func() {
				start := time.Now()
				run, err := ex.Run(planexec.Delegation{RunID: fmt.Sprintf("run-%d-%d", iteration, i), Tenant: "bench"})
				if err != nil {
					b.Error(err)
					return
				}
				res, err := run.Execute(context.Background(), plan)
				took := time.Since(start)
				if err != nil || !res.Complete {
					b.Errorf("run %d: %v", i, err)
					return
				}
				mu.Lock()
				latencies = append(latencies, took)
				mu.Unlock()
			})
		}
		wg.Wait()
		b.StopTimer()
		runtime.ReadMemStats(&after)
		mallocs += after.Mallocs - before.Mallocs
		b.StartTimer()
	}
	total := float64(b.N * runs)
	b.ReportMetric(total/b.Elapsed().Seconds(), "runs/s")
	b.ReportMetric(float64(mallocs)/total, "allocs/run")
	slices.Sort(latencies)
	if len(latencies) > 0 {
		b.ReportMetric(float64(latencies[min(len(latencies)-1, len(latencies)*99/100)].Milliseconds()), "ms-p99/run")
	}
}
