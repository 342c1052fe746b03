package llm_test

import (
	"math"
	"testing"

	"github.com/planexec/planexec/llm"
)

// Usage sums saturate: adding up many calls never wraps round to a small or
// negative count, which a budget check would take for cheap.
func TestUsageSumsSaturateInsteadOfWrapping(t *testing.T) {
	big := llm.Usage{InputTokens: math.MaxInt64 - 1, OutputTokens: math.MaxInt64, Calls: math.MaxInt64}
	if got := big.Add(llm.Usage{InputTokens: 5, OutputTokens: 1, Calls: 1}); got != (llm.Usage{InputTokens: math.MaxInt64, OutputTokens: math.MaxInt64, Calls: math.MaxInt64}) {
		t.Errorf("Add = %+v, want every count at math.MaxInt64", got)
	}
	if got := big.Total(); got != math.MaxInt64 {
		t.Errorf("Total = %d, want math.MaxInt64", got)
	}
	low := llm.Usage{InputTokens: math.MinInt64 + 1}
	if got := low.Add(llm.Usage{InputTokens: -5}); got.InputTokens != math.MinInt64 {
		t.Errorf("Add = %+v, want math.MinInt64", got)
	}
	if got := (llm.Usage{InputTokens: 3, OutputTokens: 4, Calls: 1}).Add(llm.Usage{InputTokens: 10, OutputTokens: -2, Calls: 1}); got != (llm.Usage{InputTokens: 13, OutputTokens: 2, Calls: 2}) {
		t.Errorf("Add = %+v", got)
	}
}
