package storecodec

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/store"
)

// What a test wants of a record: read, or refused as newer or as corrupt.
var (
	wantRead    error
	wantNewer   = store.ErrNewerRecord
	wantCorrupt = store.ErrCorruptRecord
)

// checkRefusal fails t unless err is the refusal want: nil, or wrapping
// exactly one of ErrNewerRecord and ErrCorruptRecord (a newer record is
// never called corrupt).
func checkRefusal(t *testing.T, err, want error) {
	t.Helper()
	switch {
	case want == nil && err != nil:
		t.Fatalf("refused: %v; want it read", err)
	case want == nil:
	case !errors.Is(err, want):
		t.Fatalf("got %v; want an error wrapping %v", err, want)
	case errors.Is(err, store.ErrNewerRecord) && errors.Is(err, store.ErrCorruptRecord):
		t.Fatalf("%v: both newer and corrupt", err)
	}
}

const (
	plan1 = `"plan":{"id":"p1","goal":"g","revision":1,"steps":[{"id":"s1","tool":"t","arguments":{"n":1}}]}`
	step1 = `"step_id":"s1","plan_id":"p1","tool":"t","key":"k","finished":"2030-01-02T03:04:05Z"`
)

func TestPlanRecordsTheStoresCannotReadAreRefused(t *testing.T) {
	doc := func(head string) string {
		return `{` + head + `,"tenant":"acme","run_id":"run-1",` + plan1 + `,"status":"running"}`
	}
	for _, c := range []struct {
		name   string
		tenant string
		column int
		doc    string
		want   error
	}{
		{"of the current layout, times in columns", "acme", 1, doc(`"version":1`), wantRead},
		{"of the current layout, times in the document", "acme", 1,
			`{"version":1,"tenant":"acme","run_id":"run-1",` + plan1 + `,"status":"completed","steps":null,"created":"2030-01-02T03:04:05Z","updated":"2030-01-02T03:04:05Z"}`, wantRead},
		{"newer by its column", "acme", 2, doc(`"version":1`), wantNewer},
		{"newer by its document", "acme", 1, doc(`"version":2`), wantNewer},
		{"newer by its column, whatever its document holds", "acme", 2, `not json`, wantNewer},
		{"newer by its document, whatever else it holds", "acme", 1, `{"version":2,"tenant":"other","status":"archived"}`, wantNewer},
		{"with no version in its document", "acme", 1, `{"tenant":"acme","run_id":"run-1",` + plan1 + `,"status":"running"}`, wantCorrupt},
		{"with version 0 in its document", "acme", 1, doc(`"version":0`), wantCorrupt},
		{"with a version that is not a number", "acme", 1, doc(`"version":"1"`), wantCorrupt},
		{"with no version in its column", "acme", 0, doc(`"version":1`), wantCorrupt},
		{"that is an array", "acme", 1, `[` + doc(`"version":1`) + `]`, wantCorrupt},
		{"that is null", "acme", 1, `null`, wantCorrupt},
		{"that is empty", "acme", 1, ``, wantCorrupt},
		{"that is cut short", "acme", 1, doc(`"version":1`)[:40], wantCorrupt},
		{"whose plan is not an object", "acme", 1, `{"version":1,"tenant":"acme","run_id":"run-1","plan":5,"status":"running"}`, wantCorrupt},
		{"whose plan is null", "acme", 1, `{"version":1,"tenant":"acme","run_id":"run-1","plan":null,"status":"running"}`, wantCorrupt},
		{"whose plan names no id", "acme", 1, `{"version":1,"tenant":"acme","run_id":"run-1","plan":{"goal":"g"},"status":"running"}`, wantCorrupt},
		{"naming another tenant", "globex", 1, doc(`"version":1`), wantCorrupt},
		{"naming another run", "acme", 1, `{"version":1,"tenant":"acme","run_id":"run-2",` + plan1 + `,"status":"running"}`, wantCorrupt},
		{"with a status never written", "acme", 1, `{"version":1,"tenant":"acme","run_id":"run-1",` + plan1 + `,"status":"archived"}`, wantCorrupt},
		{"with no status", "acme", 1, `{"version":1,"tenant":"acme","run_id":"run-1",` + plan1 + `}`, wantCorrupt},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec, err := DecodePlan(c.tenant, "run-1", c.column, []byte(c.doc))
			checkRefusal(t, err, c.want)
			if err == nil && (rec.RunID != "run-1" || rec.PlanID != "p1" || rec.Steps == nil) {
				t.Errorf("DecodePlan = %+v", rec)
			}
		})
	}
}

func TestStepRecordsTheStoresCannotReadAreRefused(t *testing.T) {
	for _, c := range []struct {
		name   string
		column int
		doc    string
		want   error
	}{
		{"done", 1, `{"version":1,` + step1 + `,"status":"done","outcome":{"a":1}}`, wantRead},
		{"failed", 1, `{"version":1,` + step1 + `,"status":"failed","error":"no"}`, wantRead},
		{"in doubt", 1, `{"version":1,` + step1 + `,"status":"in_doubt"}`, wantRead},
		{"newer by its column", 2, `{"version":1,` + step1 + `,"status":"done"}`, wantNewer},
		{"newer by its document", 1, `{"version":2,` + step1 + `,"status":"done"}`, wantNewer},
		{"with no version in its document", 1, `{` + step1 + `,"status":"done"}`, wantCorrupt},
		{"with no version in its column", 0, `{"version":1,` + step1 + `,"status":"done"}`, wantCorrupt},
		{"that is a string", 1, `"done"`, wantCorrupt},
		{"naming another step", 1, `{"version":1,"step_id":"s2","status":"done"}`, wantCorrupt},
		{"with a status never written", 1, `{"version":1,` + step1 + `,"status":"skipped"}`, wantCorrupt},
		{"with no status, which is not a step that never ran", 1, `{"version":1,` + step1 + `}`, wantCorrupt},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, err := DecodeStep("run-1", "s1", c.column, []byte(c.doc))
			checkRefusal(t, err, c.want)
			if err == nil && (st.StepID != "s1" || st.Key != "k") {
				t.Errorf("DecodeStep = %+v", st)
			}
		})
	}
}

func TestDecisionRecordsTheStoresCannotReadAreRefused(t *testing.T) {
	for _, c := range []struct {
		name   string
		column int
		doc    string
		want   error
		// mention is what the refusal must name, if anything.
		mention string
	}{
		{"approved", 2, `{"version":2,"request_id":"r1","status":"approved"}`, wantRead, ""},
		{"denied", 2, `{"version":2,"request_id":"r1","status":"denied"}`, wantRead, ""},
		{"pending", 2, `{"version":2,"request_id":"r1","status":"pending"}`, wantRead, ""},
		{"of the first layout", 1, `{"version":1,"record_id":"r1","status":"granted"}`, wantRead, ""},
		{"of the first layout in a row the migration moved on", 2, `{"version":1,"record_id":"r1","status":"granted"}`, wantRead, ""},
		{"newer by its column", 3, `{"version":2,"request_id":"r1","status":"approved"}`, wantNewer, ""},
		{"newer by its document", 2, `{"version":3,"request_id":"r1","status":"approved"}`, wantNewer, ""},
		{"with no version in its document", 2, `{"request_id":"r1","status":"approved"}`, wantCorrupt, ""},
		{"with no version in its column", 0, `{"version":2,"request_id":"r1","status":"approved"}`, wantCorrupt, ""},
		{"that is a number", 2, `2`, wantCorrupt, ""},
		{"whose members have other types", 2, `{"version":2,"request_id":"r1","status":"approved","approver":5}`, wantCorrupt, "approver"},
		{"naming another request", 2, `{"version":2,"request_id":"r2","status":"approved"}`, wantCorrupt, ""},
		{"of the first layout naming another record", 1, `{"version":1,"record_id":"r2","status":"granted"}`, wantCorrupt, ""},
		{"with a status never written", 2, `{"version":2,"request_id":"r1","status":"maybe"}`, wantCorrupt, ""},
		{"of the first layout with a status never written", 1, `{"version":1,"record_id":"r1","status":"maybe"}`, wantCorrupt, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, err := DecodeDecision("r1", c.column, []byte(c.doc))
			checkRefusal(t, err, c.want)
			if err != nil && !strings.Contains(err.Error(), c.mention) {
				t.Errorf("%v; want it to name %s", err, c.mention)
			}
			if err == nil && d.RequestID != "r1" {
				t.Errorf("DecodeDecision = %+v", d)
			}
		})
	}
}

func TestClaimRowsTheStoresCannotReadAreRefused(t *testing.T) {
	key := planexec.Key{Tenant: "acme", Digest: "k1"}
	for _, c := range []struct {
		name    string
		row     ClaimRow
		want    error
		state   store.ClaimState
		outcome string
	}{
		{"acquired", ClaimRow{State: "acquired", Version: 1}, wantRead, store.ClaimAcquired, ""},
		{"in doubt", ClaimRow{State: "in_doubt", Version: 1}, wantRead, store.ClaimInDoubt, ""},
		{"free", ClaimRow{State: "free", Version: 1}, wantRead, store.ClaimFree, ""},
		{"completed", ClaimRow{State: "completed", Outcome: []byte(`{"pnr":"PNR-1"}`), Version: 1}, wantRead, store.ClaimCompleted, `{"pnr":"PNR-1"}`},
		{"completed with an empty outcome", ClaimRow{State: "completed", Outcome: []byte{}, Version: 1}, wantRead, store.ClaimCompleted, ""},
		{"of a newer layout", ClaimRow{State: "free", Version: 2}, wantNewer, 0, ""},
		{"of a newer layout, in a state this package does not know", ClaimRow{State: "parked", Version: 2}, wantNewer, 0, ""},
		{"with no version", ClaimRow{State: "free"}, wantCorrupt, 0, ""},
		{"with a negative version", ClaimRow{State: "free", Version: -1}, wantCorrupt, 0, ""},
		{"in a state never written", ClaimRow{State: "settled", Version: 1}, wantCorrupt, 0, ""},
		{"in a state spelled otherwise", ClaimRow{State: "Completed", Outcome: []byte(`1`), Version: 1}, wantCorrupt, 0, ""},
		{"completed without an outcome", ClaimRow{State: "completed", Version: 1}, wantCorrupt, 0, ""},
		{"completed with an outcome that is not JSON", ClaimRow{State: "completed", Outcome: []byte(`{"pnr":`), Version: 1}, wantCorrupt, 0, ""},
		{"completed with bytes of another format", ClaimRow{State: "completed", Outcome: []byte("gob\x00\x1f\x8b"), Version: 1}, wantCorrupt, 0, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			state, outcome, err := DecodeClaim(key, c.row)
			checkRefusal(t, err, c.want)
			if err == nil && (state != c.state || string(outcome) != c.outcome) {
				t.Errorf("DecodeClaim = %d, %q; want %d, %q", state, outcome, c.state, c.outcome)
			}
		})
	}
}

func TestAPlanANewerVersionWroteIsNotReplaced(t *testing.T) {
	for _, c := range []struct {
		name    string
		column  int
		doc     string
		want    error
		created string
	}{
		{"of the current layout", 1, `{"version":1}`, wantRead, ""},
		{"with its creation time", 1, `{"version":1,"created":"2030-01-02T03:04:05Z"}`, wantRead, "2030-01-02 03:04:05 +0000 UTC"},
		{"that cannot be read", 1, `{"version":`, wantRead, ""},
		{"newer by its column", 2, `{"version":1}`, wantNewer, ""},
		{"newer by its document", 1, `{"version":2,"created":"2030-01-02T03:04:05Z"}`, wantNewer, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			created, err := CheckReplace("run-1", c.column, []byte(c.doc))
			checkRefusal(t, err, c.want)
			if got := fmt.Sprint(created); err == nil && c.created != "" && got != c.created {
				t.Errorf("created = %s, want %s", got, c.created)
			}
		})
	}
}

func TestAPlanRecordOfAnUnknownLayoutIsNotWritten(t *testing.T) {
	for v, want := range map[int]error{-1: wantCorrupt, 0: wantRead, 1: wantRead, 2: wantNewer} {
		t.Run(fmt.Sprint("version ", v), func(t *testing.T) { checkRefusal(t, CheckWritable(v), want) })
	}
}

// A document that is not a JSON object says so, whichever record it
// stands for, rather than a reason that sends the reader looking at a
// member it does not have.
func TestADocumentThatIsNotAnObjectIsRefusedAsSuch(t *testing.T) {
	decoders := map[string]func(doc []byte) error{
		"plan":     func(doc []byte) error { _, err := DecodePlan("acme", "run-1", 1, doc); return err },
		"step":     func(doc []byte) error { _, err := DecodeStep("run-1", "s1", 1, doc); return err },
		"decision": func(doc []byte) error { _, err := DecodeDecision("r1", 2, doc); return err },
	}
	for kind, decode := range decoders {
		for _, doc := range []string{``, ` `, `null`, `[{"version":1}]`, `"{}"`, `1`} {
			t.Run(fmt.Sprintf("%s %q", kind, doc), func(t *testing.T) {
				err := decode([]byte(doc))
				checkRefusal(t, err, wantCorrupt)
				if !strings.Contains(err.Error(), "not a JSON object") {
					t.Errorf("%v; want it to say the document is not a JSON object", err)
				}
			})
		}
	}
}

func TestWhatARunWaitsForTheStoresCannotReadIsRefused(t *testing.T) {
	waits := []store.Wait{{StepID: "s2", Tool: "book_flight", Request: "r"}, {StepID: "s3", Tool: "pay", Key: "k"}}
	col, err := EncodeWaiting(waits)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := DecodeWaiting("run-1", col); err != nil || !reflect.DeepEqual(got, waits) {
		t.Errorf("DecodeWaiting(EncodeWaiting) = %+v, %v", got, err)
	}
	if col, err := EncodeWaiting(nil); col != nil || err != nil {
		t.Errorf("EncodeWaiting(nil) = %q, %v; want NULL", col, err)
	}
	if got, err := DecodeWaiting("run-1", nil); got != nil || err != nil {
		t.Errorf("DecodeWaiting(NULL) = %+v, %v", got, err)
	}
	for _, bad := range []string{``, `null`, `[]`, `{}`, `[{"step_id":"s1"}]`, `[{"step_id":"s1","request":"r","key":"k"}]`,
		`[{"step_id":"s1","request":"r","extra":1}]`, `[{"step_id":"s1","request":"r"}] []`, `[{"tool":"t","request":"r"}]`} {
		_, err := DecodeWaiting("run-1", []byte(bad))
		checkRefusal(t, err, wantCorrupt)
	}
}
