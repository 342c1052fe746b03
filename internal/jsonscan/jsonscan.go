// Package jsonscan is a small byte-level JSON lexer (RFC 8259) shared by the
// strict decoder and the canonical encoder.
//
// Every function works on a byte slice and an offset and reports malformed
// input by returning a negative offset rather than panicking, and allocates
// only into buffers its caller hands in. The functions check syntax only;
// what a value means is left to the caller.
package jsonscan

import "unicode/utf8"

// Kind is the kind of a JSON value, as told by its first byte.
type Kind uint8

// The JSON value kinds. Invalid means the byte cannot start a value.
const (
	Invalid Kind = iota
	Null
	Bool
	Number
	String
	Array
	Object
)

var kindNames = [...]string{
	Invalid: "invalid",
	Null:    "null",
	Bool:    "boolean",
	Number:  "number",
	String:  "string",
	Array:   "array",
	Object:  "object",
}

// String returns the kind's name as used in messages ("object", "boolean", ...).
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "invalid"
}

// KindOf returns the kind of value that starts with byte c.
func KindOf(c byte) Kind {
	switch c {
	case '{':
		return Object
	case '[':
		return Array
	case '"':
		return String
	case 't', 'f':
		return Bool
	case 'n':
		return Null
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return Number
	}
	return Invalid
}

// StringFlags describe a scanned string literal.
type StringFlags uint8

const (
	// Escaped means the literal contains at least one backslash escape, so
	// its contents differ from its raw bytes.
	Escaped StringFlags = 1 << iota
	// BadUTF8 means the literal holds bytes that are not valid UTF-8 or a
	// \u escape that is an unpaired surrogate; either way the text is not a
	// sequence of Unicode scalar values.
	BadUTF8
)

// plain[c] is true for bytes that stand for themselves inside a string
// literal and need no further look: printable ASCII except '"' and '\\'.
var plain [256]bool

// space[c] is true for the four JSON whitespace bytes.
var space [256]bool

func init() {
	for c := 0x20; c < 0x80; c++ {
		plain[c] = c != '"' && c != '\\'
	}
	for _, c := range []byte{' ', '\t', '\n', '\r'} {
		space[c] = true
	}
}

// SkipSpace returns the offset of the first non-whitespace byte at or after i.
func SkipSpace(b []byte, i int) int {
	for i < len(b) && space[b[i]] {
		i++
	}
	return i
}

// ScanString scans the string literal whose opening quote is b[i]. It
// returns the offset just past the closing quote, or -1 when the literal is
// malformed (unterminated, raw control byte, bad escape).
func ScanString(b []byte, i int) (end int, flags StringFlags) {
	if i >= len(b) || b[i] != '"' {
		return -1, 0
	}
	i++
	for i < len(b) {
		c := b[i]
		if plain[c] {
			i++
			continue
		}
		switch {
		case c == '"':
			return i + 1, flags
		case c == '\\':
			flags |= Escaped
			if i+1 >= len(b) {
				return -1, flags
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				r, ok := hex4(b, i+2)
				if !ok {
					return -1, flags
				}
				i += 6
				switch {
				case r >= 0xD800 && r < 0xDC00:
					// A high surrogate is only meaningful when a low one follows.
					if i+1 < len(b) && b[i] == '\\' && b[i+1] == 'u' {
						r2, ok := hex4(b, i+2)
						if !ok {
							return -1, flags
						}
						if r2 >= 0xDC00 && r2 < 0xE000 {
							i += 6
							continue
						}
					}
					flags |= BadUTF8
				case r >= 0xDC00 && r < 0xE000:
					flags |= BadUTF8
				}
			default:
				return -1, flags
			}
		case c < 0x20:
			return -1, flags
		default:
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size == 1 {
				flags |= BadUTF8
			}
			i += size
		}
	}
	return -1, flags
}

// hex4 decodes the four hex digits at b[i:i+4].
func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// AppendUnquoted appends the text of the string literal lit (quotes
// included, already accepted by ScanString) to dst. Unpaired surrogate
// escapes become U+FFFD; raw bytes are copied as they are.
func AppendUnquoted(dst, lit []byte) []byte {
	if len(lit) < 2 {
		return dst
	}
	s := lit[1 : len(lit)-1]
	for i := 0; i < len(s); {
		c := s[i]
		if c != '\\' {
			// Copy the run up to the next escape in one go.
			j := i + 1
			for j < len(s) && s[j] != '\\' {
				j++
			}
			dst = append(dst, s[i:j]...)
			i = j
			continue
		}
		if i+1 >= len(s) {
			return dst
		}
		switch s[i+1] {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r, ok := hex4(s, i+2)
			if !ok {
				return dst
			}
			i += 6
			if r >= 0xD800 && r < 0xDC00 && i+1 < len(s) && s[i] == '\\' && s[i+1] == 'u' {
				if r2, ok := hex4(s, i+2); ok && r2 >= 0xDC00 && r2 < 0xE000 {
					r = 0x10000 + (r-0xD800)<<10 + (r2 - 0xDC00)
					i += 6
				}
			}
			if r >= 0xD800 && r < 0xE000 {
				r = utf8.RuneError
			}
			dst = utf8.AppendRune(dst, r)
			continue
		default: // '"', '\\', '/'
			dst = append(dst, s[i+1])
		}
		i += 2
	}
	return dst
}

// ScanNumber scans the number literal starting at b[i]. It returns the
// offset just past it, or -1 when it is malformed, and whether it is written
// as an integer (no fraction, no exponent).
func ScanNumber(b []byte, i int) (end int, integer bool) {
	if i < len(b) && b[i] == '-' {
		i++
	}
	if i >= len(b) {
		return -1, false
	}
	switch {
	case b[i] == '0':
		i++
	case b[i] >= '1' && b[i] <= '9':
		i++
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	default:
		return -1, false
	}
	integer = true
	if i < len(b) && b[i] == '.' {
		integer = false
		i++
		if i >= len(b) || !isDigit(b[i]) {
			return -1, false
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		integer = false
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || !isDigit(b[i]) {
			return -1, false
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	return i, integer
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// NumberParts is a number literal split into its parts. The slices point into
// the literal.
type NumberParts struct {
	Neg  bool   // written with a leading '-'
	Int  []byte // the integer digits: "0" or digits without a leading zero
	Frac []byte // the digits after the '.', empty when there is no fraction
	// ExpNeg and Exp give the exponent: Exp holds its digits without
	// leading zeros, so it is empty when there is no exponent or it is 0.
	ExpNeg bool
	Exp    []byte
}

// SplitNumber splits lit, a literal that ScanNumber accepted in full, into
// its parts. It does not allocate, and its cost is linear in len(lit).
func SplitNumber(lit []byte) NumberParts {
	var n NumberParts
	i := 0
	if i < len(lit) && lit[i] == '-' {
		n.Neg = true
		i++
	}
	j := i
	for j < len(lit) && isDigit(lit[j]) {
		j++
	}
	n.Int = lit[i:j]
	if j < len(lit) && lit[j] == '.' {
		i = j + 1
		for j = i; j < len(lit) && isDigit(lit[j]); j++ {
		}
		n.Frac = lit[i:j]
	}
	if j < len(lit) {
		// 'e' or 'E', an optional sign, then the digits.
		j++
		if j < len(lit) && (lit[j] == '+' || lit[j] == '-') {
			n.ExpNeg = lit[j] == '-'
			j++
		}
		for j < len(lit) && lit[j] == '0' {
			j++
		}
		n.Exp = lit[j:]
	}
	return n
}

// ScanLiteral scans true, false or null starting at b[i] and returns the
// offset just past it, or -1.
func ScanLiteral(b []byte, i int) int {
	var lit string
	switch {
	case i >= len(b):
		return -1
	case b[i] == 't':
		lit = "true"
	case b[i] == 'f':
		lit = "false"
	case b[i] == 'n':
		lit = "null"
	default:
		return -1
	}
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}

// SkipValue scans the value starting at b[i] (whitespace already skipped)
// and returns the offset just past it, or -1 when it is malformed. It
// walks any nesting depth iteratively, so hostile input cannot exhaust the
// goroutine stack; stack is scratch space it may grow and return.
func SkipValue(b []byte, i int, stack []bool) (end int, scratch []bool) {
	// stack holds one entry per open container: true for an object.
	stack = stack[:0]
	for {
		// Here a value is expected at b[i].
		if i >= len(b) {
			return -1, stack
		}
		switch b[i] {
		case '{', '[':
			obj := b[i] == '{'
			i = SkipSpace(b, i+1)
			if i < len(b) && b[i] == closer(obj) {
				i++
				break
			}
			stack = append(stack, obj)
			if obj {
				if i = objectKey(b, i); i < 0 {
					return -1, stack
				}
			}
			continue
		case '"':
			if i, _ = ScanString(b, i); i < 0 {
				return -1, stack
			}
		case 't', 'f', 'n':
			if i = ScanLiteral(b, i); i < 0 {
				return -1, stack
			}
		default:
			if i, _ = ScanNumber(b, i); i < 0 {
				return -1, stack
			}
		}
		// A value just ended: close containers or move to the next member.
		for {
			if len(stack) == 0 {
				return i, stack
			}
			obj := stack[len(stack)-1]
			i = SkipSpace(b, i)
			if i >= len(b) {
				return -1, stack
			}
			if b[i] == closer(obj) {
				stack = stack[:len(stack)-1]
				i++
				continue
			}
			if b[i] != ',' {
				return -1, stack
			}
			i = SkipSpace(b, i+1)
			if obj {
				if i = objectKey(b, i); i < 0 {
					return -1, stack
				}
			}
			break
		}
	}
}

func closer(obj bool) byte {
	if obj {
		return '}'
	}
	return ']'
}

// objectKey scans `"key" :` at b[i] and returns the offset of the value.
func objectKey(b []byte, i int) int {
	i, _ = ScanString(b, i)
	if i < 0 {
		return -1
	}
	i = SkipSpace(b, i)
	if i >= len(b) || b[i] != ':' {
		return -1
	}
	return SkipSpace(b, i+1)
}
