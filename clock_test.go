package planexec

import (
	"sync"
	"time"
)

// FakeClock is a clock a test moves by hand. It lives in a test file of the
// package itself, so both the package's own tests and its external tests
// (package planexec_test) use this one.
type FakeClock struct {
	mu sync.Mutex
	t  time.Time
}

// NewFakeClock returns a clock standing at a fixed instant.
func NewFakeClock() *FakeClock {
	return &FakeClock{t: time.Date(2030, time.March, 4, 9, 0, 0, 0, time.UTC)}
}

func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *FakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}
