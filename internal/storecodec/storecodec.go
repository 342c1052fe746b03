// Package storecodec is the one codec of the durable stores: how plan, step
// and decision records are written as JSON documents, and how every record
// (claims rows too) is checked as it is read, so that the stores cannot drift
// apart on what they refuse.
//
// # Versions
//
// Every record carries the version of its layout twice: in a version column
// of its row, which SQL can check without reading the document, and, for
// the documents, in the document's own "version" member, so that a document
// says what it is wherever it is copied. [PlanVersion], [DecisionVersion]
// and [ClaimVersion] are the layouts written, and the newest read.
//
// # Refusals
//
// A record a store cannot read is refused, never misread. A version newer
// than this package's, in the column or in the document, is an error
// wrapping [store.ErrNewerRecord]: it is checked first, so that a record
// of a newer layout is never called corrupt. A record that is damaged is
// an error wrapping [store.ErrCorruptRecord]: a document that is not a
// JSON object of its layout, a version missing from the column or the
// document, a record naming another run, step or request than its row, a
// status (for a claim, a state) this package never writes, a completed
// claim whose outcome is NULL or not JSON. Read as anything else, such a
// record could run a finished step again or replay garbage as an outcome.
// The stores wrap these errors in their *store.Error.
//
// # What stays with each store
//
// How records map to columns: which columns a row has, how times and leases
// are kept, how an empty outcome or a NULL scans. A store that keeps a
// plan's times in columns encodes its plans with [TimesInColumns], one that
// keeps them in the document with [TimesInDocument].
package storecodec

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/planexec/planexec/internal/rawjson"
	"github.com/planexec/planexec/store"
)

// The layout versions the stores write, and the newest they read.
const (
	// PlanVersion is the layout of plan and step records.
	PlanVersion = store.RecordVersion
	// DecisionVersion is the layout of decision records. 2: bound to a
	// request ("request_id", "why", "approved"); 1 is read and carried over.
	DecisionVersion = 2
	// ClaimVersion is the layout of a claims row.
	ClaimVersion = 1
)

// CheckWritable refuses to write a plan record that claims a layout this
// package does not know: a version newer than PlanVersion wraps
// store.ErrNewerRecord, a negative one store.ErrCorruptRecord. Zero
// (a record that does not say) is written at PlanVersion.
func CheckWritable(version int) error {
	switch {
	case version > PlanVersion:
		return fmt.Errorf("record version %d is newer than this package's %d: %w", version, PlanVersion, store.ErrNewerRecord)
	case version < 0:
		return fmt.Errorf("record version %d: %w", version, store.ErrCorruptRecord)
	}
	return nil
}

// newer is the refusal of a record of a newer layout; what names the record.
func newer(what string, version, newest int) error {
	return fmt.Errorf("%s: written in layout version %d, newer than this package's %d: %w", what, version, newest, store.ErrNewerRecord)
}

// corrupt is the refusal of a damaged record; what names it, why says what
// is wrong with it.
func corrupt(what, why string) error {
	return fmt.Errorf("%s: %w: %s", what, store.ErrCorruptRecord, why)
}

// encode renders a record. Raw JSON in it (outcomes) keeps its characters:
// no HTML escaping.
func encode(v any) ([]byte, error) { return rawjson.Marshal(v, nil, nil) }

// decodeDoc decodes a stored document into v after checking its versions:
// column's (its row's) and the document's own. Either newer than newest is
// ErrNewerRecord, checked first so that a newer layout is never called
// corrupt; a document that is not a JSON object of the layout, or names no
// version, is ErrCorruptRecord. what names the record in errors.
func decodeDoc(what string, column, newest int, doc []byte, v any) error {
	if column > newest {
		return newer(what, column, newest)
	}
	if d := bytes.TrimSpace(doc); len(d) == 0 || d[0] != '{' {
		return corrupt(what, "not a JSON object")
	}
	var head struct {
		Version *int `json:"version"`
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
