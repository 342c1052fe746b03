// Package provider holds what the model adapters share about calling an HTTP
// API: which failures are worth trying again, and how text a server sent is
// made safe to put in an error.
package provider

import (
	"errors"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"syscall"
	"unicode/utf8"
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

// MaxMessage bounds the text of a server's message kept in an error.
const MaxMessage = 500

// Scrub removes key, and anything keyLike matches (replaced by mask), from
// text a server or transport wrote, and cuts it to MaxMessage bytes on a
// rune boundary.
func Scrub(s, key string, keyLike *regexp.Regexp, mask string) string {
	if key != "" {
		s = strings.ReplaceAll(s, key, "[redacted]")
	}
	s = keyLike.ReplaceAllString(s, mask)
	if len(s) > MaxMessage {
		cut := MaxMessage
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}
