package storecodec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/planexec/planexec/store"
)

// EncodeWaiting renders what a run waits for as a run's row keeps it, in a
// column of its own so a listing reads it without the plan: nil (NULL) for
// nothing, else a JSON array of store.Wait.
func EncodeWaiting(waits []store.Wait) ([]byte, error) {
	if len(waits) == 0 {
		return nil, nil
	}
	return encode(waits)
}

// DecodeWaiting reads what EncodeWaiting wrote for run runID: nil for NULL.
// Anything else than a JSON array of waits, each naming a step and one of a
// request, a key or a call (a call may name its key too), wraps
// store.ErrCorruptRecord.
func DecodeWaiting(runID string, col []byte) ([]store.Wait, error) {
	if col == nil {
		return nil, nil
	}
	what := fmt.Sprintf("what run %q waits for", runID)
	var waits []store.Wait
	if err := decodeStrict(col, &waits); err != nil {
		return nil, corrupt(what, err.Error())
	}
	if len(waits) == 0 {
		return nil, corrupt(what, "an empty list is stored as NULL")
	}
	for _, w := range waits {
		named := 0
		key := w.Key
		if w.Call != "" {
			key = "" // the call's own
		}
		for _, s := range []string{w.Request, key, w.Call} {
			if s != "" {
				named++
			}
		}
		if w.StepID == "" || named != 1 {
			return nil, corrupt(what, fmt.Sprintf("a wait for step %q names not one of a request, a key and a call", w.StepID))
		}
	}
	return waits, nil
}

// decodeStrict decodes doc into v, refusing members v has no field for and
// anything after the value.
func decodeStrict(doc []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("more than one value")
	}
	return nil
}
