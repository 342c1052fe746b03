package jsonscan

import (
	"bytes"
	"encoding/json"
	"testing"
)

func TestScanString(t *testing.T) {
	tests := []struct {
		in    string
		end   int
		flags StringFlags
		text  string
	}{
		{`"abc"`, 5, 0, "abc"},
		{`""x`, 2, 0, ""},
		{`"a\"b"`, 6, Escaped, `a"b`},
		{`"\\\/\b\f\n\r\t"`, 16, Escaped, "\\/\b\f\n\r\t"},
		{`"\u0041\u00e9"`, 14, Escaped, "Aé"},
		{`"\ud83d\ude00"`, 14, Escaped, "😀"},
		{`"\ud83d"`, 8, Escaped | BadUTF8, "\uFFFD"},
		{`"\ude00"`, 8, Escaped | BadUTF8, "\uFFFD"},
		{`"\ud83d\u0041"`, 14, Escaped | BadUTF8, "\uFFFDA"},
		{"\"é😀\"", 8, 0, "é😀"},
		{"\"\xff\"", 3, BadUTF8, "\xff"},
		{"\"\xed\xa0\x80\"", 5, BadUTF8, "\xed\xa0\x80"},
		{`"abc`, -1, 0, ""},
		{`"\x"`, -1, Escaped, ""},
		{`"\u12g4"`, -1, Escaped, ""},
		{`"\u12"`, -1, Escaped, ""},
		{`"\`, -1, Escaped, ""},
		{"\"a\nb\"", -1, 0, ""},
		{`x`, -1, 0, ""},
	}
	for _, tc := range tests {
		end, flags := ScanString([]byte(tc.in), 0)
		if end != tc.end || (end >= 0 && flags != tc.flags) {
			t.Errorf("%q: got (%d, %b), want (%d, %b)", tc.in, end, flags, tc.end, tc.flags)
			continue
		}
		if end < 0 {
			continue
		}
		if got := AppendUnquoted(nil, []byte(tc.in[:end])); string(got) != tc.text {
			t.Errorf("%q: unquoted %q, want %q", tc.in, got, tc.text)
		}
	}
}

func TestScanNumber(t *testing.T) {
	tests := []struct {
		in      string
		end     int
		integer bool
	}{
		{`0`, 1, true}, {`-0`, 2, true}, {`123,`, 3, true}, {`01`, 1, true},
		{`1.5`, 3, false}, {`1e5`, 3, false}, {`1E+5`, 4, false}, {`-1.5e-05]`, 8, false},
		{`-`, -1, false}, {`1.`, -1, false}, {`1.e5`, -1, false}, {`1e`, -1, false},
		{`1e+`, -1, false}, {`.5`, -1, false}, {`+1`, -1, false}, {`-x`, -1, false},
	}
	for _, tc := range tests {
		end, integer := ScanNumber([]byte(tc.in), 0)
		if end != tc.end || (end >= 0 && integer != tc.integer) {
			t.Errorf("%q: got (%d, %v), want (%d, %v)", tc.in, end, integer, tc.end, tc.integer)
		}
	}
}

func TestSplitNumber(t *testing.T) {
	tests := []struct {
		in            string
		neg           bool
		intPart, frac string
		expNeg        bool
		exp           string
	}{
		{`0`, false, "0", "", false, ""},
		{`-0`, true, "0", "", false, ""},
		{`412.50`, false, "412", "50", false, ""},
		{`-1.5e-05`, true, "1", "5", true, "5"},
		{`1E+10`, false, "1", "", false, "10"},
		{`7e000`, false, "7", "", false, ""},
		{`0.000e-0`, false, "0", "000", true, ""},
		{`12e0010`, false, "12", "", false, "10"},
	}
	for _, tc := range tests {
		lit := []byte(tc.in)
		if end, _ := ScanNumber(lit, 0); end != len(lit) {
			t.Fatalf("%q: not a whole literal", tc.in)
		}
		n := SplitNumber(lit)
		if n.Neg != tc.neg || string(n.Int) != tc.intPart || string(n.Frac) != tc.frac || n.ExpNeg != tc.expNeg || string(n.Exp) != tc.exp {
			t.Errorf("%q: got {%v %q %q %v %q}", tc.in, n.Neg, n.Int, n.Frac, n.ExpNeg, n.Exp)
		}
	}
}

func TestScanLiteralAndKind(t *testing.T) {
	for in, want := range map[string]int{"true": 4, "false,": 5, "null": 4, "nul": -1, "tru": -1, "x": -1, "": -1, "nulL": -1} {
		if got := ScanLiteral([]byte(in), 0); got != want {
			t.Errorf("%q: got %d, want %d", in, got, want)
		}
	}
	kinds := map[byte]Kind{'{': Object, '[': Array, '"': String, 't': Bool, 'f': Bool, 'n': Null, '-': Number, '7': Number, 'x': Invalid}
	for c, want := range kinds {
		if got := KindOf(c); got != want {
			t.Errorf("%q: got %v, want %v", c, got, want)
		}
	}
	if Object.String() != "object" || Bool.String() != "boolean" || Kind(99).String() != "invalid" {
		t.Error("kind names")
	}
}

func TestSkipValue(t *testing.T) {
	for _, in := range []string{
		`1`, `"x"`, `true`, `[]`, `{}`, `[1,[2,[3]],{"a":{"b":[]}}]`, `{ "a" : [ 1 , 2 ] , "b" : { } }`,
	} {
		if end, _ := SkipValue([]byte(in+"  "), 0, nil); end != len(in) {
			t.Errorf("%q: end %d, want %d", in, end, len(in))
		}
	}
	for _, in := range []string{
		`[`, `[1,]`, `{"a"}`, `{"a":}`, `{"a":1,}`, `{1:2}`, `[1 2]`, `[}`, `{]`, `"`, `x`, ``,
	} {
		if end, _ := SkipValue([]byte(in), 0, nil); end >= 0 {
			t.Errorf("%q: accepted up to %d", in, end)
		}
	}
	deep := bytes.Repeat([]byte("["), 1<<20)
	deep = append(deep, bytes.Repeat([]byte("]"), 1<<20)...)
	if end, _ := SkipValue(deep, 0, nil); end != len(deep) {
		t.Errorf("deep: end %d", end)
	}
}

func FuzzSkipValue(f *testing.F) {
	for _, s := range []string{`{"a":[1,2,{"b":null}]}`, `[1,]`, `"\u00e9"`, `-0.5e+3`, `{"a" : true }`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		if bytes.Count(doc, []byte("["))+bytes.Count(doc, []byte("{")) > 10000 {
			return // beyond encoding/json's own nesting limit
		}
		i := SkipSpace(doc, 0)
		end, _ := SkipValue(doc, i, nil)
		ok := end >= 0 && SkipSpace(doc, end) == len(doc)
		if ok != json.Valid(doc) {
			t.Fatalf("SkipValue says %v, encoding/json says %v for %q", ok, !ok, doc)
		}
	})
}
