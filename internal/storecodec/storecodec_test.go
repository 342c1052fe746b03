package storecodec

import (
	"testing"
	"time"

	"github.com/planexec/planexec"
)

func TestDecisionsOfBothLayoutsDecodeAlike(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, c := range []struct {
		name   string
		column int
		doc    string
		want   planexec.Decision
	}{
		{"first layout, granted", 1, `{"version":1,"record_id":"r1","status":"granted","approver":"ana","decided_at":"2030-01-02T03:04:05Z","expires":"0001-01-01T00:00:00Z"}`,
			planexec.Decision{RequestID: "r1", Status: planexec.Approved, Approver: "ana", DecidedAt: at}},
		{"first layout, denied with a reason", 1, `{"version":1,"record_id":"r2","status":"denied","approver":"lee","reason":"too dear","decided_at":"2030-01-02T03:04:05Z"}`,
			planexec.Decision{RequestID: "r2", Status: planexec.Denied, Approver: "lee", Why: "too dear", DecidedAt: at}},
		{"current layout", 2, `{"version":2,"request_id":"r3","status":"approved","approver":"ana","why":"","decided_at":"2030-01-02T03:04:05Z","expires":"2030-01-02T04:04:05Z"}`,
			planexec.Decision{RequestID: "r3", Status: planexec.Approved, Approver: "ana", DecidedAt: at, Expires: at.Add(time.Hour)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := DecodeDecision(c.want.RequestID, c.column, []byte(c.doc))
			if err != nil {
				t.Fatal(err)
			}
			if got.RequestID != c.want.RequestID || got.Status != c.want.Status || got.Approver != c.want.Approver ||
				got.Why != c.want.Why || !got.DecidedAt.Equal(c.want.DecidedAt) || !got.Expires.Equal(c.want.Expires) {
				t.Errorf("DecodeDecision = %+v, want %+v", got, c.want)
			}
		})
	}
	if _, err := DecodeDecision("r1", 2, []byte(`{"version":2,"request_id":`)); err == nil {
		t.Error("a truncated document decoded")
	}
}
