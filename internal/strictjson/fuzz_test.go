package strictjson

import (
	"encoding/json"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/planexec/planexec/internal/canonjson"
)

// problemRE lists every problem text the package may produce; anything
// else would suggest document content leaking into a message.
var problemRE = regexp.MustCompile(`^(unknown key|missing required key|duplicate key|` +
	`key differs only in case from "[A-Za-z0-9/~]+"|` +
	`expected (object|array|string|number|integer|boolean), got (object|array|string|number|boolean)|` +
	`expected integer, got number with fraction or exponent|null is not allowed|` +
	`(integer|number) out of range for [a-z0-9]+|not valid JSON|nesting deeper than [0-9]+|` +
	`number out of range for decimal: more than 38 digits when written out in full|` +
	`integer out of range for big\.Int: more than 78 digits|` +
	`larger than [0-9]+ bytes|invalid UTF-8|invalid value|invalid RFC 3339 date-time|invalid key|invalid base64|expected exactly [0-9]+ items)$`)

func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		goodBooking,
		`{"id":"t","passengers":[{"name":"A","age":30},{"name":"B"}],"tags":{"k":"v"},"note":null,
			"when":"2024-05-01T10:00:00Z","extra":{"any":[1,"x",null]},"pair":[1,2],"blob":"aGk=","ratio":0.5,
			"small":-3,"u":65535,"ok":true,"a/b~c":"s","level":"high","temp":21.5,"big":1e300,"price":0.10,
			"stops":{"x":[1,2]}}`,
		`{"id":"t","passengers":[],"extra":null,"temp":null}`,
		`{"ID":"t","Passengers":[],"id":"u","passengers":[{"NAME":1}]}`,
		`{"id":"t","passengers":[],"price":12345678901234567890.123,"small":128,"u":-0}`,
		`{"id":"\ud800","passengers":[],"x/~y":{"a":[[[[]]]]}}`,
		"{\"id\":\"\xff\",\"passengers\":[]}",
		`{"name":"a","kids":[{"name":"b","next":{"name":"c"}}]}`,
		`[1,2`, `{"a":`, `nul`, ``, `"x"`, `{"id":"t","passengers":[],"pair":[1,2,3]}`,
		`{"id":"t","passengers":[],"when":"2024-05-01T10:00:00\u005a"}`,
		`{"decimals":[412.50,1e37,1e38,1e-38,0e38,0.0001e4,99999999999999999999999999999999999999],"ints":[-0]}`,
		`{"decimals":[1e10000,1e-99999999999999999999,1.00000000000000000000000000000000000000]}`,
		`{"null":1.5e-3,"big":-115792089237316195423570985008687907853269984665640564039457584007913129639935,"bigs":[0,-0]}`,
		`{"null":"1","big":1e3,"bigs":[1.0,1234567890123456789012345678901234567890123456789012345678901234567890123456789]}`,
		`{"raw":[1e999999999,-0.0e-0,10e9999999999999999999],"tree":{"v":1,"kids":[{"v":2.50}]}}`,
	} {
		f.Add([]byte(s))
	}
	tripDec, err := For(reflect.TypeFor[Trip]())
	if err != nil {
		f.Fatal(err)
	}
	nodeDec, err := For(reflect.TypeFor[Node]())
	if err != nil {
		f.Fatal(err)
	}
	bookDec, err := For(reflect.TypeFor[Booking]())
	if err != nil {
		f.Fatal(err)
	}
	numDec, err := For(reflect.TypeFor[numbers]())
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		var trip Trip
		check(t, doc, tripDec.Decode(doc, &trip, Limits{}), &trip, new(Trip))
		var node Node
		check(t, doc, nodeDec.Decode(doc, &node, Limits{MaxDepth: 6}), &node, new(Node))
		var book Booking
		check(t, doc, bookDec.Decode(doc, &book, Limits{}), &book, new(Booking))
		var num numbers
		check(t, doc, numDec.Decode(doc, &num, Limits{}), &num, new(numbers))
		if len(num.Decimals) > 0 || num.Raw != nil {
			// Accepted numbers render within a small multiple of the
			// document: at worst 1e37 (5 bytes with its comma) becomes 38
			// digits in quotes.
			if canon, err := canonjson.Marshal(&num); err != nil || len(canon) > maxGrowth*len(doc)+64 {
				t.Fatalf("canonical form of %q: %d bytes, %v", doc, len(canon), err)
			}
		}
	})
}

// check verifies the properties every Decode result must have. got holds
// what Decode produced, ref is a fresh value for encoding/json.
func check(t *testing.T, doc []byte, viols []Violation, got, ref any) {
	t.Helper()
	if len(viols) > MaxViolations {
		t.Fatalf("%d violations", len(viols))
	}
	syntaxOK := json.Valid(doc)
	for _, v := range viols {
		if !problemRE.MatchString(v.Problem) {
			t.Fatalf("unexpected problem text %q", v.Problem)
		}
		if v.Path != "" && !strings.HasPrefix(v.Path, "/") || !utf8.ValidString(v.Path) {
			t.Fatalf("bad path %q", v.Path)
		}
		for _, r := range v.Path {
			if r < 0x20 || r == 0x7f {
				t.Fatalf("control character in path %q", v.Path)
			}
		}
		if syntaxOK && v.Problem == "not valid JSON" {
			t.Fatalf("valid JSON reported invalid at %q: %q", v.Path, doc)
		}
	}
	if !syntaxOK {
		if len(viols) == 0 {
			t.Fatalf("invalid JSON accepted: %q", doc)
		}
		if len(viols) < MaxViolations && viols[len(viols)-1].Problem != "not valid JSON" {
			t.Fatalf("invalid JSON without a syntax violation: %q: %v", doc, viols)
		}
	}
	if len(viols) > 0 {
		if !reflect.ValueOf(got).Elem().IsZero() {
			t.Fatalf("dst written despite violations")
		}
		return
	}
	// Accepted: encoding/json must accept it too, with the same result.
	if err := json.Unmarshal(doc, ref); err != nil {
		t.Fatalf("accepted, but encoding/json refuses: %v: %q", err, doc)
	}
	a, err1 := json.Marshal(got)
	b, err2 := json.Marshal(ref)
	if err1 != nil || err2 != nil {
		t.Fatalf("marshal: %v %v", err1, err2)
	}
	if string(a) != string(b) {
		t.Fatalf("decoded differently from encoding/json for %q:\n%s\n%s", doc, a, b)
	}
}
