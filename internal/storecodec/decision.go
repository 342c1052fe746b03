package storecodec

import (
	"encoding/json"
	"fmt"

	"github.com/planexec/planexec/store"
)

// decisionDoc is a decision's document: the planexec type with a version.
type decisionDoc struct {
	Version int `json:"version"`
	store.Decision
}

// EncodeDecision renders a decision's document at DecisionVersion.
func EncodeDecision(d store.Decision) ([]byte, error) {
	return encode(decisionDoc{Version: DecisionVersion, Decision: d})
}

// DecodeDecision checks and decodes the stored document of the decision on
// request requestID, whose row's version column holds column. A document
// of the first layout is carried over: its record_id is the request id,
// "granted" is Approved, its reason is Why. A record of a newer layout wraps
// store.ErrNewerRecord; one that is not of its layout, names another
// request, or holds a status never written wraps store.ErrCorruptRecord.
func DecodeDecision(requestID string, column int, doc []byte) (store.Decision, error) {
	what := fmt.Sprintf("decision on request %q", requestID)
	var probe json.RawMessage
	if err := decodeDoc(what, column, DecisionVersion, doc, &probe); err != nil {
		return store.Decision{}, err
	}
	d, err := decodeLayouts(doc)
	if err != nil {
		return store.Decision{}, corrupt(what, err.Error())
	}
	if d.RequestID != requestID {
		return store.Decision{}, corrupt(what, fmt.Sprintf("the record names %q", d.RequestID))
	}
	switch d.Status {
	case store.Approved, store.Denied, store.Pending:
	default:
		return store.Decision{}, corrupt(what, fmt.Sprintf("status %q is none this package writes", d.Status))
	}
	return d, nil
}

// legacyDecision is a decision as the first layout wrote it: bound to a
// "record", with "granted" for an approval and its reason in "reason".
type legacyDecision struct {
	RecordID string `json:"record_id"`
	Status   string `json:"status"`
	Reason   string `json:"reason"`
}

// decodeLayouts decodes a decision document of the current layout or the
// first one, which it carries over: record_id is the request id, "granted"
// is Approved, reason is Why. Members it does not know are ignored, as the
// version checks decide what is readable.
func decodeLayouts(doc []byte) (store.Decision, error) {
	var d store.Decision
	if err := json.Unmarshal(doc, &d); err != nil {
		return store.Decision{}, err
	}
	if d.RequestID != "" {
		return d, nil
	}
	var old legacyDecision
	if err := json.Unmarshal(doc, &old); err != nil {
		return store.Decision{}, err
	}
	d.RequestID, d.Why = old.RecordID, old.Reason
	if old.Status == "granted" {
		d.Status = store.Approved
	}
	return d, nil
}
