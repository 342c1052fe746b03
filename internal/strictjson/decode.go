package strictjson

import (
	"bytes"
	"encoding"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"reflect"
	"strconv"
	"strings"

	"github.com/planexec/planexec/internal/jsonscan"
	"github.com/shopspring/decimal"
)

// nullLiteral is what a non-pointer json.Unmarshaler receives for an
// optional member written as null, as encoding/json would pass it.
var nullLiteral = []byte("null")

// value checks the value at s.pos against c and stores it in v. depth is
// the number of containers around the value.
func (s *state) value(c *codec, v reflect.Value, depth int) {
	b := s.data
	if s.pos >= len(b) {
		s.fail()
		return
	}
	ch := b[s.pos]
	if ch == 'n' {
		if s.literal() {
			s.violate("null is not allowed")
		}
		return
	}
	switch c.kind {
	case kStruct:
		if ch != '{' {
			s.mismatch(c, depth)
			return
		}
		s.object(c, v, depth)
	case kMap:
		if ch != '{' {
			s.mismatch(c, depth)
			return
		}
		s.mapObject(c, v, depth)
	case kSlice, kArray:
		if ch != '[' {
			s.mismatch(c, depth)
			return
		}
		s.array(c, v, depth)
	case kString:
		if ch != '"' {
			s.mismatch(c, depth)
			return
		}
		if str, ok := s.str(); ok {
			v.SetString(string(str))
		}
	case kBytes:
		if ch != '"' {
			s.mismatch(c, depth)
			return
		}
		str, ok := s.str()
		if !ok {
			return
		}
		out := make([]byte, base64.StdEncoding.DecodedLen(len(str)))
		n, err := base64.StdEncoding.Decode(out, str)
		if err != nil {
			s.violate("invalid base64")
			return
		}
		v.SetBytes(out[:n])
	case kBool:
		if ch != 't' && ch != 'f' {
			s.mismatch(c, depth)
			return
		}
		if s.literal() {
			v.SetBool(ch == 't')
		}
	case kInt, kUint, kFloat, kDecimal, kBigInt:
		if jsonscan.KindOf(ch) != jsonscan.Number {
			s.mismatch(c, depth)
			return
		}
		s.number(c, v)
	case kPtr:
		p := reflect.New(c.elem.typ)
		s.value(c.elem, p.Elem(), depth)
		v.Set(p)
	case kJSON:
		if c.stringOnly && ch != '"' {
			s.mismatch(c, depth)
			return
		}
		start, n := s.pos, len(s.viols)
		s.walk(depth)
		if s.stop || len(s.viols) != n {
			return
		}
		if err := v.Addr().Interface().(json.Unmarshaler).UnmarshalJSON(b[start:s.pos]); err != nil {
			// The error text may quote the document, so it is dropped.
			if c.typ == timeType {
				s.violate("invalid RFC 3339 date-time")
			} else {
				s.violate("invalid value")
			}
		}
	case kText:
		if ch != '"' {
			s.mismatch(c, depth)
			return
		}
		str, ok := s.str()
		if !ok {
			return
		}
		if err := v.Addr().Interface().(encoding.TextUnmarshaler).UnmarshalText(str); err != nil {
			s.violate("invalid value")
		}
	case kRaw:
		start, n := s.pos, len(s.viols)
		s.walk(depth)
		if !s.stop && len(s.viols) == n {
			v.SetBytes(bytes.Clone(b[start:s.pos]))
		}
	}
}

// optionalNull consumes the null written for an optional member. It leaves
// the zero value, except that a non-pointer json.Unmarshaler is handed the
// null, as encoding/json does, so both decoders agree on the result.
func (s *state) optionalNull(c *codec, v reflect.Value) {
	if !s.literal() {
		return
	}
	switch c.kind {
	case kJSON:
		if err := v.Addr().Interface().(json.Unmarshaler).UnmarshalJSON(nullLiteral); err != nil {
			s.violate("invalid value")
		}
	case kRaw:
		v.SetBytes(bytes.Clone(nullLiteral))
	}
}

// mismatch reports a value of the wrong JSON kind and skips it.
func (s *state) mismatch(c *codec, depth int) {
	got := jsonscan.KindOf(s.data[s.pos])
	if got == jsonscan.Invalid {
		s.fail()
		return
	}
	s.violate("expected " + c.expect + ", got " + got.String())
	s.walk(depth)
}

// literal consumes true, false or null.
func (s *state) literal() bool {
	end := jsonscan.ScanLiteral(s.data, s.pos)
	if end < 0 {
		s.fail()
		return false
	}
	s.pos = end
	return true
}

// str consumes a string and returns its text, which is only valid until the
// next call (it may live in s.scratch).
func (s *state) str() ([]byte, bool) {
	start := s.pos
	end, flags := jsonscan.ScanString(s.data, start)
	if end < 0 {
		s.fail()
		return nil, false
	}
	s.pos = end
	if flags&jsonscan.BadUTF8 != 0 {
		s.violate("invalid UTF-8")
		return nil, false
	}
	if flags&jsonscan.Escaped == 0 {
		return s.data[start+1 : end-1], true
	}
	s.scratch = jsonscan.AppendUnquoted(s.scratch[:0], s.data[start:end])
	return s.scratch, true
}

// number consumes a number literal for an int, uint, float, decimal or
// big.Int. Every bound is checked on the literal itself, in time linear in
// its length, before anything parses it.
func (s *state) number(c *codec, v reflect.Value) {
	end, integer := jsonscan.ScanNumber(s.data, s.pos)
	if end < 0 {
		s.fail()
		return
	}
	lit := s.data[s.pos:end]
	s.pos = end
	switch c.kind {
	case kInt, kUint:
		if !integer {
			s.violate("expected integer, got number with fraction or exponent")
			return
		}
		neg, mag, ok := parseMagnitude(lit)
		if c.kind == kInt {
			limit := uint64(1) << (c.bits - 1)
			if !neg {
				limit--
			}
			if !ok || mag > limit {
				s.violate(c.rangeMsg)
				return
			}
			if neg {
				v.SetInt(-int64(mag))
			} else {
				v.SetInt(int64(mag))
			}
			return
		}
		// "-0" is refused too: encoding/json does not read it as unsigned.
		if neg || !ok || (c.bits < 64 && mag >= uint64(1)<<c.bits) {
			s.violate(c.rangeMsg)
			return
		}
		v.SetUint(mag)
	case kFloat:
		// ParseFloat reads a long literal in linear time, rounding as
		// encoding/json does.
		f, err := strconv.ParseFloat(string(lit), c.bits)
		if err != nil {
			// The literal's syntax is already checked, so only range errors remain.
			s.violate(c.rangeMsg)
			return
		}
		v.SetFloat(f)
	case kDecimal:
		d, ok := parseDecimal(lit)
		if !ok {
			s.violate(c.rangeMsg)
			return
		}
		switch p := v.Addr().Interface().(type) {
		case *decimal.Decimal:
			*p = d
		case *decimal.NullDecimal:
			*p = decimal.NullDecimal{Decimal: d, Valid: true}
		}
	case kBigInt:
		if !integer {
			s.violate("expected integer, got number with fraction or exponent")
			return
		}
		digits := len(lit)
		if lit[0] == '-' {
			digits--
		}
		if digits > MaxBigIntDigits {
			s.violate(c.rangeMsg)
			return
		}
		v.Addr().Interface().(*big.Int).SetString(string(lit), 10)
	}
}

// parseMagnitude reads an integer literal as sign and magnitude; ok is false
// when the magnitude does not fit in 64 bits. It stops at the first digit
// that overflows, so a long literal costs no more than a short one.
func parseMagnitude(lit []byte) (neg bool, mag uint64, ok bool) {
	if len(lit) > 0 && lit[0] == '-' {
		neg, lit = true, lit[1:]
	}
	for _, c := range lit {
		d := uint64(c - '0')
		if mag > (^uint64(0)-d)/10 {
			return neg, 0, false
		}
		mag = mag*10 + d
	}
	return neg, mag, true
}

// parseDecimal turns a JSON number literal into a decimal holding exactly
// the written digits and scale, as decimal.NewFromString would: 412.50 has
// coefficient 41250 and exponent -2. ok is false when the decimal has more
// than MaxDecimalDigits digits written out in full (see plainDigits); the
// check reads the literal once and comes before any parsing, so neither a
// long literal nor a large exponent costs more than reading it.
func parseDecimal(lit []byte) (d decimal.Decimal, ok bool) {
	n := jsonscan.SplitNumber(lit)
	// The coefficient's digits: Int and Frac together, leading zeros
	// dropped, trailing ones kept.
	var coef [MaxDecimalDigits]byte
	nd := 0
	for _, part := range [...][]byte{n.Int, n.Frac} {
		for _, c := range part {
			if nd == 0 && c == '0' {
				continue
			}
			if nd == len(coef) {
				return decimal.Decimal{}, false // more digits than the bound
			}
			coef[nd] = c
			nd++
		}
	}
	// An exponent of 19 digits or more is beyond 10^18, so beyond any
	// fraction that cancels it out: no document is that long.
	if len(n.Exp) > 18 {
		return decimal.Decimal{}, false
	}
	var exp int64
	for _, c := range n.Exp {
		exp = exp*10 + int64(c-'0')
	}
	if n.ExpNeg {
		exp = -exp
	}
	exp -= int64(len(n.Frac))
	if plainDigits(nd, exp) > MaxDecimalDigits {
		return decimal.Decimal{}, false
	}
	if nd <= 18 {
		var m int64
		for _, c := range coef[:nd] {
			m = m*10 + int64(c-'0')
		}
		if n.Neg {
			m = -m
		}
		return decimal.New(m, int32(exp)), true
	}
	b, _ := new(big.Int).SetString(string(coef[:nd]), 10)
	if n.Neg {
		b.Neg(b)
	}
	return decimal.NewFromBigInt(b, int32(exp)), true
}

// plainDigits is the number of digits of coefficient × 10^exp written out
// in full at its scale, leading zeros not counted, where the coefficient
// has nd digits (0 for zero): 412.50 has 5, 1e3 has 4, 0.001 has 3.
func plainDigits(nd int, exp int64) int64 {
	if exp >= 0 {
		return int64(nd) + exp
	}
	return max(int64(nd), -exp)
}

// object checks a JSON object against struct codec c.
func (s *state) object(c *codec, v reflect.Value, depth int) {
	if depth >= s.maxDepth {
		s.tooDeep()
		return
	}
	depth++
	b := s.data
	var seen uint64
	var seenMany []uint64
	if len(c.fields) > 64 {
		seenMany = make([]uint64, (len(c.fields)+63)/64)
	}
	var unknown [][]byte
	s.pos = jsonscan.SkipSpace(b, s.pos+1)
	if s.pos < len(b) && b[s.pos] == '}' {
		s.pos++
	} else {
		for {
			key, flags, ok := s.key()
			if !ok {
				return
			}
			fi := -1
			if flags&jsonscan.BadUTF8 == 0 {
				fi = c.lookup(key)
			}
			switch {
			case flags&jsonscan.BadUTF8 != 0:
				s.violate("invalid UTF-8")
				s.walk(depth)
			case fi < 0:
				unknown = s.unknownKey(c, key, unknown)
				s.walk(depth)
			case isSeen(seen, seenMany, fi):
				s.violate("duplicate key")
				s.walk(depth)
			default:
				seen = markSeen(seen, seenMany, fi)
				f := &c.fields[fi]
				fv := fieldOf(v, f)
				if f.optional && s.pos < len(b) && b[s.pos] == 'n' {
					s.optionalNull(f.codec, fv)
				} else {
					s.value(f.codec, fv, depth)
				}
			}
			s.pop()
			if !s.next('}') {
				break
			}
		}
		if s.stop {
			return
		}
	}
	if c.required == 0 {
		return
	}
	for i := range c.fields {
		f := &c.fields[i]
		if !f.optional && !isSeen(seen, seenMany, i) {
			s.pushName(f.name)
			s.violate("missing required key")
			s.pop()
		}
	}
}

// key reads a member's key and the ':' after it, and pushes the key onto the
// path. The key is unescaped (into scratch when it had escapes, so it is
// valid only until the next key); flags tell whether it held invalid UTF-8.
func (s *state) key() (key []byte, flags jsonscan.StringFlags, ok bool) {
	b := s.data
	kstart := s.pos
	kend, flags := jsonscan.ScanString(b, kstart)
	if kend < 0 {
		s.fail()
		return nil, 0, false
	}
	s.pushKey(kstart, kend)
	if !s.colon(kend) {
		return nil, 0, false
	}
	if flags&jsonscan.Escaped == 0 {
		return b[kstart+1 : kend-1], flags, true
	}
	s.scratch = jsonscan.AppendUnquoted(s.scratch[:0], b[kstart:kend])
	return s.scratch, flags, true
}

// colon consumes the ':' after a key ending at kend and the space after it.
func (s *state) colon(kend int) bool {
	b := s.data
	s.pos = jsonscan.SkipSpace(b, kend)
	if s.pos >= len(b) || b[s.pos] != ':' {
		s.fail()
		return false
	}
	s.pos = jsonscan.SkipSpace(b, s.pos+1)
	return true
}

// next consumes the ',' or closing byte after a member or element. It
// returns true when another member follows, false at the end of the
// container or when the scan has stopped.
func (s *state) next(closer byte) bool {
	if s.stop {
		return false
	}
	b := s.data
	s.pos = jsonscan.SkipSpace(b, s.pos)
	if s.pos < len(b) {
		switch b[s.pos] {
		case ',':
			s.pos = jsonscan.SkipSpace(b, s.pos+1)
			return true
		case closer:
			s.pos++
			return false
		}
	}
	s.fail()
	return false
}

func isSeen(seen uint64, many []uint64, i int) bool {
	if many != nil {
		return many[i/64]&(1<<(i%64)) != 0
	}
	return seen&(1<<i) != 0
}

func markSeen(seen uint64, many []uint64, i int) uint64 {
	if many != nil {
		many[i/64] |= 1 << (i % 64)
		return seen
	}
	return seen | 1<<i
}

// lookup finds the field whose JSON name is exactly key, or -1.
func (c *codec) lookup(key []byte) int {
	if c.byName != nil {
		if i, ok := c.byName[string(key)]; ok {
			return i
		}
		return -1
	}
	for i := range c.fields {
		if c.fields[i].name == string(key) {
			return i
		}
	}
	return -1
}

// unknownKey reports a key that names no field. Earlier unknown keys of the
// same object are passed in and returned, to tell repeats apart; there are
// at most MaxViolations of them since each one is a violation.
func (s *state) unknownKey(c *codec, key []byte, earlier [][]byte) [][]byte {
	for _, k := range earlier {
		if bytes.Equal(k, key) {
			s.violate("duplicate key")
			return earlier
		}
	}
	earlier = append(earlier, bytes.Clone(key))
	for i := range c.fields {
		if strings.EqualFold(c.fields[i].name, string(key)) {
			s.violate("key differs only in case from " + strconv.Quote(c.fields[i].name))
			return earlier
		}
	}
	s.violate("unknown key")
	return earlier
}

// fieldOf returns the struct field for f, allocating embedded pointers on
// the way as encoding/json does.
func fieldOf(v reflect.Value, f *field) reflect.Value {
	if !f.viaPtr {
		if len(f.index) == 1 {
			return v.Field(f.index[0])
		}
		return v.FieldByIndex(f.index)
	}
	for i, x := range f.index {
		if i > 0 && v.Kind() == reflect.Pointer {
			if v.IsNil() {
				v.Set(reflect.New(v.Type().Elem()))
			}
			v = v.Elem()
		}
		v = v.Field(x)
	}
	return v
}

// mapObject checks a JSON object against map codec c.
func (s *state) mapObject(c *codec, v reflect.Value, depth int) {
	if depth >= s.maxDepth {
		s.tooDeep()
		return
	}
	depth++
	b := s.data
	m := reflect.MakeMap(c.typ)
	v.Set(m)
	kt := c.typ.Key()
	var kv, ev reflect.Value
	s.pos = jsonscan.SkipSpace(b, s.pos+1)
	if s.pos < len(b) && b[s.pos] == '}' {
		s.pos++
		return
	}
	for {
		key, flags, ok := s.key()
		if !ok {
			return
		}
		var k reflect.Value
		switch {
		case flags&jsonscan.BadUTF8 != 0:
			s.violate("invalid UTF-8")
		case c.keyText:
			// encoding/json reads keys of such types with UnmarshalText.
			kp := reflect.New(kt)
			if err := kp.Interface().(encoding.TextUnmarshaler).UnmarshalText(key); err != nil {
				s.violate("invalid key")
			} else {
				k = kp.Elem()
			}
		default:
			if !kv.IsValid() {
				kv = reflect.New(kt).Elem()
			}
			kv.SetString(string(key))
			k = kv
		}
		switch {
		case !k.IsValid():
			s.walk(depth)
		case m.MapIndex(k).IsValid():
			s.violate("duplicate key")
			s.walk(depth)
		default:
			if !ev.IsValid() {
				ev = reflect.New(c.elem.typ).Elem()
			} else {
				ev.SetZero()
			}
			s.value(c.elem, ev, depth)
			m.SetMapIndex(k, ev)
		}
		s.pop()
		if !s.next('}') {
			return
		}
	}
}

// array checks a JSON array against slice or array codec c.
func (s *state) array(c *codec, v reflect.Value, depth int) {
	if depth >= s.maxDepth {
		s.tooDeep()
		return
	}
	depth++
	b := s.data
	s.pos = jsonscan.SkipSpace(b, s.pos+1)
	isSlice := c.kind == kSlice
	n := 0
	if s.pos < len(b) && b[s.pos] == ']' {
		s.pos++
	} else {
		for {
			switch {
			case isSlice:
				if n == v.Cap() {
					// Grow by doubling, as append would.
					grown := reflect.MakeSlice(c.typ, n, max(4, 2*n))
					reflect.Copy(grown, v)
					v.Set(grown)
				}
				v.SetLen(n + 1)
				s.pushIndex(n)
				s.value(c.elem, v.Index(n), depth)
			case n < c.length:
				s.pushIndex(n)
				s.value(c.elem, v.Index(n), depth)
			default:
				if n == c.length {
					s.violate(c.lenMsg)
				}
				s.pushIndex(n)
				s.walk(depth)
			}
			s.pop()
			n++
			if !s.next(']') {
				break
			}
		}
		if s.stop {
			return
		}
	}
	if isSlice {
		if n == 0 {
			// Like encoding/json, [] gives an empty slice, not nil.
			v.Set(reflect.MakeSlice(c.typ, 0, 0))
		}
		return
	}
	if n < c.length {
		s.violate(c.lenMsg)
	}
}

// walk checks any JSON value at s.pos for syntax, depth and UTF-8 without a
// type: the contents of json.RawMessage and json.Unmarshaler values, and
// values that are already refused but must still be passed over.
func (s *state) walk(depth int) {
	b := s.data
	if s.pos >= len(b) {
		s.fail()
		return
	}
	switch b[s.pos] {
	case '{', '[':
		obj := b[s.pos] == '{'
		closer := byte(']')
		if obj {
			closer = '}'
		}
		if depth >= s.maxDepth {
			s.tooDeep()
			return
		}
		s.pos = jsonscan.SkipSpace(b, s.pos+1)
		if s.pos < len(b) && b[s.pos] == closer {
			s.pos++
			return
		}
		for i := 0; ; i++ {
			if obj {
				kstart := s.pos
				kend, flags := jsonscan.ScanString(b, kstart)
				if kend < 0 {
					s.fail()
					return
				}
				s.pushKey(kstart, kend)
				if !s.colon(kend) {
					return
				}
				if flags&jsonscan.BadUTF8 != 0 {
					s.violate("invalid UTF-8")
				}
			} else {
				s.pushIndex(i)
			}
			s.walk(depth + 1)
			s.pop()
			if !s.next(closer) {
				return
			}
		}
	case '"':
		end, flags := jsonscan.ScanString(b, s.pos)
		if end < 0 {
			s.fail()
			return
		}
		s.pos = end
		if flags&jsonscan.BadUTF8 != 0 {
			s.violate("invalid UTF-8")
		}
	case 't', 'f', 'n':
		s.literal()
	default:
		end, _ := jsonscan.ScanNumber(b, s.pos)
		if end < 0 {
			s.fail()
			return
		}
		s.pos = end
	}
}
