// Package provider holds what the model adapters share about calling an HTTP
// API: which failures are worth trying again, how an answer is bounded and
// read (guard.go), and how text a server sent is made safe to put in an error,
// a Response or an event (redact.go).
package provider

import (
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strconv"
	"syscall"
	"time"

	"github.com/planexec/planexec/llm"
)

// RetryableStatus reports whether an HTTP status may succeed if the call is
// tried again: a timeout, a conflict, a rate limit or a server error.
func RetryableStatus(status int) bool {
	return status == http.StatusRequestTimeout || status == http.StatusConflict ||
		status == http.StatusTooManyRequests || status >= 500
}

// RetryAdvice honours the server's x-should-retry header, when res has one;
// otherwise it returns otherwise.
func RetryAdvice(res *http.Response, otherwise bool) bool {
	if res == nil {
		return otherwise
	}
	switch res.Header.Get("x-should-retry") {
	case "true":
		return true
	case "false":
		return false
	}
	return otherwise
}

// RetryableTransport says whether a call that got no answer may succeed if
// tried again: after a timeout or a dropped, reset or refused connection,
// not after a TLS or certificate failure, a protocol mismatch or a bad URL.
func RetryableTransport(err error) bool {
	var netErr net.Error
	if errors.As(err, &netErr) && netErr.Timeout() {
		return true
	}
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)
}

// MaxRetryWait is the longest wait a server may ask for (Retry-After) that
// the SDKs are let sleep before trying again, even when the call has no
// deadline. openai-go stops at the same bound.
const MaxRetryWait = 2 * time.Minute

// RetryAfter reads the wait a server asked for before the next try: the
// Retry-After-Ms header (milliseconds) when it holds a usable number, else
// Retry-After (seconds, or an HTTP date), the order the SDKs read them in.
// A negative, NaN or unreadable value is no advice; a wait too long for a
// time.Duration is the longest one.
func RetryAfter(h http.Header) (time.Duration, bool) {
	for _, r := range []struct {
		header string
		unit   time.Duration
	}{{"Retry-After-Ms", time.Millisecond}, {"Retry-After", time.Second}} {
		v := h.Get(r.header)
		if v == "" {
			continue
		}
		if f, err := strconv.ParseFloat(v, 64); err == nil || errors.Is(err, strconv.ErrRange) {
			switch {
			case math.IsNaN(f) || f < 0:
				continue
			case f*float64(r.unit) >= math.MaxInt64:
				return math.MaxInt64, true
			}
			return time.Duration(f * float64(r.unit)), true
		}
		if r.unit == time.Second {
			if t, err := http.ParseTime(v); err == nil {
				return max(time.Until(t), 0), true
			}
		}
	}
	return 0, false
}

// TokenCount checks one token count a server reported: it must be between 0
// and llm.MaxTokenCount. Anything else is an error wrapping
// llm.ErrMalformedResponse that names field.
func TokenCount(field string, n int64) error {
	if n < 0 || n > llm.MaxTokenCount {
		return fmt.Errorf("%w: %s is %d, outside 0 to %d", llm.ErrMalformedResponse, field, n, int64(llm.MaxTokenCount))
	}
	return nil
}
