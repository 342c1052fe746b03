// Package storecodec holds what every durable store reads and writes the same
// way, so the stores cannot drift apart on it.
package storecodec

import (
	"encoding/json"

	"github.com/planexec/planexec"
)

// legacyDecision is a decision as the first layout wrote it: bound to a
// "record", with "granted" for an approval and its reason in "reason".
type legacyDecision struct {
	RecordID string `json:"record_id"`
	Status   string `json:"status"`
	Reason   string `json:"reason"`
}

// DecodeDecision decodes a stored decision document, of the current layout or
// the first one (which it carries over: record_id is the request id,
// "granted" is Approved, reason is Why). Members it does not know are
// ignored, as the stores' version checks decide what is readable.
func DecodeDecision(doc []byte) (planexec.Decision, error) {
	var d planexec.Decision
	if err := json.Unmarshal(doc, &d); err != nil {
		return planexec.Decision{}, err
	}
	if d.RequestID != "" {
		return d, nil
	}
	var old legacyDecision
	if err := json.Unmarshal(doc, &old); err != nil {
		return planexec.Decision{}, err
	}
	d.RequestID, d.Why = old.RecordID, old.Reason
	if old.Status == "granted" {
		d.Status = planexec.Approved
	}
	return d, nil
}
