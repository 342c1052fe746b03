package strictjson

import (
	"reflect"
	"strconv"

	"github.com/shopspring/decimal"
)

// HasDecimals reports whether a value of the Decoder's type can hold a
// decimal.Decimal (through pointers, collections and struct fields; not
// inside a type that decodes itself).
func (d *Decoder) HasDecimals() bool { return d.decimals }

// Decimals calls yield with the path and value of every decimal.Decimal in
// v, a value of the Decoder's type. A path is the member names and indexes,
// unescaped, leading from v to the decimal, as encoding/json names them; the
// slice is only valid during the call. Nil pointers and embedded pointers
// are passed over; types that decode themselves (json.Unmarshaler,
// encoding.TextUnmarshaler) are not looked into.
func (d *Decoder) Decimals(v reflect.Value, yield func(path []string, x decimal.Decimal)) {
	if !d.decimals || v.Type() != d.t {
		return
	}
	walkDecimals(d.c, v, make([]string, 0, 8), yield)
}

func walkDecimals(c *codec, v reflect.Value, path []string, yield func([]string, decimal.Decimal)) {
	switch c.kind {
	case kDecimal:
		if v.CanInterface() {
			yield(path, v.Interface().(decimal.Decimal))
		}
	case kPtr:
		if !v.IsNil() {
			walkDecimals(c.elem, v.Elem(), path, yield)
		}
	case kSlice, kArray:
		for i := range v.Len() {
			walkDecimals(c.elem, v.Index(i), append(path, strconv.Itoa(i)), yield)
		}
	case kMap:
		for it := v.MapRange(); it.Next(); {
			walkDecimals(c.elem, it.Value(), append(path, it.Key().String()), yield)
		}
	case kStruct:
		for i := range c.fields {
			f := &c.fields[i]
			fv, err := v.FieldByIndexErr(f.index)
			if err != nil {
				continue // through a nil embedded pointer: encoding/json leaves it out too
			}
			walkDecimals(f.codec, fv, append(path, f.name), yield)
		}
	}
}

// holdsDecimal reports whether a value decoded by c can hold a decimal.
func holdsDecimal(c *codec, seen map[*codec]bool) bool {
	if seen[c] {
		return false
	}
	seen[c] = true
	switch c.kind {
	case kDecimal:
		return true
	case kPtr, kSlice, kArray, kMap:
		return holdsDecimal(c.elem, seen)
	case kStruct:
		for i := range c.fields {
			if holdsDecimal(c.fields[i].codec, seen) {
				return true
			}
		}
	}
	return false
}
