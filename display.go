package planexec

import (
	"bytes"
	"encoding/json"
	"math/big"
	"reflect"
	"strconv"
	"strings"

	"github.com/shopspring/decimal"

	"github.com/planexec/planexec/internal/canonjson"
	"github.com/planexec/planexec/internal/strictjson"
)

// display renders the arguments for a person to read: their canonical JSON,
// except that each decimal is written at the scale the model wrote it with:
// a fare written 412.50 shows "412.50", where the canonical form, which
// digests use, has "412.5". Decimals stay JSON strings, as in the canonical
// form, so no JSON reader turns them into floating point on the way to the
// screen. It is rendered when asked for (an approval request), not for
// every step.
func (d decoded) display() []byte {
	return displayJSON(d.value, d.canonical)
}

// displayJSON is display for value, a contract's type or a pointer to one,
// whose canonical JSON is canonical. A type without decimals, or anything
// unexpected, gives canonical itself.
func displayJSON(value any, canonical []byte) []byte {
	v := reflect.ValueOf(value)
	if v.Kind() == reflect.Pointer && !v.IsNil() {
		v = v.Elem()
	}
	if !v.IsValid() {
		return canonical
	}
	dec, err := strictjson.For(v.Type()) // built with the contract: a lookup
	if err != nil || !dec.HasDecimals() {
		return canonical
	}
	var tree any
	jd := json.NewDecoder(bytes.NewReader(canonical))
	jd.UseNumber()
	if jd.Decode(&tree) != nil {
		return canonical
	}
	changed := false
	dec.Decimals(v, func(path []string, x decimal.Decimal) {
		if setDecimal(tree, path, x) {
			changed = true
		}
	})
	if !changed {
		return canonical
	}
	out, err := canonjson.Marshal(tree)
	if err != nil {
		return canonical
	}
	return out
}

// setDecimal replaces the string at path in tree, when it is x's canonical
// rendering, by x's display rendering. A path encoding/json left out
// (omitempty) is not there, and nothing changes.
func setDecimal(tree any, path []string, x decimal.Decimal) bool {
	if len(path) == 0 {
		return false
	}
	node := tree
	for _, seg := range path[:len(path)-1] {
		if node = member(node, seg); node == nil {
			return false
		}
	}
	last := path[len(path)-1]
	if s, ok := member(node, last).(string); !ok || s != x.String() {
		return false
	}
	switch n := node.(type) {
	case map[string]any:
		n[last] = displayDecimal(x)
	case []any:
		i, _ := strconv.Atoi(last) // member found it
		n[i] = displayDecimal(x)
	}
	return true
}

// member is the member seg of an object, or the element seg of an array, in
// a tree decoded from JSON; nil when there is none.
func member(node any, seg string) any {
	switch n := node.(type) {
	case map[string]any:
		return n[seg]
	case []any:
		if i, err := strconv.Atoi(seg); err == nil && i >= 0 && i < len(n) {
			return n[i]
		}
	}
	return nil
}

// maxPadding bounds the zeros a plain rendering adds to the digits; past it
// a decimal is written as its digits and an exponent.
const maxPadding = 20

// displayDecimal writes x at its own scale: 412.50 as "412.50", 0.10 as
// "0.10". Plain notation is used while it pads the digits with at most
// maxPadding zeros; otherwise the digits and an exponent ("1e-30",
// "15e40"), so a rendering is never much longer than the number written.
func displayDecimal(x decimal.Decimal) string {
	coef := x.Coefficient()
	exp := int64(x.Exponent())
	sign := ""
	if coef.Sign() < 0 {
		sign = "-"
	}
	digits := new(big.Int).Abs(coef).String()
	scientific := func() string { return sign + digits + "e" + strconv.FormatInt(exp, 10) }
	switch {
	case exp >= 0 && digits == "0":
		return "0"
	case exp >= 0 && exp <= maxPadding:
		return sign + digits + strings.Repeat("0", int(exp))
	case exp >= 0:
		return scientific()
	}
	scale := -exp
	if int64(len(digits)) > scale {
		cut := int64(len(digits)) - scale
		return sign + digits[:cut] + "." + digits[cut:]
	}
	lead := scale - int64(len(digits))
	if lead > maxPadding {
		return scientific()
	}
	return sign + "0." + strings.Repeat("0", int(lead)) + digits
}
