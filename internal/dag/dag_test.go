package dag

import (
	"slices"
	"testing"
)

func TestOrderPutsEveryNodeAfterWhatItWaitsOn(t *testing.T) {
	deps := [][]int{{1, 2}, {}, {1}, {0, 2}}
	order, blocked := New(deps).Order()
	if blocked != nil {
		t.Fatalf("blocked = %v, want none", blocked)
	}
	pos := make([]int, len(deps))
	for p, n := range order {
		pos[n] = p
	}
	for i, ds := range deps {
		for _, d := range ds {
			if pos[d] >= pos[i] {
				t.Errorf("node %d ordered before its dependency %d: %v", i, d, order)
			}
		}
	}
}

func TestOrderBlocksNodesInAndBehindACycle(t *testing.T) {
	// 0 free; 1 ↔ 2 a loop; 3 waits on 2; 4 waits on itself.
	deps := [][]int{{}, {2}, {1}, {2}, {4}}
	g := New(deps)
	order, blocked := g.Order()
	if !slices.Equal(order, []int{0}) {
		t.Errorf("order = %v, want [0]", order)
	}
	if !slices.Equal(blocked, []int{1, 2, 3, 4}) {
		t.Fatalf("blocked = %v, want [1 2 3 4]", blocked)
	}
	if got, want := g.InCycle(blocked), []bool{true, true, false, true}; !slices.Equal(got, want) {
		t.Errorf("InCycle = %v, want %v", got, want)
	}
}

func TestRepeatedEdgesCountOnce(t *testing.T) {
	g := New([][]int{{}, {0, 0, 0}})
	if g.Indegree(1) != 1 {
		t.Errorf("indegree = %d, want 1", g.Indegree(1))
	}
	if got := g.Dependents(0); len(got) != 1 || got[0] != 1 {
		t.Errorf("dependents = %v, want [1]", got)
	}
	if _, blocked := g.Order(); blocked != nil {
		t.Errorf("blocked = %v", blocked)
	}
}

func BenchmarkOrder1000(b *testing.B) {
	deps := make([][]int, 1000)
	for i := 1; i < len(deps); i++ {
		deps[i] = []int{i - 1, i / 2}
	}
	b.ReportAllocs()
	for b.Loop() {
		New(deps).Order()
	}
}
