// Package strictjson checks an untrusted JSON document against a Go type and
// decodes it only when it matches exactly, reporting every violation with a
// JSON Pointer (RFC 6901) path.
//
// Field names follow encoding/json (tag names, "-", promoted embedded
// structs), but matching is strict: keys are case-sensitive, unknown and
// repeated keys are refused, and a field is required unless its json tag
// says omitempty or omitzero. Optional fields may be absent or null;
// anywhere else null is refused. Numbers must fit the Go type exactly
// (no fraction for integers, no overflow), strings must be valid UTF-8,
// and decimal.Decimal takes a JSON number literal digit for digit.
//
// # Numbers
//
// A number is checked against its bound on the literal as written, in time
// linear in its length, before anything parses it, so that neither a long
// run of digits nor a large exponent costs more than reading it:
//
//   - Integer types take what they hold: int64 from -2^63 to 2^63-1,
//     uint64 up to 2^64-1, and so on for the narrower ones.
//   - big.Int takes an integer literal of at most MaxBigIntDigits (78)
//     digits, which holds any 256-bit value.
//   - decimal.Decimal and decimal.NullDecimal take a number literal whose
//     value, written out in full at its own scale, has at most
//     MaxDecimalDigits (38) digits, not counting leading zeros: 412.50 has
//     5, 1.5e3 has 4, 0.001 has 3, while 1e38 (39) and 1e-39 (39) are out
//     of range. 38 digits is the largest precision of SQL DECIMAL and
//     NUMERIC in many databases, so an accepted amount fits such a column
//     exactly, and its plain rendering (what digests are built from) stays
//     short: without the bound, 1e10000 (7 bytes) renders as 10001 digits.
//   - float32 and float64 take any literal within their range, rounded
//     as encoding/json rounds it.
//
// Numbers inside json.RawMessage values, and inside the values of other
// types that decode themselves (json.Unmarshaler), are only checked for
// syntax: they reach the caller, or that type's UnmarshalJSON, as written.
//
// Messages never quote the document: a key appears only in a path,
// sanitised and shortened, and a value never appears at all, so violations
// can be shown to the model that wrote the document, or logged, safely.
package strictjson

import (
	"reflect"
	"strconv"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/planexec/planexec/internal/jsonscan"
)

const (
	// DefaultMaxDepth is the nesting limit used when Limits.MaxDepth is 0.
	DefaultMaxDepth = 32
	// DefaultMaxBytes is the size limit used when Limits.MaxBytes is 0.
	DefaultMaxBytes = 1 << 20
	// maxDepthCap bounds MaxDepth: encoding/json refuses deeper documents
	// anyway, and it keeps recursion within reasonable stack use.
	maxDepthCap = 10000
	// MaxViolations is the most violations one Decode call reports; the
	// scan stops once it has that many.
	MaxViolations = 32
	// maxKeyBytes is how much of a key a path shows.
	maxKeyBytes = 64

	// MaxDecimalDigits bounds a decimal: written out in full at its own
	// scale, without leading zeros, it has at most this many digits. 38 is
	// the largest precision of DECIMAL and NUMERIC in SQL Server, Oracle and
	// Snowflake, and of the 128-bit decimals of Arrow and Spark (10^38 <
	// 2^127): ample for money, and it keeps a decimal's rendering short.
	MaxDecimalDigits = 38
	// MaxBigIntDigits bounds a big.Int: at most this many digits, enough
	// for any 256-bit value (2^256 has 78), the widest integers in common
	// use for ids, hashes and token amounts.
	MaxBigIntDigits = 78
)

// Violation is one thing wrong with a document, at a JSON Pointer (RFC
// 6901) path.
type Violation struct {
	// Path locates the offending value or key: "" is the root,
	// "/passengers/0/name" a nested member. Keys are escaped per RFC 6901
	// (~0, ~1), cut to 64 bytes (then "…"), and invalid UTF-8 or control
	// characters in them are shown as U+FFFD.
	Path string
	// Problem is a short lower-case fragment such as "unknown key" or
	// "expected integer, got string". It never holds document content.
	Problem string
}

// String renders the violation as "path: problem", the root shown as "(root)".
func (v Violation) String() string {
	p := v.Path
	if p == "" {
		p = "(root)"
	}
	return p + ": " + v.Problem
}

// Limits bounds the work one document may cause.
type Limits struct {
	// MaxDepth is the deepest nesting of objects and arrays allowed; the
	// root container is at depth 1. 0 (or less) means DefaultMaxDepth;
	// values above 10000, encoding/json's own limit, count as 10000.
	MaxDepth int
	// MaxBytes is the largest document size allowed. 0 (or less) means
	// DefaultMaxBytes.
	MaxBytes int
}

// Decoder decodes one Go type strictly. It is built once per type by For
// and is safe for concurrent use.
type Decoder struct {
	t        reflect.Type
	c        *codec
	decimals bool // a value can hold a decimal.Decimal
}

// Type returns the Go type the Decoder decodes.
func (d *Decoder) Type() reflect.Type { return d.t }

// Decode checks raw against the Decoder's type. When raw has no violation it
// decodes it into dst, a non-nil pointer to a value of that type, and
// returns nil. dst is overwritten as a whole: members absent from raw leave
// zero values, not whatever dst held before. Otherwise dst is left untouched
// and the violations are returned in document order, at most MaxViolations
// of them.
func (d *Decoder) Decode(raw []byte, dst any, lim Limits) []Violation {
	rv := reflect.ValueOf(dst)
	if rv.Kind() != reflect.Pointer || rv.IsNil() || rv.Type().Elem() != d.t {
		return []Violation{{Problem: "destination is not a non-nil *" + d.t.String()}}
	}
	// Decoding goes into a fresh value so dst stays untouched on failure.
	v, viols := d.decode(raw, lim)
	if viols != nil {
		return viols
	}
	rv.Elem().Set(v.Elem())
	return nil
}

// New is Decode into a new value of the Decoder's type: it returns a
// pointer to that value (a *T as an any), or the violations.
func (d *Decoder) New(raw []byte, lim Limits) (any, []Violation) {
	v, viols := d.decode(raw, lim)
	if viols != nil {
		return nil, viols
	}
	return v.Interface(), nil
}

// decode decodes raw into a new value and returns a pointer to it.
func (d *Decoder) decode(raw []byte, lim Limits) (reflect.Value, []Violation) {
	maxBytes := lim.MaxBytes
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	if len(raw) > maxBytes {
		return reflect.Value{}, []Violation{{Problem: "larger than " + strconv.Itoa(maxBytes) + " bytes"}}
	}
	maxDepth := lim.MaxDepth
	if maxDepth <= 0 {
		maxDepth = DefaultMaxDepth
	}
	maxDepth = min(maxDepth, maxDepthCap)

	s := statePool.Get().(*state)
	s.data, s.maxDepth = raw, maxDepth
	v := reflect.New(d.t)
	s.pos = jsonscan.SkipSpace(raw, 0)
	s.value(d.c, v.Elem(), 0)
	if !s.stop {
		if s.pos = jsonscan.SkipSpace(raw, s.pos); s.pos != len(raw) {
			s.frames = s.frames[:0]
			s.fail()
		}
	}
	viols := s.viols
	s.release()
	if len(viols) > 0 {
		return reflect.Value{}, viols
	}
	return v, nil
}

// frame is one step of the path to the value being scanned. Key segments
// point into the document and are only unquoted when a violation needs the
// path, which keeps the happy path free of string building.
type frame struct {
	kind       uint8 // frameKey, frameIndex or frameName
	start, end int   // frameKey: the key literal, quotes included
	index      int   // frameIndex
	name       string
}

const (
	frameKey uint8 = iota
	frameIndex
	frameName
)

// state is the scanner for one Decode call.
type state struct {
	data     []byte
	pos      int
	maxDepth int
	frames   []frame
	viols    []Violation
	stop     bool   // malformed input or MaxViolations reached
	scratch  []byte // unquoted strings, reused
	skip     []bool // jsonscan.SkipValue's stack, reused
}

var statePool = sync.Pool{New: func() any { return new(state) }}

func (s *state) release() {
	// Keep no reference to the caller's document or results.
	s.data, s.viols, s.stop, s.pos = nil, nil, false, 0
	s.frames = s.frames[:0]
	if cap(s.scratch) > 64<<10 {
		s.scratch = nil
	}
	if cap(s.skip) > 64<<10 {
		s.skip = nil
	}
	statePool.Put(s)
}

func (s *state) pushKey(start, end int) {
	s.frames = append(s.frames, frame{kind: frameKey, start: start, end: end})
}

func (s *state) pushIndex(i int) {
	s.frames = append(s.frames, frame{kind: frameIndex, index: i})
}

func (s *state) pushName(name string) {
	s.frames = append(s.frames, frame{kind: frameName, name: name})
}

func (s *state) pop() { s.frames = s.frames[:len(s.frames)-1] }

// violate records a problem at the current path.
func (s *state) violate(problem string) {
	if s.stop {
		return
	}
	s.viols = append(s.viols, Violation{Path: s.path(), Problem: problem})
	if len(s.viols) >= MaxViolations {
		s.stop = true
	}
}

// fail records malformed JSON at the current path and ends the scan: past a
// syntax error nothing can be located reliably.
func (s *state) fail() {
	s.violate("not valid JSON")
	s.stop = true
}

func (s *state) tooDeep() {
	s.violate("nesting deeper than " + strconv.Itoa(s.maxDepth))
	s.skipDeep()
}

// skipDeep passes over the value at s.pos without recursion, checking only
// its syntax.
func (s *state) skipDeep() {
	var end int
	end, s.skip = jsonscan.SkipValue(s.data, s.pos, s.skip)
	if end < 0 {
		s.fail()
		return
	}
	s.pos = end
}

// path renders the current frames as an RFC 6901 pointer.
func (s *state) path() string {
	if len(s.frames) == 0 {
		return ""
	}
	var p, key []byte
	for _, f := range s.frames {
		p = append(p, '/')
		switch f.kind {
		case frameIndex:
			p = strconv.AppendInt(p, int64(f.index), 10)
		case frameName:
			p = appendSegment(p, []byte(f.name))
		default:
			key = jsonscan.AppendUnquoted(key[:0], s.data[f.start:f.end])
			p = appendSegment(p, key)
		}
	}
	return string(p)
}

// appendSegment appends key as one pointer segment: cut to maxKeyBytes,
// unprintable or invalid bytes replaced, then ~ and / escaped.
func appendSegment(p, key []byte) []byte {
	cut := len(key) > maxKeyBytes
	if cut {
		n := maxKeyBytes
		// Back up to a rune start so the cut does not split a character;
		// a rune is at most 4 bytes, so look no further back than 3.
		for back := 0; back < utf8.UTFMax-1 && n > 0 && !utf8.RuneStart(key[n]); back++ {
			n--
		}
		key = key[:n]
	}
	for i := 0; i < len(key); {
		r, size := utf8.DecodeRune(key[i:])
		i += size
		switch {
		case r == utf8.RuneError && size == 1, unicode.IsControl(r):
			p = utf8.AppendRune(p, utf8.RuneError)
		case r == '~':
			p = append(p, '~', '0')
		case r == '/':
			p = append(p, '~', '1')
		default:
			p = utf8.AppendRune(p, r)
		}
	}
	if cut {
		p = append(p, "…"...)
	}
	return p
}

// Segment renders key as one JSON Pointer segment the way violation paths
// show keys: escaped per RFC 6901, cut to 64 bytes, invalid UTF-8 and control
// characters shown as U+FFFD. Callers building paths of their own use it so
// that a model-written key is bounded wherever it appears.
func Segment(key string) string {
	return string(appendSegment(nil, []byte(key)))
}
