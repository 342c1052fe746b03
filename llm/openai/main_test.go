package openai_test

import (
	"testing"

	"go.uber.org/goleak"
)

// No goroutine outlives the call that started it: every test in the package
// ends with none of ours left running.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
