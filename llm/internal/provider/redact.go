package provider

import (
	"fmt"
	"io"
	"regexp"
	"strings"
	"unicode/utf8"
)

// MaxMessage bounds the text of a server's message kept in an error.
const MaxMessage = 500

// MaxToken bounds an identifier taken from an answer: a request id, a
// completion id, a model name, a finish reason.
const MaxToken = 200

// minFragment is the length of a run of the key's characters that counts as
// the key: a server may echo the key without its prefix, or only part of it.
const minFragment = 12

// Redactor holds an API key and takes it out of text a server sent. A
// Redactor printed itself, with any verb, shows "[redacted]"; the key is
// kept in a closure, so that printing a struct that holds a Redactor, which
// fmt does field by field without asking the fields how, shows a function's
// address and not the key.
type Redactor struct {
	key  func() string
	like *regexp.Regexp
	mask string
}

// NewRedactor returns a Redactor for key (which may be empty). like matches
// text shaped like any key of the provider, masked or not; it is replaced by
// mask.
func NewRedactor(key string, like *regexp.Regexp, mask string) *Redactor {
	return &Redactor{key: func() string { return key }, like: like, mask: mask}
}

// Format prints "[redacted]" for every verb.
func (r *Redactor) Format(f fmt.State, verb rune) { _, _ = io.WriteString(f, "[redacted]") }

// Message returns s, a server's or a transport's message, with the key (or
// any run of minFragment of its characters) and anything keyLike matches
// taken out, cut to MaxMessage bytes on a rune boundary.
func (r *Redactor) Message(s string) string {
	// Cut first, so a message of megabytes is not searched; the margin keeps
	// a key that straddles the final cut whole, so it is found.
	s, cut := truncate(s, MaxMessage+len(r.key())+64)
	s = r.like.ReplaceAllString(r.redact(s), r.mask)
	s, cut2 := truncate(s, MaxMessage)
	if cut || cut2 {
		s += "…"
	}
	return s
}

// Token returns s when it is safe to keep as an identifier: 1 to MaxToken
// bytes of letters, digits and "-_.:/@+=", holding no part of the key and
// nothing shaped like a key. Otherwise it returns "": an id is either kept
// whole or dropped, never half shown.
func (r *Redactor) Token(s string) string {
	if s == "" || len(s) > MaxToken {
		return ""
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-_.:/@+=", c) >= 0) {
			return ""
		}
	}
	if r.like.MatchString(s) || r.redact(s) != s {
		return ""
	}
	return s
}

// redact replaces every run of s made of the key's characters, minFragment
// or more of them in the key's order (the whole key when it is shorter), by
// "[redacted]".
func (r *Redactor) redact(s string) string {
	k := r.key()
	if k == "" {
		return s
	}
	w := min(len(k), minFragment)
	var secret []bool
	for i := 0; i+w <= len(k); i++ {
		frag := k[i : i+w]
		for from := 0; from+w <= len(s); {
			j := strings.Index(s[from:], frag)
			if j < 0 {
				break
			}
			if secret == nil {
				secret = make([]bool, len(s))
			}
			for p := from + j; p < from+j+w; p++ {
				secret[p] = true
			}
			from += j + 1
		}
	}
	if secret == nil {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		if !secret[i] {
			b.WriteByte(s[i])
			i++
			continue
		}
		b.WriteString("[redacted]")
		for i < len(s) && secret[i] {
			i++
		}
	}
	return b.String()
}

// truncate cuts s to at most n bytes on a rune boundary and says whether it
// cut anything.
func truncate(s string, n int) (string, bool) {
	if len(s) <= n {
		return s, false
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n], true
}
