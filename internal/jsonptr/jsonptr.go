// Package jsonptr reads JSON Pointers (RFC 6901) and finds what they point
// at in a JSON document without decoding it.
package jsonptr

import (
	"bytes"
	"errors"
	"strings"

	"github.com/planexec/planexec/internal/jsonscan"
)

// ErrSyntax is a pointer that is not "" and does not start with "/", or
// holds a "~" not followed by "0" or "1".
var ErrSyntax = errors.New("not a JSON Pointer")

// Parse splits pointer into its reference tokens, unescaped: "" is the
// whole document (no tokens), "/a~1b/0" is ["a/b", "0"].
func Parse(pointer string) ([]string, error) {
	if pointer == "" {
		return nil, nil
	}
	if pointer[0] != '/' {
		return nil, ErrSyntax
	}
	tokens := strings.Split(pointer[1:], "/")
	for i, t := range tokens {
		if !strings.Contains(t, "~") {
			continue
		}
		var b strings.Builder
		for j := 0; j < len(t); j++ {
			if t[j] != '~' {
				b.WriteByte(t[j])
				continue
			}
			if j+1 == len(t) || (t[j+1] != '0' && t[j+1] != '1') {
				return nil, ErrSyntax
			}
			b.WriteByte("~/"[t[j+1]-'0'])
			j++
		}
		tokens[i] = b.String()
	}
	return tokens, nil
}

// Format joins tokens into a pointer, escaping "~" and "/".
func Format(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		for j := 0; j < len(t); j++ {
			switch t[j] {
			case '~':
				b.WriteString("~0")
			case '/':
				b.WriteString("~1")
			default:
				b.WriteByte(t[j])
			}
		}
	}
	return b.String()
}

// Index reads an array index token: digits without a leading zero. "-"
// (the element after the last) is no index of an element that exists.
func Index(token string) (int, bool) {
	if token == "" || len(token) > 9 || (len(token) > 1 && token[0] == '0') {
		return 0, false
	}
	n := 0
	for i := 0; i < len(token); i++ {
		c := token[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// Get returns the value tokens point at in doc, a well-formed JSON
// document, as its bytes in doc. ok is false when nothing is there: a
// member no object has, an index past an array's end, a token into a
// string, number or literal, or a doc that is not well formed. Of
// duplicate members, the first is taken.
func Get(doc []byte, tokens []string) (value []byte, ok bool) {
	var stack []bool
	var key []byte
	i := jsonscan.SkipSpace(doc, 0)
	for _, tok := range tokens {
		if i >= len(doc) {
			return nil, false
		}
		switch doc[i] {
		case '{':
			i = jsonscan.SkipSpace(doc, i+1)
			for found := false; !found; {
				if i >= len(doc) || doc[i] != '"' {
					return nil, false
				}
				end, _ := jsonscan.ScanString(doc, i)
				if end < 0 {
					return nil, false
				}
				key = jsonscan.AppendUnquoted(key[:0], doc[i:end])
				i = jsonscan.SkipSpace(doc, end)
				if i >= len(doc) || doc[i] != ':' {
					return nil, false
				}
				i = jsonscan.SkipSpace(doc, i+1)
				if string(key) == tok {
					found = true
					continue
				}
				if i, stack = jsonscan.SkipValue(doc, i, stack); i < 0 {
					return nil, false
				}
				if i = jsonscan.SkipSpace(doc, i); i >= len(doc) || doc[i] != ',' {
					return nil, false
				}
				i = jsonscan.SkipSpace(doc, i+1)
			}
		case '[':
			n, ok := Index(tok)
			if !ok {
				return nil, false
			}
			i = jsonscan.SkipSpace(doc, i+1)
			if i < len(doc) && doc[i] == ']' {
				return nil, false
			}
			for ; n > 0; n-- {
				if i, stack = jsonscan.SkipValue(doc, i, stack); i < 0 {
					return nil, false
				}
				if i = jsonscan.SkipSpace(doc, i); i >= len(doc) || doc[i] != ',' {
					return nil, false
				}
				i = jsonscan.SkipSpace(doc, i+1)
			}
		default:
			return nil, false
		}
	}
	end, _ := jsonscan.SkipValue(doc, i, stack)
	if end < 0 {
		return nil, false
	}
	return doc[i:end], true
}

// Found is an object Find found.
type Found struct {
	// At is where the object is in the document.
	At []string
	// Start and End delimit its bytes.
	Start, End int
}

// Find lists the objects in doc that have a member named key, in document
// order, without looking inside them. ok is false when doc is not well
// formed or nests deeper than maxDepth; what was found before is returned.
func Find(doc []byte, key string, maxDepth int) (found []Found, ok bool) {
	f := finder{doc: doc, key: key, maxDepth: maxDepth}
	end := f.value(jsonscan.SkipSpace(doc, 0), 0)
	return f.found, end >= 0 && jsonscan.SkipSpace(doc, end) == len(doc)
}

type finder struct {
	doc      []byte
	key      string
	maxDepth int
	at       []string
	found    []Found
	scratch  []byte
}

// value scans the value at i and returns the offset past it, or -1.
func (f *finder) value(i, depth int) int {
	doc := f.doc
	if i >= len(doc) {
		return -1
	}
	switch doc[i] {
	case '{':
		if depth >= f.maxDepth {
			return -1
		}
		if f.holdsKey(i) {
			end, _ := jsonscan.SkipValue(doc, i, nil)
			if end >= 0 {
				f.found = append(f.found, Found{At: append([]string(nil), f.at...), Start: i, End: end})
			}
			return end
		}
		i = jsonscan.SkipSpace(doc, i+1)
		if i < len(doc) && doc[i] == '}' {
			return i + 1
		}
		for {
			end, _ := jsonscan.ScanString(doc, i)
			if end < 0 {
				return -1
			}
			f.scratch = jsonscan.AppendUnquoted(f.scratch[:0], doc[i:end])
			f.at = append(f.at, string(f.scratch))
			i = jsonscan.SkipSpace(doc, end)
			if i >= len(doc) || doc[i] != ':' {
				return -1
			}
			if i = f.value(jsonscan.SkipSpace(doc, i+1), depth+1); i < 0 {
				return -1
			}
			f.at = f.at[:len(f.at)-1]
			if i = jsonscan.SkipSpace(doc, i); i >= len(doc) {
				return -1
			}
			if doc[i] == '}' {
				return i + 1
			}
			if doc[i] != ',' {
				return -1
			}
			i = jsonscan.SkipSpace(doc, i+1)
		}
	case '[':
		if depth >= f.maxDepth {
			return -1
		}
		i = jsonscan.SkipSpace(doc, i+1)
		if i < len(doc) && doc[i] == ']' {
			return i + 1
		}
		for n := 0; ; n++ {
			f.at = append(f.at, itoa(n))
			if i = f.value(i, depth+1); i < 0 {
				return -1
			}
			f.at = f.at[:len(f.at)-1]
			if i = jsonscan.SkipSpace(doc, i); i >= len(doc) {
				return -1
			}
			if doc[i] == ']' {
				return i + 1
			}
			if doc[i] != ',' {
				return -1
			}
			i = jsonscan.SkipSpace(doc, i+1)
		}
	default:
		end, _ := jsonscan.SkipValue(doc, i, nil)
		return end
	}
}

// holdsKey reports whether the object at i has a member named f.key.
func (f *finder) holdsKey(i int) bool {
	doc := f.doc
	i = jsonscan.SkipSpace(doc, i+1)
	var stack []bool
	for i < len(doc) && doc[i] == '"' {
		end, _ := jsonscan.ScanString(doc, i)
		if end < 0 {
			return false
		}
		lit := doc[i:end]
		if bytes.Equal(lit[1:len(lit)-1], []byte(f.key)) || string(jsonscan.AppendUnquoted(f.scratch[:0], lit)) == f.key {
			return true
		}
		i = jsonscan.SkipSpace(doc, end)
		if i >= len(doc) || doc[i] != ':' {
			return false
		}
		if i, stack = jsonscan.SkipValue(doc, jsonscan.SkipSpace(doc, i+1), stack); i < 0 {
			return false
		}
		if i = jsonscan.SkipSpace(doc, i); i >= len(doc) || doc[i] != ',' {
			return false
		}
		i = jsonscan.SkipSpace(doc, i+1)
	}
	return false
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return string(b[i:])
}
