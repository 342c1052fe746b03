package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"unicode/utf8"
)

// maxNumberLiteral bounds a number in a document of no declared type: long
// enough for any decimal or integer a Go type takes, short enough that no
// validator that reads it exactly (big.Rat) does much work.
const maxNumberLiteral = 100

// CheckValue holds raw to what a decoder of a Go type would ask of any JSON
// value, when no Go type describes it (a schema does): one value and nothing
// after it, valid UTF-8, no object with a key twice, nesting and size within
// lim, and numbers of at most 100 characters whose exponent, written out,
// stays within ±1000. It returns the violations, at most MaxViolations, with
// their paths; nil when raw holds to all of it.
func CheckValue(raw []byte, lim Limits) []Violation {
	if lim.MaxBytes <= 0 {
		lim.MaxBytes = DefaultMaxBytes
	}
	if lim.MaxDepth <= 0 {
		lim.MaxDepth = DefaultMaxDepth
	}
	if len(raw) > lim.MaxBytes {
		return []Violation{{Problem: "larger than " + strconv.Itoa(lim.MaxBytes) + " bytes"}}
	}
	if !utf8.Valid(raw) {
		return []Violation{{Problem: "invalid UTF-8"}}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var stack []*valueFrame
	var out []Violation
	path := func() string {
		var b []byte
		for _, f := range stack {
			if f.object {
				b = appendSegment(append(b, '/'), []byte(f.key))
			} else {
				b = strconv.AppendInt(append(b, '/'), int64(f.index-1), 10)
			}
		}
		return string(b)
	}
	violate := func(problem string) bool {
		out = append(out, Violation{Path: path(), Problem: problem})
		return len(out) < MaxViolations
	}
	values := 0
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			if len(stack) > 0 || values == 0 {
				return append(out, Violation{Path: path(), Problem: "not JSON"})
			}
			break
		}
		if err != nil {
			return append(out, Violation{Path: path(), Problem: "not JSON"})
		}
		var top *valueFrame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top == nil {
			values++
			if values > 1 {
				return append(out, Violation{Problem: "more than one value"})
			}
		}
		if top != nil && top.object && top.atKey {
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack = closeFrame(stack)
				continue
			}
			k := tok.(string) // a key: the decoder accepts nothing else here
			top.key, top.atKey = k, false
			if top.keys[k] {
				if !violate("duplicate key") {
					return out
				}
			}
			top.keys[k] = true
			continue
		}
		if top != nil && !top.object {
			if d, ok := tok.(json.Delim); ok && d == ']' {
				stack = closeFrame(stack)
				continue
			}
			top.index++
		}
		switch v := tok.(type) {
		case json.Delim:
			if len(stack) >= lim.MaxDepth {
				return append(out, Violation{Path: path(), Problem: "nested deeper than " + strconv.Itoa(lim.MaxDepth)})
			}
			stack = append(stack, &valueFrame{object: v == '{', keys: map[string]bool{}, atKey: v == '{'})
			continue
		case json.Number:
			if !boundedNumber(string(v)) {
				if !violate("a number too long or too large") {
					return out
				}
			}
		}
		if top != nil && top.object {
			top.atKey = true
		}
	}
	return out
}

// valueFrame is an object or array CheckValue is inside.
type valueFrame struct {
	object bool
	keys   map[string]bool
	key    string // the member being read, in an object
	index  int    // the next element, in an array
	atKey  bool   // an object expects a key next
}

// closeFrame leaves the innermost container: the member of an object that
// held it is read.
func closeFrame(stack []*valueFrame) []*valueFrame {
	stack = stack[:len(stack)-1]
	if n := len(stack); n > 0 && stack[n-1].object {
		stack[n-1].atKey = true
	}
	return stack
}

// boundedNumber reports whether a number literal is short, and its
// exponent small.
func boundedNumber(lit string) bool {
	if len(lit) > maxNumberLiteral {
		return false
	}
	for i := 0; i < len(lit); i++ {
		if lit[i] == 'e' || lit[i] == 'E' {
			exp, err := strconv.Atoi(lit[i+1:])
			return err == nil && exp >= -1000 && exp <= 1000
		}
	}
	return true
}
