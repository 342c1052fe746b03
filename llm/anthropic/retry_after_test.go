package anthropic_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/planexec/planexec/llm/anthropic"
)

// A wait the server asks for that is longer than the call has left (its
// context's deadline, the adapter's timeout, or two minutes when there is
// neither) is not slept out: the rate limit is returned at once, retryable,
// with the wait it asked for, and not as a call that got no answer.
func TestAWaitPastTheDeadlineReturnsTheRateLimitAtOnce(t *testing.T) {
	later := time.Now().Add(3 * time.Hour).UTC().Format(http.TimeFormat)
	for name, c := range map[string]struct {
		header   map[string]string
		timeout  time.Duration
		deadline time.Duration // of the caller's context; 0 for none
		want     time.Duration
	}{
		"a day, past the timeout":              {map[string]string{"retry-after": "86400"}, 2 * time.Second, 0, 24 * time.Hour},
		"a minute, past the caller's deadline": {map[string]string{"retry-after": "60"}, 0, 2 * time.Second, time.Minute},
		"milliseconds, past the timeout":       {map[string]string{"retry-after-ms": "30000"}, 2 * time.Second, 0, 30 * time.Second},
		"an HTTP date, past the timeout":       {map[string]string{"retry-after": later}, 2 * time.Second, 0, 3 * time.Hour},
		"past two minutes, with no deadline":   {map[string]string{"retry-after": "150"}, 0, 0, 150 * time.Second},
		"too long for a duration":              {map[string]string{"retry-after": "1e300"}, 2 * time.Second, 0, time.Duration(1<<63 - 1)},
	} {
		t.Run(name, func(t *testing.T) {
			api := newAPI(t, apiError(429, "rate_limit_error", "Number of requests has exceeded your rate limit", c.header), planned(goodPlan))
			ctx := context.Background()
			if c.deadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, c.deadline)
				defer cancel()
			}
			start := time.Now()
			_, err := api.model(t, anthropic.WithTimeout(c.timeout)).Generate(ctx, planRequest)
			if d := time.Since(start); d > time.Second {
				t.Errorf("returned after %s", d)
			}
			pe := providerError(t, err)
			if pe.Status != 429 || !pe.Retryable || pe.RequestID != "req_001" {
				t.Fatalf("err = %v, want the 429, retryable", err)
			}
			if diff := pe.RetryAfter - c.want; diff < -5*time.Second || diff > 5*time.Second {
				t.Errorf("RetryAfter = %s, want %s", pe.RetryAfter, c.want)
			}
			if n := len(api.requests()); n != 1 {
				t.Errorf("%d requests, want 1", n)
			}
		})
	}
}

// A short wait within the time left is slept, and the call tried again; when
// no try is left, the wait asked for comes back with the error.
func TestAWaitWithinTheDeadlineIsSlept(t *testing.T) {
	limited := apiError(429, "rate_limit_error", "slow down", map[string]string{"retry-after-ms": "200"})
	api := newAPI(t, limited, planned(goodPlan))
	start := time.Now()
	resp, err := api.model(t, anthropic.WithTimeout(10*time.Second)).Generate(context.Background(), planRequest)
	if err != nil || !jsonEqual(t, []byte(resp.Content), []byte(goodPlan)) {
		t.Fatalf("Generate = %+v, %v", resp, err)
	}
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Errorf("retried after %s, before the 200ms asked for", d)
	}
	if n := len(api.requests()); n != 2 {
		t.Errorf("%d requests, want 2", n)
	}

	api = newAPI(t, limited)
	_, err = api.model(t, anthropic.WithMaxRetries(0)).Generate(context.Background(), planRequest)
	if pe := providerError(t, err); pe.Status != 429 || !pe.Retryable || pe.RetryAfter != 200*time.Millisecond {
		t.Errorf("err = %v (%+v), want the 429 with RetryAfter 200ms", err, pe)
	}
}
