package storecodec

import (
	"encoding/json"
	"fmt"

	"github.com/planexec/planexec/store"
)

// Claim states as the claims tables spell them; the stores' SQL spells
// them so too.
const (
	StateAcquired  = "acquired"
	StateCompleted = "completed"
	StateInDoubt   = "in_doubt"
	// StateFree is a key given up; the row keeps its epoch so fencing
	// still holds.
	StateFree = "free"
)

// ClaimRow is what every store reads of a claims row to know what the
// claim is. A store keeps the rest of the row (epoch, holder, lease) its
// own way.
type ClaimRow struct {
	State   string
	Outcome []byte // nil: NULL; empty: an empty outcome
	Version int
}

// EncodeOutcome is a claim's outcome as stored: never NULL, so that a
// completed claim whose outcome is NULL can only be damage. An empty
// outcome is stored as zero bytes.
func EncodeOutcome(outcome json.RawMessage) []byte {
	if outcome == nil {
		return []byte{}
	}
	return outcome
}

// DecodeClaim checks the claims row of key and returns its state (store.ClaimFree
// for a key given up) and, for a completed claim, its outcome (nil for an
// empty one). A row of a newer layout wraps store.ErrNewerRecord. A row
// with no version, a state this package never writes, or a completed claim
// whose outcome is NULL or not JSON wraps store.ErrCorruptRecord: read as
// anything else, it could replay garbage as a step's outcome or run a
// finished step again.
func DecodeClaim(key store.Key, r ClaimRow) (store.ClaimState, json.RawMessage, error) {
	what := fmt.Sprintf("claim of key %s", key.Digest)
	switch {
	case r.Version > ClaimVersion:
		return 0, nil, newer(what, r.Version, ClaimVersion)
	case r.Version < 1:
		return 0, nil, corrupt(what, "no layout version")
	}
	switch r.State {
	case StateAcquired:
		return store.ClaimAcquired, nil, nil
	case StateInDoubt:
		return store.ClaimInDoubt, nil, nil
	case StateFree:
		return store.ClaimFree, nil, nil
	case StateCompleted:
		switch {
		case r.Outcome == nil:
			return 0, nil, corrupt(what, "completed without an outcome")
		case len(r.Outcome) == 0:
			return store.ClaimCompleted, nil, nil // completed with an empty outcome, as given
		case !json.Valid(r.Outcome):
			return 0, nil, corrupt(what, "the outcome is not JSON")
		}
		return store.ClaimCompleted, r.Outcome, nil
	}
	return 0, nil, corrupt(what, fmt.Sprintf("state %q is none this package writes", r.State))
}
