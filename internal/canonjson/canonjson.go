// Package canonjson renders JSON in one canonical form, so that equal
// documents give equal bytes and therefore equal digests.
//
// The canonical form of a document is:
//
//   - No whitespace outside strings.
//   - Object members sorted by the UTF-8 bytes of their unescaped keys;
//     duplicate keys are an error.
//   - Strings hold their unescaped text, with only '"', '\\' and the control
//     characters U+0000 to U+001F escaped: \b \t \n \f \r for those five, and
//     \u00XX with lowercase hex for the rest. Nothing else is escaped (no
//     HTML escaping, no \u escapes for non-ASCII), so "\u0041" and "A" come
//     out the same. Invalid UTF-8 and unpaired surrogate escapes are errors.
//   - true, false and null as they are.
//   - Numbers by exact decimal value, never through float64. Let the value
//     be ±D × 10^E with D a run of digits without leading or trailing zeros,
//     and A = E + len(D) − 1 the exponent of its leading digit. Zero (of
//     any sign or spelling) is "0". Otherwise a '-' comes first if the value
//     is negative, then plain decimal notation when it needs few padding
//     zeros, that is when 0 ≤ E ≤ 20 (an integer: D then E zeros) or when
//     E < 0 and A ≥ −7 (D with a '.' inserted, or "0." then −A−1 zeros then
//     D when the value is below 1). Any other value is written as D, 'e' and
//     E in decimal, with a '-' when negative and no '+' or leading zeros.
//     Examples: 412.50, 4.1250e2 and 41250e-2 → "412.5"; 1E2 → "100";
//     -0 and 0e5 → "0"; 1e20 → "100000000000000000000"; 1e21 → "1e21";
//     1e-7 → "0.0000001"; 1.5e-8 → "15e-9"; 1e999999999 → "1e999999999".
//     Equal values thus give equal text and different values different
//     text, and no number grows by more than about 20 bytes, whatever its
//     exponent.
//
// Nesting deeper than 10000 levels is refused, as encoding/json does.
//
// Marshal renders Go values with encoding/json first, so a type with its
// own MarshalJSON decides its text. decimal.Decimal writes its plain
// digits as a string ("412.5"; equal decimals give equal text whatever
// their scale), padding zeros included, so Marshal refuses a decimal whose
// exponent is beyond ±MaxDecimalExponent rather than render, say, 1e10000
// as 10001 digits.
package canonjson

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/planexec/planexec/internal/jsonscan"
)

// maxDepth matches encoding/json's own nesting limit.
const maxDepth = 10000

// Marshal returns the canonical JSON of v: encoding/json's rendering of v
// (no HTML escaping), re-encoded canonically. It fails, before rendering
// anything, when a decimal.Decimal or decimal.NullDecimal inside v has an
// exponent beyond ±MaxDecimalExponent.
func Marshal(v any) ([]byte, error) {
	if err := checkDecimals(reflect.ValueOf(v), 0); err != nil {
		return nil, err
	}
	w := getWork()
	defer w.release()
	if err := w.enc.Encode(v); err != nil {
		return nil, err
	}
	return w.canonicalize(w.buf.Bytes())
}

// work is what one Marshal or Canonicalize needs besides its result. It is
// pooled: digests are taken for every step of every plan, and building this
// afresh each time cost more allocations than the result itself.
type work struct {
	buf  bytes.Buffer
	enc  *json.Encoder // writes to buf, without HTML escaping
	p    parser
	keys []int // the emitter's stack of member keys
}

var workPool = sync.Pool{New: func() any {
	w := &work{}
	w.enc = json.NewEncoder(&w.buf)
	w.enc.SetEscapeHTML(false)
	return w
}}

func getWork() *work { return workPool.Get().(*work) }

// release returns w to the pool, keeping no reference to a document and no
// buffer grown past what small documents need.
func (w *work) release() {
	const keep = 64 << 10
	if w.buf.Cap() > keep {
		return
	}
	w.buf.Reset()
	w.p.doc = nil
	if cap(w.p.nodes) > keep/32 {
		w.p.nodes = nil
	}
	if cap(w.p.arena) > keep {
		w.p.arena = nil
	}
	if cap(w.p.scratch) > keep {
		w.p.scratch = nil
	}
	workPool.Put(w)
}

// Digest returns "sha256:" followed by the lowercase hex SHA-256 of
// Marshal(v).
func Digest(v any) (string, error) {
	b, err := Marshal(v)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// Sum returns "sha256:" followed by the lowercase hex SHA-256 of canonical,
// which the caller has built canonically.
func Sum(canonical []byte) string {
	sum := sha256.Sum256(canonical)
	var b [len("sha256:") + 2*sha256.Size]byte
	copy(b[:], "sha256:")
	hex.Encode(b[len("sha256:"):], sum[:])
	return string(b[:])
}

// AppendString appends s to dst as a canonical JSON string. Invalid UTF-8 is
// replaced by U+FFFD first, as encoding/json does.
func AppendString(dst []byte, s string) []byte {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	return appendString(dst, []byte(s))
}

// Canonicalize re-encodes a JSON document canonically. It fails on invalid
// JSON, duplicate keys and invalid UTF-8. Errors give byte offsets, never
// document content.
func Canonicalize(doc []byte) ([]byte, error) {
	w := getWork()
	defer w.release()
	return w.canonicalize(doc)
}

func (w *work) canonicalize(doc []byte) ([]byte, error) {
	p := &w.p
	p.doc, p.pos, p.nodes, p.arena = doc, 0, p.nodes[:0], p.arena[:0]
	p.pos = jsonscan.SkipSpace(doc, 0)
	if err := p.value(0); err != nil {
		return nil, err
	}
	if p.pos = jsonscan.SkipSpace(doc, p.pos); p.pos != len(doc) {
		return nil, p.syntaxError()
	}
	e := emitter{nodes: p.nodes, doc: doc, arena: p.arena, keys: w.keys[:0]}
	e.out = make([]byte, 0, len(doc))
	_, err := e.emit(0)
	w.keys = e.keys[:0]
	if err != nil {
		return nil, err
	}
	return e.out, nil
}

// node is one entry of the flat tree Canonicalize builds, in document
// order. Building the tree first lets every object be sorted once, so the
// whole job stays O(n log n) however deep the nesting.
type node struct {
	kind byte // '{', '[', 'k' (object key), 'v' (scalar), 't', 'f', 'n'
	// arena says whether text lives in the arena (rewritten) or in the
	// document (already canonical).
	arena bool
	// off and n locate the text: the canonical rendering of a scalar, or
	// the unescaped bytes of a key.
	off, n int
	// count is the number of members or elements of a container.
	count int
	// end is the index just past the node's subtree.
	end int
}

type parser struct {
	doc     []byte
	pos     int
	nodes   []node
	arena   []byte
	scratch []byte // unescaped string text, reused
}

func (p *parser) syntaxError() error {
	return fmt.Errorf("canonjson: invalid JSON at offset %d", p.pos)
}

func (p *parser) value(depth int) error {
	b := p.doc
	if p.pos >= len(b) {
		return p.syntaxError()
	}
	switch b[p.pos] {
	case '{', '[':
		if depth >= maxDepth {
			return fmt.Errorf("canonjson: nesting deeper than %d at offset %d", maxDepth, p.pos)
		}
		open := b[p.pos]
		closer := byte(']')
		if open == '{' {
			closer = '}'
		}
		idx := len(p.nodes)
		p.nodes = append(p.nodes, node{kind: open})
		p.pos = jsonscan.SkipSpace(b, p.pos+1)
		count := 0
		if p.pos < len(b) && b[p.pos] == closer {
			p.pos++
		} else {
			for {
				if open == '{' {
					if err := p.key(); err != nil {
						return err
					}
				}
				if err := p.value(depth + 1); err != nil {
					return err
				}
				count++
				p.pos = jsonscan.SkipSpace(b, p.pos)
				if p.pos >= len(b) {
					return p.syntaxError()
				}
				if b[p.pos] == closer {
					p.pos++
					break
				}
				if b[p.pos] != ',' {
					return p.syntaxError()
				}
				p.pos = jsonscan.SkipSpace(b, p.pos+1)
			}
		}
		p.nodes[idx].count = count
		p.nodes[idx].end = len(p.nodes)
	case '"':
		start := p.pos
		end, flags := jsonscan.ScanString(b, start)
		if end < 0 {
			return p.syntaxError()
		}
		if flags&jsonscan.BadUTF8 != 0 {
			return fmt.Errorf("canonjson: invalid UTF-8 in string at offset %d", start)
		}
		p.pos = end
		n := node{kind: 'v', off: start, n: end - start}
		if flags&jsonscan.Escaped != 0 {
			// Without escapes the literal is already canonical: the only
			// bytes that would need escaping cannot appear raw.
			off := len(p.arena)
			p.scratch = jsonscan.AppendUnquoted(p.scratch[:0], b[start:end])
			p.arena = appendString(p.arena, p.scratch)
			n = node{kind: 'v', arena: true, off: off, n: len(p.arena) - off}
		}
		n.end = len(p.nodes) + 1
		p.nodes = append(p.nodes, n)
	case 't', 'f', 'n':
		end := jsonscan.ScanLiteral(b, p.pos)
		if end < 0 {
			return p.syntaxError()
		}
		p.nodes = append(p.nodes, node{kind: b[p.pos], end: len(p.nodes) + 1})
		p.pos = end
	default:
		start := p.pos
		end, _ := jsonscan.ScanNumber(b, start)
		if end < 0 {
			return p.syntaxError()
		}
		p.pos = end
		off := len(p.arena)
		p.arena = appendNumber(p.arena, b[start:end])
		n := node{kind: 'v', arena: true, off: off, n: len(p.arena) - off}
		if bytes.Equal(p.arena[off:], b[start:end]) {
			// Already canonical: point at the document, reuse the arena.
			p.arena = p.arena[:off]
			n = node{kind: 'v', off: start, n: end - start}
		}
		n.end = len(p.nodes) + 1
		p.nodes = append(p.nodes, n)
	}
	return nil
}

// key parses `"key" :` and records the unescaped key.
func (p *parser) key() error {
	b := p.doc
	start := p.pos
	end, flags := jsonscan.ScanString(b, start)
	if end < 0 {
		return p.syntaxError()
	}
	if flags&jsonscan.BadUTF8 != 0 {
		return fmt.Errorf("canonjson: invalid UTF-8 in key at offset %d", start)
	}
	n := node{kind: 'k', off: start + 1, n: end - start - 2}
	if flags&jsonscan.Escaped != 0 {
		off := len(p.arena)
		p.arena = jsonscan.AppendUnquoted(p.arena, b[start:end])
		n = node{kind: 'k', arena: true, off: off, n: len(p.arena) - off}
	}
	n.end = len(p.nodes) + 1
	p.nodes = append(p.nodes, n)
	p.pos = jsonscan.SkipSpace(b, end)
	if p.pos >= len(b) || b[p.pos] != ':' {
		return p.syntaxError()
	}
	p.pos = jsonscan.SkipSpace(b, p.pos+1)
	return nil
}

type emitter struct {
	nodes []node
	doc   []byte
	arena []byte
	out   []byte
	// keys is a stack of member key indexes shared by all objects being
	// emitted, so sorting needs no allocation per object.
	keys []int
}

func (e *emitter) text(n *node) []byte {
	if n.arena {
		return e.arena[n.off : n.off+n.n]
	}
	return e.doc[n.off : n.off+n.n]
}

var errDuplicate = errors.New("canonjson: duplicate key")

// emit writes node i and its subtree and returns the index after them.
func (e *emitter) emit(i int) (int, error) {
	n := &e.nodes[i]
	switch n.kind {
	case 't':
		e.out = append(e.out, "true"...)
	case 'f':
		e.out = append(e.out, "false"...)
	case 'n':
		e.out = append(e.out, "null"...)
	case 'v':
		e.out = append(e.out, e.text(n)...)
	case '[':
		e.out = append(e.out, '[')
		j := i + 1
		for k := 0; k < n.count; k++ {
			if k > 0 {
				e.out = append(e.out, ',')
			}
			var err error
			if j, err = e.emit(j); err != nil {
				return 0, err
			}
		}
		e.out = append(e.out, ']')
	case '{':
		base := len(e.keys)
		j := i + 1
		for k := 0; k < n.count; k++ {
			e.keys = append(e.keys, j)
			j = e.nodes[j+1].end
		}
		members := e.keys[base:]
		slices.SortFunc(members, func(a, b int) int {
			return bytes.Compare(e.text(&e.nodes[a]), e.text(&e.nodes[b]))
		})
		for k := 1; k < len(members); k++ {
			if bytes.Equal(e.text(&e.nodes[members[k-1]]), e.text(&e.nodes[members[k]])) {
				return 0, errDuplicate
			}
		}
		e.out = append(e.out, '{')
		for k := 0; k < n.count; k++ {
			if k > 0 {
				e.out = append(e.out, ',')
			}
			// Nested objects may grow e.keys, so index it afresh each time.
			kn := e.keys[base+k]
			e.out = appendString(e.out, e.text(&e.nodes[kn]))
			e.out = append(e.out, ':')
			if _, err := e.emit(kn + 1); err != nil {
				return 0, err
			}
		}
		e.out = append(e.out, '}')
		e.keys = e.keys[:base]
	}
	return n.end, nil
}

const hexDigits = "0123456789abcdef"

// appendString appends s (valid UTF-8) as a canonical string literal.
func appendString[S string | []byte](dst []byte, s S) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\t':
			dst = append(dst, '\\', 't')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\r':
			dst = append(dst, '\\', 'r')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// Plain decimal notation is used when it pads with at most maxTrailZeros
// zeros before the point or at most maxLeadZeros after it; see the package
// documentation.
const (
	maxTrailZeros = 20
	maxLeadZeros  = 6
)

// appendNumber appends the canonical form of the number literal lit, which
// jsonscan.ScanNumber accepted. Its cost is linear in len(lit), whatever
// the exponent.
func appendNumber(dst, lit []byte) []byte {
	n := jsonscan.SplitNumber(lit)
	intPart, fracPart := n.Int, n.Frac

	// The significant digits D run from the first to the last non-zero
	// digit of intPart+fracPart; positions index that concatenation.
	total := len(intPart) + len(fracPart)
	digit := func(k int) byte {
		if k < len(intPart) {
			return intPart[k]
		}
		return fracPart[k-len(intPart)]
	}
	first, last := -1, -1
	for k := 0; k < total; k++ {
		if digit(k) != '0' {
			if first < 0 {
				first = k
			}
			last = k
		}
	}
	if first < 0 {
		return append(dst, '0')
	}
	if n.Neg {
		dst = append(dst, '-')
	}
	nd := last - first + 1
	// The last significant digit sits at place len(intPart)-1-last before
	// the written exponent is applied.
	shift := int64(len(intPart) - 1 - last)

	if len(n.Exp) > 18 {
		// The exponent does not fit in int64 arithmetic. Such a value is
		// never written plainly: that would take a number of digits near
		// the exponent's magnitude, far more than any input holds. As
		// |shift| < len(lit) < 10^18 <= |exponent|, the sum keeps the
		// exponent's sign.
		dst = appendDigits(dst, digit, first, last)
		dst = append(dst, 'e')
		if n.ExpNeg {
			dst = append(dst, '-')
			shift = -shift
		}
		return appendSum(dst, n.Exp, shift)
	}
	var exp int64
	for _, c := range n.Exp {
		exp = exp*10 + int64(c-'0')
	}
	if n.ExpNeg {
		exp = -exp
	}
	e := exp + shift       // D × 10^e is the value
	a := e + int64(nd) - 1 // exponent of the leading digit
	switch {
	case e > maxTrailZeros || a < -maxLeadZeros-1:
		dst = appendDigits(dst, digit, first, last)
		dst = append(dst, 'e')
		return strconv.AppendInt(dst, e, 10)
	case e >= 0:
		// An integer: the digits, then e zeros.
		dst = appendDigits(dst, digit, first, last)
		for ; e > 0; e-- {
			dst = append(dst, '0')
		}
		return dst
	case a < 0:
		// Below 1: "0.", -a-1 zeros, then the digits.
		dst = append(dst, '0', '.')
		for k := int64(0); k < -a-1; k++ {
			dst = append(dst, '0')
		}
		return appendDigits(dst, digit, first, last)
	default:
		// a+1 integer digits, then the rest after the point.
		split := first + int(a) + 1
		dst = appendDigits(dst, digit, first, split-1)
		dst = append(dst, '.')
		return appendDigits(dst, digit, split, last)
	}
}

// appendSum appends the decimal digits of x+s, where x is a run of decimal
// digits without leading zeros and s is small enough that x+s > 0. It works
// digit by digit in the appended copy, so its cost is linear in len(x)
// where math/big would take time quadratic in it.
func appendSum(dst, x []byte, s int64) []byte {
	start := len(dst)
	dst = append(dst, x...)
	z := dst[start:]
	if s >= 0 {
		carry := uint64(s)
		for i := len(z) - 1; i >= 0 && carry > 0; i-- {
			d := uint64(z[i]-'0') + carry
			z[i] = byte('0' + d%10)
			carry = d / 10
		}
		for ; carry > 0; carry /= 10 {
			// The sum has more digits than x: shift them right by one.
			dst = append(dst, 0)
			copy(dst[start+1:], dst[start:])
			dst[start] = byte('0' + carry%10)
		}
		return dst
	}
	borrow := uint64(-s)
	for i := len(z) - 1; i >= 0 && borrow > 0; i-- {
		d := int64(z[i]-'0') - int64(borrow%10)
		borrow /= 10
		if d < 0 {
			d += 10
			borrow++
		}
		z[i] = byte('0' + d)
	}
	// Drop the leading zeros the subtraction may have left.
	k := 0
	for k < len(z)-1 && z[k] == '0' {
		k++
	}
	return append(dst[:start], z[k:]...)
}

func appendDigits(dst []byte, digit func(int) byte, from, to int) []byte {
	for k := from; k <= to; k++ {
		dst = append(dst, digit(k))
	}
	return dst
}
