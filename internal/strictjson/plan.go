package strictjson

import (
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/shopspring/decimal"
)

// kind says how a codec reads its JSON value.
type kind uint8

const (
	kBool kind = iota + 1
	kInt
	kUint
	kFloat
	kString
	kBytes   // []byte as a base64 string
	kDecimal // decimal.Decimal or decimal.NullDecimal from a number literal
	kBigInt  // big.Int from an integer literal
	kJSON    // json.Unmarshaler (time.Time too, restricted to strings)
	kText    // encoding.TextUnmarshaler from a string
	kRaw     // json.RawMessage
	kPtr
	kSlice
	kArray
	kMap
	kStruct
)

// codec is the decoding plan for one Go type. Codecs form a graph (cyclic
// for recursive types) that is immutable once built and shared by all
// goroutines.
type codec struct {
	kind       kind
	typ        reflect.Type
	bits       int    // size of int, uint and float kinds
	elem       *codec // pointer, slice, array and map elements
	length     int    // array length
	stringOnly bool   // kJSON: only a JSON string is accepted (time.Time)
	keyText    bool   // kMap: keys go through encoding.TextUnmarshaler
	fields     []field
	byName     map[string]int // lookup for structs with many fields
	required   int            // number of required fields
	expect     string         // the JSON kind named in type mismatch messages
	rangeMsg   string         // numbers: message for values the type cannot hold
	lenMsg     string         // arrays: message for a wrong item count
}

// field is one JSON member of a struct.
type field struct {
	name     string
	index    []int
	viaPtr   bool // index goes through an embedded pointer that may need allocating
	optional bool
	codec    *codec
}

// linearLimit is the field count up to which a linear scan beats a map
// lookup when matching keys.
const linearLimit = 8

var (
	decimalType     = reflect.TypeFor[decimal.Decimal]()
	nullDecimalType = reflect.TypeFor[decimal.NullDecimal]()
	bigIntType      = reflect.TypeFor[big.Int]()
	timeType        = reflect.TypeFor[time.Time]()
	rawType         = reflect.TypeFor[json.RawMessage]()
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	textType        = reflect.TypeFor[encoding.TextUnmarshaler]()
)

var (
	// decoders caches one *Decoder per reflect.Type for lock-free reuse.
	decoders sync.Map
	// buildMu serialises plan building so the shared codecs map is
	// consistent; building happens once per type, so contention is moot.
	buildMu sync.Mutex
	// codecs holds every codec built so far, keyed by type, so that a type
	// reached from several roots is planned once.
	codecs = map[reflect.Type]*codec{}
)

// For returns the Decoder for type t, building and caching it on first use.
// It fails for types that cannot be decoded strictly: channels, functions,
// complex numbers, unsafe pointers, interfaces (declare a concrete type or
// json.RawMessage instead), maps whose keys are not strings, and fields
// tagged with the `string` option. The error names the Go path of the
// offending field.
func For(t reflect.Type) (*Decoder, error) {
	if t == nil {
		return nil, errors.New("strictjson: nil type")
	}
	if d, ok := decoders.Load(t); ok {
		return d.(*Decoder), nil
	}
	buildMu.Lock()
	defer buildMu.Unlock()
	if d, ok := decoders.Load(t); ok {
		return d.(*Decoder), nil
	}
	b := builder{fresh: map[reflect.Type]*codec{}}
	c, err := b.codec(t, t.String())
	if err != nil {
		return nil, fmt.Errorf("strictjson: %w", err)
	}
	// Only publish codecs once the whole graph is known to be good.
	for typ, fc := range b.fresh {
		codecs[typ] = fc
	}
	d := &Decoder{t: t, c: c, decimals: holdsDecimal(c, map[*codec]bool{})}
	decoders.Store(t, d)
	return d, nil
}

// builder plans the types reachable from one root.
type builder struct {
	fresh map[reflect.Type]*codec
}

func (b *builder) codec(t reflect.Type, path string) (*codec, error) {
	if c, ok := codecs[t]; ok {
		return c, nil
	}
	if c, ok := b.fresh[t]; ok {
		// Either done or in progress further up: a recursive type closes
		// its cycle here.
		return c, nil
	}
	c := &codec{typ: t}
	b.fresh[t] = c
	if err := b.fill(c, t, path); err != nil {
		return nil, err
	}
	c.describe()
	return c, nil
}

func (b *builder) fill(c *codec, t reflect.Type, path string) error {
	// Types with their own JSON meaning come first, as in encoding/json.
	switch t {
	case decimalType, nullDecimalType:
		c.kind = kDecimal
		return nil
	case bigIntType:
		c.kind = kBigInt
		return nil
	case timeType:
		c.kind, c.stringOnly = kJSON, true
		return nil
	case rawType:
		c.kind = kRaw
		return nil
	}
	k := t.Kind()
	if k != reflect.Pointer && k != reflect.Interface {
		if reflect.PointerTo(t).Implements(unmarshalerType) {
			c.kind = kJSON
			return nil
		}
		if reflect.PointerTo(t).Implements(textType) {
			c.kind = kText
			return nil
		}
	}
	switch k {
	case reflect.Bool:
		c.kind = kBool
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		c.kind, c.bits = kInt, t.Bits()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		c.kind, c.bits = kUint, t.Bits()
	case reflect.Float32, reflect.Float64:
		c.kind, c.bits = kFloat, t.Bits()
	case reflect.String:
		c.kind = kString
	case reflect.Pointer:
		c.kind = kPtr
		e, err := b.codec(t.Elem(), path)
		if err != nil {
			return err
		}
		c.elem = e
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			// encoding/json reads any slice of byte-kinded elements as base64.
			c.kind = kBytes
			return nil
		}
		c.kind = kSlice
		e, err := b.codec(t.Elem(), path+"[]")
		if err != nil {
			return err
		}
		c.elem = e
	case reflect.Array:
		c.kind, c.length = kArray, t.Len()
		e, err := b.codec(t.Elem(), path+"[]")
		if err != nil {
			return err
		}
		c.elem = e
	case reflect.Map:
		kt := t.Key()
		if kt.Kind() != reflect.String {
			return fmt.Errorf("%s: map key type %s is not a string type", path, kt)
		}
		c.kind = kMap
		c.keyText = reflect.PointerTo(kt).Implements(textType)
		e, err := b.codec(t.Elem(), path+"[key]")
		if err != nil {
			return err
		}
		c.elem = e
	case reflect.Struct:
		c.kind = kStruct
		return b.structFields(c, t, path)
	case reflect.Interface:
		return fmt.Errorf("%s: interface type %s cannot be checked strictly; declare a concrete type or json.RawMessage", path, t)
	default: // Chan, Func, Complex64, Complex128, UnsafePointer
		return fmt.Errorf("%s: type %s has no strict JSON form", path, t)
	}
	return nil
}

// describe precomputes the messages a codec reports, so that reporting a
// violation costs no formatting on the scan's side.
func (c *codec) describe() {
	switch c.kind {
	case kBool:
		c.expect = "boolean"
	case kInt, kUint:
		c.expect = "integer"
		c.rangeMsg = "integer out of range for " + c.typ.Kind().String()
	case kFloat:
		c.expect = "number"
		c.rangeMsg = "number out of range for " + c.typ.Kind().String()
	case kDecimal:
		c.expect = "number"
		c.rangeMsg = "number out of range for decimal: more than " + strconv.Itoa(MaxDecimalDigits) + " digits when written out in full"
	case kBigInt:
		c.expect = "integer"
		c.rangeMsg = "integer out of range for big.Int: more than " + strconv.Itoa(MaxBigIntDigits) + " digits"
	case kString, kBytes, kText:
		c.expect = "string"
	case kJSON:
		if c.stringOnly {
			c.expect = "string"
		}
	case kSlice:
		c.expect = "array"
	case kArray:
		c.expect = "array"
		c.lenMsg = "expected exactly " + strconv.Itoa(c.length) + " items"
	case kMap, kStruct:
		c.expect = "object"
	}
}

// candidate is a struct member found while walking embedded structs.
type candidate struct {
	name     string
	tagged   bool
	index    []int
	viaPtr   bool
	optional bool
	typ      reflect.Type
	path     string // Go path for error messages
	twice    bool   // reached through a struct type embedded more than once at one depth
}

// structFields computes the JSON members of struct type t the way
// encoding/json does: tag names, "-" and unexported fields skipped,
// untagged embedded structs promoted, and for a name claimed by several
// fields the shallowest wins, a tagged one breaking ties, otherwise none.
func (b *builder) structFields(c *codec, t reflect.Type, path string) error {
	chosen, err := members(t, path)
	if err != nil {
		return err
	}
	c.fields = make([]field, len(chosen))
	for i, f := range chosen {
		fc, err := b.codec(f.typ, f.path)
		if err != nil {
			return err
		}
		c.fields[i] = field{name: f.name, index: f.index, viaPtr: f.viaPtr, optional: f.optional, codec: fc}
		if !f.optional {
			c.required++
		}
	}
	if len(c.fields) > linearLimit {
		c.byName = make(map[string]int, len(c.fields))
		for i, f := range c.fields {
			c.byName[f.name] = i
		}
	}
	return nil
}

// Member is one JSON member of a struct type, named as encoding/json names
// it.
type Member struct {
	Name string
	Type reflect.Type
	// Optional is true for a member tagged omitempty or omitzero: the
	// decoder accepts it absent or null.
	Optional bool
}

// membersOf caches Members by type.
var membersOf sync.Map // reflect.Type -> []Member, or error

// Members lists the JSON members of struct type t in declaration order, the
// way encoding/json and the decoder see them (tag names, embedded structs
// promoted, conflicting names dropped). It fails where For would for the
// struct's own members (an embedded pointer to an unexported struct, the
// "string" tag option); member types are not checked.
func Members(t reflect.Type) ([]Member, error) {
	if got, ok := membersOf.Load(t); ok {
		if err, bad := got.(error); bad {
			return nil, err
		}
		return got.([]Member), nil
	}
	chosen, err := members(t, t.String())
	if err != nil {
		membersOf.Store(t, err)
		return nil, err
	}
	ms := make([]Member, len(chosen))
	for i, f := range chosen {
		ms[i] = Member{Name: f.name, Type: f.typ, Optional: f.optional}
	}
	membersOf.Store(t, ms)
	return ms, nil
}

// members computes the JSON members of struct type t the way
// encoding/json does: tag names, "-" and unexported fields skipped,
// untagged embedded structs promoted, and for a name claimed by several
// fields the shallowest wins, a tagged one breaking ties, otherwise none.
// They come in declaration order.
func members(t reflect.Type, path string) ([]candidate, error) {
	type level struct {
		typ    reflect.Type
		index  []int
		viaPtr bool
		count  int
		path   string
	}
	var found []candidate
	visited := map[reflect.Type]bool{}
	next := []level{{typ: t, count: 1, path: path}}
	for len(next) > 0 {
		current := next
		next = nil
		// Each type is expanded once per depth; counting its occurrences
		// lets fields reached twice at the same depth cancel out.
		seen := map[reflect.Type]int{}
		var distinct []level
		for _, l := range current {
			if visited[l.typ] {
				continue
			}
			if i, ok := seen[l.typ]; ok {
				distinct[i].count += l.count
				continue
			}
			seen[l.typ] = len(distinct)
			distinct = append(distinct, l)
		}
		for _, l := range distinct {
			visited[l.typ] = true
		}
		for _, l := range distinct {
			for i := 0; i < l.typ.NumField(); i++ {
				sf := l.typ.Field(i)
				ft := sf.Type
				if sf.Anonymous {
					et := ft
					if et.Kind() == reflect.Pointer {
						et = et.Elem()
					}
					if !sf.IsExported() && et.Kind() != reflect.Struct {
						continue
					}
				} else if !sf.IsExported() {
					continue
				}
				tag := sf.Tag.Get("json")
				if tag == "-" {
					continue
				}
				name, opts, _ := strings.Cut(tag, ",")
				if !validTagName(name) {
					name = ""
				}
				fpath := l.path + "." + sf.Name
				optional := false
				for o := range strings.SplitSeq(opts, ",") {
					switch o {
					case "omitempty", "omitzero":
						optional = true
					case "string":
						return nil, fmt.Errorf("%s: the json tag option \"string\" is not supported", fpath)
					}
				}
				index := append(slices.Clip(l.index), i)
				viaPtr := l.viaPtr
				if name == "" && sf.Anonymous {
					et := ft
					if et.Name() == "" && et.Kind() == reflect.Pointer {
						et = et.Elem()
					}
					if et.Kind() == reflect.Struct {
						if ft.Kind() == reflect.Pointer {
							if !sf.IsExported() {
								// encoding/json cannot allocate it either.
								return nil, fmt.Errorf("%s: embedded pointer to unexported struct type %s cannot be allocated", fpath, et)
							}
							viaPtr = true
						}
						next = append(next, level{typ: et, index: index, viaPtr: viaPtr, count: l.count, path: fpath})
						continue
					}
				}
				tagged := name != ""
				if !tagged {
					name = sf.Name
				}
				found = append(found, candidate{
					name: name, tagged: tagged, index: index, viaPtr: viaPtr,
					optional: optional, typ: ft, path: fpath, twice: l.count > 1,
				})
			}
		}
	}

	// Pick the dominant candidate for every name.
	byName := map[string][]candidate{}
	var names []string
	for _, f := range found {
		if _, ok := byName[f.name]; !ok {
			names = append(names, f.name)
		}
		byName[f.name] = append(byName[f.name], f)
	}
	var chosen []candidate
	for _, n := range names {
		if f, ok := dominant(byName[n]); ok {
			chosen = append(chosen, f)
		}
	}
	// Declaration order keeps "missing required key" reports predictable.
	slices.SortFunc(chosen, func(a, b candidate) int { return slices.Compare(a.index, b.index) })
	return chosen, nil
}

// dominant picks the field that owns a JSON name: the shallowest one, or
// among several equally shallow the only tagged one.
func dominant(fs []candidate) (candidate, bool) {
	minDepth := len(fs[0].index)
	for _, f := range fs {
		minDepth = min(minDepth, len(f.index))
	}
	var best candidate
	n, tagged := 0, 0
	for _, f := range fs {
		if len(f.index) != minDepth {
			continue
		}
		n++
		if f.twice {
			n++
		}
		if f.tagged {
			tagged++
			if f.twice {
				tagged++
			}
			best = f
		} else if tagged == 0 {
			best = f
		}
	}
	switch {
	case n == 1:
		return best, true
	case tagged == 1:
		return best, true
	}
	return candidate{}, false
}

// validTagName reports whether a json tag name is usable as encoding/json
// judges it: letters, digits and punctuation other than quotes and
// backslashes. Otherwise the Go field name applies.
func validTagName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		switch {
		case strings.ContainsRune("!#$%&()*+-./:;<=>?@[]^_{|}~ ", r):
		case unicode.IsLetter(r), unicode.IsDigit(r):
		default:
			return false
		}
	}
	return true
}
