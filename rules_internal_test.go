package planexec

import (
	"strings"
	"testing"
)

type uncheckedRule struct {
	Paid bool   `json:"paid" validate:"gt=0"`
	Code string `json:"code" validate:"len=3"`
}

type checkedRule struct {
	Code string `json:"code" validate:"len=3"`
}

func TestAPanicInsideTheValidatorIsARefusalNotACrash(t *testing.T) {
	// NewContract would refuse uncheckedRule; checkValues is the last line
	// behind it.
	vs := checkValues(&uncheckedRule{Paid: true, Code: "secret-value"})
	if len(vs) != 1 || vs[0].Why != "cannot be validated: a rule could not run" {
		t.Fatalf("violations = %v, want one saying a rule could not run", vs)
	}
	if strings.Contains(vs[0].String(), "secret") || strings.Contains(vs[0].String(), "bool") {
		t.Errorf("the violation repeats what the validator panicked with: %v", vs[0])
	}
	// The shared validator still works afterwards.
	if vs := checkValues(&checkedRule{Code: "LHRX"}); len(vs) != 1 || vs[0].Path != "/code" {
		t.Errorf("after a panic, violations = %v, want /code failing len=3", vs)
	}
}
