package canonjson

import (
	"encoding/json"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/shopspring/decimal"
)

type plainCode string

type plainArgs struct {
	Zeta     string    `json:"zeta"`
	Alpha    int64     `json:"alpha"`
	Flag     bool      `json:"flag,omitempty"`
	Note     string    `json:"note,omitempty"`
	Count    uint16    `json:"count,omitempty"`
	Small    int8      `json:"small"`
	Big      uint64    `json:"big"`
	Code     plainCode `json:"code"`
	Untagged int
	Skipped  string `json:"-"`
	Dash     bool   `json:"-,"`
	hidden   string //nolint:unused // encoding/json never renders it
}

type textCode string

func (c textCode) MarshalText() ([]byte, error) { return []byte("T" + c), nil }

type jsonCode int

func (c *jsonCode) MarshalJSON() ([]byte, error) { return []byte(`"J"`), nil }

type plainInner struct{ A int }

// Types whose rendering is Marshal's alone.
type (
	withEmbedded struct {
		plainInner
		B int
	}
	withNested  struct{ In plainInner }
	withPointer struct{ P *int }
	withFloat   struct{ F float64 }
	withDecimal struct{ D decimal.Decimal }
	withTime    struct{ T time.Time }
	withText    struct{ C textCode }
	withJSON    struct{ C jsonCode } // a pointer receiver: encoding/json uses it on fields
	withString  struct {
		N int `json:"n,string"`
	}
	withOmitZero struct {
		N int `json:"n,omitzero"`
	}
	withClash struct {
		A int `json:"B"`
		B int
	}
	withOddName struct {
		A int `json:"a b"`
	}
	withSlice  struct{ S []string }
	withNumber struct{ N json.Number }
)

func TestPlainRefusesWhatOnlyMarshalRenders(t *testing.T) {
	for _, v := range []any{
		withEmbedded{}, withNested{}, withPointer{}, withFloat{}, withDecimal{}, withTime{}, withText{}, withJSON{},
		withString{}, withOmitZero{}, withClash{}, withOddName{}, withSlice{}, withNumber{}, 42, "s",
	} {
		if p := PlainFor(reflect.TypeOf(v)); p != nil {
			t.Errorf("PlainFor(%T) is not nil", v)
		}
	}
	if PlainFor(reflect.TypeFor[plainArgs]()) == nil {
		t.Fatal("PlainFor(plainArgs) is nil")
	}
}

// checkPlain fails unless Plain renders v as Marshal does.
func checkPlain(t *testing.T, p *Plain, v plainArgs) {
	t.Helper()
	want, err := Marshal(&v)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Append(nil, reflect.ValueOf(&v).Elem()); string(got) != string(want) {
		t.Errorf("Plain renders %+v as\n%s\nMarshal as\n%s", v, got, want)
	}
}

func TestPlainRendersAsMarshalDoes(t *testing.T) {
	p := PlainFor(reflect.TypeFor[plainArgs]())
	for _, v := range []plainArgs{
		{},
		{Zeta: "z", Alpha: -1, Flag: true, Note: "n", Count: 7, Small: -128, Big: math.MaxUint64, Code: "LHR", Untagged: 3, Skipped: "s", Dash: true, hidden: "h"},
		{Alpha: math.MinInt64, Big: 10000000000000000000, Small: 127},
		{Zeta: "quote \" backslash \\ controls \b\f\n\r\t\x00\x1f\x7f"},
		{Zeta: "html <>& and separators \u2028\u2029 and é, 漢, 🙂"},
		{Zeta: "invalid \xff\xfe bytes \xc3 and a lone surrogate \xed\xa0\x80", Note: "\xe2\x82"},
		{Zeta: "\ufffd stays", Code: "\x01"},
	} {
		checkPlain(t, p, v)
	}
}

func FuzzPlainRendersAsMarshalDoes(f *testing.F) {
	f.Add("zeta", "note", int64(0), uint64(0), false, "code")
	f.Add("\xff\u2028\"\\\x00", "", int64(-1), uint64(math.MaxUint64), true, "<&>")
	p := PlainFor(reflect.TypeFor[plainArgs]())
	f.Fuzz(func(t *testing.T, zeta, note string, alpha int64, big uint64, flag bool, code string) {
		checkPlain(t, p, plainArgs{Zeta: zeta, Note: note, Alpha: alpha, Big: big, Flag: flag, Code: plainCode(code),
			Small: int8(alpha), Count: uint16(big), Untagged: int(alpha >> 3)})
	})
}
