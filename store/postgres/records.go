package postgres

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/internal/storecodec"
)

// Records are stored as JSON, each with the layout version it was written in
// (planexec.PlanRecordVersion) inside it; plans and decisions have it in a
// column too. A plan's document is its planexec.PlanRecord without the
// steps; a step's and a decision's are the planexec type with a "version"
// member added.

type stepDoc struct {
	Version int `json:"version"`
	planexec.StepRecord
}

type decisionDoc struct {
	Version int `json:"version"`
	planexec.Decision
}

// encode renders a record. Raw JSON in it (arguments, outcomes) keeps its
// characters: no HTML escaping.
func encode(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// checkWritable refuses to write a record that claims a layout this package
// does not know.
func checkWritable(version int) error {
	switch {
	case version > planexec.PlanRecordVersion:
		return fmt.Errorf("record version %d is newer than this package's %d: %w", version, planexec.PlanRecordVersion, planexec.ErrNewerRecord)
	case version < 0:
		return fmt.Errorf("record version %d: %w", version, planexec.ErrCorruptRecord)
	}
	return nil
}

// decodeVersioned checks a stored record's versions (its column's, if it has
// one, and its own), then decodes it into v. what names the record in
// errors.
func decodeVersioned(what string, column int, doc []byte, v any) error {
	var head struct {
		Version *int `json:"version"`
	}
	if column > planexec.PlanRecordVersion {
		return fmt.Errorf("%s: written in layout version %d, newer than this package's %d: %w", what, column, planexec.PlanRecordVersion, planexec.ErrNewerRecord)
	}
	if err := json.Unmarshal(doc, &head); err != nil {
		return fmt.Errorf("%s: %w: %v", what, planexec.ErrCorruptRecord, err)
	}
	if head.Version == nil || *head.Version < 1 {
		return fmt.Errorf("%s: %w: no layout version", what, planexec.ErrCorruptRecord)
	}
	if *head.Version > planexec.PlanRecordVersion {
		return fmt.Errorf("%s: written in layout version %d, newer than this package's %d: %w", what, *head.Version, planexec.PlanRecordVersion, planexec.ErrNewerRecord)
	}
	if err := json.Unmarshal(doc, v); err != nil {
		return fmt.Errorf("%s: %w: %v", what, planexec.ErrCorruptRecord, err)
	}
	return nil
}

func decodePlan(tenant, runID string, column int, doc []byte) (*planexec.PlanRecord, error) {
	what := fmt.Sprintf("plan of run %q", runID)
	var rec planexec.PlanRecord
	if err := decodeVersioned(what, column, doc, &rec); err != nil {
		return nil, err
	}
	if rec.Tenant != tenant || rec.RunID != runID {
		return nil, fmt.Errorf("%s: %w: the record names tenant %q, run %q", what, planexec.ErrCorruptRecord, rec.Tenant, rec.RunID)
	}
	return &rec, nil
}

func decodeStep(runID, stepID string, doc []byte) (planexec.StepRecord, error) {
	what := fmt.Sprintf("step %q of run %q", stepID, runID)
	var d stepDoc
	if err := decodeVersioned(what, 0, doc, &d); err != nil {
		return planexec.StepRecord{}, err
	}
	if d.StepID != stepID {
		return planexec.StepRecord{}, fmt.Errorf("%s: %w: the record names step %q", what, planexec.ErrCorruptRecord, d.StepID)
	}
	return d.StepRecord, nil
}

func decodeDecision(requestID string, column int, doc []byte) (planexec.Decision, error) {
	what := fmt.Sprintf("decision on request %q", requestID)
	var probe json.RawMessage
	if err := decodeVersioned(what, column, doc, &probe); err != nil {
		return planexec.Decision{}, err
	}
	d, err := storecodec.DecodeDecision(doc)
	if err != nil {
		return planexec.Decision{}, fmt.Errorf("%s: %w: %v", what, planexec.ErrCorruptRecord, err)
	}
	if d.RequestID != requestID {
		return planexec.Decision{}, fmt.Errorf("%s: %w: the record names %q", what, planexec.ErrCorruptRecord, d.RequestID)
	}
	return d, nil
}
