package canonjson

import (
	"encoding/json"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Plain renders values of one plain struct type canonically, byte for byte
// as Marshal does, without rendering them with encoding/json and parsing
// the result back. Most tools take a few named scalars; their arguments are
// digested for every step of every plan, and the round trip through
// encoding/json was most of what validating a step cost.
//
// A struct is plain when every field encoding/json renders is a bool, an
// integer or a string (named types too), tagged with no option but
// omitempty, named with letters, digits, '_' and '-' only, and none of its
// types has a JSON or text marshaler of its own or is json.Number (which
// encoding/json writes as a number). Anything else (an embedded field, a
// nested struct, a pointer, a float, a decimal) is Marshal's alone.
type Plain struct {
	fields []plainField // sorted by name: canonical member order
}

type plainField struct {
	key       []byte // the canonical member name and ':'
	index     int
	kind      reflect.Kind
	omitEmpty bool
}

var numberType = reflect.TypeFor[json.Number]()

// PlainFor returns the Plain of struct type t, or nil when t is not plain.
func PlainFor(t reflect.Type) *Plain {
	if t.Kind() != reflect.Struct {
		return nil
	}
	p := &Plain{}
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous {
			return nil
		}
		if !f.IsExported() {
			continue // encoding/json never renders it
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if opts != "" && opts != "omitempty" {
			return nil
		}
		if name == "" {
			name = f.Name
		}
		if !plainName(name) || !plainType(f.Type) {
			return nil
		}
		key := appendString(nil, name)
		p.fields = append(p.fields, plainField{key: append(key, ':'), index: i, kind: f.Type.Kind(), omitEmpty: opts == "omitempty"})
	}
	slices.SortFunc(p.fields, func(a, b plainField) int { return strings.Compare(string(a.key), string(b.key)) })
	for i := 1; i < len(p.fields); i++ {
		if string(p.fields[i-1].key) == string(p.fields[i].key) {
			return nil // encoding/json's rules for clashing names are not repeated here
		}
	}
	return p
}

// plainName reports whether a member name needs no escaping and sorts as
// its bytes: '"' and ':' cannot appear, so keys sort as names do.
func plainName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func plainType(t reflect.Type) bool {
	if t == numberType {
		return false // encoding/json writes a json.Number as a number
	}
	switch t.Kind() {
	case reflect.Bool, reflect.String,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
	default:
		return false
	}
	// encoding/json asks the pointer too, since the values it renders
	// are addressable fields.
	pt := reflect.PointerTo(t)
	return !t.Implements(marshalerType) && !t.Implements(textType) && !pt.Implements(marshalerType) && !pt.Implements(textType)
}

// Append appends the canonical JSON of v, a value of p's type.
func (p *Plain) Append(dst []byte, v reflect.Value) []byte {
	dst = append(dst, '{')
	first := true
	for i := range p.fields {
		f := &p.fields[i]
		fv := v.Field(f.index)
		if f.omitEmpty && fv.IsZero() {
			continue
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = append(dst, f.key...)
		switch f.kind {
		case reflect.Bool:
			dst = strconv.AppendBool(dst, fv.Bool())
		case reflect.String:
			dst = appendGoString(dst, fv.String())
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			dst = strconv.AppendInt(dst, fv.Int(), 10)
		default:
			dst = strconv.AppendUint(dst, fv.Uint(), 10)
		}
	}
	return append(dst, '}')
}

// appendGoString appends s as the canonical form of what encoding/json
// writes for it: every byte that is not valid UTF-8 becomes U+FFFD, as
// encoding/json writes it, and the rest is s.
func appendGoString(dst []byte, s string) []byte {
	if utf8.ValidString(s) {
		return appendString(dst, s)
	}
	b := make([]byte, 0, len(s)+8)
	for _, r := range s { // an invalid byte ranges as one RuneError
		b = utf8.AppendRune(b, r)
	}
	return appendString(dst, b)
}
