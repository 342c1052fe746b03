package planexec_test

import (
	"context"
	"strings"
	"testing"

	"github.com/shopspring/decimal"

	"github.com/planexec/planexec"
)

// What a person deciding on a step is shown: the validated arguments, with
// decimals as the model wrote them. What records and keys digest: the
// canonical form, where 412.5 and 412.50 are one value.

type dLeg struct {
	Via  string          `json:"via"`
	Fare decimal.Decimal `json:"fare"`
}

// DExtras is exported: encoding/json cannot allocate an embedded pointer to
// an unexported struct.
type DExtras struct {
	Fee decimal.Decimal `json:"fee,omitzero"`
}

type dTrip struct {
	*DExtras
	Legs  []dLeg                     `json:"legs"`
	Taxes map[string]decimal.Decimal `json:"taxes,omitempty"`
	Tip   *decimal.Decimal           `json:"tip,omitempty"`
	Total decimal.Decimal            `json:"total,omitzero"`
	Ref   string                     `json:"ref"`
}

// dAsked runs one irreversible "trip" step with args and returns what the
// gate was asked.
func dAsked(t *testing.T, args string) planexec.ApprovalRequest {
	t.Helper()
	ex, gate := oneTool(t, "trip", func(ctx context.Context, _ dTrip) (string, error) {
		return "booked", nil
	}, planexec.Irreversible())
	if _, err := ex.Execute(context.Background(), planexec.Plan{Steps: []planexec.Step{step("s1", "trip", args)}}); err != nil {
		t.Fatalf("Execute(%s): %v", args, err)
	}
	asked := gate.Asked()
	if len(asked) != 1 {
		t.Fatalf("asked %d times, want 1", len(asked))
	}
	return asked[0]
}

func TestAPersonIsShownADecimalAsTheModelWroteIt(t *testing.T) {
	var asked []planexec.ApprovalRequest
	for _, fare := range []string{"412.50", "412.5", "412.500"} {
		ex, gate := newExecutor(t, &recorder{}, nil)
		if _, err := ex.Execute(context.Background(), planexec.Plan{ID: "p1", Steps: []planexec.Step{
			step("s1", "book_flight", `{"flight":"BA117","seats":1,"fare":`+fare+`}`),
		}}); err != nil {
			t.Fatalf("Execute with fare %s: %v", fare, err)
		}
		if len(gate.Asked()) != 1 {
			t.Fatalf("asked %d times, want 1", len(gate.Asked()))
		}
		req := gate.Asked()[0]
		if got, want := string(req.Arguments), `{"fare":"`+fare+`","flight":"BA117","seats":1}`; got != want {
			t.Errorf("shown %s, want %s", got, want)
		}
		asked = append(asked, req)
	}
	// One value, one record: the digests are of the canonical form.
	for _, a := range asked[1:] {
		if a.ArgumentsDigest != asked[0].ArgumentsDigest || a.ID != asked[0].ID {
			t.Errorf("412.50 and its other spellings give different records: %s/%s vs %s/%s",
				asked[0].ID, asked[0].ArgumentsDigest, a.ID, a.ArgumentsDigest)
		}
	}
	// A decision recorded for 412.50 clears 412.5 in the same run: it is the
	// same record.
	ex, gate := newExecutor(t, &recorder{}, nil)
	for _, fare := range []string{"412.50", "412.5"} {
		if _, err := ex.Execute(context.Background(), planexec.Plan{ID: "p1", Steps: []planexec.Step{
			step("s1", "book_flight", `{"flight":"BA117","seats":1,"fare":`+fare+`}`),
		}}); err != nil {
			t.Fatalf("Execute with fare %s: %v", fare, err)
		}
	}
	if n := len(gate.Asked()); n != 1 {
		t.Errorf("the gate was asked %d times for one value written two ways, want once", n)
	}
}

func TestDecimalsAreShownAsWrittenWhereverTheyAre(t *testing.T) {
	req := dAsked(t, `{"fee":0.10,"legs":[{"via":"DUB","fare":100.00},{"via":"JFK","fare":5}],`+
		`"taxes":{"row.1/a~b":1.50,"plain":2},"tip":3.0,"total":105.10,"ref":"R"}`)
	want := `{"fee":"0.10","legs":[{"fare":"100.00","via":"DUB"},{"fare":"5","via":"JFK"}],` +
		`"ref":"R","taxes":{"plain":"2","row.1/a~b":"1.50"},"tip":"3.0","total":"105.10"}`
	if got := string(req.Arguments); got != want {
		t.Errorf("shown\n %s\nwant\n %s", got, want)
	}
	// Left out (omitempty, a nil embedded pointer) stays left out.
	req = dAsked(t, `{"legs":[],"ref":"R"}`)
	if got, want := string(req.Arguments), `{"legs":[],"ref":"R"}`; got != want {
		t.Errorf("shown %s, want %s", got, want)
	}
}

// Decimals past 38 digits written out (1e-9999, -25e9990) are refused before
// anyone is asked; within the bound, a long exponent is still shown short.
func TestADecimalShownToAPersonStaysShortWhateverItsExponent(t *testing.T) {
	for written, shown := range map[string]string{
		"1.5E-3":    "0.0015",
		"12e2":      "1200",
		"0.000":     "0.000",
		"-0.50":     "-0.50",
		"1e20":      "100000000000000000000",
		"1e21":      "1e21",
		"1e-21":     "0.000000000000000000001",
		"1.000e-22": "1000e-25",
	} {
		req := dAsked(t, `{"tip":`+written+`,"legs":[],"ref":"R"}`)
		want := `{"legs":[],"ref":"R","tip":"` + shown + `"}`
		if got := string(req.Arguments); got != want {
			t.Errorf("%s is shown as %s, want %s", written, got, want)
		}
		if len(req.Arguments) > 100 {
			t.Errorf("%s is shown in %d bytes", written, len(req.Arguments))
		}
	}
}

func TestArgumentsWithoutDecimalsAreShownInTheirCanonicalForm(t *testing.T) {
	r := &recorder{}
	ex, gate := newExecutor(t, r, nil)
	if _, err := ex.Execute(context.Background(), planexec.Plan{Steps: []planexec.Step{
		step("s1", "book_flight", `{ "seats" : 1, "flight" : "BA\u0031\u00317", "note":"<a & b>" }`),
	}}); err != nil {
		t.Fatalf("Execute: %v", err)
	}
	if got, want := string(gate.Asked()[0].Arguments), `{"flight":"BA117","note":"<a & b>","seats":1}`; got != want {
		t.Errorf("shown %s, want %s", got, want)
	}
	if strings.Contains(string(gate.Asked()[0].Arguments), `\u003c`) {
		t.Error("the arguments are HTML-escaped")
	}
}
