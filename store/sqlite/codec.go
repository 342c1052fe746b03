package sqlite

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/internal/rawjson"
	"github.com/planexec/planexec/internal/storecodec"
)

// Records are JSON documents in TEXT columns, which SQLite stores as they
// are given. A plan's document is its planexec.PlanRecord without its steps
// (rows of their own) and times (columns of their own); a step's and a
// decision's are the planexec type with a "version" member added. Claims
// are columns only.
//
// Every record has the version of its layout twice: in a version column of
// its row, which SQL can check without reading the document, and, for the
// documents, in the document's own "version" member, so a document says
// what it is wherever it is copied. A reader refuses a record whose version,
// in either place, is newer than it reads: it is not misread.
//
// This file is the one place where records are encoded and checked as they
// are read.

// The layout versions this package writes, and the newest it reads.
const (
	// planVersion is the layout of plan and step records.
	planVersion = planexec.PlanRecordVersion
	// decisionVersion is the layout of decision records.
	decisionVersion = 2 // 2: bound to a request ("request_id", "why", "approved")
	// claimVersion is the layout of a claims row.
	claimVersion = 1
)

// Claim states as the claims table spells them.
const (
	stateFree      = "free" // given up; the row keeps its epoch so fencing still holds
	stateAcquired  = "acquired"
	stateCompleted = "completed"
	stateInDoubt   = "in_doubt"
)

// claimFree is the state of a key given up, next to the planexec states.
const claimFree planexec.ClaimState = 0

// planDoc is what the plans table's record column holds.
type planDoc struct {
	Version int                 `json:"version"`
	Tenant  string              `json:"tenant"`
	RunID   string              `json:"run_id"`
	Plan    planexec.Plan       `json:"plan"`
	Status  planexec.PlanStatus `json:"status"`
}

type stepDoc struct {
	Version int `json:"version"`
	planexec.StepRecord
}

type decisionDoc struct {
	Version int `json:"version"`
	planexec.Decision
}

// argumentsPath leads from a plan's document to each step's arguments.
var argumentsPath = []string{"plan", "steps", rawjson.Each, "arguments"}

// encode renders a record. Raw JSON in it (outcomes) keeps its characters:
// no HTML escaping.
func encode(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// encodePlan renders a plan's record, each step's arguments byte for byte
// as the planner wrote them.
func encodePlan(rec *planexec.PlanRecord) ([]byte, error) {
	doc, err := encode(planDoc{Version: planVersion, Tenant: rec.Tenant, RunID: rec.RunID, Plan: rec.Plan, Status: rec.Status})
	if err != nil {
		return nil, err
	}
	args := make([]json.RawMessage, len(rec.Plan.Steps))
	for i, s := range rec.Plan.Steps {
		args[i] = s.Arguments
	}
	return rawjson.Restore(doc, argumentsPath, args)
}

func encodeStep(st planexec.StepRecord) ([]byte, error) {
	return encode(stepDoc{Version: planVersion, StepRecord: st})
}

func encodeDecision(d planexec.Decision) ([]byte, error) {
	return encode(decisionDoc{Version: decisionVersion, Decision: d})
}

// encodeOutcome is a claim's outcome as stored: never NULL, so that a
// completed claim whose outcome is NULL can only be damage. An empty
// outcome is a BLOB of zero bytes.
func encodeOutcome(outcome json.RawMessage) []byte {
	if outcome == nil {
		return []byte{}
	}
	return outcome
}

// checkWritable refuses to write a record that claims a layout this package
// does not know.
func checkWritable(version int) error {
	switch {
	case version > planVersion:
		return fmt.Errorf("record version %d is newer than this package's %d: %w", version, planVersion, planexec.ErrNewerRecord)
	case version < 0:
		return fmt.Errorf("record version %d: %w", version, planexec.ErrCorruptRecord)
	}
	return nil
}

func newer(what string, version, newest int) error {
	return fmt.Errorf("%s: written in layout version %d, newer than this package's %d: %w", what, version, newest, planexec.ErrNewerRecord)
}

func corrupt(what, why string) error {
	return fmt.Errorf("%s: %w: %s", what, planexec.ErrCorruptRecord, why)
}

// decodeDoc decodes a stored document into v after checking its versions:
// column's (its row's) and the document's own. Either newer than newest is
// ErrNewerRecord, checked first so that a newer layout is never called
// corrupt; a document that is not a JSON object of the layout, or names no
// version, is ErrCorruptRecord. what names the record in errors.
func decodeDoc(what string, column, newest int, doc []byte, v any) error {
	if column > newest {
		return newer(what, column, newest)
	}
	var head struct {
		Version *int `json:"version"`
	}
	if d := bytes.TrimSpace(doc); len(d) == 0 || d[0] != '{' {
		return corrupt(what, "not a JSON object")
	}
	if err := json.Unmarshal(doc, &head); err != nil {
		return corrupt(what, err.Error())
	}
	switch {
	case head.Version != nil && *head.Version > newest:
		return newer(what, *head.Version, newest)
	case head.Version == nil || *head.Version < 1 || column < 1:
		return corrupt(what, "no layout version")
	}
	if err := json.Unmarshal(doc, v); err != nil {
		return corrupt(what, err.Error())
	}
	return nil
}

// storedPlanVersion reads, from a stored plan document about to be
// replaced, its layout version: zero when the document does not say (or is
// not one).
func storedPlanVersion(doc []byte) int {
	var head struct {
		Version json.RawMessage `json:"version"`
	}
	var version int
	if json.Unmarshal(doc, &head) == nil {
		_ = json.Unmarshal(head.Version, &version)
	}
	return version
}

func decodePlan(tenant, runID string, column int, doc []byte) (planDoc, error) {
	what := fmt.Sprintf("plan of run %q", runID)
	var d planDoc
	if err := decodeDoc(what, column, planVersion, doc, &d); err != nil {
		return planDoc{}, err
	}
	if d.Tenant != tenant || d.RunID != runID {
		return planDoc{}, corrupt(what, fmt.Sprintf("the record names tenant %q, run %q", d.Tenant, d.RunID))
	}
	switch d.Status {
	case planexec.PlanRunning, planexec.PlanAwaitingApproval, planexec.PlanCompleted, planexec.PlanFailed:
	default:
		return planDoc{}, corrupt(what, fmt.Sprintf("status %q is none this package writes", d.Status))
	}
	return d, nil
}

func decodeStep(runID, stepID string, column int, doc []byte) (planexec.StepRecord, error) {
	what := fmt.Sprintf("step %q of run %q", stepID, runID)
	var d stepDoc
	if err := decodeDoc(what, column, planVersion, doc, &d); err != nil {
		return planexec.StepRecord{}, err
	}
	if d.StepID != stepID {
		return planexec.StepRecord{}, corrupt(what, fmt.Sprintf("the record names step %q", d.StepID))
	}
	// A status read as something else would let a finished step run again.
	switch d.Status {
	case planexec.StepDone, planexec.StepFailed, planexec.StepInDoubt:
	default:
		return planexec.StepRecord{}, corrupt(what, fmt.Sprintf("status %q is none this package writes", d.Status))
	}
	return d.StepRecord, nil
}

func decodeDecision(requestID string, column int, doc []byte) (planexec.Decision, error) {
	what := fmt.Sprintf("decision on request %q", requestID)
	var probe json.RawMessage
	if err := decodeDoc(what, column, decisionVersion, doc, &probe); err != nil {
		return planexec.Decision{}, err
	}
	// Layout 1 bound a decision to a "record" and said "granted";
	// storecodec reads both layouts.
	d, err := storecodec.DecodeDecision(doc)
	if err != nil {
		return planexec.Decision{}, corrupt(what, err.Error())
	}
	if d.RequestID != requestID {
		return planexec.Decision{}, corrupt(what, fmt.Sprintf("the record names %q", d.RequestID))
	}
	switch d.Status {
	case planexec.Approved, planexec.Denied, planexec.Pending:
	default:
		return planexec.Decision{}, corrupt(what, fmt.Sprintf("status %q is none this package writes", d.Status))
	}
	return d, nil
}

// claimRow is a row of the claims table as read.
type claimRow struct {
	state   string
	epoch   int64
	holder  string
	lease   sql.NullInt64 // Unix nanoseconds
	outcome []byte        // nil: NULL
	version int
}

// decodeClaim checks a claims row and returns its state (claimFree for a
// key given up) and, for a completed claim, its outcome. A row of a newer
// layout is ErrNewerRecord. A state this package never writes, or a
// completed claim whose outcome is NULL or not JSON, is ErrCorruptRecord:
// read as anything else, it could replay garbage as a step's outcome or run
// a finished step again.
func decodeClaim(key planexec.Key, r claimRow) (planexec.ClaimState, json.RawMessage, error) {
	what := fmt.Sprintf("claim of key %s", key.Digest)
	switch {
	case r.version > claimVersion:
		return 0, nil, newer(what, r.version, claimVersion)
	case r.version < 1:
		return 0, nil, corrupt(what, "no layout version")
	}
	switch r.state {
	case stateAcquired:
		return planexec.ClaimAcquired, nil, nil
	case stateInDoubt:
		return planexec.ClaimInDoubt, nil, nil
	case stateFree:
		return claimFree, nil, nil
	case stateCompleted:
		switch {
		case r.outcome == nil:
			return 0, nil, corrupt(what, "completed without an outcome")
		case len(r.outcome) == 0:
			return planexec.ClaimCompleted, nil, nil // completed with an empty outcome, as given
		case !json.Valid(r.outcome):
			return 0, nil, corrupt(what, "the outcome is not JSON")
		}
		return planexec.ClaimCompleted, r.outcome, nil
	}
	return 0, nil, corrupt(what, fmt.Sprintf("state %q is none this package writes", r.state))
}
