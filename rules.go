package planexec

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-playground/validator/v10"
	"github.com/shopspring/decimal"

	"github.com/planexec/planexec/internal/strictjson"
)

// Value rules are the `validate:` tags of a contract's type
// (go-playground/validator). NewContract checks every rule against the type
// of its field (checkRules), so that a rule which could never run, or would
// run wrongly, is a *ConfigurationError when the contract is built rather
// than a panic on the first plan that uses the tool. decode runs them
// (checkValues).
//
// # Decimals
//
// The validator compares numbers as int64, uint64 or float64 and has no case
// for decimal.Decimal, a struct: its own gt panics on one. It offers two
// ways in. RegisterCustomTypeFunc converts a value of a type into one it
// knows before any rule runs; but nothing it knows is exact: a float64
// rounds (1000.0000000000000001 would pass lte=1000) and a string would be
// compared by its length. RegisterValidation replaces the function behind a
// tag for every kind. That is the way taken: the comparison tags (gt, gte,
// lt, lte, min, max, eq, ne, oneof) are registered again with a function
// that compares a decimal.Decimal with decimal arithmetic, and hands any
// other value to builtinRules, an unmodified validator, so integers, floats,
// strings, slices and times keep the builtin meaning exactly. Users write the
// same tags they write for integers: `validate:"gt=0,lte=1000"`.

// validate runs the rules of every contract. It caches struct metadata and
// is safe for concurrent use.
var validate = func() *validator.Validate {
	// Field names are the JSON names, so that violations are located by JSON
	// Pointer. A struct embedded without a JSON name has its fields promoted,
	// as in encoding/json: it gets no name of its own (WithTagNameFuncBlankOmit
	// keeps the empty name instead of falling back to the Go field name).
	v := validator.New(validator.WithRequiredStructEnabled(), validator.WithTagNameFuncBlankOmit())
	v.RegisterTagNameFunc(func(f reflect.StructField) string {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case name == "-":
			return f.Name
		case name == "" && f.Anonymous && structKind(f.Type):
			return ""
		case name == "":
			return f.Name
		}
		return name
	})
	for tag := range decimalRules {
		if err := v.RegisterValidation(tag, decimalRule(tag)); err != nil {
			panic(err) // the tags are fixed: this cannot happen
		}
	}
	return v
}()

// builtinRules is a validator without the decimal rules: every value that
// is not a decimal is checked by the builtin function of its tag.
var builtinRules = validator.New(validator.WithRequiredStructEnabled())

// decimalRules are the tags that compare a decimal.Decimal by value. Each
// takes a decimal parameter; oneof takes several, separated by spaces.
var decimalRules = map[string]func(x decimal.Decimal, params []decimal.Decimal) bool{
	"gt":  func(x decimal.Decimal, p []decimal.Decimal) bool { return x.GreaterThan(p[0]) },
	"gte": func(x decimal.Decimal, p []decimal.Decimal) bool { return x.GreaterThanOrEqual(p[0]) },
	"min": func(x decimal.Decimal, p []decimal.Decimal) bool { return x.GreaterThanOrEqual(p[0]) },
	"lt":  func(x decimal.Decimal, p []decimal.Decimal) bool { return x.LessThan(p[0]) },
	"lte": func(x decimal.Decimal, p []decimal.Decimal) bool { return x.LessThanOrEqual(p[0]) },
	"max": func(x decimal.Decimal, p []decimal.Decimal) bool { return x.LessThanOrEqual(p[0]) },
	"eq":  func(x decimal.Decimal, p []decimal.Decimal) bool { return x.Equal(p[0]) },
	"ne":  func(x decimal.Decimal, p []decimal.Decimal) bool { return !x.Equal(p[0]) },
	"oneof": func(x decimal.Decimal, p []decimal.Decimal) bool {
		for _, d := range p {
			if x.Equal(d) {
				return true
			}
		}
		return false
	},
}

// decimalRule is the function registered for tag: decimal arithmetic for a
// decimal.Decimal (the validator has already followed a pointer), the
// builtin rule for anything else.
func decimalRule(tag string) validator.Func {
	cmp := decimalRules[tag]
	return func(fl validator.FieldLevel) bool {
		f := fl.Field()
		if f.Type() != decimalType {
			return builtinRule(fl, tag)
		}
		params, err := decimalParams(tag, fl.Param())
		if err != nil || !f.CanInterface() {
			return false // NewContract refuses such a rule; never pass it
		}
		return cmp(f.Interface().(decimal.Decimal), params)
	}
}

// builtinRule runs the builtin rule tag, with the field's parameter, on the
// field's value.
func builtinRule(fl validator.FieldLevel, tag string) bool {
	f := fl.Field()
	if !f.CanInterface() {
		return false
	}
	return builtinRules.Var(f.Interface(), builtinTag(tag, fl.Param())) == nil
}

// builtinTags caches, per tag, the rule text for each parameter: building
// it on every check would cost an allocation per rule and value.
var builtinTags = func() map[string]*sync.Map {
	m := make(map[string]*sync.Map, len(decimalRules))
	for tag := range decimalRules {
		m[tag] = new(sync.Map)
	}
	return m
}()

// builtinTag is the validate tag that runs rule tag with parameter param.
func builtinTag(tag, param string) string {
	if param == "" {
		return tag
	}
	if rule, ok := builtinTags[tag].Load(param); ok {
		return rule.(string)
	}
	rule := tag + "=" + paramEscaper.Replace(param)
	builtinTags[tag].Store(param, rule)
	return rule
}

// The validator writes "," and "|" inside a parameter as 0x2C and 0x7C, and
// unescapes them when it parses a tag. A parameter that goes back into a tag
// is escaped again.
var (
	paramEscaper   = strings.NewReplacer(",", "0x2C", "|", "0x7C")
	paramUnescaper = strings.NewReplacer("0x2C", ",", "0x7C", "|")
)

// decimalParamCache holds parsed parameters by tag and text. Parameters come
// from struct tags, so it stays as small as the contracts' rules.
var decimalParamCache sync.Map // string → []decimal.Decimal

// decimalParams parses the parameter of a decimal rule: one decimal, or for
// oneof one or more separated by spaces.
func decimalParams(tag, param string) ([]decimal.Decimal, error) {
	key := tag + "=" + param
	if ds, ok := decimalParamCache.Load(key); ok {
		return ds.([]decimal.Decimal), nil
	}
	words := []string{param}
	if tag == "oneof" {
		words = strings.Fields(param)
		if len(words) == 0 {
			return nil, errors.New("oneof needs at least one value")
		}
	}
	ds := make([]decimal.Decimal, len(words))
	for i, w := range words {
		d, err := decimal.NewFromString(w)
		if err != nil {
			return nil, fmt.Errorf("%q is not a decimal number", w)
		}
		ds[i] = d
	}
	decimalParamCache.Store(key, ds)
	return ds, nil
}

// checkValues runs the rules on ptr, a pointer to a contract's type. A panic
// inside the validator (NewContract checked every rule, so it would be a
// bug) refuses the arguments rather than crash: the panic's text is not
// used, since it may quote the value.
func checkValues(ptr any) (vs []Violation) {
	defer func() {
		if recover() != nil {
			vs = []Violation{{Why: "cannot be validated: a rule could not run"}}
		}
	}()
	return ruleViolations(validate.Struct(ptr))
}

// checkTags checks the tags of t that NewContract relies on: every validate
// rule against its field's type (checkRules), and every jsonschema tag for
// parts invopop/jsonschema would ignore (checkSchemaTags).
func checkTags(t reflect.Type) error {
	if err := checkRules(t); err != nil {
		return err
	}
	return checkSchemaTags(t)
}

// checkRules walks t as the validator does (nested structs, pointers, and
// the elements of slices, arrays and maps after dive) and returns an error
// naming the first field, by JSON path, whose rule cannot apply to it: a rule
// the validator does not know, a parameter it cannot parse, a rule that does
// not fit the field's type (gt on a bool, len on a decimal), a dive on a
// field that is not a collection, or rules inside elements that would never
// run because the collection has no dive.
func checkRules(t reflect.Type) error {
	w := ruleWalk{done: map[reflect.Type]bool{}, ruled: map[reflect.Type]bool{}}
	return w.structType(t, "")
}

type ruleWalk struct {
	done  map[reflect.Type]bool // struct types checked (or being checked)
	ruled map[reflect.Type]bool // hasRules memo
}

func (w *ruleWalk) structType(t reflect.Type, at string) error {
	if w.done[t] {
		return nil
	}
	w.done[t] = true
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() && !f.Anonymous {
			continue // the validator skips these too
		}
		tag := f.Tag.Get("validate")
		if tag == "-" {
			continue
		}
		if err := w.field(tag, f.Type, fieldPath(at, f)); err != nil {
			return err
		}
	}
	return nil
}

// field checks one field's tag level by level: the rules before the first
// dive apply to the field, those after it to its elements, and so on.
func (w *ruleWalk) field(tag string, t reflect.Type, path string) error {
	where := pathOrRoot(path)
	at := func(format string, args ...any) error {
		return fmt.Errorf("field %s: "+format, append([]any{where}, args...)...)
	}
	depth := 0
	var items []string
	if tag != "" {
		items = strings.Split(tag, ",")
	}
	for i := 0; i < len(items); i++ {
		it := items[i]
		switch it {
		case "dive":
			c := deref(t)
			if k := c.Kind(); k != reflect.Slice && k != reflect.Array && k != reflect.Map {
				return at(`"dive" needs a slice, array or map, not %s`, c)
			}
			if i+1 < len(items) && items[i+1] == "keys" {
				if c.Kind() != reflect.Map {
					return at(`"keys" needs a map, not %s`, c)
				}
				end := i + 2
				for end < len(items) && items[end] != "endkeys" {
					end++
				}
				if end == len(items) {
					return at(`"keys" has no "endkeys"`)
				}
				if err := w.field(strings.Join(items[i+2:end], ","), c.Key(), path+" (its keys)"); err != nil {
					return err
				}
				i = end
			}
			t = c.Elem()
			depth++
			where = pathOrRoot(path) + " (" + strings.Repeat("elements of ", depth-1) + "its elements)"
		case "keys":
			return at(`"keys" must come right after "dive"`)
		case "endkeys":
			return at(`"endkeys" without "keys"`)
		case "omitempty", "omitnil", "omitzero", "structonly", "nostructlevel":
		case "":
			return at("the validate tag has an empty rule (a stray comma?)")
		default:
			for _, alt := range strings.Split(it, "|") {
				if err := w.rule(alt, t); err != nil {
					return at("%s", err)
				}
			}
		}
	}
	// What the validator goes on to: the fields of a struct, whatever the
	// tag; the elements of a collection only after dive.
	c := deref(t)
	switch {
	case c.Kind() == reflect.Struct && c != decimalType && !c.ConvertibleTo(timeType):
		return w.structType(c, path)
	case w.ruledElements(c):
		return at(`its elements have validate rules, which run only after "dive": write validate:"dive" on the field`)
	}
	return nil
}

// rule checks one rule (name, or name=param) against t.
func (w *ruleWalk) rule(rule string, t reflect.Type) error {
	name, param, _ := strings.Cut(rule, "=")
	param = paramUnescaper.Replace(param)
	if name == "" {
		return fmt.Errorf("rule %q has no name", rule)
	}
	if machineRules[name] {
		return fmt.Errorf("rule %q consults the file system or the network, so checking a plan would depend on the machine; check it in the tool instead", rule)
	}
	if !knownRule(name) {
		return fmt.Errorf("rule %q is not one go-playground/validator knows", rule)
	}
	c := deref(t)
	class := ruleClass(c)
	if class == "decimal" {
		if _, ok := decimalRules[name]; ok {
			if _, err := decimalParams(name, param); err != nil {
				return fmt.Errorf("rule %q does not apply to a decimal: its parameter: %v", rule, err)
			}
			return nil
		}
		if presenceRules[name] {
			return nil
		}
		return fmt.Errorf("rule %q does not apply to a decimal; decimals take gt, gte, lt, lte, min, max, eq, ne and oneof", rule)
	}
	if class != "string" && !presenceRules[name] && !crossFieldRules[name] && !kindRules[class][name] {
		return fmt.Errorf("rule %q does not apply to %s", rule, c)
	}
	if name == "validateFn" {
		return nil // it calls a method of the field's type: not run on a zero value here
	}
	if p := probe(c, rule); p != nil {
		if s, _ := p.(string); strings.HasPrefix(s, "Bad field type") {
			return fmt.Errorf("rule %q does not apply to %s", rule, c)
		}
		return fmt.Errorf("rule %q cannot run on %s: its parameter is malformed", rule, c)
	}
	return nil
}

// ruledElements reports whether t is a collection whose elements (through
// pointers and nested collections) are structs with validate rules.
func (w *ruleWalk) ruledElements(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Slice, reflect.Array, reflect.Map:
		e := deref(t.Elem())
		if e.Kind() == reflect.Struct {
			return w.hasRules(e)
		}
		return w.ruledElements(e)
	}
	return false
}

// hasRules reports whether struct type t, or a struct it holds, has a
// validate tag.
func (w *ruleWalk) hasRules(t reflect.Type) bool {
	if has, ok := w.ruled[t]; ok {
		return has
	}
	w.ruled[t] = false // a recursive type answers from its other fields
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if tag := f.Tag.Get("validate"); tag != "" && tag != "-" {
			w.ruled[t] = true
			return true
		}
		for e := deref(f.Type); ; e = deref(e.Elem()) {
			if e.Kind() == reflect.Struct && w.hasRules(e) {
				w.ruled[t] = true
				return true
			}
			if k := e.Kind(); k != reflect.Slice && k != reflect.Array && k != reflect.Map {
				break
			}
		}
	}
	return false
}

var timeType = reflect.TypeFor[time.Time]()

// ruleClass names the group of types a rule is checked against.
func ruleClass(t reflect.Type) string {
	switch {
	case t == decimalType:
		return "decimal"
	case t.Kind() == reflect.Struct && t.ConvertibleTo(timeType):
		return "time"
	}
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "bool"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Slice, reflect.Array, reflect.Map:
		return "collection"
	}
	return "struct"
}

func set(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

var (
	// presenceRules say whether a value must be there, on any type.
	presenceRules = set("required", "required_if", "required_unless", "required_with", "required_with_all",
		"required_without", "required_without_all", "excluded_if", "excluded_unless", "excluded_with",
		"excluded_with_all", "excluded_without", "excluded_without_all", "skip_unless", "isdefault")
	// crossFieldRules compare a field with another one. Not on decimals:
	// they would compare the struct, not the value.
	crossFieldRules = set("eqfield", "nefield", "gtfield", "gtefield", "ltfield", "ltefield", "eqcsfield",
		"necsfield", "gtcsfield", "gtecsfield", "ltcsfield", "ltecsfield", "validateFn")
	// kindRules are the rules that apply to a type other than a string. Every
	// other rule reads the value as a string: on another kind it would test
	// the text "<int Value>" and pass or fail without meaning.
	kindRules = map[string]map[string]bool{
		"bool": set("eq", "ne", "boolean"),
		"number": set("len", "min", "max", "eq", "ne", "lt", "lte", "gt", "gte", "oneof", "noneof", "numeric",
			"number", "latitude", "longitude", "port", "iso3166_1_alpha_numeric", "iso3166_1_alpha_numeric_eu",
			"iso4217_numeric", "luhn_checksum"),
		"collection": set("len", "min", "max", "eq", "ne", "lt", "lte", "gt", "gte", "unique", "json"),
		"time":       set("lt", "lte", "gt", "gte", "min", "max"),
	}
	// machineRules look at the file system or resolve names over the
	// network.
	machineRules = set("file", "filepath", "dir", "dirpath", "image", "tcp4_addr", "tcp6_addr", "tcp_addr",
		"udp4_addr", "udp6_addr", "udp_addr", "ip4_addr", "ip6_addr", "ip_addr", "unix_addr", "uds_exists")
)

var knownRules sync.Map // rule name → bool

// knownRule reports whether the validator has a rule (or alias) called name.
func knownRule(name string) bool {
	if k, ok := knownRules.Load(name); ok {
		return k.(bool)
	}
	p := probe(reflect.TypeFor[string](), name)
	s, _ := p.(string)
	known := !strings.Contains(s, "Undefined validation function")
	knownRules.Store(name, known)
	return known
}

// probe runs rule on the zero value of t, as the only field of a struct,
// and returns what the validator panicked with, if it did. It is how a
// parameter the rule cannot parse, or a type it does not handle, is found
// before any plan arrives. Rules that consult the machine are never probed.
func probe(t reflect.Type, rule string) (panicked any) {
	st := reflect.StructOf([]reflect.StructField{{
		Name: "V", Type: t, Tag: reflect.StructTag(`validate:` + strconv.Quote(rule)),
	}})
	defer func() { panicked = recover() }()
	_ = validate.Struct(reflect.New(st).Interface())
	return nil
}

// fieldPath is the JSON Pointer of field f of a struct at path at. A struct
// embedded without a JSON name has its fields promoted, as in encoding/json;
// a field JSON ignores is named by its Go name.
func fieldPath(at string, f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	switch {
	case name == "" && f.Anonymous && structKind(f.Type):
		return at
	case name == "" || name == "-":
		name = f.Name
	}
	return at + "/" + strictjson.Segment(name)
}

func pathOrRoot(p string) string {
	if p == "" {
		return "(root)"
	}
	return p
}

// structKind reports whether t is a struct or a pointer to one.
func structKind(t reflect.Type) bool {
	return deref(t).Kind() == reflect.Struct
}

// deref follows pointers, as the validator does before a rule runs.
func deref(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}
