package provider

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"syscall"
	"testing"
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
