package provider

import (
	"crypto/x509"
	"errors"
	"fmt"
	"math"
	"net/http"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestAMessageLosesTheKeyAndKeyShapedTextAndIsBounded(t *testing.T) {
	like := regexp.MustCompile(`\bsk-[A-Za-z0-9]{3,}`)
	got := NewRedactor("secret-123", like, "sk-[redacted]").Message("bad key secret-123 and sk-abcdef " + strings.Repeat("é", 400))
	if strings.Contains(got, "secret-123") || strings.Contains(got, "sk-abcdef") {
		t.Errorf("a key survived: %q", got)
	}
	if len(got) > MaxMessage+len("…") || !strings.HasSuffix(got, "…") {
		t.Errorf("not bounded: %d bytes", len(got))
	}
}

func TestOnlyFailuresThatMaySucceedLaterAreRetryable(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("dial: %w", syscall.ECONNREFUSED), true},
		{fmt.Errorf("read: %w", syscall.ECONNRESET), true},
		{x509.UnknownAuthorityError{}, false},
		{errors.New("http: server gave HTTP response to HTTPS client"), false},
	} {
		if got := RetryableTransport(c.err); got != c.want {
			t.Errorf("RetryableTransport(%v) = %v, want %v", c.err, got, c.want)
		}
	}
	for status, want := range map[int]bool{400: false, 401: false, 408: true, 409: true, 429: true, 500: true, 529: true} {
		if RetryableStatus(status) != want {
			t.Errorf("RetryableStatus(%d) = %v", status, !want)
		}
	}
	res := &http.Response{Header: http.Header{"X-Should-Retry": {"false"}}}
	if RetryAdvice(res, true) || !RetryAdvice(nil, true) {
		t.Error("x-should-retry not honoured, or a missing response not tolerated")
	}
}

func TestARedactorAndWhatHoldsItPrintNoKey(t *testing.T) {
	const key = "sk-proj-0123456789abcdefghij"
	holder := struct {
		name   string
		redact *Redactor
	}{"m", NewRedactor(key, regexp.MustCompile(`\bsk-[A-Za-z0-9_*\-.]{3,}`), "sk-[redacted]")}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%d"} {
		for _, v := range []any{holder, &holder, holder.redact, *holder.redact} {
			text := fmt.Sprintf(verb, v)
			if strings.Contains(text, key[8:20]) || strings.Contains(text, fmt.Sprintf("%x", key[8:20])) {
				t.Errorf("printed with %s: %s", verb, text)
			}
		}
	}
}

func TestPartsOfTheKeyAreRedactedAndIdentifiersHoldingThemDropped(t *testing.T) {
	const key = "sk-proj-0123456789abcdefghij"
	r := NewRedactor(key, regexp.MustCompile(`\bsk-[A-Za-z0-9_*\-.]{3,}`), "sk-[redacted]")
	for in, want := range map[string]string{
		"key " + key + " bad":       "key [redacted] bad",
		"key " + key[8:] + " bad":   "key [redacted] bad",
		"tail " + key[10:] + ".":    "tail [redacted].",
		"short " + key[20:] + ".":   "short " + key[20:] + ".", // eight characters are no secret
		"twice " + key + key[:15]:   "twice [redacted]",
		"masked sk-proj-****ghij !": "masked sk-[redacted] !",
	} {
		if got := r.Message(in); got != want {
			t.Errorf("Message(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{
		"req_0123":               "req_0123",
		"req_" + key[10:24]:      "",
		"chatcmpl-" + key:        "",
		"req 1":                  "",
		"req\n1":                 "",
		strings.Repeat("a", 201): "",
		strings.Repeat("a", 200): strings.Repeat("a", 200),
	} {
		if got := r.Token(in); got != want {
			t.Errorf("Token(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestRetryAfterReadsTheWaitTheSDKsWouldTake(t *testing.T) {
	for name, c := range map[string]struct {
		h    http.Header
		want time.Duration
		ok   bool
	}{
		"seconds":            {http.Header{"Retry-After": {"3"}}, 3 * time.Second, true},
		"fraction":           {http.Header{"Retry-After": {"0.5"}}, 500 * time.Millisecond, true},
		"milliseconds first": {http.Header{"Retry-After": {"30"}, "Retry-After-Ms": {"250"}}, 250 * time.Millisecond, true},
		"bad milliseconds":   {http.Header{"Retry-After": {"30"}, "Retry-After-Ms": {"-1"}}, 30 * time.Second, true},
		"a date past":        {http.Header{"Retry-After": {"Mon, 02 Jan 2006 15:04:05 GMT"}}, 0, true},
		"overflowing":        {http.Header{"Retry-After": {"1e300"}}, math.MaxInt64, true},
		"past float64":       {http.Header{"Retry-After": {"1e999"}}, math.MaxInt64, true},
		"negative":           {http.Header{"Retry-After": {"-5"}}, 0, false},
		"not a number":       {http.Header{"Retry-After": {"soon"}}, 0, false},
		"NaN":                {http.Header{"Retry-After": {"NaN"}}, 0, false},
		"none":               {http.Header{}, 0, false},
	} {
		got, ok := RetryAfter(c.h)
		if got != c.want || ok != c.ok {
			t.Errorf("%s: RetryAfter = %s, %v; want %s, %v", name, got, ok, c.want, c.ok)
		}
	}
}
