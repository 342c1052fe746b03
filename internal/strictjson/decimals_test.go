package strictjson

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/shopspring/decimal"
)

type DecInner struct {
	Fee decimal.Decimal `json:"fee"`
}

type decOuter struct {
	*DecInner
	Fare decimal.Decimal  `json:"fare"`
	Tip  *decimal.Decimal `json:"tip,omitempty"`
	Legs []struct {
		Cost decimal.Decimal `json:"cost"`
	} `json:"legs"`
	Taxes map[string]decimal.Decimal `json:"taxes"`
	Hold  [2]decimal.Decimal         `json:"hold"`
	Name  string                     `json:"name"`
}

func TestDecimalsFindsEveryDecimalByItsJSONPath(t *testing.T) {
	d, err := For(reflect.TypeFor[decOuter]())
	if err != nil {
		t.Fatal(err)
	}
	if !d.HasDecimals() {
		t.Fatal("HasDecimals = false")
	}
	tip := decimal.RequireFromString("3.0")
	v := decOuter{
		Fare: decimal.RequireFromString("412.50"), Tip: &tip,
		Legs: []struct {
			Cost decimal.Decimal `json:"cost"`
		}{{decimal.RequireFromString("1.10")}},
		Taxes: map[string]decimal.Decimal{"a/b": decimal.RequireFromString("0.5")},
	}
	var got []string
	d.Decimals(reflect.ValueOf(v), func(path []string, x decimal.Decimal) {
		got = append(got, strings.Join(path, "|")+"="+x.StringFixed(-x.Exponent()))
	})
	slices.Sort(got)
	want := []string{"fare=412.50", "hold|0=0", "hold|1=0", "legs|0|cost=1.10", "taxes|a/b=0.5", "tip=3.0"}
	if !slices.Equal(got, want) {
		t.Errorf("got %v, want %v (a nil embedded pointer is passed over)", got, want)
	}
	v.DecInner = &DecInner{Fee: decimal.RequireFromString("0.10")}
	got = nil
	d.Decimals(reflect.ValueOf(v), func(path []string, x decimal.Decimal) { got = append(got, strings.Join(path, "|")) })
	if !slices.Contains(got, "fee") {
		t.Errorf("a promoted decimal was not found: %v", got)
	}
}

func TestHasDecimalsIsFalseWithoutOne(t *testing.T) {
	type node struct {
		Name     string `json:"name"`
		Children []node `json:"children"`
	}
	d, err := For(reflect.TypeFor[node]())
	if err != nil {
		t.Fatal(err)
	}
	if d.HasDecimals() {
		t.Error("HasDecimals = true for a type without decimals")
	}
	calls := 0
	d.Decimals(reflect.ValueOf(node{Children: []node{{}}}), func([]string, decimal.Decimal) { calls++ })
	if calls != 0 {
		t.Errorf("yield called %d times", calls)
	}
}
