package planexec

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/planexec/planexec/store"
)

// RunStatus is where a stored run stands.
type RunStatus = store.RunStatus

// Run states, as a store keeps them and Executor.Runs lists them.
const (
	RunRunning          = store.RunRunning          // an executor is running the plan
	RunAwaitingApproval = store.RunAwaitingApproval // a person has yet to decide (RunInfo.Waiting names the requests)
	RunInDoubt          = store.RunInDoubt          // a step's effect may have landed (RunInfo.Waiting names its key)
	RunInterrupted      = store.RunInterrupted      // stopped before it finished, nothing in doubt: resume it
	RunCompleted        = store.RunCompleted        // every step finished (a run of rounds: the planner answered)
	RunFailed           = store.RunFailed           // a step failed, or a person or the ladder refused one
	RunPlanning         = store.RunPlanning         // a run of rounds between rounds: Do goes on with the next
	RunAwaitingReply    = store.RunAwaitingReply    // the planner asked the person: Reply goes on with their answer
	RunAwaitingTool     = store.RunAwaitingTool     // a caller's tool call was handed back: SubmitResult, then Resume
)

// Info is where the stored run stands: what a listing shows, with the
// delegation the run acts under (see Resume) and what each request it
// waits for asks. A run the store has no record of is ErrNoRecord.
func (r *Run) Info(ctx context.Context) (RunInfo, error) {
	rec, d, err := r.adopt(ctx, reading)
	if err != nil {
		return RunInfo{}, err
	}
	info := runInfo(d.Tenant, store.RunSummary{RunID: rec.RunID, PlanID: rec.PlanID, Status: rec.Status, Waiting: rec.Waiting,
		LeaseExpires: rec.LeaseExpires, Created: rec.Created, Updated: rec.Updated}, r.ex.now())
	info.Delegation = d
	if plan, st, err := decodeRun(rec); err == nil {
		info.Question, info.Barred = plan.Question, st.barred()
	}
	return info, nil
}

// RunInfo is a stored run as a listing shows it.
type RunInfo struct {
	ID      string
	PlanID  string
	Status  RunStatus
	Waiting []Wait
	Created time.Time
	Updated time.Time
	// Delegation is the authority the run acts under, as Run.Info reads
	// it (a listing leaves it nil).
	Delegation *Delegation
	// Question is what a run awaiting a reply asked (Run.Info only).
	Question string
	// Barred lists the tools that failed twice in a run of rounds, sorted:
	// the run does not offer them again (Run.Info only).
	Barred []string
}

// Wait is one thing a stopped run waits for: a person's decision on an
// approval request (Request, and what it asks; record it with Run.Decide),
// the resolution of a key in doubt (Key; settle it with Run.Resolve), or
// the result of a tool call handed back to the caller (Call; give it to
// Run.SubmitResult).
type Wait struct {
	Step    string
	Tool    string
	Request string
	// Approval is what the person is asked: the tool, the arguments as
	// they will run (references resolved), the amount and the grant that
	// escalated it. It came from the model: keep it out of logs.
	Approval *ApprovalRequest
	Key      Key
	Call     string
	// HandedBack is the call the run waits on, as it was handed back (its
	// tool and arguments), for a client that lost it. It came from the
	// model: keep it out of logs.
	HandedBack *ToolCall
}

// RunQuery asks for a page of a tenant's runs.
type RunQuery struct {
	// Status lists only runs in these states; none lists every run.
	Status []RunStatus
	// After is the Next of the page before; "" starts from the most
	// recently updated run.
	After string
	// Limit is the most runs on a page. Default: 50; at most 1000.
	Limit int
}

// RunPage is one page of a listing.
type RunPage struct {
	Runs []RunInfo
	// Next continues the listing (RunQuery.After); "" on the last page.
	Next string
}

// ErrInvalidQuery reports a listing that cannot be made as asked.
var ErrInvalidQuery = errors.New("planexec: invalid query")

// Runs lists tenant's stored runs, most recently updated first, a page at a
// time: the runs waiting for a person (RunAwaitingApproval), in doubt,
// interrupted, failed, and so on, each with what it waits for. One tenant
// never sees another's runs. It needs a store that lists runs
// (store.RunLister): every store of this module does. A status that is not
// one of the Run states, or a cursor no listing returned, wraps
// ErrInvalidQuery.
func (ex *Executor) Runs(ctx context.Context, tenant string, q RunQuery) (RunPage, error) {
	lister := ex.st.lister
	if lister == nil {
		return RunPage{}, &ConfigurationError{Why: "the store does not list runs"}
	}
	for _, st := range q.Status {
		if !slices.Contains(store.RunStatuses, st) {
			return RunPage{}, fmt.Errorf("planexec: listing runs: status %s is none a run can be in: %w", quote(string(st)), ErrInvalidQuery)
		}
	}
	sq := store.RunQuery{Statuses: q.Status, Limit: q.Limit}
	switch {
	case sq.Limit <= 0:
		sq.Limit = 50
	case sq.Limit > 1000:
		sq.Limit = 1000
	}
	if q.After != "" {
		var err error
		if sq.AfterUpdated, sq.AfterRunID, err = decodeCursor(q.After); err != nil {
			return RunPage{}, err
		}
	}
	// A run left running by an executor that died (its lease ran out) is
	// interrupted, whatever its record says: listing interrupted runs asks
	// the store for running ones too, and listing running ones drops them.
	wants := slices.Clone(q.Status)
	if slices.Contains(wants, RunInterrupted) && !slices.Contains(wants, RunRunning) {
		sq.Statuses = append(slices.Clone(sq.Statuses), RunRunning)
	}
	now := ex.now()
	want := sq.Limit
	// One more than asked tells whether a page follows; a page whose runs
	// are not all shown is read on until it is full or the runs end.
	sq.Limit++
	var page RunPage
	for {
		runs, err := lister.ListRuns(ctx, tenant, sq)
		if err != nil {
			return RunPage{}, fmt.Errorf("planexec: listing the runs of tenant %s: %w", quote(tenant), err)
		}
		for _, s := range runs {
			info := runInfo(tenant, s, now)
			if len(wants) > 0 && !slices.Contains(wants, info.Status) {
				continue
			}
			if len(page.Runs) == want {
				last := page.Runs[want-1]
				page.Next = encodeCursor(last.Updated, last.ID)
				return page, nil
			}
			page.Runs = append(page.Runs, info)
		}
		if len(runs) < sq.Limit {
			return page, nil
		}
		last := runs[len(runs)-1]
		sq.AfterUpdated, sq.AfterRunID = last.Updated, last.RunID
	}
}

// runInfo is how a listing shows s at now.
func runInfo(tenant string, s store.RunSummary, now time.Time) RunInfo {
	info := RunInfo{ID: s.RunID, PlanID: s.PlanID, Status: s.Status, Created: s.Created, Updated: s.Updated}
	if s.Status == RunRunning && !now.Before(s.LeaseExpires) {
		info.Status = RunInterrupted
	}
	for _, w := range s.Waiting {
		wait := Wait{Step: w.StepID, Tool: w.Tool, Request: w.Request, Call: w.Call}
		if w.Key != "" {
			wait.Key = Key{Tenant: tenant, Digest: w.Key}
		}
		if w.Request != "" && len(w.Detail) > 0 {
			var req ApprovalRequest
			if json.Unmarshal(w.Detail, &req) == nil && req.ID == w.Request {
				wait.Approval = &req
			}
		}
		if w.Call != "" && len(w.Detail) > 0 {
			var h handedBack
			if json.Unmarshal(w.Detail, &h) == nil && h.Call.ID == w.Call {
				wait.HandedBack = &h.Call
			}
		}
		info.Waiting = append(info.Waiting, wait)
	}
	return info
}

// encodeCursor names the run a page ended with: its update time (seconds
// and nanoseconds, so any time round-trips) and id.
func encodeCursor(updated time.Time, runID string) string {
	b := binary.BigEndian.AppendUint64(nil, uint64(updated.Unix()))
	b = binary.BigEndian.AppendUint32(b, uint32(updated.Nanosecond()))
	return base64.RawURLEncoding.EncodeToString(append(b, runID...))
}

func decodeCursor(c string) (time.Time, string, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil || len(b) < 12 || binary.BigEndian.Uint32(b[8:]) >= 1e9 {
		return time.Time{}, "", fmt.Errorf("planexec: listing runs: not a listing's cursor: %w", ErrInvalidQuery)
	}
	return time.Unix(int64(binary.BigEndian.Uint64(b)), int64(binary.BigEndian.Uint32(b[8:]))).UTC(), string(b[12:]), nil
}
