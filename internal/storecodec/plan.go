package storecodec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/planexec/planexec/internal/rawjson"
	"github.com/planexec/planexec/store"
)

// PlanTimes says where a store keeps a plan's Created and Updated times,
// which decides what its plan documents hold.
type PlanTimes int

const (
	// TimesInColumns: the plan's row has columns for its times, and the
	// document holds version, tenant, run_id, plan and status.
	TimesInColumns PlanTimes = iota
	// TimesInDocument: the document is what encoding a store.PlanRecord
	// without its steps writes, its times included ("steps" is null: steps
	// are rows of their own).
	TimesInDocument
)

// planHead is what every plan document holds.
type planHead struct {
	Version int             `json:"version"`
	Tenant  string          `json:"tenant"`
	RunID   string          `json:"run_id"`
	Plan    json.RawMessage `json:"plan"`
	Status  store.RunStatus `json:"status"`
}

// timedPlan is a plan document with its times, in store.PlanRecord's
// order. Reading, it serves either layout.
type timedPlan struct {
	planHead
	Steps   json.RawMessage `json:"steps"` // written null; never read
	Created time.Time       `json:"created"`
	Updated time.Time       `json:"updated"`
}

// planPath leads from a plan record's document to its plan's.
var planPath = []string{"plan"}

// EncodePlan renders rec's document at PlanVersion, without its steps, its
// plan's document byte for byte as the executor wrote it (encoding/json
// alone would compact it). times says whether the document holds rec's
// Created and Updated.
func EncodePlan(rec *store.PlanRecord, times PlanTimes) ([]byte, error) {
	head := planHead{Version: PlanVersion, Tenant: rec.Tenant, RunID: rec.RunID, Plan: rec.Plan, Status: rec.Status}
	var v any = head
	if times == TimesInDocument {
		v = timedPlan{planHead: head, Created: rec.Created, Updated: rec.Updated}
	}
	return rawjson.Marshal(v, planPath, []json.RawMessage{rec.Plan})
}

// DecodePlan checks and decodes the stored plan document of run runID of
// tenant, whose row's version column holds column. The record it returns
// has an empty Steps map to fill from the step rows; its Created and
// Updated are the document's, zero when it holds none (a store that keeps
// them in columns sets them from those). A record of a newer layout wraps
// store.ErrNewerRecord; one that is not of the layout, names another
// tenant or run, holds no plan or a status never written wraps
// store.ErrCorruptRecord.
func DecodePlan(tenant, runID string, column int, doc []byte) (*store.PlanRecord, error) {
	what := fmt.Sprintf("plan of run %q", runID)
	var d timedPlan
	if err := decodeDoc(what, column, PlanVersion, doc, &d); err != nil {
		return nil, err
	}
	if d.Tenant != tenant || d.RunID != runID {
		return nil, corrupt(what, fmt.Sprintf("the record names tenant %q, run %q", d.Tenant, d.RunID))
	}
	if !slices.Contains(store.RunStatuses, d.Status) {
		return nil, corrupt(what, fmt.Sprintf("status %q is none this package writes", d.Status))
	}
	var plan struct {
		ID *string `json:"id"`
	}
	if p := bytes.TrimSpace(d.Plan); len(p) == 0 || p[0] != '{' || json.Unmarshal(p, &plan) != nil || plan.ID == nil {
		return nil, corrupt(what, "the record holds no plan")
	}
	return &store.PlanRecord{Version: d.Version, Tenant: d.Tenant, RunID: d.RunID, PlanID: *plan.ID, Plan: d.Plan, Status: d.Status,
		Steps: map[string]store.StepRecord{}, Created: d.Created, Updated: d.Updated}, nil
}

// CheckReplace refuses to replace the stored plan record of run runID, as
// read with its row's version column, when a newer version of the package
// wrote it, by the column or by the document: overwriting it would lose
// what that version knows. It returns the creation time the document holds,
// zero when it holds none. A document that cannot be read says no version,
// and may be replaced.
func CheckReplace(runID string, column int, doc []byte) (created time.Time, err error) {
	var head struct {
		Version json.RawMessage `json:"version"`
		Created json.RawMessage `json:"created"`
	}
	var version int
	if json.Unmarshal(doc, &head) == nil {
		_ = json.Unmarshal(head.Version, &version)
		_ = json.Unmarshal(head.Created, &created)
	}
	if v := max(column, version); v > PlanVersion {
		return time.Time{}, newer(fmt.Sprintf("the stored plan of run %q", runID), v, PlanVersion)
	}
	return created, nil
}

// stepDoc is a step's document: the planexec type with a version.
type stepDoc struct {
	Version int `json:"version"`
	store.StepRecord
}

// EncodeStep renders a step's document at PlanVersion.
func EncodeStep(st store.StepRecord) ([]byte, error) {
	return encode(stepDoc{Version: PlanVersion, StepRecord: st})
}

// DecodeStep checks and decodes the stored document of step stepID of run
// runID, whose row's version column holds column. A record of a newer
// layout wraps store.ErrNewerRecord; one that is not of the layout,
// names another step, or holds a status never written wraps
// store.ErrCorruptRecord.
func DecodeStep(runID, stepID string, column int, doc []byte) (store.StepRecord, error) {
	what := fmt.Sprintf("step %q of run %q", stepID, runID)
	var d stepDoc
	if err := decodeDoc(what, column, PlanVersion, doc, &d); err != nil {
		return store.StepRecord{}, err
	}
	if d.StepID != stepID {
		return store.StepRecord{}, corrupt(what, fmt.Sprintf("the record names step %q", d.StepID))
	}
	// A status read as something else would let a finished step run again.
	switch d.Status {
	case store.StepDone, store.StepFailed, store.StepInDoubt:
	default:
		return store.StepRecord{}, corrupt(what, fmt.Sprintf("status %q is none this package writes", d.Status))
	}
	return d.StepRecord, nil
}
