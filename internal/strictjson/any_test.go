package strictjson

import (
	"strings"
	"testing"
)

func TestCheckValueFindsWhatADecoderOfAGoTypeWouldRefuse(t *testing.T) {
	for doc, want := range map[string]string{
		`{"a":1,"b":[true,{"c":null}],"d":"x"}`:           "",
		`{"a":{"b":[1,2]},"c":{"d":3}}`:                   "",
		`[{"a":1},{"a":2}]`:                               "",
		`{"a":1,"a":2}`:                                   "/a: duplicate key",
		`{"a":{"b":1,"b":2},"c":1}`:                       "/a/b: duplicate key",
		`[1,{"x":[0,{"y":1,"y":1}]}]`:                     "/1/x/1/y: duplicate key",
		`{"a":1} {"b":2}`:                                 "(root): more than one value",
		`{"a":1e100000}`:                                  "/a: a number too long or too large",
		`{"a":` + strings.Repeat("9", 120) + `}`:          "/a: a number too long or too large",
		"{\"a\":\"\xff\"}":                                "(root): invalid UTF-8",
		`{"a":`:                                           "not JSON",
		strings.Repeat("[", 40) + strings.Repeat("]", 40): "nested deeper than 32",
	} {
		vs := CheckValue([]byte(doc), Limits{})
		got := ""
		if len(vs) > 0 {
			got = vs[0].String()
		}
		if (want == "") != (got == "") || !strings.Contains(got, want) {
			t.Errorf("CheckValue(%.40q) = %q, want %q", doc, got, want)
		}
	}
}
