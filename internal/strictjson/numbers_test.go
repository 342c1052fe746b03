package strictjson

import (
	"encoding/json"
	"math/big"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/planexec/planexec/internal/canonjson"
	"github.com/shopspring/decimal"
)

// numbers holds every kind of number the decoder knows.
type numbers struct {
	Decimals []decimal.Decimal   `json:"decimals,omitempty"`
	Ints     []int64             `json:"ints,omitempty"`
	Floats   []float64           `json:"floats,omitempty"`
	Raw      json.RawMessage     `json:"raw,omitempty"`
	Tree     *tree               `json:"tree,omitempty"`
	Null     decimal.NullDecimal `json:"null,omitzero"`
	Big      *big.Int            `json:"big,omitempty"`
	Bigs     []big.Int           `json:"bigs,omitempty"`
}

const (
	decimalRange = "number out of range for decimal: more than 38 digits when written out in full"
	bigIntRange  = "integer out of range for big.Int: more than 78 digits"
)

func TestDecimalBounds(t *testing.T) {
	r := strings.Repeat
	tests := []struct {
		lit string
		ok  bool
	}{
		{"412.50", true},
		{"0", true},
		{"-0", true},
		{"0.00", true},
		{"1.5e-3", true},
		{"-12.345e1", true},
		{r("9", 38), true},
		{"-" + r("9", 38), true},
		{"12345678901234567890.123456789012345678", true},
		{"1e37", true},
		{"9.9999999999999999999999999999999999999e37", true},
		{"0." + r("0", 37) + "1", true},
		{"1e-38", true},
		{"0e38", true},
		{"100e-2", true},
		{"0.0001e4", true},
		{"0." + r("0", 5000) + "1e5001", true},

		{"1e10000", false},
		{"1e-10000", false},
		{"1e999999999", false},
		{"-1e-999999999", false},
		{"1e99999999999999999999", false},
		{"1e-99999999999999999999", false},
		{r("9", 39), false},
		{"12345678901234567890.1234567890123456789", false},
		{"1e38", false},
		{"1e-39", false},
		{"0." + r("0", 38) + "1", false},
		{"1." + r("0", 38), false},
		{"0e39", false},
		{"0." + r("0", 39), false},
		{"1" + r("0", 5000) + "e-4990", false},
		{r("7", 100000), false},
	}
	type D struct {
		A decimal.Decimal `json:"a"`
	}
	for _, tc := range tests {
		name := tc.lit
		if len(name) > 48 {
			name = name[:48] + "…"
		}
		t.Run(name, func(t *testing.T) {
			got, viols := decode[D](t, `{"a":`+tc.lit+`}`, Limits{})
			if !tc.ok {
				if want := []Violation{v("/a", decimalRange)}; !reflect.DeepEqual(viols, want) {
					t.Fatalf("got %v, want %v", viols, want)
				}
				return
			}
			if viols != nil {
				t.Fatal(viols)
			}
			want, err := decimal.NewFromString(tc.lit)
			if err != nil {
				t.Fatal(err)
			}
			if got.A.Coefficient().Cmp(want.Coefficient()) != 0 || got.A.Exponent() != want.Exponent() {
				t.Errorf("got %s×10^%d, want %s×10^%d", got.A.Coefficient(), got.A.Exponent(), want.Coefficient(), want.Exponent())
			}
			if s := got.A.String(); len(s) > 41 {
				t.Errorf("renders as %d bytes", len(s))
			}
		})
	}
}

func TestNullDecimal(t *testing.T) {
	type N struct {
		A decimal.NullDecimal `json:"a"`
		B decimal.NullDecimal `json:"b,omitempty"`
	}
	got, viols := decode[N](t, `{"a":412.50,"b":null}`, Limits{})
	if viols != nil || !got.A.Valid || got.A.Decimal.String() != "412.5" || got.A.Decimal.Exponent() != -2 || got.B.Valid {
		t.Errorf("got %+v %v", got, viols)
	}
	tests := []struct {
		doc  string
		want []Violation
	}{
		{`{"a":1e10000}`, []Violation{v("/a", decimalRange)}},
		{`{"a":"412.50"}`, []Violation{v("/a", "expected number, got string")}},
		{`{"a":null}`, []Violation{v("/a", "null is not allowed")}},
		{`{"a":1,"b":` + strings.Repeat("1", 39) + `}`, []Violation{v("/b", decimalRange)}},
	}
	for _, tc := range tests {
		if _, viols := decode[N](t, tc.doc, Limits{}); !reflect.DeepEqual(viols, tc.want) {
			t.Errorf("%.40s: got %v, want %v", tc.doc, viols, tc.want)
		}
	}
}

func TestBigInt(t *testing.T) {
	max256 := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 256), big.NewInt(1)).String()
	tests := []struct {
		lit  string
		want []Violation
	}{
		{"0", nil},
		{"-0", nil},
		{"-12", nil},
		{max256, nil},
		{"-" + strings.Repeat("9", 78), nil},
		{strings.Repeat("9", 79), []Violation{v("/big", bigIntRange)}},
		{"-1" + strings.Repeat("0", 1<<18), []Violation{v("/big", bigIntRange)}},
		{"1.0", []Violation{v("/big", "expected integer, got number with fraction or exponent")}},
		{"1e3", []Violation{v("/big", "expected integer, got number with fraction or exponent")}},
		{`"12"`, []Violation{v("/big", "expected integer, got string")}},
	}
	for _, tc := range tests {
		got, viols := decode[numbers](t, `{"big":`+tc.lit+`,"bigs":[`+tc.lit+`]}`, Limits{})
		if tc.want != nil {
			want := append(tc.want, v("/bigs/0", tc.want[0].Problem))
			if !reflect.DeepEqual(viols, want) {
				t.Errorf("%.40s: got %v, want %v", tc.lit, viols, want)
			}
			continue
		}
		want, _ := new(big.Int).SetString(tc.lit, 10)
		if viols != nil || got.Big.Cmp(want) != 0 || got.Bigs[0].Cmp(want) != 0 {
			t.Errorf("%s: got %v %v %v", tc.lit, got.Big, got.Bigs, viols)
		}
	}
}

// maxGrowth bounds how many times larger than a document its canonical
// form may be: the worst is a decimal written 1e37, 5 bytes with its comma,
// rendered as 38 digits in quotes and a comma.
const maxGrowth = 9

// TestHostileNumbers checks what the documents the benchmarks use give:
// refused at the first offending number with the bound's problem, or
// accepted with canonical arguments at most maxGrowth times the document.
func TestHostileNumbers(t *testing.T) {
	d := mustFor[numbers](t)
	// Small documents keep the test quick; the benchmarks use 1 MiB.
	for _, tc := range hostileDocs(64 << 10) {
		t.Run(tc.name, func(t *testing.T) {
			var n numbers
			viols := d.Decode([]byte(tc.doc), &n, Limits{})
			if !reflect.DeepEqual(viols, tc.want) {
				t.Fatalf("got %v\nwant %v", viols, tc.want)
			}
			if viols != nil {
				return
			}
			canon, err := canonjson.Marshal(&n)
			if err != nil {
				t.Fatal(err)
			}
			if len(canon) > maxGrowth*len(tc.doc) {
				t.Errorf("canonical arguments of %d bytes for a document of %d", len(canon), len(tc.doc))
			}
		})
	}
}

type tree struct {
	V    decimal.Decimal `json:"v"`
	Kids []tree          `json:"kids,omitempty"`
}

// fill returns prefix, then item repeated (separated by commas) for as long
// as the document stays within n bytes, then suffix.
func fill(prefix, item, suffix string, n int) string {
	var sb strings.Builder
	sb.WriteString(prefix)
	for k := 0; sb.Len()+len(item)+1+len(suffix) <= n; k++ {
		if k > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(item)
	}
	sb.WriteString(suffix)
	return sb.String()
}

// nested returns depth arrays one inside the other around inner.
func nested(depth int, inner string) string {
	return strings.Repeat("[", depth) + inner + strings.Repeat("]", depth)
}

// nestedTree returns a tree depth objects deep.
func nestedTree(depth int) string {
	return strings.Repeat(`{"v":1.5,"kids":[`, depth-1) + `{"v":-2.25}` + strings.Repeat(`]}`, depth-1)
}

// hostileDocs are documents of about size bytes made of numbers a model
// could write to cost the validator time or memory.
func hostileDocs(size int) []struct {
	name string
	doc  string
	want []Violation // nil: accepted
} {
	digits := func(prefix, suffix string) string {
		return prefix + strings.Repeat("7", size-len(prefix)-len(suffix)) + suffix
	}
	return []struct {
		name string
		doc  string
		want []Violation
	}{
		{"long-digits/decimal", digits(`{"decimals":[`, `]}`), []Violation{v("/decimals/0", decimalRange)}},
		{"long-digits/int", digits(`{"ints":[`, `]}`), []Violation{v("/ints/0", "integer out of range for int64")}},
		{"long-digits/float", digits(`{"floats":[`, `]}`), []Violation{v("/floats/0", "number out of range for float64")}},
		{"long-digits/raw", digits(`{"raw":[`, `]}`), nil},
		{"long-fraction/decimal", digits(`{"decimals":[0.`, `]}`), []Violation{v("/decimals/0", decimalRange)}},
		{"long-exponent/decimal", digits(`{"decimals":[1e`, `]}`), []Violation{v("/decimals/0", decimalRange)}},
		{"long-exponent/raw", digits(`{"raw":[1e-`, `]}`), nil},
		{"huge-exponents/decimal", fill(`{"decimals":[`, `1e999999999`, `]}`, size), manyViolations("/decimals/", decimalRange)},
		{"exponent-10000/decimal", fill(`{"decimals":[`, `1e10000`, `]}`, size), manyViolations("/decimals/", decimalRange)},
		{"huge-exponents/raw", fill(`{"raw":[`, `1e999999999`, `]}`, size), nil},
		{"longest-rendering/decimal", fill(`{"decimals":[`, `1e37`, `]}`, size), nil},
		{"many-small/decimal", fill(`{"decimals":[`, `412.50,-0.01,3e2`, `]}`, size), nil},
		{"many-small/int", fill(`{"ints":[`, `412,-1,90071992547409930`, `]}`, size), nil},
		{"many-small/float", fill(`{"floats":[`, `412.5,-0.01,3e2`, `]}`, size), nil},
		{"many-small/raw", fill(`{"raw":[`, `412.50,-0.01,3e2,1e21`, `]}`, size), nil},
		{"deep/raw", fill(`{"raw":[`, nested(DefaultMaxDepth-2, `1.5e300,-7,0.001`), `]}`, size), nil},
		{"deep/tree", fill(`{"tree":{"v":0,"kids":[`, nestedTree(DefaultMaxDepth/2-1), `]}}`, size), nil},
	}
}

// manyViolations is what a document of refused numbers gives: one
// violation per number until the scan stops at MaxViolations.
func manyViolations(prefix, problem string) []Violation {
	vs := make([]Violation, MaxViolations)
	for i := range vs {
		vs[i] = v(prefix+strconv.Itoa(i), problem)
	}
	return vs
}

// BenchmarkHostileNumbers decodes 1 MiB (DefaultMaxBytes) of hostile
// numbers and, when they are accepted, renders the canonical JSON digests
// use, as a contract does. allocB/input-B is bytes allocated per input
// byte; ns/input-B is the time per input byte: both must stay flat however
// the numbers are written.
func BenchmarkHostileNumbers(b *testing.B) {
	d, err := For(reflect.TypeFor[numbers]())
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range hostileDocs(DefaultMaxBytes) {
		b.Run(tc.name, func(b *testing.B) {
			doc := []byte(tc.doc)
			perInputByte(b, len(doc), func() {
				var n numbers
				if viols := d.Decode(doc, &n, Limits{}); viols == nil {
					if _, err := canonjson.Marshal(&n); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

// perInputByte runs f in a benchmark loop and reports its cost per input byte.
func perInputByte(b *testing.B, n int, f func()) {
	b.ReportAllocs()
	b.SetBytes(int64(n))
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	before := ms.TotalAlloc
	for b.Loop() {
		f()
	}
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.TotalAlloc-before)/float64(b.N)/float64(n), "allocB/input-B")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/input-B")
}
