package planexec

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/shopspring/decimal"

	"github.com/planexec/planexec/internal/jsonptr"
)

// Whatever an outcome holds and whatever path a reference names, putting the
// value in place never panics, and gives either a violation or arguments
// that are one JSON document.
func FuzzResolveRefs(f *testing.F) {
	f.Add([]byte(`{"flight":"BA117","fare":"412.50"}`), "/fare", true)
	f.Add([]byte(`[{"a":[1,2,{"b":null}]}]`), "/0/a/2/b", false)
	f.Add([]byte(`"1e400"`), "", true)
	f.Add([]byte(`{"x":"\u0031\u0032"}`), "/x", true)
	f.Fuzz(func(t *testing.T, outcome []byte, path string, unquote bool) {
		if !json.Valid(outcome) {
			return
		}
		tokens, err := jsonptr.Parse(path)
		if err != nil {
			return
		}
		args := []byte(`{"a":1,"v":{"$from":"s1","path":"x"},"z":[true]}`)
		refs := []reference{{at: []string{"v"}, start: 11, end: 36, step: "s1", path: tokens, unquote: unquote}}
		if string(args[refs[0].start:refs[0].end]) != `{"$from":"s1","path":"x"}` {
			t.Fatalf("the fixture's span is off: %s", args[refs[0].start:refs[0].end])
		}
		out, vs := resolveRefs(args, refs, func(int) []byte { return outcome }, 1<<20)
		if vs == nil && !json.Valid(out) {
			t.Fatalf("resolved to %s, not JSON", out)
		}
	})
}

type (
	fitPriced struct {
		Fare decimal.Decimal `json:"fare"`
	}
	fitFares struct {
		Fares []decimal.Decimal `json:"fares"`
	}
	fitNamed struct {
		Name string `json:"name"`
		Nick string `json:"nick,omitempty"`
	}
	fitWithPointer struct {
		Name *string `json:"name"`
	}
	fitTagged struct {
		Flight string `json:"flight"`
		Count  int    `json:"count,string"`
	}
	fitArgs struct {
		Priced fitPriced         `json:"priced"`
		Fares  fitFares          `json:"fares"`
		Fare   decimal.Decimal   `json:"fare"`
		Text   string            `json:"text"`
		Bytes  []byte            `json:"bytes"`
		Labels map[string]string `json:"labels"`
		Pair   [2]string         `json:"pair"`
		Legs   []string          `json:"legs"`
	}
)

// What a reference's type check accepts, and what it refuses, at the edges
// of how json.Marshal writes an outcome and the contract reads arguments.
func TestTheFitOfAReferenceAtTheEdges(t *testing.T) {
	contract, err := NewContract[fitArgs]("take")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		out      reflect.Type
		path, at string
		refused  string // "" when it fits
	}{
		{"a decimal where a decimal goes", reflect.TypeFor[fitPriced](), "/fare", "/fare", ""},
		{"an object holding a decimal", reflect.TypeFor[[]fitPriced](), "/0", "/priced", "recorded as a string"},
		{"a list of decimals", reflect.TypeFor[fitFares](), "", "/fares", "recorded as a string"},
		{"a json.Number where a string goes", reflect.TypeFor[struct {
			N json.Number `json:"n"`
		}](), "/n", "/text", "a number where a string goes"},
		{"a string where bytes go", reflect.TypeFor[fitNamed](), "/name", "/bytes", "a string where bytes in base64 goes"},
		{"bytes where a string goes", reflect.TypeFor[struct {
			B []byte `json:"b"`
		}](), "/b", "/text", ""},
		{"an object with an omitempty member where a map goes", reflect.TypeFor[fitNamed](), "", "/labels", ""},
		{"an object with a member that may be null where a map goes", reflect.TypeFor[fitWithPointer](), "", "/labels", "may be null"},
		{"an array where an array of its length goes", reflect.TypeFor[[2]string](), "", "/pair", ""},
		{"a slice where an array goes", reflect.TypeFor[[]string](), "", "/pair", "an array of 2"},
		{"beside a member tagged string", reflect.TypeFor[[]fitTagged](), "/0/flight", "/text", ""},
		{"a list where a list goes", reflect.TypeFor[[]fitNamed](), "/0/name", "/legs", "a string where a list goes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ref := reference{step: "s1"}
			ref.path, _ = jsonptr.Parse(tc.path)
			ref.at, _ = jsonptr.Parse(tc.at)
			_, ref.optional, _ = typeAt(contract.typ, ref.at, false)
			got := checkRef(&ref, &Tool{name: "give", output: tc.out}, contract)
			switch {
			case tc.refused == "" && got != "":
				t.Errorf("refused: %s", got)
			case tc.refused != "" && !strings.Contains(got, tc.refused):
				t.Errorf("got %q, want a refusal saying %q", got, tc.refused)
			}
		})
	}
}
