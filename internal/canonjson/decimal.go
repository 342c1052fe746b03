package canonjson

import (
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"sync"

	"github.com/shopspring/decimal"
)

// MaxDecimalExponent bounds the exponent of a decimal.Decimal that Marshal
// renders. decimal's MarshalJSON writes every digit of the plain notation,
// padding zeros included, so 1e10000 (coefficient 1, exponent 10000) would
// come out as 10001 digits: a value that small in memory must not render
// that large. ±100 is far beyond the 38 digits SQL DECIMAL holds (strict
// decoding admits no more) and leaves room for values computed by code.
const MaxDecimalExponent = 100

var (
	decimalType     = reflect.TypeFor[decimal.Decimal]()
	nullDecimalType = reflect.TypeFor[decimal.NullDecimal]()
	marshalerType   = reflect.TypeFor[json.Marshaler]()
	textType        = reflect.TypeFor[encoding.TextMarshaler]()
)

// plans caches a decimalPlan per type, so that values that cannot hold a
// decimal are not walked at all and the rest are walked without asking
// again for every element.
var plans sync.Map // reflect.Type → *decimalPlan

// decimalPlan says where decimals may sit inside values of one type.
type decimalPlan struct {
	holds  bool  // a decimal that encoding/json renders may sit inside
	fields []int // struct: the indexes of the fields that may hold one
}

// planFor returns the decimalPlan of t.
func planFor(t reflect.Type) *decimalPlan {
	if p, ok := plans.Load(t); ok {
		return p.(*decimalPlan)
	}
	// Only whole answers are cached: one found while a recursive type was
	// still being looked at may be incomplete.
	p := &decimalPlan{holds: reaches(t, map[reflect.Type]bool{})}
	if p.holds && t.Kind() == reflect.Struct {
		for i := range t.NumField() {
			f := t.Field(i)
			if (f.IsExported() || f.Anonymous) && reaches(f.Type, map[reflect.Type]bool{}) {
				p.fields = append(p.fields, i)
			}
		}
	}
	plans.Store(t, p)
	return p
}

// reaches reports whether encoding/json may render a decimal found inside a
// value of type t. visiting holds the types being looked at further up.
func reaches(t reflect.Type, visiting map[reflect.Type]bool) bool {
	if t == decimalType || t == nullDecimalType {
		return true
	}
	if visiting[t] {
		return false
	}
	visiting[t] = true
	defer delete(visiting, t)
	switch t.Kind() {
	case reflect.Interface:
		return true
	case reflect.Pointer:
		// encoding/json calls the methods of the value pointed to.
		return reaches(t.Elem(), visiting)
	}
	if t.Implements(marshalerType) || t.Implements(textType) {
		// Rendered by its own method: what it holds does not reach the
		// output as it is.
		return false
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		return reaches(t.Elem(), visiting)
	case reflect.Map:
		return reaches(t.Key(), visiting) || reaches(t.Elem(), visiting)
	case reflect.Struct:
		for i := range t.NumField() {
			f := t.Field(i)
			if (f.IsExported() || f.Anonymous) && reaches(f.Type, visiting) {
				return true
			}
		}
	}
	return false
}

// checkDecimals returns an error for the first decimal reachable from v
// whose exponent is beyond ±MaxDecimalExponent. depth counts the values
// passed on the way down.
func checkDecimals(v reflect.Value, depth int) error {
	if !v.IsValid() {
		return nil
	}
	t := v.Type()
	p := planFor(t)
	if !p.holds {
		return nil
	}
	if depth > 2*maxDepth {
		// Values this deep cannot be rendered (Canonicalize refuses them)
		// and cyclic ones would not end: stop here.
		return fmt.Errorf("canonjson: value nested deeper than %d", maxDepth)
	}
	switch t {
	case decimalType:
		return checkExponent(v)
	case nullDecimalType:
		if !v.FieldByName("Valid").Bool() {
			return nil // rendered as null
		}
		return checkExponent(v.FieldByName("Decimal"))
	}
	switch t.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil
		}
		return checkDecimals(v.Elem(), depth+1)
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			if err := checkDecimals(v.Index(i), depth+1); err != nil {
				return err
			}
		}
	case reflect.Map:
		for it := v.MapRange(); it.Next(); {
			if err := checkDecimals(it.Key(), depth+1); err != nil {
				return err
			}
			if err := checkDecimals(it.Value(), depth+1); err != nil {
				return err
			}
		}
	case reflect.Struct:
		for _, i := range p.fields {
			if err := checkDecimals(v.Field(i), depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

var errDecimalExponent = fmt.Errorf("canonjson: a decimal's exponent is beyond ±%d, so it would render mostly as padding zeros", MaxDecimalExponent)

// checkExponent checks one decimal.Decimal. A decimal that Interface cannot
// reach sits in an unexported embedded field, which encoding/json does not
// render through its MarshalJSON either.
func checkExponent(v reflect.Value) error {
	if !v.CanInterface() {
		return nil
	}
	var e int32
	if v.CanAddr() {
		e = v.Addr().Interface().(*decimal.Decimal).Exponent() // no copy to allocate
	} else {
		e = v.Interface().(decimal.Decimal).Exponent()
	}
	if e > MaxDecimalExponent || e < -MaxDecimalExponent {
		return errDecimalExponent
	}
	return nil
}
