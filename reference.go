package planexec

import (
	"bytes"
	"encoding"
	"encoding/json"
	"fmt"
	"math/big"
	"reflect"
	"strings"

	"github.com/shopspring/decimal"

	"github.com/planexec/planexec/internal/jsonptr"
	"github.com/planexec/planexec/internal/jsonscan"
	"github.com/planexec/planexec/internal/strictjson"
)

// RefKey is the member that makes an object in a step's arguments a
// reference to an earlier step's outcome, {"$from": "s1", "path": "/0"}:
// the value at that JSON Pointer in what s1 returned. The package guide
// says how references are checked ("What a step reads from another").
const RefKey = "$from"

// reference is one argument value taken from an earlier step's outcome.
type reference struct {
	at         []string // where the value goes in the arguments
	start, end int      // the reference object's bytes in the arguments
	step       string   // the step whose outcome it reads
	path       []string // where in that outcome
	from       int      // the index of step in the plan
	optional   bool     // the argument may be absent or null
	unquote    bool     // a decimal written as a string goes where a decimal number does
}

// refWire is a reference as written.
type refWire struct {
	From string `json:"$from"`
	Path string `json:"path"`
}

var refDecoder = mustDecoder(reflect.TypeFor[refWire]())

// describe is a reference for a violation: the argument's path is the
// violation's own.
func (ref *reference) describe() string {
	return fmt.Sprintf("reference to step %s at %s", quote(ref.step), quote(jsonptr.Format(ref.path)))
}

// findRefs lists the references in a step's arguments. A reference not
// written as one is a violation.
func findRefs(args []byte, lim Limits) ([]reference, []Violation) {
	if !bytes.Contains(args, []byte(`"`+RefKey+`"`)) && !bytes.Contains(args, []byte(`\u`)) {
		return nil, nil // the common case: nothing to look for
	}
	found, _ := jsonptr.Find(args, RefKey, lim.MaxArgumentDepth)
	if len(found) == 0 {
		return nil, nil
	}
	refs := make([]reference, 0, len(found))
	var vs []Violation
	for _, f := range found {
		at := pointer(f.At)
		var w refWire
		if svs := refDecoder.Decode(args[f.Start:f.End], &w, strictjson.Limits{MaxDepth: 2}); svs != nil {
			for _, v := range svs {
				vs = append(vs, Violation{Path: at + v.Path, Why: "a reference is {\"$from\": step id, \"path\": JSON Pointer}: " + v.Problem})
			}
			continue
		}
		path, err := jsonptr.Parse(w.Path)
		if err != nil {
			vs = append(vs, Violation{Path: at + "/path", Why: "the reference's path is not a JSON Pointer (\"\" or \"/a/0/b\")"})
			continue
		}
		refs = append(refs, reference{at: f.At, start: f.Start, end: f.End, step: w.From, path: path})
	}
	return refs, vs
}

// pointer renders tokens as a violation's path, the way the decoder renders
// paths.
func pointer(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		b.WriteString(strictjson.Segment(t))
	}
	return b.String()
}

// splice returns args with each reference's bytes replaced by values[k].
func splice(args []byte, refs []reference, values [][]byte) []byte {
	out := make([]byte, 0, spliced(args, refs, values))
	last := 0
	for k := range refs {
		out = append(out, args[last:refs[k].start]...)
		out = append(out, values[k]...)
		last = refs[k].end
	}
	return append(out, args[last:]...)
}

// withRefs checks the arguments of a step that holds references as far as
// they can be checked before the outcomes exist: each reference stands
// where the argument type has a member, and the rest of the arguments hold
// to the contract (the referenced values stand in as zero values, and what
// the contract says of them is left to dispatch).
func withRefs(c *Contract, args []byte, refs []reference, lim Limits) []Violation {
	values := make([][]byte, len(refs))
	for k := range refs {
		ref := &refs[k]
		t, optional, why := typeAt(c.typ, ref.at, false)
		if why != "" {
			return []Violation{{Path: pointer(ref.at), Why: "a " + ref.describe() + " where the arguments have no member: " + why}}
		}
		ref.optional = optional
		values[k] = placeholder(t, 0)
	}
	_, vs := c.decode(splice(args, refs, values), lim)
	kept := vs[:0]
	for _, v := range vs {
		if !under(v.Path, refs) {
			kept = append(kept, v)
		}
	}
	if len(kept) == 0 {
		return nil
	}
	return kept
}

// under reports whether path is at or inside a referenced value.
func under(path string, refs []reference) bool {
	for k := range refs {
		at := pointer(refs[k].at)
		if path == at || strings.HasPrefix(path, at+"/") {
			return true
		}
	}
	return false
}

// checkRef holds a reference to the types of the tool it reads (out) and
// the argument it fills (in): the empty string when it fits, else why not.
func checkRef(ref *reference, out *Tool, in *Contract) string {
	if out.output == nil {
		return "" // nothing is known of the outcome: checked at dispatch
	}
	src, srcOptional, why := typeAt(out.output, ref.path, true)
	if why != "" {
		return fmt.Sprintf("tool %s returns nothing at that path: %s", quote(out.name), why)
	}
	dst, _, _ := typeAt(in.typ, ref.at, false)
	if srcOptional && !ref.optional {
		return "the value there may be absent or null, and the argument is required"
	}
	f := fitter{seen: map[[2]reflect.Type]bool{}}
	if why := f.fit(src, dst); why != "" {
		return why
	}
	ref.unquote = shapeOf(src, true) == shapeDecimal && shapeOf(dst, false) == shapeDecimal
	return ""
}

// resolveRefs puts the referenced values in place: outcome(k) is the
// outcome of the step reference k reads. Arguments that would come to more
// than maxBytes once resolved are refused before any of it is copied.
func resolveRefs(args []byte, refs []reference, outcome func(from int) []byte, maxBytes int) ([]byte, []Violation) {
	values := make([][]byte, len(refs))
	var vs []Violation
	for k := range refs {
		ref := &refs[k]
		v, ok := jsonptr.Get(outcome(ref.from), ref.path)
		switch {
		case !ok && ref.optional:
			v = []byte("null")
		case !ok:
			vs = append(vs, Violation{Path: pointer(ref.at), Why: "the " + ref.describe() + " finds nothing in the outcome"})
			continue
		case ref.unquote && len(v) > 0 && v[0] == '"':
			// A decimal is recorded as a string of its digits, and goes
			// where a decimal goes as a number, written as it was.
			var s string
			if json.Unmarshal(v, &s) != nil {
				vs = append(vs, Violation{Path: pointer(ref.at), Why: "the " + ref.describe() + " finds no decimal in the outcome"})
				continue
			}
			if end, _ := jsonscan.ScanNumber([]byte(s), 0); s == "" || end != len(s) {
				vs = append(vs, Violation{Path: pointer(ref.at), Why: "the " + ref.describe() + " finds no decimal in the outcome"})
				continue
			}
			v = []byte(s)
		}
		values[k] = v
	}
	if vs != nil {
		return nil, vs
	}
	if size := spliced(args, refs, values); size > maxBytes {
		return nil, []Violation{{Why: fmt.Sprintf("once its references are resolved, the arguments come to %d bytes, more than the %d allowed", size, maxBytes)}}
	}
	return splice(args, refs, values), nil
}

// spliced is the size of args with each reference's bytes replaced by
// values[k].
func spliced(args []byte, refs []reference, values [][]byte) int {
	size := len(args)
	for k := range refs {
		size += len(values[k]) - (refs[k].end - refs[k].start)
	}
	return size
}

// shape is what a Go type is written as in JSON, as far as a reference's
// fit is concerned.
type shape uint8

const (
	shapeAny     shape = iota // nothing is known of it: checked at dispatch
	shapeString               // a string (text, bytes, times too)
	shapeInteger              // an integer
	shapeNumber               // any number
	shapeDecimal              // a decimal: a string in an outcome, a number in arguments
	shapeBool
	shapeList   // an array
	shapeObject // a struct's members
	shapeMap    // an object with free keys
	shapeBytes  // bytes, as a base64 string
)

var shapeNames = [...]string{"a value of any shape", "a string", "an integer", "a number", "a decimal", "a boolean", "a list", "an object",
	"an object with free keys", "bytes in base64"}

var (
	nullDecimalType = reflect.TypeFor[decimal.NullDecimal]()
	bigIntType      = reflect.TypeFor[big.Int]()
	rawType         = reflect.TypeFor[json.RawMessage]()
	numberType      = reflect.TypeFor[json.Number]()
	anyType         = reflect.TypeFor[any]()
	marshalerType   = reflect.TypeFor[json.Marshaler]()
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	textMarshaler   = reflect.TypeFor[encoding.TextMarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// shapeOf is how t is written: by json.Marshal when out (an outcome), as
// the contract's strict decoder reads it otherwise (arguments). Pointers
// are looked through.
func shapeOf(t reflect.Type, out bool) shape {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t {
	case decimalType, nullDecimalType:
		return shapeDecimal
	case bigIntType:
		return shapeInteger
	case timeType:
		return shapeString
	case rawType:
		return shapeAny
	}
	if t == numberType && out {
		return shapeNumber // json.Marshal writes its digits as a number
	}
	pt := reflect.PointerTo(t)
	if out {
		switch {
		case t.Implements(marshalerType) || pt.Implements(marshalerType):
			return shapeAny
		case t.Implements(textMarshaler) || pt.Implements(textMarshaler):
			return shapeString
		}
	} else {
		switch {
		case pt.Implements(unmarshalerType):
			return shapeAny
		case pt.Implements(textUnmarshaler):
			return shapeString
		}
	}
	switch t.Kind() {
	case reflect.Bool:
		return shapeBool
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return shapeInteger
	case reflect.Float32, reflect.Float64:
		return shapeNumber
	case reflect.String:
		return shapeString
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 && !reflect.PointerTo(t.Elem()).Implements(textUnmarshaler) {
			return shapeBytes
		}
		return shapeList
	case reflect.Array:
		return shapeList
	case reflect.Map:
		return shapeMap
	case reflect.Struct:
		return shapeObject
	}
	return shapeAny
}

// typeAt walks t along tokens, as json.Marshal writes it when out, as the
// contract reads it otherwise. optional tells whether the value there may
// be absent or null: in an outcome, because a pointer, an omitempty member
// or a map's member is on the way; in arguments, because its member is
// omitempty. A walk into a value of any shape ends there, at shapeAny.
// why says where the walk found no way on.
func typeAt(t reflect.Type, tokens []string, out bool) (_ reflect.Type, optional bool, why string) {
	if t == nil {
		return anyType, true, "" // a schema's arguments: the schema decides at dispatch
	}
	for n, tok := range tokens {
		if out && t.Kind() == reflect.Pointer {
			optional = true
		}
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		at := func() string { return quote(jsonptr.Format(tokens[:n+1])) }
		switch shapeOf(t, out) {
		case shapeAny:
			return t, optional, ""
		case shapeList:
			i, ok := jsonptr.Index(tok)
			if !ok {
				return nil, false, fmt.Sprintf("%s: %s is no index into a list", at(), quote(tok))
			}
			if t.Kind() == reflect.Array && i >= t.Len() {
				return nil, false, fmt.Sprintf("%s: the array has %d elements", at(), t.Len())
			}
			t = t.Elem()
			if !out {
				optional = false
			}
		case shapeMap:
			t = t.Elem()
			optional = out // a map's member may be absent
		case shapeObject:
			ms, err := strictjson.Members(t)
			if err != nil {
				return anyType, optional, "" // a shape the decoder has no word for: checked at dispatch
			}
			found := false
			for _, m := range ms {
				if m.Name == tok {
					t, found = m.Type, true
					optional = (out && optional) || m.Optional
					break
				}
			}
			if !found {
				return nil, false, fmt.Sprintf("%s: %s has no member %s", at(), t, quote(tok))
			}
		default:
			return nil, false, fmt.Sprintf("%s: %s has no members", at(), shapeNames[shapeOf(t, out)])
		}
	}
	if out && t.Kind() == reflect.Pointer {
		optional = true
	}
	return t, optional, ""
}

// fitter decides whether an outcome's type fits an argument's.
type fitter struct {
	seen  map[[2]reflect.Type]bool // pairs being checked: recursive types fit
	depth int                      // how far inside the referenced value the check is
}

// fit returns why a value of type src, as json.Marshal writes it, is not one
// the contract's decoder takes as a dst, or "".
func (f *fitter) fit(src, dst reflect.Type) string {
	pair := [2]reflect.Type{src, dst}
	if f.seen[pair] {
		return ""
	}
	f.seen[pair] = true
	s, d := shapeOf(src, true), shapeOf(dst, false)
	mismatch := func() string { return shapeNames[s] + " where " + shapeNames[d] + " goes" }
	for src.Kind() == reflect.Pointer {
		src = src.Elem()
	}
	for dst.Kind() == reflect.Pointer {
		dst = dst.Elem()
	}
	f.depth++
	defer func() { f.depth-- }()
	switch {
	case s == shapeAny || d == shapeAny:
		return "" // checked at dispatch
	case s == shapeDecimal && d == shapeDecimal && f.depth > 1:
		// Put in place, a decimal the reference names is written as the
		// number it records; one inside a list or an object stays the
		// string json.Marshal wrote, which no decimal argument takes.
		return "a decimal inside it is recorded as a string, where the argument takes a number: refer to the decimal itself"
	case s == d && s != shapeList && s != shapeObject && s != shapeMap:
		return ""
	case s == shapeInteger && (d == shapeNumber || d == shapeDecimal),
		s == shapeNumber && d == shapeDecimal,
		s == shapeDecimal && d == shapeString,
		s == shapeBytes && d == shapeString:
		return ""
	case s == shapeList && d == shapeList:
		if dst.Kind() == reflect.Array && (src.Kind() != reflect.Array || src.Len() != dst.Len()) {
			return "a list of any length where an array of " + fmt.Sprint(dst.Len()) + " goes"
		}
		return f.element(src.Elem(), dst.Elem(), "its elements")
	case s == shapeMap && d == shapeMap:
		return f.element(src.Elem(), dst.Elem(), "its members")
	case s == shapeObject && d == shapeMap:
		ms, err := strictjson.Members(src)
		if err != nil {
			return ""
		}
		for _, m := range ms {
			// A member left out is a key the map lacks, which is fine; a
			// nil pointer written as null is a value the map cannot hold.
			if m.Type.Kind() == reflect.Pointer && !m.Optional && shapeOf(m.Type, true) != shapeAny {
				return fmt.Sprintf("member %q may be null, and the argument's members may not", m.Name)
			}
			if why := f.fit(m.Type, dst.Elem()); why != "" {
				return fmt.Sprintf("member %q: %s", m.Name, why)
			}
		}
		return ""
	case s == shapeObject && d == shapeObject:
		return f.object(src, dst)
	}
	return mismatch()
}

// element checks the elements of a list or map: the decoder takes no null
// for one, and a pointer element may be nil.
func (f *fitter) element(src, dst reflect.Type, what string) string {
	if src.Kind() == reflect.Pointer && shapeOf(src, true) != shapeAny {
		return what + " may be null, and the argument's may not"
	}
	if why := f.fit(src, dst); why != "" {
		return what + ": " + why
	}
	return ""
}

// member checks one member of an outcome's object against the type it
// fills; optional tells whether the argument's member may be absent.
func (f *fitter) member(m strictjson.Member, dst reflect.Type, optional bool) string {
	mayLack := m.Optional || (m.Type.Kind() == reflect.Pointer && shapeOf(m.Type, true) != shapeAny)
	if mayLack && !optional {
		return fmt.Sprintf("member %q may be absent or null, and the argument's is required", m.Name)
	}
	if why := f.fit(m.Type, dst); why != "" {
		return fmt.Sprintf("member %q: %s", m.Name, why)
	}
	return ""
}

// object checks a struct against a struct: every member of the outcome's
// has a place in the argument's, and every member the argument requires is
// one the outcome always has.
func (f *fitter) object(src, dst reflect.Type) string {
	sms, err1 := strictjson.Members(src)
	dms, err2 := strictjson.Members(dst)
	if err1 != nil || err2 != nil {
		return ""
	}
	for _, dm := range dms {
		found := false
		for _, sm := range sms {
			if sm.Name == dm.Name {
				found = true
				if why := f.member(sm, dm.Type, dm.Optional); why != "" {
					return why
				}
			}
		}
		if !found && !dm.Optional {
			return fmt.Sprintf("the outcome has no member %q, which the argument requires", dm.Name)
		}
	}
	for _, sm := range sms {
		found := false
		for _, dm := range dms {
			found = found || dm.Name == sm.Name
		}
		if !found {
			return fmt.Sprintf("the outcome's member %q has no place in the argument", sm.Name)
		}
	}
	return ""
}

// placeholder is a value of type t the contract's decoder takes, as
// plain as can be: it stands in for a referenced value while the rest of a
// step's arguments are checked.
func placeholder(t reflect.Type, depth int) []byte {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if depth > 32 {
		return []byte("null")
	}
	if t == timeType {
		return []byte(`"0001-01-01T00:00:00Z"`)
	}
	switch shapeOf(t, false) {
	case shapeString, shapeBytes:
		return []byte(`""`)
	case shapeInteger, shapeNumber, shapeDecimal:
		return []byte("0")
	case shapeBool:
		return []byte("false")
	case shapeMap:
		return []byte("{}")
	case shapeList:
		if t.Kind() != reflect.Array || t.Len() == 0 {
			return []byte("[]")
		}
		b := []byte{'['}
		for i := range t.Len() {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, placeholder(t.Elem(), depth+1)...)
		}
		return append(b, ']')
	case shapeObject:
		ms, err := strictjson.Members(t)
		if err != nil {
			return []byte("{}")
		}
		b := []byte{'{'}
		for _, m := range ms {
			if m.Optional {
				continue
			}
			if len(b) > 1 {
				b = append(b, ',')
			}
			b = appendJSONString(b, m.Name)
			b = append(b, ':')
			b = append(b, placeholder(m.Type, depth+1)...)
		}
		return append(b, '}')
	}
	return []byte("0") // any JSON: raw messages take a number
}
