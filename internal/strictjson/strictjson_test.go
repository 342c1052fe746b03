package strictjson

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/shopspring/decimal"
)

type Booking struct {
	Flight string          `json:"flight"`
	Seats  int             `json:"seats"`
	Amount decimal.Decimal `json:"amount"`
	Date   string          `json:"date"`
}

type Passenger struct {
	Name string `json:"name"`
	Age  *int   `json:"age,omitempty"`
}

// Level decodes through encoding.TextUnmarshaler.
type Level int

func (l *Level) UnmarshalText(b []byte) error {
	switch string(b) {
	case "low":
		*l = 1
	case "high":
		*l = 2
	default:
		return errors.New("unknown level " + string(b))
	}
	return nil
}

func (l Level) MarshalText() ([]byte, error) {
	switch l {
	case 1:
		return []byte("low"), nil
	case 2:
		return []byte("high"), nil
	}
	return []byte(""), nil
}

// Celsius decodes through json.Unmarshaler and refuses impossible values.
type Celsius struct{ V float64 }

func (c *Celsius) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return err
	}
	if f < -273.15 {
		return fmt.Errorf("below absolute zero: %s", b)
	}
	c.V = f
	return nil
}

func (c Celsius) MarshalJSON() ([]byte, error) {
	return strconv.AppendFloat(nil, c.V, 'g', -1, 64), nil
}

type Trip struct {
	ID         string            `json:"id"`
	Passengers []Passenger       `json:"passengers"`
	Tags       map[string]string `json:"tags,omitempty"`
	Note       *string           `json:"note,omitempty"`
	When       time.Time         `json:"when,omitzero"`
	Extra      json.RawMessage   `json:"extra,omitempty"`
	Pair       [2]int            `json:"pair,omitempty"`
	Blob       []byte            `json:"blob,omitempty"`
	Ratio      float32           `json:"ratio,omitempty"`
	Small      int8              `json:"small,omitempty"`
	U          uint16            `json:"u,omitempty"`
	OK         bool              `json:"ok,omitempty"`
	Slash      string            `json:"a/b~c,omitempty"`
	Level      Level             `json:"level,omitempty"`
	Temp       Celsius           `json:"temp,omitempty"`
	Big        float64           `json:"big,omitempty"`
	Price      *decimal.Decimal  `json:"price,omitempty"`
	Stops      map[string][]int  `json:"stops,omitempty"`
}

type Node struct {
	Name string `json:"name"`
	Kids []Node `json:"kids,omitempty"`
	Next *Node  `json:"next,omitempty"`
}

type Base struct {
	ID      string `json:"id"`
	Created string `json:"created,omitempty"`
}

type Audit struct {
	By string `json:"by"`
}

type Embedding struct {
	Base
	*Audit
	Name string `json:"name"`
}

// Conflict has two promoted fields named "X" at the same depth, which
// encoding/json drops, and a tagged "Y" that wins over an untagged one.
type conflictA struct {
	X int
	Y int
}
type conflictB struct {
	X int
	W int `json:"Y"`
}
type Conflict struct {
	conflictA
	conflictB
}

func mustFor[T any](t *testing.T) *Decoder {
	t.Helper()
	d, err := For(reflect.TypeFor[T]())
	if err != nil {
		t.Fatalf("For(%v): %v", reflect.TypeFor[T](), err)
	}
	return d
}

func decode[T any](t *testing.T, doc string, lim Limits) (T, []Violation) {
	t.Helper()
	var v T
	return v, mustFor[T](t).Decode([]byte(doc), &v, lim)
}

func v(path, problem string) Violation { return Violation{Path: path, Problem: problem} }

const goodBooking = `{"flight":"BA123","seats":2,"amount":412.50,"date":"2024-05-01"}`

func TestBookingViolations(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want []Violation
	}{
		{"valid", goodBooking, nil},
		{"valid with whitespace", " \n{ \"flight\" : \"BA123\" ,\t\"seats\":2,\"amount\":1,\"date\":\"d\" }\r\n", nil},
		{"unknown key", `{"flight":"BA123","seats":2,"amount":1,"date":"d","meal":"veg"}`,
			[]Violation{v("/meal", "unknown key")}},
		{"case mismatch", `{"Flight":"BA123","seats":2,"amount":1,"date":"d"}`,
			[]Violation{v("/Flight", `key differs only in case from "flight"`), v("/flight", "missing required key")}},
		{"duplicate key", `{"flight":"BA123","seats":2,"seats":3,"amount":1,"date":"d"}`,
			[]Violation{v("/seats", "duplicate key")}},
		{"duplicate key by escape", `{"flight":"BA123","seats":2,"se\u0061ts":3,"amount":1,"date":"d"}`,
			[]Violation{v("/seats", "duplicate key")}},
		{"duplicate unknown key", `{"flight":"BA123","seats":2,"amount":1,"date":"d","x":1,"x":2}`,
			[]Violation{v("/x", "unknown key"), v("/x", "duplicate key")}},
		{"missing required", `{"flight":"BA123","amount":1}`,
			[]Violation{v("/seats", "missing required key"), v("/date", "missing required key")}},
		{"null for required", `{"flight":null,"seats":2,"amount":1,"date":"d"}`,
			[]Violation{v("/flight", "null is not allowed")}},
		{"integer as string", `{"flight":"BA123","seats":"2","amount":1,"date":"d"}`,
			[]Violation{v("/seats", "expected integer, got string")}},
		{"string as number", `{"flight":7,"seats":2,"amount":1,"date":"d"}`,
			[]Violation{v("/flight", "expected string, got number")}},
		{"fraction for int", `{"flight":"BA123","seats":2.5,"amount":1,"date":"d"}`,
			[]Violation{v("/seats", "expected integer, got number with fraction or exponent")}},
		{"exponent for int", `{"flight":"BA123","seats":2e0,"amount":1,"date":"d"}`,
			[]Violation{v("/seats", "expected integer, got number with fraction or exponent")}},
		{"int overflow", `{"flight":"BA123","seats":9223372036854775808,"amount":1,"date":"d"}`,
			[]Violation{v("/seats", "integer out of range for int")}},
		{"int huge", `{"flight":"BA123","seats":-99999999999999999999999,"amount":1,"date":"d"}`,
			[]Violation{v("/seats", "integer out of range for int")}},
		{"decimal as string", `{"flight":"BA123","seats":2,"amount":"412.50","date":"d"}`,
			[]Violation{v("/amount", "expected number, got string")}},
		{"decimal exponent beyond decimal's bound", `{"flight":"BA123","seats":2,"amount":1e999999999,"date":"d"}`,
			[]Violation{v("/amount", decimalRange)}},
		{"decimal tiny exponent beyond bound", `{"flight":"BA123","seats":2,"amount":1e-10001,"date":"d"}`,
			[]Violation{v("/amount", decimalRange)}},
		{"object for string", `{"flight":{"a":[1,2]},"seats":2,"amount":1,"date":"d"}`,
			[]Violation{v("/flight", "expected string, got object")}},
		{"array at root", `[1,2]`, []Violation{v("", "expected object, got array")}},
		{"bool for int", `{"flight":"BA123","seats":true,"amount":1,"date":"d"}`,
			[]Violation{v("/seats", "expected integer, got boolean")}},
		{"several in document order", `{"seats":"x","zz":1,"flight":1}`,
			[]Violation{v("/seats", "expected integer, got string"), v("/zz", "unknown key"),
				v("/flight", "expected string, got number"), v("/amount", "missing required key"), v("/date", "missing required key")}},
		{"invalid UTF-8 in value", "{\"flight\":\"B\xffA\",\"seats\":2,\"amount\":1,\"date\":\"d\"}",
			[]Violation{v("/flight", "invalid UTF-8")}},
		{"lone surrogate escape", `{"flight":"\ud800","seats":2,"amount":1,"date":"d"}`,
			[]Violation{v("/flight", "invalid UTF-8")}},
		{"surrogate pair ok", `{"flight":"\ud83d\ude00","seats":2,"amount":1,"date":"d"}`, nil},
		{"invalid UTF-8 in key", "{\"fl\xffight\":\"x\",\"seats\":2,\"amount\":1,\"date\":\"d\"}",
			[]Violation{v("/fl\uFFFDight", "invalid UTF-8"), v("/flight", "missing required key")}},
		{"empty document", ``, []Violation{v("", "not valid JSON")}},
		{"whitespace only", "  \n", []Violation{v("", "not valid JSON")}},
		{"truncated", `{"flight":"BA123","seats":2`, []Violation{v("", "not valid JSON")}},
		{"broken inside member", `{"flight":"BA123","seats":2x,"amount":1,"date":"d"}`,
			[]Violation{v("", "not valid JSON")}},
		{"bad literal", `{"flight":"BA123","seats":nul}`, []Violation{v("/seats", "not valid JSON")}},
		{"leading zero", `{"flight":"BA123","seats":02,"amount":1,"date":"d"}`, []Violation{v("", "not valid JSON")}},
		{"trailing comma", `{"flight":"BA123","seats":2,"amount":1,"date":"d",}`, []Violation{v("", "not valid JSON")}},
		{"trailing data", goodBooking + ` {}`, []Violation{v("", "not valid JSON")}},
		{"violation then syntax error stops", `{"x":1,"flight":[1,}`,
			[]Violation{v("/x", "unknown key"), v("/flight", "expected string, got array"), v("/flight/1", "not valid JSON")}},
		{"raw control char", "{\"flight\":\"a\x01\",\"seats\":2,\"amount\":1,\"date\":\"d\"}", []Violation{v("/flight", "not valid JSON")}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, got := decode[Booking](t, tc.doc, Limits{})
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %v\nwant %v", got, tc.want)
			}
		})
	}
}

func TestBookingDecodes(t *testing.T) {
	b, viols := decode[Booking](t, goodBooking, Limits{})
	if viols != nil {
		t.Fatal(viols)
	}
	if b.Flight != "BA123" || b.Seats != 2 || b.Date != "2024-05-01" {
		t.Errorf("decoded %+v", b)
	}
	if b.Amount.String() != "412.5" || b.Amount.Exponent() != -2 || b.Amount.Coefficient().Int64() != 41250 {
		t.Errorf("amount %s exp %d coef %s, want 412.50 exactly", b.Amount, b.Amount.Exponent(), b.Amount.Coefficient())
	}
}

func TestDecimalExact(t *testing.T) {
	type D struct {
		A decimal.Decimal `json:"a"`
	}
	for _, lit := range []string{
		"412.50", "412.5", "0", "-0", "0.00", "-0.0", "1e2", "1E+2", "1.5e-3", "-12.345e1",
		"12345678901234567890.123", "999999999999999999999999999999.00000001",
		"123456789012345678", "1234567890123456789", "0.000000000000000000001",
		"-9223372036854775808", "9223372036854775807", "1e37", "1e-38",
	} {
		got, viols := decode[D](t, `{"a":`+lit+`}`, Limits{})
		if viols != nil {
			t.Errorf("%s: %v", lit, viols)
			continue
		}
		want, err := decimal.NewFromString(lit)
		if err != nil {
			t.Fatal(err)
		}
		if !got.A.Equal(want) || got.A.Exponent() != want.Exponent() || got.A.String() != want.String() {
			t.Errorf("%s: got %s (exp %d), want %s (exp %d)", lit, got.A, got.A.Exponent(), want, want.Exponent())
		}
	}
	got, _ := decode[D](t, `{"a":12345678901234567890.123}`, Limits{})
	if got.A.String() != "12345678901234567890.123" {
		t.Errorf("got %s", got.A)
	}
}

func TestIntegerRanges(t *testing.T) {
	type Ints struct {
		I8  int8    `json:"i8,omitempty"`
		I16 int16   `json:"i16,omitempty"`
		I32 int32   `json:"i32,omitempty"`
		I64 int64   `json:"i64,omitempty"`
		U8  uint8   `json:"u8,omitempty"`
		U64 uint64  `json:"u64,omitempty"`
		F32 float32 `json:"f32,omitempty"`
		F64 float64 `json:"f64,omitempty"`
	}
	tests := []struct {
		doc  string
		want []Violation
	}{
		{`{"i8":127}`, nil},
		{`{"i8":-128}`, nil},
		{`{"i8":128}`, []Violation{v("/i8", "integer out of range for int8")}},
		{`{"i8":-129}`, []Violation{v("/i8", "integer out of range for int8")}},
		{`{"i16":32768}`, []Violation{v("/i16", "integer out of range for int16")}},
		{`{"i32":-2147483649}`, []Violation{v("/i32", "integer out of range for int32")}},
		{`{"i64":-9223372036854775808}`, nil},
		{`{"i64":9223372036854775807}`, nil},
		{`{"i64":9223372036854775808}`, []Violation{v("/i64", "integer out of range for int64")}},
		{`{"u8":255}`, nil},
		{`{"u8":256}`, []Violation{v("/u8", "integer out of range for uint8")}},
		{`{"u8":-1}`, []Violation{v("/u8", "integer out of range for uint8")}},
		{`{"u8":-0}`, []Violation{v("/u8", "integer out of range for uint8")}},
		{`{"u64":18446744073709551615}`, nil},
		{`{"u64":18446744073709551616}`, []Violation{v("/u64", "integer out of range for uint64")}},
		{`{"f32":3.4e38}`, nil},
		{`{"f32":3.5e38}`, []Violation{v("/f32", "number out of range for float32")}},
		{`{"f64":1e308}`, nil},
		{`{"f64":1e309}`, []Violation{v("/f64", "number out of range for float64")}},
		{`{"f64":-1e-400}`, nil},
		{`{"f64":"1"}`, []Violation{v("/f64", "expected number, got string")}},
	}
	for _, tc := range tests {
		got, viols := decode[Ints](t, tc.doc, Limits{})
		if !reflect.DeepEqual(viols, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.doc, viols, tc.want)
			continue
		}
		if viols == nil {
			var ref Ints
			if err := json.Unmarshal([]byte(tc.doc), &ref); err != nil || ref != got {
				t.Errorf("%s: decoded %+v, encoding/json %+v (%v)", tc.doc, got, ref, err)
			}
		}
	}
}

func TestTrip(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want []Violation
	}{
		{"minimal", `{"id":"t","passengers":[]}`, nil},
		{"optional null", `{"id":"t","passengers":[],"tags":null,"note":null,"when":null,"pair":null,"blob":null,"temp":null,"price":null}`, nil},
		{"full", `{"id":"t","passengers":[{"name":"A","age":30},{"name":"B"}],"tags":{"k":"v","":"e"},"note":"n",
			"when":"2024-05-01T10:00:00Z","extra":{"any":[1,"x",null]},"pair":[1,2],"blob":"aGk=","ratio":0.5,
			"small":-3,"u":65535,"ok":true,"a/b~c":"s","level":"high","temp":21.5,"big":1e300,"price":0.10,
			"stops":{"x":[1,2]}}`, nil},
		{"nested path", `{"id":"t","passengers":[{"name":"A"},{"name":5}]}`,
			[]Violation{v("/passengers/1/name", "expected string, got number")}},
		{"nested missing", `{"id":"t","passengers":[{"name":"A"},{"age":3}]}`,
			[]Violation{v("/passengers/1/name", "missing required key")}},
		{"nested unknown and case", `{"id":"t","passengers":[{"name":"A","NAME":"B","x":1}]}`,
			[]Violation{v("/passengers/0/NAME", `key differs only in case from "name"`), v("/passengers/0/x", "unknown key")}},
		{"null in array", `{"id":"t","passengers":[null]}`, []Violation{v("/passengers/0", "null is not allowed")}},
		{"null for optional pointer inside", `{"id":"t","passengers":[{"name":"A","age":null}]}`, nil},
		{"array for object", `{"id":"t","passengers":{}}`, []Violation{v("/passengers", "expected array, got object")}},
		{"map value type", `{"id":"t","passengers":[],"tags":{"a":"x","b":2}}`,
			[]Violation{v("/tags/b", "expected string, got number")}},
		{"map duplicate", `{"id":"t","passengers":[],"tags":{"a":"x","a":"y"}}`,
			[]Violation{v("/tags/a", "duplicate key")}},
		{"map null value", `{"id":"t","passengers":[],"tags":{"a":null}}`,
			[]Violation{v("/tags/a", "null is not allowed")}},
		{"map nested", `{"id":"t","passengers":[],"stops":{"x":[1,"2"]}}`,
			[]Violation{v("/stops/x/1", "expected integer, got string")}},
		{"bad time", `{"id":"t","passengers":[],"when":"yesterday"}`, []Violation{v("/when", "invalid RFC 3339 date-time")}},
		{"time as number", `{"id":"t","passengers":[],"when":1700000000}`, []Violation{v("/when", "expected string, got number")}},
		{"array too short", `{"id":"t","passengers":[],"pair":[1]}`, []Violation{v("/pair", "expected exactly 2 items")}},
		{"array too long", `{"id":"t","passengers":[],"pair":[1,2,3,"x"]}`, []Violation{v("/pair", "expected exactly 2 items")}},
		{"array element", `{"id":"t","passengers":[],"pair":[1,1.5]}`,
			[]Violation{v("/pair/1", "expected integer, got number with fraction or exponent")}},
		{"bad base64", `{"id":"t","passengers":[],"blob":"***"}`, []Violation{v("/blob", "invalid base64")}},
		{"bytes as array", `{"id":"t","passengers":[],"blob":[1,2]}`, []Violation{v("/blob", "expected string, got array")}},
		{"float32 range", `{"id":"t","passengers":[],"ratio":1e39}`, []Violation{v("/ratio", "number out of range for float32")}},
		{"text unmarshaler refuses", `{"id":"t","passengers":[],"level":"medium"}`, []Violation{v("/level", "invalid value")}},
		{"text unmarshaler needs string", `{"id":"t","passengers":[],"level":1}`, []Violation{v("/level", "expected string, got number")}},
		{"json unmarshaler refuses", `{"id":"t","passengers":[],"temp":-300}`, []Violation{v("/temp", "invalid value")}},
		{"raw any value", `{"id":"t","passengers":[],"extra":[{"a":{"b":null}},true]}`, nil},
		{"raw invalid UTF-8", "{\"id\":\"t\",\"passengers\":[],\"extra\":{\"a\":[\"\xc3\"]}}",
			[]Violation{v("/extra/a/0", "invalid UTF-8")}},
		{"raw broken", `{"id":"t","passengers":[],"extra":{"a":[1,]}}`, []Violation{v("/extra/a/1", "not valid JSON")}},
		{"bool", `{"id":"t","passengers":[],"ok":"true"}`, []Violation{v("/ok", "expected boolean, got string")}},
		{"rfc6901 key", `{"id":"t","passengers":[],"a/b~c":1}`, []Violation{v("/a~1b~0c", "expected string, got number")}},
		{"rfc6901 unknown", `{"id":"t","passengers":[],"x/~y":1}`, []Violation{v("/x~1~0y", "unknown key")}},
		{"control char in key", `{"id":"t","passengers":[],"a\nb":1}`, []Violation{v("/a\uFFFDb", "unknown key")}},
		{"long key", `{"id":"t","passengers":[],"` + strings.Repeat("k", 100) + `":1}`,
			[]Violation{v("/"+strings.Repeat("k", 64)+"…", "unknown key")}},
		{"long key cut at rune", `{"id":"t","passengers":[],"` + strings.Repeat("k", 63) + "é" + `":1}`,
			[]Violation{v("/"+strings.Repeat("k", 63)+"…", "unknown key")}},
		{"uint range", `{"id":"t","passengers":[],"u":65536}`, []Violation{v("/u", "integer out of range for uint16")}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, viols := decode[Trip](t, tc.doc, Limits{})
			if !reflect.DeepEqual(viols, tc.want) {
				t.Fatalf("got  %v\nwant %v", viols, tc.want)
			}
			if viols != nil {
				return
			}
			// Whatever passes must also decode the same with encoding/json.
			var ref Trip
			if err := json.Unmarshal([]byte(tc.doc), &ref); err != nil {
				t.Fatalf("encoding/json refuses: %v", err)
			}
			a, _ := json.Marshal(got)
			b, _ := json.Marshal(ref)
			if string(a) != string(b) {
				t.Errorf("decoded\n%s\nencoding/json\n%s", a, b)
			}
		})
	}
}

func TestTripValues(t *testing.T) {
	doc := `{"id":"t","passengers":[{"name":"A","age":30}],"tags":{},"when":"2024-05-01T10:00:00+02:00",
		"extra": {"k" : 1},"pair":[7,8],"blob":"aGk=","level":"low","temp":-5,"price":0.10}`
	got, viols := decode[Trip](t, doc, Limits{})
	if viols != nil {
		t.Fatal(viols)
	}
	if len(got.Passengers) != 1 || got.Passengers[0].Age == nil || *got.Passengers[0].Age != 30 {
		t.Errorf("passengers %+v", got.Passengers)
	}
	if got.Tags == nil || len(got.Tags) != 0 {
		t.Errorf("tags %#v, want empty non-nil map", got.Tags)
	}
	if got.When.Unix() != 1714550400 {
		t.Errorf("when %v", got.When)
	}
	if string(got.Extra) != `{"k" : 1}` {
		t.Errorf("extra %q", got.Extra)
	}
	if got.Pair != [2]int{7, 8} || string(got.Blob) != "hi" || got.Level != 1 || got.Temp.V != -5 {
		t.Errorf("decoded %+v", got)
	}
	if got.Price == nil || got.Price.String() != "0.1" || got.Price.Exponent() != -2 {
		t.Errorf("price %v", got.Price)
	}
	empty, viols := decode[Trip](t, `{"id":"t","passengers":[]}`, Limits{})
	if viols != nil || empty.Passengers == nil || len(empty.Passengers) != 0 {
		t.Errorf("passengers %#v (%v), want empty non-nil slice", empty.Passengers, viols)
	}
}

func TestOptionalRawNull(t *testing.T) {
	got, viols := decode[Trip](t, `{"id":"t","passengers":[],"extra":null}`, Limits{})
	if viols != nil || string(got.Extra) != "null" {
		t.Errorf("extra %q (%v), want \"null\" as encoding/json gives", got.Extra, viols)
	}
	got, _ = decode[Trip](t, `{"id":"t","passengers":[]}`, Limits{})
	if got.Extra != nil {
		t.Errorf("extra %q, want nil when absent", got.Extra)
	}
}

func TestRequiredRawAndPointer(t *testing.T) {
	type R struct {
		Raw json.RawMessage `json:"raw"`
		P   *int            `json:"p"`
	}
	_, viols := decode[R](t, `{"raw":null,"p":null}`, Limits{})
	want := []Violation{v("/raw", "null is not allowed"), v("/p", "null is not allowed")}
	if !reflect.DeepEqual(viols, want) {
		t.Errorf("got %v, want %v", viols, want)
	}
	_, viols = decode[R](t, `{}`, Limits{})
	want = []Violation{v("/raw", "missing required key"), v("/p", "missing required key")}
	if !reflect.DeepEqual(viols, want) {
		t.Errorf("got %v, want %v", viols, want)
	}
	got, viols := decode[R](t, `{"raw":[null],"p":3}`, Limits{})
	if viols != nil || string(got.Raw) != "[null]" || *got.P != 3 {
		t.Errorf("got %+v %v", got, viols)
	}
}

func TestRecursive(t *testing.T) {
	doc := `{"name":"root","kids":[{"name":"a","kids":[{"name":"a1"}]},{"name":"b","next":{"name":"c","kids":[{"x":1}]}}]}`
	_, viols := decode[Node](t, doc, Limits{})
	want := []Violation{v("/kids/1/next/kids/0/x", "unknown key"), v("/kids/1/next/kids/0/name", "missing required key")}
	if !reflect.DeepEqual(viols, want) {
		t.Errorf("got %v, want %v", viols, want)
	}
	got, viols := decode[Node](t, `{"name":"root","kids":[{"name":"a","kids":[{"name":"a1"}]}],"next":{"name":"n"}}`, Limits{})
	if viols != nil || got.Kids[0].Kids[0].Name != "a1" || got.Next.Name != "n" {
		t.Errorf("got %+v %v", got, viols)
	}
}

func TestEmbedded(t *testing.T) {
	got, viols := decode[Embedding](t, `{"id":"i","by":"me","name":"n"}`, Limits{})
	if viols != nil || got.ID != "i" || got.Audit == nil || got.By != "me" || got.Name != "n" {
		t.Errorf("got %+v %v", got, viols)
	}
	_, viols = decode[Embedding](t, `{"name":"n","Base":{}}`, Limits{})
	want := []Violation{v("/Base", "unknown key"), v("/id", "missing required key"), v("/by", "missing required key")}
	if !reflect.DeepEqual(viols, want) {
		t.Errorf("got %v, want %v", viols, want)
	}

	// "X" is ambiguous and dropped; "Y" goes to the tagged field.
	got2, viols := decode[Conflict](t, `{"Y":5}`, Limits{})
	if viols != nil || got2.W != 5 || got2.Y != 0 {
		t.Errorf("got %+v %v", got2, viols)
	}
	var ref Conflict
	if err := json.Unmarshal([]byte(`{"Y":5}`), &ref); err != nil || ref != got2 {
		t.Errorf("encoding/json gives %+v", ref)
	}
	_, viols = decode[Conflict](t, `{"Y":5,"X":1}`, Limits{})
	if want := []Violation{v("/X", "unknown key")}; !reflect.DeepEqual(viols, want) {
		t.Errorf("got %v, want %v", viols, want)
	}
}

func TestTopLevelKinds(t *testing.T) {
	if got, viols := decode[[]int](t, `[1,2,3]`, Limits{}); viols != nil || len(got) != 3 {
		t.Errorf("got %v %v", got, viols)
	}
	if _, viols := decode[[]int](t, `[1,"2"]`, Limits{}); !reflect.DeepEqual(viols, []Violation{v("/1", "expected integer, got string")}) {
		t.Errorf("got %v", viols)
	}
	if got, viols := decode[map[string]int](t, `{"a":1}`, Limits{}); viols != nil || got["a"] != 1 {
		t.Errorf("got %v %v", got, viols)
	}
	if got, viols := decode[string](t, `"x"`, Limits{}); viols != nil || got != "x" {
		t.Errorf("got %v %v", got, viols)
	}
	if _, viols := decode[int](t, `null`, Limits{}); !reflect.DeepEqual(viols, []Violation{v("", "null is not allowed")}) {
		t.Errorf("got %v", viols)
	}
	if got, viols := decode[*int](t, `5`, Limits{}); viols != nil || *got != 5 {
		t.Errorf("got %v %v", got, viols)
	}
	if got, viols := decode[[]*Passenger](t, `[{"name":"x"}]`, Limits{}); viols != nil || got[0].Name != "x" {
		t.Errorf("got %v %v", got, viols)
	}
	if got, viols := decode[time.Time](t, `"2024-01-02T03:04:05Z"`, Limits{}); viols != nil || got.Year() != 2024 {
		t.Errorf("got %v %v", got, viols)
	}
}

func TestLimits(t *testing.T) {
	deep := strings.Repeat(`{"name":"x","next":`, 40) + `{"name":"x"}` + strings.Repeat(`}`, 40)
	_, viols := decode[Node](t, deep, Limits{})
	want := []Violation{v(strings.Repeat("/next", 32), "nesting deeper than 32")}
	if !reflect.DeepEqual(viols, want) {
		t.Errorf("got %v, want %v", viols, want)
	}
	if _, viols := decode[Node](t, deep, Limits{MaxDepth: 41}); viols != nil {
		t.Errorf("MaxDepth 41: %v", viols)
	}
	_, viols = decode[Node](t, deep, Limits{MaxDepth: 3})
	if want := []Violation{v("/next/next/next", "nesting deeper than 3")}; !reflect.DeepEqual(viols, want) {
		t.Errorf("got %v, want %v", viols, want)
	}

	// Depth applies inside raw values and unknown members too, and the
	// scan goes on after an over-deep value.
	type R struct {
		Raw json.RawMessage `json:"raw"`
		N   int             `json:"n"`
	}
	_, viols = decode[R](t, `{"raw":[[[1]]],"junk":{"a":[[{}]]},"n":"x"}`, Limits{MaxDepth: 3})
	want = []Violation{v("/raw/0/0", "nesting deeper than 3"), v("/junk", "unknown key"),
		v("/junk/a/0", "nesting deeper than 3"), v("/n", "expected integer, got string")}
	if !reflect.DeepEqual(viols, want) {
		t.Errorf("got %v, want %v", viols, want)
	}
	// An over-deep value that is also malformed stops the scan there.
	_, viols = decode[R](t, `{"raw":[[[1,]]],"n":1}`, Limits{MaxDepth: 2})
	want = []Violation{v("/raw/0", "nesting deeper than 2"), v("/raw/0", "not valid JSON")}
	if !reflect.DeepEqual(viols, want) {
		t.Errorf("got %v, want %v", viols, want)
	}

	// Hostile nesting far past the limit must neither recurse nor crash.
	hostile := strings.Repeat("[", 1<<20-2) + strings.Repeat("]", 0)
	_, viols = decode[R](t, `{"raw":`+hostile[:len(hostile)-8], Limits{})
	if len(viols) != 2 || viols[1].Problem != "not valid JSON" {
		t.Errorf("hostile: %v", viols)
	}
	balanced := `{"n":1,"raw":` + strings.Repeat("[", 500000) + strings.Repeat("]", 500000) + `}`
	_, viols = decode[R](t, balanced, Limits{})
	if want := []Violation{v("/raw"+strings.Repeat("/0", 31), "nesting deeper than 32")}; !reflect.DeepEqual(viols, want) {
		t.Errorf("balanced: %v", viols)
	}

	big := `{"name":"` + strings.Repeat("x", 2000) + `"}`
	_, viols = decode[Node](t, big, Limits{MaxBytes: 1000})
	if want := []Violation{v("", "larger than 1000 bytes")}; !reflect.DeepEqual(viols, want) {
		t.Errorf("got %v, want %v", viols, want)
	}
	huge := `{"name":"` + strings.Repeat("x", 1<<20) + `"}`
	_, viols = decode[Node](t, huge, Limits{})
	if want := []Violation{v("", "larger than 1048576 bytes")}; !reflect.DeepEqual(viols, want) {
		t.Errorf("got %v, want %v", viols, want)
	}
}

func TestViolationCap(t *testing.T) {
	var sb strings.Builder
	sb.WriteString(`{"flight":"x","seats":1,"amount":1,"date":"d"`)
	for i := range 50 {
		fmt.Fprintf(&sb, `,"k%d":1`, i)
	}
	sb.WriteString(`,"broken":`) // never reached: the scan stopped at 32
	_, viols := decode[Booking](t, sb.String(), Limits{})
	if len(viols) != MaxViolations {
		t.Fatalf("got %d violations, want %d", len(viols), MaxViolations)
	}
	if viols[31] != v("/k31", "unknown key") {
		t.Errorf("last violation %v", viols[31])
	}
}

func TestDstUntouched(t *testing.T) {
	d := mustFor[Booking](t)
	b := Booking{Flight: "keep", Seats: 9}
	if viols := d.Decode([]byte(`{"flight":"new","seats":"x","amount":1,"date":"d"}`), &b, Limits{}); viols == nil {
		t.Fatal("expected violations")
	}
	if b.Flight != "keep" || b.Seats != 9 {
		t.Errorf("dst changed: %+v", b)
	}
	if viols := d.Decode([]byte(goodBooking), b, Limits{}); len(viols) != 1 || !strings.Contains(viols[0].Problem, "destination") {
		t.Errorf("non-pointer dst: %v", viols)
	}
	var other int
	if viols := d.Decode([]byte(goodBooking), &other, Limits{}); len(viols) != 1 {
		t.Errorf("wrong dst type: %v", viols)
	}
	if viols := d.Decode([]byte(goodBooking), (*Booking)(nil), Limits{}); len(viols) != 1 {
		t.Errorf("nil dst: %v", viols)
	}
}

func TestForRefuses(t *testing.T) {
	type WithAny struct {
		Items []struct {
			Extra any `json:"extra"`
		} `json:"items"`
	}
	type WithChan struct {
		C chan int `json:"c"`
	}
	type WithFunc struct {
		F func() `json:"f"`
	}
	type WithComplex struct {
		C complex128 `json:"c"`
	}
	type WithIntMap struct {
		M map[int]string `json:"m"`
	}
	type WithStringOpt struct {
		N int `json:"n,string"`
	}
	type WithUnsafe struct {
		P unsafe.Pointer `json:"p"`
	}
	type WithIface struct {
		E error `json:"e"`
	}
	type inner struct{ X int }
	type WithHiddenPtr struct {
		*inner
	}
	tests := []struct {
		t    reflect.Type
		want string
	}{
		{reflect.TypeFor[WithAny](), "WithAny.Items[].Extra: interface type interface {} cannot be checked strictly; declare a concrete type or json.RawMessage"},
		{reflect.TypeFor[any](), "declare a concrete type or json.RawMessage"},
		{reflect.TypeFor[map[string]any](), "declare a concrete type"},
		{reflect.TypeFor[WithChan](), "WithChan.C: type chan int has no strict JSON form"},
		{reflect.TypeFor[WithFunc](), "WithFunc.F: type func()"},
		{reflect.TypeFor[WithComplex](), "WithComplex.C: type complex128"},
		{reflect.TypeFor[WithIntMap](), "WithIntMap.M: map key type int is not a string type"},
		{reflect.TypeFor[WithStringOpt](), `WithStringOpt.N: the json tag option "string" is not supported`},
		{reflect.TypeFor[WithUnsafe](), "WithUnsafe.P: type unsafe.Pointer"},
		{reflect.TypeFor[WithIface](), "WithIface.E: interface type error"},
		{reflect.TypeFor[WithHiddenPtr](), "WithHiddenPtr.inner: embedded pointer to unexported struct"},
	}
	for _, tc := range tests {
		_, err := For(tc.t)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("For(%v) = %v, want error containing %q", tc.t, err, tc.want)
		}
	}
	if _, err := For(nil); err == nil {
		t.Error("For(nil) succeeded")
	}
}

func TestForCachesAndType(t *testing.T) {
	a := mustFor[Trip](t)
	b := mustFor[Trip](t)
	if a != b {
		t.Error("decoder not cached")
	}
	if a.Type() != reflect.TypeFor[Trip]() {
		t.Errorf("Type() = %v", a.Type())
	}
}

func TestViolationString(t *testing.T) {
	if s := v("/seats", "expected integer, got string").String(); s != "/seats: expected integer, got string" {
		t.Error(s)
	}
	if s := v("", "not valid JSON").String(); s != "(root): not valid JSON" {
		t.Error(s)
	}
}

// TestNoPayloadInProblems feeds values carrying a marker and checks that no
// problem text repeats it.
func TestNoPayloadInProblems(t *testing.T) {
	const m = "SECRETMARK"
	docs := []string{
		`{"id":"SECRETMARK","passengers":"SECRETMARK"}`,
		`{"id":1,"passengers":[],"when":"SECRETMARK","level":"SECRETMARK","temp":"SECRETMARK","blob":"SECRETMARK"}`,
		`{"SECRETMARK":1,"Id":"x","passengers":[{"SECRETMARK":2}],"tags":{"SECRETMARK":3}}`,
		`{"id":"x","passengers":[],"extra":SECRETMARK}`,
	}
	for _, doc := range docs {
		_, viols := decode[Trip](t, doc, Limits{})
		if viols == nil {
			t.Errorf("%s: no violations", doc)
		}
		for _, vi := range viols {
			if strings.Contains(vi.Problem, m) || strings.Contains(strings.ToUpper(vi.Problem), m) {
				t.Errorf("%s: problem %q quotes the payload", doc, vi.Problem)
			}
		}
	}
}

func TestConcurrent(t *testing.T) {
	d := mustFor[Trip](t)
	done := make(chan bool)
	for g := 0; g < 8; g++ {
		go func() {
			defer func() { done <- true }()
			for i := 0; i < 200; i++ {
				var trip Trip
				if viols := d.Decode([]byte(`{"id":"t","passengers":[{"name":"a"}],"tags":{"a":"b"}}`), &trip, Limits{}); viols != nil {
					t.Error(viols)
					return
				}
				if viols := d.Decode([]byte(`{"id":1,"passengers":[{"nam":"a"}]}`), &trip, Limits{}); len(viols) != 3 {
					t.Error(viols)
					return
				}
			}
		}()
	}
	for g := 0; g < 8; g++ {
		<-done
	}
}

func BenchmarkDecodeBooking(b *testing.B) {
	d, err := For(reflect.TypeFor[Booking]())
	if err != nil {
		b.Fatal(err)
	}
	raw := []byte(goodBooking)
	var bk Booking // outside the loop: count Decode's allocations only
	b.ReportAllocs()
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		if viols := d.Decode(raw, &bk, Limits{}); viols != nil {
			b.Fatal(viols)
		}
	}
}

func BenchmarkDecodeBookingViolations(b *testing.B) {
	d, err := For(reflect.TypeFor[Booking]())
	if err != nil {
		b.Fatal(err)
	}
	raw := []byte(`{"Flight":"BA123","seats":"2","amount":412.50,"meal":"veg"}`)
	var bk Booking
	b.ReportAllocs()
	for b.Loop() {
		if viols := d.Decode(raw, &bk, Limits{}); len(viols) != 5 {
			b.Fatal(viols)
		}
	}
}

func BenchmarkEncodingJSONBooking(b *testing.B) {
	raw := []byte(goodBooking)
	b.ReportAllocs()
	b.SetBytes(int64(len(raw)))
	var bk Booking
	for b.Loop() {
		bk = Booking{}
		if err := json.Unmarshal(raw, &bk); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeTrip(b *testing.B) {
	d, err := For(reflect.TypeFor[Trip]())
	if err != nil {
		b.Fatal(err)
	}
	raw := []byte(`{"id":"t","passengers":[{"name":"A","age":30},{"name":"B"}],"tags":{"k":"v"},"note":"n",
		"when":"2024-05-01T10:00:00Z","extra":{"any":[1,"x",null]},"pair":[1,2],"blob":"aGk=","ratio":0.5,
		"small":-3,"u":65535,"ok":true,"level":"high","temp":21.5,"price":0.10}`)
	b.ReportAllocs()
	b.SetBytes(int64(len(raw)))
	var trip Trip
	for b.Loop() {
		if viols := d.Decode(raw, &trip, Limits{}); viols != nil {
			b.Fatal(viols)
		}
	}
}

// Code is a string-kinded map key read through encoding.TextUnmarshaler.
type Code string

func (c *Code) UnmarshalText(b []byte) error {
	if len(b) == 0 {
		return errors.New("empty code")
	}
	*c = Code(strings.ToUpper(string(b)))
	return nil
}

func TestTextKeys(t *testing.T) {
	got, viols := decode[map[Code]int](t, `{"ab":1,"cd":2}`, Limits{})
	if viols != nil || got["AB"] != 1 || got["CD"] != 2 {
		t.Errorf("got %v %v", got, viols)
	}
	_, viols = decode[map[Code]int](t, `{"ab":1,"AB":2,"":3}`, Limits{})
	want := []Violation{v("/AB", "duplicate key"), v("/", "invalid key")}
	if !reflect.DeepEqual(viols, want) {
		t.Errorf("got %v, want %v", viols, want)
	}
}

func TestManyFields(t *testing.T) {
	var fields []reflect.StructField
	for i := range 70 {
		tag := fmt.Sprintf(`json:"f%d"`, i)
		if i%2 == 1 {
			tag = fmt.Sprintf(`json:"f%d,omitempty"`, i)
		}
		fields = append(fields, reflect.StructField{Name: fmt.Sprintf("F%d", i), Type: reflect.TypeFor[int](), Tag: reflect.StructTag(tag)})
	}
	typ := reflect.StructOf(fields)
	d, err := For(typ)
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	sb.WriteString("{")
	for i := 0; i < 70; i += 2 {
		if i > 0 {
			sb.WriteString(",")
		}
		fmt.Fprintf(&sb, `"f%d":%d`, i, i)
	}
	doc := sb.String()
	dst := reflect.New(typ)
	if viols := d.Decode([]byte(doc+`,"f69":1}`), dst.Interface(), Limits{}); viols != nil {
		t.Fatal(viols)
	}
	if dst.Elem().Field(68).Int() != 68 || dst.Elem().Field(69).Int() != 1 {
		t.Error("fields not decoded")
	}
	viols := d.Decode([]byte(doc+`,"f68":1,"F3":1,"f65":1,"f65":2}`), dst.Interface(), Limits{})
	want := []Violation{v("/f68", "duplicate key"), v("/F3", `key differs only in case from "f3"`), v("/f65", "duplicate key")}
	if !reflect.DeepEqual(viols, want) {
		t.Errorf("got %v, want %v", viols, want)
	}
	viols = d.Decode([]byte(`{"f0":0}`), dst.Interface(), Limits{})
	if len(viols) != 32 || viols[0] != v("/f2", "missing required key") {
		t.Errorf("got %d violations: %v", len(viols), viols)
	}
}
