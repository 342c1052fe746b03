package canonjson

import (
	"encoding/json"
	"fmt"
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/planexec/planexec/internal/jsonscan"

	"github.com/shopspring/decimal"
)

func TestCanonicalize(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		// Whitespace and key order.
		{` { "b" : 1 ,	"a" : [ 1 , 2 ] }
`, `{"a":[1,2],"b":1}`},
		{`{"b":{"d":1,"c":2},"a":{}}`, `{"a":{},"b":{"c":2,"d":1}}`},
		{`[]`, `[]`},
		{`{}`, `{}`},
		{`[true,false,null]`, `[true,false,null]`},
		// Keys sort by UTF-8 bytes of their unescaped text, not UTF-16.
		{`{"é":1,"z":2,"Z":3,"\ud83d\ude00":4,"\uffff":5}`, `{"Z":3,"z":2,"é":1,"` + "\uffff" + `":5,"😀":4}`},
		{`{"\u0062":1,"a":2}`, `{"a":2,"b":1}`},
		{`{"a\u0000":1,"a":2}`, `{"a":2,"a\u0000":1}`},
		// Strings: one escaping.
		{`"\u0041"`, `"A"`},
		{`"A"`, `"A"`},
		{`"\/"`, `"/"`},
		{`"\"\\"`, `"\"\\"`},
		{`"\b\f\n\r\t"`, `"\b\f\n\r\t"`},
		{`"\u0008\u000C\u000a"`, `"\b\f\n"`},
		{`"\u0001\u001F\u007f"`, "\"\\u0001\\u001f\u007f\""},
		{`"<>&\u003c\u2028"`, "\"<>&<\u2028\""},
		{`"\u00e9"`, `"é"`},
		{`"\ud83d\ude00"`, `"😀"`},
		// Numbers.
		{`412.5`, `412.5`},
		{`412.50`, `412.5`},
		{`4.1250e2`, `412.5`},
		{`41250e-2`, `412.5`},
		{`0.41250E+3`, `412.5`},
		{`-0`, `0`},
		{`0.0`, `0`},
		{`0e5`, `0`},
		{`-0.000e-7`, `0`},
		{`1E2`, `100`},
		{`100`, `100`},
		{`1e+2`, `100`},
		{`10.0e1`, `100`},
		{`-1.5`, `-1.5`},
		{`9007199254740993`, `9007199254740993`},
		{`9007199254740992`, `9007199254740992`},
		{`18446744073709551615`, `18446744073709551615`},
		{`12345678901234567890.123`, `12345678901234567890.123`},
		{`100000000000000000000`, `100000000000000000000`},
		{`1e20`, `100000000000000000000`},
		{`1e21`, `1e21`},
		{`1.5e21`, `1500000000000000000000`},
		{`1.5e22`, `15e21`},
		{`123456789012345678901234`, `123456789012345678901234`},
		{`0.000001`, `0.000001`},
		{`1e-6`, `0.000001`},
		{`0.0000012`, `0.0000012`},
		{`1e-7`, `0.0000001`},
		{`1e-8`, `1e-8`},
		{`1.5E-7`, `0.00000015`},
		{`1.5E-8`, `15e-9`},
		{`0.000000015`, `15e-9`},
		{`1e999999999`, `1e999999999`},
		{`-1e-999999999`, `-1e-999999999`},
		{`10e999999999`, `1e1000000000`},
		{`1e00000000000000000000000000005`, `100000`},
		{`1e123456789012345678901234567890`, `1e123456789012345678901234567890`},
		{`120e-123456789012345678901234567890`, `12e-123456789012345678901234567889`},
		// Exponents too long for int64: adjusted digit by digit.
		{`10e9999999999999999999`, `1e10000000000000000000`},
		{`0.01e10000000000000000000`, `1e9999999999999999998`},
		{`0.01e-10000000000000000000`, `1e-10000000000000000002`},
		{`-100e-10000000000000000000`, `-1e-9999999999999999998`},
		{`1000000000000000000000e-1000000000000000000000`, `1e-999999999999999999979`},
		{`1e-0000000000000000000000000`, `1`},
		{`-0.5`, `-0.5`},
		{`3.14159`, `3.14159`},
		{`[1.0,1,1e0,10e-1]`, `[1,1,1,1]`},
	}
	for _, tc := range tests {
		got, err := Canonicalize([]byte(tc.in))
		if err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		if string(got) != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.in, got, tc.want)
		}
		if !json.Valid(got) {
			t.Errorf("%s: output %s is not valid JSON", tc.in, got)
		}
	}
}

// TestLongNumbers feeds numbers of a million digits: they must come out
// exact and no longer than they went in (plus a few bytes), and the work
// must stay linear (a quadratic algorithm would take minutes here).
func TestLongNumbers(t *testing.T) {
	const n = 1 << 20
	r := strings.Repeat
	tests := []struct {
		name, in, want string
	}{
		{"digits", r("7", n), r("7", n)},
		{"digits with a zero fraction", "-" + r("7", n) + ".000", "-" + r("7", n)},
		{"fraction", "0." + r("0", n) + "5", "5e-" + fmt.Sprint(n+1)},
		{"exponent", "1e1" + r("0", n), "1e1" + r("0", n)},
		{"exponent carried through every digit", "10e" + r("9", n), "1e1" + r("0", n)},
		{"exponent borrowed through every digit", "10e-1" + r("0", n), "1e-" + r("9", n)},
		{"exponent with leading zeros", "5e" + r("0", n) + "3", "5000"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Canonicalize([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("got %d bytes starting %.20q, want %d bytes starting %.20q", len(got), got, len(tc.want), tc.want)
			}
		})
	}
}

func TestCanonicalizeDistinct(t *testing.T) {
	pairs := [][2]string{
		{`9007199254740993`, `9007199254740992`},
		{`0.1`, `0.10000000000000001`},
		{`1e999999999`, `1e999999998`},
		{`1e123456789012345678901234567890`, `1e123456789012345678901234567891`},
		{`-1`, `1`},
		{`"a"`, `"A"`},
		{`{"a":1}`, `{"a":"1"}`},
		{`[1,2]`, `[2,1]`},
		{`1e21`, `100000000000000000000`},
	}
	for _, p := range pairs {
		a, err1 := Canonicalize([]byte(p[0]))
		b, err2 := Canonicalize([]byte(p[1]))
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		if string(a) == string(b) {
			t.Errorf("%s and %s both give %s", p[0], p[1], a)
		}
	}
}

func TestCanonicalizeErrors(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{``, "invalid JSON"},
		{`{`, "invalid JSON"},
		{`{"a":1,}`, "invalid JSON"},
		{`[1,]`, "invalid JSON"},
		{`01`, "invalid JSON"},
		{`1.`, "invalid JSON"},
		{`.5`, "invalid JSON"},
		{`+1`, "invalid JSON"},
		{`1e`, "invalid JSON"},
		{`nul`, "invalid JSON"},
		{`"abc`, "invalid JSON"},
		{`"\x"`, "invalid JSON"},
		{`"\u12"`, "invalid JSON"},
		{"\"a\x01\"", "invalid JSON"},
		{`{} {}`, "invalid JSON"},
		{`{"a" 1}`, "invalid JSON"},
		{`{1:2}`, "invalid JSON"},
		{`NaN`, "invalid JSON"},
		{`{"a":1,"a":2}`, "duplicate key"},
		{`{"a":1,"\u0061":2}`, "duplicate key"},
		{`[{"x":{"a":1,"b":2,"a":3}}]`, "duplicate key"},
		{"\"\xff\"", "invalid UTF-8"},
		{"{\"\xc3\":1}", "invalid UTF-8"},
		{`"\ud800"`, "invalid UTF-8"},
		{`"\udc00\ud800"`, "invalid UTF-8"},
		{"\"\xed\xa0\x80\"", "invalid UTF-8"},
		{strings.Repeat("[", 10001) + strings.Repeat("]", 10001), "nesting deeper than 10000"},
	}
	for _, tc := range tests {
		_, err := Canonicalize([]byte(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			in := tc.in
			if len(in) > 40 {
				in = in[:40] + "..."
			}
			t.Errorf("%q: error %v, want %q", in, err, tc.want)
		}
	}
	if _, err := Canonicalize([]byte(strings.Repeat("[", 10000) + strings.Repeat("]", 10000))); err != nil {
		t.Errorf("depth 10000: %v", err)
	}
}

func TestCanonicalizeDeepObjectsLinear(t *testing.T) {
	// Each level has two members in reverse order, so every object is
	// reordered; this must not cost time quadratic in the depth.
	const depth = 9000
	doc := strings.Repeat(`{"b":1,"a":`, depth) + `0` + strings.Repeat(`}`, depth)
	got, err := Canonicalize([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Repeat(`{"a":`, depth) + `0` + strings.Repeat(`,"b":1}`, depth)
	if string(got) != want {
		t.Error("deep object rendered wrongly")
	}
}

func TestMarshalAndDigest(t *testing.T) {
	type Order struct {
		Flight string          `json:"flight"`
		Amount decimal.Decimal `json:"amount"`
		Note   string          `json:"note"`
		Meta   map[string]any  `json:"meta"`
	}
	a := Order{Flight: "BA123", Amount: decimal.RequireFromString("412.50"), Note: "<&>", Meta: map[string]any{"z": 1, "a": 2.50}}
	b := Order{Flight: "BA123", Amount: decimal.RequireFromString("412.5"), Note: "<&>", Meta: map[string]any{"a": 2.5, "z": 1.0}}
	ma, err := Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"amount":"412.5","flight":"BA123","meta":{"a":2.5,"z":1},"note":"<&>"}`; string(ma) != want {
		t.Errorf("Marshal:\n got %s\nwant %s", ma, want)
	}
	da, err := Digest(a)
	if err != nil {
		t.Fatal(err)
	}
	db, err := Digest(b)
	if err != nil {
		t.Fatal(err)
	}
	if da != db {
		t.Errorf("decimal 412.50 and 412.5 give different digests: %s %s", da, db)
	}
	if !strings.HasPrefix(da, "sha256:") || len(da) != len("sha256:")+64 || strings.ToLower(da) != da {
		t.Errorf("digest format %s", da)
	}
	// Known value: sha256 of `{"a":1}`.
	d, err := Digest(map[string]int{"a": 1})
	if err != nil {
		t.Fatal(err)
	}
	if want := "sha256:015abd7f5cc57a2dd94b7590f04ad8084273905ee33ec5cebeae62276a97f862"; d != want {
		t.Errorf("Digest = %s, want %s", d, want)
	}
	c := a
	c.Amount = decimal.RequireFromString("412.51")
	if dc, _ := Digest(c); dc == da {
		t.Error("different amounts give the same digest")
	}
	if _, err := Marshal(make(chan int)); err == nil {
		t.Error("Marshal(chan) succeeded")
	}
	if _, err := Digest(func() {}); err == nil {
		t.Error("Digest(func) succeeded")
	}
}

func TestMarshalBoundsDecimals(t *testing.T) {
	type inner struct {
		Amount decimal.Decimal `json:"amount"`
	}
	type hidden struct{ Amount decimal.Decimal }
	type order struct {
		hidden
		Lines []inner  `json:"lines"`
		Tip   *inner   `json:"tip,omitempty"`
		Meta  any      `json:"meta,omitempty"`
		Note  string   `json:"note"`
		skip  [1]inner // unexported: never rendered, never checked
	}
	big := decimal.New(1, 10000)
	tiny := decimal.New(1, -10000)
	edge := decimal.New(1, MaxDecimalExponent)
	tests := []struct {
		name string
		v    any
		ok   bool
	}{
		{"decimal 1e10000", big, false},
		{"decimal 1e-10000", tiny, false},
		{"decimal at the bound", edge, true},
		{"decimal below the bound", decimal.New(-5, -MaxDecimalExponent), true},
		{"decimal past the bound", decimal.New(1, MaxDecimalExponent+1), false},
		{"zero with a huge exponent", decimal.New(0, 10000), false},
		{"pointer", &big, false},
		{"null decimal", decimal.NullDecimal{Decimal: big, Valid: true}, false},
		{"null decimal that is null", decimal.NullDecimal{Decimal: big}, true},
		{"valid null decimal", decimal.NewNullDecimal(decimal.RequireFromString("412.50")), true},
		{"in a slice of structs", order{Lines: []inner{{}, {big}}}, false},
		{"behind a pointer field", order{Tip: &inner{tiny}}, false},
		{"in an interface", order{Meta: map[string]any{"x": []any{1, big}}}, false},
		{"as a map key", map[decimal.Decimal]int{big: 1}, false},
		{"promoted from an unexported embedded struct", order{hidden: hidden{big}}, false},
		{"in an unexported field", order{skip: [1]inner{{big}}}, true},
		{"ordinary order", order{Lines: []inner{{decimal.RequireFromString("412.50")}}, Note: "x"}, true},
		{"no decimals at all", map[string]any{"a": []int{1, 2}}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := Marshal(tc.v)
			if tc.ok {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if len(out) > 400 {
					t.Errorf("rendered as %d bytes", len(out))
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "exponent is beyond") {
				t.Fatalf("got %d bytes, error %v; want the decimal refused", len(out), err)
			}
			if strings.Contains(err.Error(), "10000") {
				t.Errorf("error %q quotes the value", err)
			}
			if _, err := Digest(tc.v); err == nil {
				t.Error("Digest accepted what Marshal refused")
			}
		})
	}
}

func TestMarshalRefusesCyclesWithoutLooping(t *testing.T) {
	type node struct {
		D    decimal.Decimal `json:"d"`
		Next *node           `json:"next"`
	}
	n := &node{}
	n.Next = n
	if _, err := Marshal(n); err == nil {
		t.Fatal("cyclic value rendered")
	}
}

func FuzzCanonicalize(f *testing.F) {
	for _, s := range []string{
		`{"b":1,"a":[1,2,{"d":null,"c":true}]}`, `412.50`, `4.1250e2`, `-0.0e-0`, `1e999999999`,
		`"\u0041\ud83d\ude00\n\u001f"`, `{"a":1,"a":2}`, "\"\xff\"", `[`, `{"\u00e9":"é"}`,
		`12345678901234567890.123`, `1e-7`, `0.000001`, `[1e21,1e20,1E+2]`, `"<\u2028>"`,
		`{"a":{"b":{"c":[[],{}]}}}`, `1e123456789012345678901234567890`, `[1e20,1e-7,1e20]`,
		`10e9999999999999999999`, `-0.01e-10000000000000000000`, `1000e-0000000000000000000000002`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		c, err := Canonicalize(doc)
		if err != nil {
			return
		}
		if !json.Valid(doc) {
			t.Fatalf("accepted input encoding/json finds invalid: %q", doc)
		}
		if !json.Valid(c) {
			t.Fatalf("output not valid JSON: %q -> %q", doc, c)
		}
		c2, err := Canonicalize(c)
		if err != nil {
			t.Fatalf("canonical output refused: %q -> %q: %v", doc, c, err)
		}
		if string(c2) != string(c) {
			t.Fatalf("not idempotent: %q -> %q -> %q", doc, c, c2)
		}
		if r1, ok := smallNumber(doc); ok {
			r2, ok := new(big.Rat).SetString(string(c))
			if !ok || r1.Cmp(r2) != 0 {
				t.Fatalf("number changed value: %q -> %q", doc, c)
			}
		}
		if d1, e1, ok := scientific(doc); ok {
			d2, e2, _ := scientific(c)
			if d1 != d2 || e1.Cmp(e2) != 0 {
				t.Fatalf("number changed value: %q -> %q", doc, c)
			}
		}
		// "1e20" (4 bytes) becomes 21 bytes, the worst growth there is.
		if len(c) > 6*len(doc)+32 {
			t.Fatalf("output much longer than input: %d -> %d", len(doc), len(c))
		}
	})
}

// smallNumber parses doc as an exact rational when it is a lone number
// literal with a short exponent, so that big.Rat can hold it cheaply.
func smallNumber(doc []byte) (*big.Rat, bool) {
	lit := strings.TrimSpace(string(doc))
	if lit == "" || len(lit) > 200 {
		return nil, false
	}
	if end, _ := jsonscan.ScanNumber([]byte(lit), 0); end != len(lit) {
		return nil, false
	}
	if i := strings.IndexAny(lit, "eE"); i >= 0 && len(strings.TrimLeft(lit[i+1:], "+-0")) > 3 {
		return nil, false
	}
	return new(big.Rat).SetString(lit)
}

// scientific reads doc, when it is a lone number literal of at most 200
// bytes, as ±D × 10^E with D free of leading and trailing zeros ("0" for
// zero), using math/big for the exponent whatever its length.
func scientific(doc []byte) (digits string, exp *big.Int, ok bool) {
	lit := strings.TrimSpace(string(doc))
	if lit == "" || len(lit) > 200 {
		return "", nil, false
	}
	if end, _ := jsonscan.ScanNumber([]byte(lit), 0); end != len(lit) {
		return "", nil, false
	}
	sign := ""
	if lit[0] == '-' {
		sign, lit = "-", lit[1:]
	}
	mant, e, _ := strings.Cut(strings.ToLower(lit), "e")
	exp = new(big.Int)
	if e != "" {
		exp.SetString(strings.TrimPrefix(e, "+"), 10)
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	exp.Sub(exp, big.NewInt(int64(len(frac))))
	d := strings.TrimLeft(intPart+frac, "0")
	trimmed := strings.TrimRight(d, "0")
	exp.Add(exp, big.NewInt(int64(len(d)-len(trimmed))))
	if trimmed == "" {
		return "0", new(big.Int), true
	}
	return sign + trimmed, exp, true
}

// TestNumberSpellings writes random values in several equivalent ways and
// checks that all give the same text, with the same value.
func TestNumberSpellings(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	seen := map[string]string{}
	for range 5000 {
		n := 1 + rng.IntN(25)
		digits := make([]byte, n)
		for i := range digits {
			digits[i] = byte('0' + rng.IntN(10))
		}
		if rng.IntN(3) == 0 {
			digits[0] = '0' // a value below 1 once a point is inserted after it
		}
		exp := rng.IntN(81) - 40
		sign := ""
		if rng.IntN(2) == 0 {
			sign = "-"
		}
		ds := strings.TrimLeft(string(digits), "0")
		if ds == "" {
			ds = "7" // zero has its own cases in TestCanonicalize
		}
		spellings := []string{
			fmt.Sprintf("%s%se%d", sign, ds, exp),
			fmt.Sprintf("%s%s000E%+d", sign, ds, exp-3),
			fmt.Sprintf("%s%s.%s00e%d", sign, ds[:1], ds[1:]+"0", exp+len(ds)-1),
			fmt.Sprintf("%s0.%s0E%d", sign, ds, exp+len(ds)),
		}
		if exp >= 0 {
			spellings = append(spellings, sign+ds+strings.Repeat("0", exp))
		} else if len(ds) > -exp {
			spellings = append(spellings, sign+ds[:len(ds)+exp]+"."+ds[len(ds)+exp:])
		} else {
			spellings = append(spellings, sign+"0."+strings.Repeat("0", -exp-len(ds))+ds)
		}
		want, _ := new(big.Rat).SetString(spellings[0])
		var first string
		for _, sp := range spellings {
			got, err := Canonicalize([]byte(sp))
			if err != nil {
				t.Fatalf("%s: %v", sp, err)
			}
			if first == "" {
				first = string(got)
			} else if string(got) != first {
				t.Fatalf("%s gives %s, %s gives %s", spellings[0], first, sp, got)
			}
			if r, ok := new(big.Rat).SetString(string(got)); !ok || r.Cmp(want) != 0 {
				t.Fatalf("%s gives %s, a different value", sp, got)
			}
		}
		// Different values must never share a text.
		key := want.RatString()
		if prev, ok := seen[first]; ok && prev != key {
			t.Fatalf("%s and %s both give %s", prev, key, first)
		}
		seen[first] = key
	}
}

func BenchmarkCanonicalize(b *testing.B) {
	doc := []byte(`{"flight":"BA123","seats":2,"amount":412.50,"date":"2024-05-01",
		"passengers":[{"name":"A","age":30},{"name":"B\u00e9"}],"meta":{"z":1,"a":[true,null]}}`)
	b.ReportAllocs()
	b.SetBytes(int64(len(doc)))
	for b.Loop() {
		if _, err := Canonicalize(doc); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDigest(b *testing.B) {
	type Booking struct {
		Flight string          `json:"flight"`
		Seats  int             `json:"seats"`
		Amount decimal.Decimal `json:"amount"`
		Date   string          `json:"date"`
	}
	v := Booking{"BA123", 2, decimal.RequireFromString("412.50"), "2024-05-01"}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Digest(v); err != nil {
			b.Fatal(err)
		}
	}
}

func TestAnObjectBuiltWithAppendStringAndSumDigestsLikeDigest(t *testing.T) {
	args, err := Marshal(map[string]any{"seats": 1, "flight": "BA117"})
	if err != nil {
		t.Fatal(err)
	}
	run, tenant := "run-\"1\"\n\xff", "acme/eu"
	want, err := Digest(map[string]any{"arguments": json.RawMessage(args), "run": run, "tenant": tenant})
	if err != nil {
		t.Fatal(err)
	}
	b := append([]byte(`{"arguments":`), args...)
	b = append(b, `,"run":`...)
	b = AppendString(b, run)
	b = append(b, `,"tenant":`...)
	b = AppendString(b, tenant)
	b = append(b, '}')
	if got := Sum(b); got != want {
		t.Errorf("Sum = %s, want %s", got, want)
	}
}
