package planexec

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"github.com/shopspring/decimal"

	"github.com/planexec/planexec/internal/canonjson"
	"github.com/planexec/planexec/internal/jsonptr"
	"github.com/planexec/planexec/internal/strictjson"
	"github.com/planexec/planexec/store"
)

// NewClientTool declares a tool that the caller of a service runs, not the
// service: a tool a client of a chat-completions API passed with its
// request, say. Its arguments are described by a JSON Schema (the client's,
// draft 2020-12; a reference to another document is refused) instead of a
// Go type, and a step's arguments are held to it, strictly, before the step
// is handed back: a document that is not one JSON object, a key written
// twice, a number past what any Go type takes, or anything the schema
// refuses is ReasonArguments, with paths and keywords, never values.
//
// A step of it calls nothing: when it is ready, the run stops, stored, with
// a *ToolCallPendingError carrying the call (an id, the tool, the arguments
// as checked), and the run's status is RunAwaitingTool. The caller runs the
// tool and gives its result to Run.SubmitResult; Resume (or Do) then goes
// on with it as the step's outcome. A call handed back is handed back again,
// with the same id, until its result is in.
//
// A client tool is given to a run (WithTools), since each caller brings its
// own. The options are those of any contract: Irreversible, KeyArguments,
// RequireApproval, OncePerTenant.
func NewClientTool(name, description string, schema json.RawMessage, opts ...ContractOption) (*Tool, error) {
	c, err := newSchemaContract(name, schema, opts...)
	if err != nil {
		return nil, err
	}
	return &Tool{name: name, description: description, contract: c, client: true}, nil
}

// noLoader refuses every document a schema refers to: a client's schema
// must not make the service read a file or a URL.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("the schema refers to %s: only references within it are followed", url)
}

// newSchemaContract is a contract whose arguments a JSON Schema describes.
func newSchemaContract(tool string, schema json.RawMessage, opts ...ContractOption) (*Contract, error) {
	c := &Contract{tool: tool}
	for _, o := range opts {
		o(c)
	}
	if tool == "" {
		return nil, &ConfigurationError{Why: "a tool needs a name"}
	}
	refuse := func(why string) (*Contract, error) {
		return nil, &ConfigurationError{Tool: tool, Why: why}
	}
	if vs := strictjson.CheckValue(schema, strictjson.Limits{}); vs != nil {
		return refuse("its schema is not one JSON document: " + vs[0].String())
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		return refuse("its schema is not JSON")
	}
	obj, _ := doc.(map[string]any)
	if obj == nil || obj["type"] != "object" {
		return refuse(`arguments are a JSON object: its schema must say "type": "object"`)
	}
	props, _ := obj["properties"].(map[string]any)
	for _, k := range c.keyArgs {
		if _, ok := props[k]; !ok {
			return refuse(fmt.Sprintf("key argument %q is not a property of its schema", k))
		}
	}
	if n := schemaCost(obj, obj, map[string]int{}, map[string]bool{}); n > maxSchemaCost {
		return refuse(fmt.Sprintf("its schema is too costly to check: its references unfold to more than %d subschemas", maxSchemaCost))
	}
	comp := jsonschema.NewCompiler()
	comp.DefaultDraft(jsonschema.Draft2020)
	comp.UseLoader(noLoader{})
	const url = "planexec:arguments.json"
	if err := comp.AddResource(url, doc); err != nil {
		return refuse("its schema cannot be read: " + err.Error())
	}
	if c.jschema, err = comp.Compile(url); err != nil {
		return refuse("its schema is not a schema: " + err.Error())
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, schema); err != nil {
		return refuse("its schema is not JSON")
	}
	c.schema = compact.Bytes()
	return c, nil
}

// decodeBySchema checks raw against a schema contract and renders what the
// digests use. The value a step is handed back with is the canonical JSON.
func (c *Contract) decodeBySchema(raw json.RawMessage, lim Limits) (decoded, []Violation) {
	if vs := strictjson.CheckValue(raw, strictjson.Limits{MaxDepth: lim.MaxArgumentDepth, MaxBytes: lim.MaxPlanBytes}); vs != nil {
		return decoded{}, violations(vs)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return decoded{}, []Violation{{Why: "not JSON"}}
	}
	if err := c.jschema.Validate(inst); err != nil {
		var ve *jsonschema.ValidationError
		if !errors.As(err, &ve) {
			return decoded{}, []Violation{{Why: "cannot be validated"}}
		}
		return decoded{}, schemaViolations(ve)
	}
	canon, err := canonjson.Canonicalize(raw)
	if err != nil {
		return decoded{}, []Violation{{Why: "cannot be rendered as JSON"}}
	}
	d := decoded{value: json.RawMessage(canon), canonical: canon}
	var vs []Violation
	if d.keyJSON, vs = c.keyOf(canon); vs != nil {
		return decoded{}, vs
	}
	return d, nil
}

// schemaViolations lists the schema's refusals: where, and which keyword
// (and for a missing property, its name, which the schema gave). What the
// validator says of the value is left out: it may quote it.
func schemaViolations(ve *jsonschema.ValidationError) []Violation {
	var out []Violation
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(out) >= strictjson.MaxViolations {
			return
		}
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				walk(c)
			}
			return
		}
		var at strings.Builder
		for _, t := range e.InstanceLocation {
			at.WriteString("/" + strictjson.Segment(t))
		}
		why := "fails the schema"
		if kw := e.ErrorKind.KeywordPath(); len(kw) > 0 {
			why = "fails the schema's " + kw[len(kw)-1]
		}
		if req, ok := e.ErrorKind.(*kind.Required); ok {
			why = "missing required " + strings.Join(quoteAll(req.Missing), ", ")
		}
		out = append(out, Violation{Path: at.String(), Why: why})
	}
	walk(ve)
	slices.SortStableFunc(out, func(a, b Violation) int { return strings.Compare(a.Path, b.Path) })
	return out
}

func quoteAll(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = quote(n)
	}
	return out
}

// ToolCall is a step of a tool its caller runs, handed back: what the
// caller calls, and the id its result comes back under.
type ToolCall struct {
	// ID names the call; it is the same each time the call is handed back.
	ID     string `json:"id"`
	StepID string `json:"step_id"`
	Tool   string `json:"tool"`
	// Arguments are the step's arguments as the tool's schema accepted
	// them, references resolved, in canonical JSON.
	Arguments json.RawMessage `json:"arguments"`
}

// ToolCallPendingError reports steps handed back to the run's caller: the
// run stopped there, stored (Stored), having run what came before. Give each
// call's result to Run.SubmitResult, then Resume (or Do) goes on.
type ToolCallPendingError struct {
	RunID, Tenant string
	Calls         []ToolCall
	Stored        bool
	docs          map[string]json.RawMessage // each call as a waiting run stores it, by id
}

func (e *ToolCallPendingError) Error() string {
	return fmt.Sprintf("planexec: run %s awaits the results of %d tool calls handed back to its caller", quote(e.RunID), len(e.Calls))
}

// callPrefix starts a call's id; the rest is its step's key digest.
const callPrefix = "call_"

// callID is the id of the call of a step whose key digest is digest.
func callID(digest string) string {
	return callPrefix + strings.TrimPrefix(digest, "sha256:")
}

// callKey is the key digest of the step of call id.
func callKey(id string) string {
	return "sha256:" + strings.TrimPrefix(id, callPrefix)
}

// handedBack is a call handed back as a run waiting for its result stores
// it: the call, and how its step was cleared, for the step's record.
type handedBack struct {
	Call       ToolCall        `json:"call"`
	ApprovedBy string          `json:"approved_by,omitempty"`
	Grant      string          `json:"grant,omitempty"`
	Amount     decimal.Decimal `json:"amount,omitzero"`
}

// document is the call as a run waiting for its result stores it, cleared
// as clr says.
func (c *ToolCall) document(clr clearance) json.RawMessage {
	h := handedBack{Call: *c}
	if clr.decision != nil {
		h.ApprovedBy = clr.decision.Approver
	}
	if clr.grant != nil {
		h.Grant, h.Amount = clr.grant.ID, clr.amount
	}
	b, _ := json.Marshal(&h) // strings, a decimal and canonical JSON: it cannot fail
	return b
}

// SubmitResult gives the result of a call handed back to the caller (a
// *ToolCallPendingError): outcome, one JSON document, becomes the step's
// outcome, and the next Resume (or Do) goes on with it, handing back
// again only the calls still without a result.
//
// The call's key was claimed before the call was handed back: the result
// completes that claim, with the step's record, in one write. The first
// result given stands; the same result given again is taken (a retried
// request), another is ErrNotPending. A call the stored run does not await
// (another run's, never handed back) is ErrNotPending too, and an outcome
// that is not JSON ErrInvalidDecision; nothing is recorded then. It acts
// for the run's stored user and agent: a Run naming others is a
// *DelegationError. A delegation expired since does not refuse it: the
// call ran, and its result is what happened.
func (r *Run) SubmitResult(ctx context.Context, call string, outcome json.RawMessage) error {
	if vs := strictjson.CheckValue(outcome, strictjson.Limits{MaxBytes: r.ex.cfg.Limits.MaxPlanBytes}); vs != nil {
		return fmt.Errorf("planexec: the result of call %s: %s: %w", quote(call), vs[0], ErrInvalidDecision)
	}
	rec, d, err := r.adopt(ctx, acting)
	if err != nil {
		return err
	}
	notPending := func(why string) error {
		return fmt.Errorf("planexec: call %s of run %s: %s: %w", quote(call), quote(d.RunID), why, ErrNotPending)
	}
	i := slices.IndexFunc(rec.Waiting, func(w store.Wait) bool { return w.Call == call })
	switch {
	case rec.Status != store.RunAwaitingTool && rec.Status != store.RunAwaitingApproval:
		return notPending(fmt.Sprintf("the run is %s, awaiting no tool result", rec.Status))
	case i < 0:
		return notPending("the run awaits no such call")
	}
	w := rec.Waiting[i]
	var h handedBack
	if err := json.Unmarshal(w.Detail, &h); err != nil || h.Call.ID != call {
		return &store.Error{Op: "load plan", Err: fmt.Errorf("the call %s run %s awaits: %w", quote(call), quote(d.RunID), store.ErrCorruptRecord)}
	}
	var compact bytes.Buffer
	_ = json.Compact(&compact, outcome) // checked above
	st, key := r.ex.st, Key{Tenant: d.Tenant, Digest: callKey(call)}
	for range 3 {
		c, err := st.Claim(ctx, store.ClaimRequest{Key: key, RunID: d.RunID, StepID: w.StepID, Tool: w.Tool, Holder: handBackHolder(d.RunID),
			Lease: r.ex.cfg.HandBackLease, TakeOver: true})
		if err != nil {
			return fmt.Errorf("planexec: the claim of call %s: %w", quote(call), err)
		}
		switch {
		case c.State == store.ClaimCompleted && bytes.Equal(c.Outcome, compact.Bytes()):
			return nil // the same result again (a retried request): it stands
		case c.State == store.ClaimCompleted:
			return notPending("another result is in")
		case c.State != store.ClaimAcquired && c.Holder != handBackHolder(d.RunID):
			return notPending("another run holds its key")
		}
		sr := StepResult{Tool: w.Tool, Status: StepDone, Outcome: compact.Bytes(), Key: key, ApprovedBy: h.ApprovedBy}
		srec := stepRecord(rec.PlanID, w.StepID, sr, clearance{}, "", r.ex.now())
		srec.Grant, srec.Amount = h.Grant, h.Amount
		err = st.CompleteStep(ctx, &store.StepWrite{Key: key, Epoch: c.Epoch, RunID: d.RunID, Outcome: sr.Outcome, Record: srec})
		if errors.Is(err, store.ErrFenced) {
			continue // another result landed first, or the claim moved on: read it again
		}
		if err != nil {
			return fmt.Errorf("planexec: recording the result of call %s: %w", quote(call), err)
		}
		r.j.emit(&Event{Kind: EventToolResultSubmitted, RunID: d.RunID, Tenant: d.Tenant, PlanID: rec.PlanID, StepID: w.StepID, Tool: w.Tool, Call: call})
		return r.j.flush(context.WithoutCancel(ctx))
	}
	return notPending("its claim keeps moving")
}

// maxSchemaCost bounds the subschemas a client's schema unfolds to, its
// references followed: what one check of arguments may visit. A schema
// whose definitions refer to each other twice over unfolds exponentially
// (each level doubling the work) while staying small on the wire.
const maxSchemaCost = 10_000

// schemaCost counts the subschemas node unfolds to, following "$ref"s
// within root (a reference into itself, through a cycle, counts once: its
// depth is bounded by the arguments'), saturating past maxSchemaCost.
func schemaCost(root, node any, memo map[string]int, visiting map[string]bool) int {
	switch n := node.(type) {
	case []any:
		total := 0
		for _, x := range n {
			total = min(total+schemaCost(root, x, memo, visiting), maxSchemaCost+1)
		}
		return total
	case map[string]any:
		total := 1
		for k, v := range n {
			switch k {
			case "$defs", "definitions", "const", "enum", "examples", "default":
				continue // data, or definitions counted where they are referred to
			case "$ref", "$dynamicRef":
				ref, _ := v.(string)
				total = min(total+refCost(root, ref, memo, visiting), maxSchemaCost+1)
			default:
				total = min(total+schemaCost(root, v, memo, visiting), maxSchemaCost+1)
			}
		}
		return total
	}
	return 0
}

// refCost is what following ref, a reference within root, costs.
func refCost(root any, ref string, memo map[string]int, visiting map[string]bool) int {
	if c, ok := memo[ref]; ok {
		return c
	}
	if visiting[ref] || !strings.HasPrefix(ref, "#") {
		return 1
	}
	tokens, err := jsonptr.Parse(strings.TrimPrefix(ref, "#"))
	if err != nil {
		return 1
	}
	target := root
	for _, t := range tokens {
		m, ok := target.(map[string]any)
		if !ok {
			return 1
		}
		target = m[t]
	}
	visiting[ref] = true
	c := schemaCost(root, target, memo, visiting)
	delete(visiting, ref)
	memo[ref] = c
	return c
}
