package planexec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"unicode"
	"unicode/utf8"

	"github.com/planexec/planexec/internal/canonjson"
	"github.com/planexec/planexec/internal/dag"
	"github.com/planexec/planexec/internal/strictjson"
	"github.com/planexec/planexec/store"
)

// Plan is what a planner writes: a goal and the steps that reach it. It names
// tools and carries arguments; it never carries a sentence somebody has to
// interpret. The executor gives each plan an id and a revision.
type Plan struct {
	ID       string `json:"id"`
	Goal     string `json:"goal"`
	Revision int    `json:"revision"`
	// Round is the round of a run of rounds (Run.Do) the plan is for,
	// from 1; 0 for a plan run on its own (Run.Execute).
	Round int    `json:"round,omitempty"`
	Steps []Step `json:"steps"`
	// Answer, in a run of rounds, ends the run: the planner's answer to
	// the task from the work done, with no steps.
	Answer string `json:"answer,omitempty"`
	// Question, in a run of rounds, asks the person something only they
	// can tell, with no steps: the run waits for their reply (Run.Reply).
	Question string `json:"question,omitempty"`
}

// Step names a registered tool and carries its arguments. DependsOn gives the
// order: the order in which the planner happened to write the steps decides
// nothing. Intent is for the person reading the plan back; nothing executes it.
type Step struct {
	ID   string `json:"id"`
	Tool string `json:"tool"`
	// Arguments stay raw JSON until the tool's contract decodes them, so
	// decimals and large integers arrive exactly as written.
	Arguments json.RawMessage `json:"arguments"`
	DependsOn []string        `json:"depends_on,omitempty"`
	Intent    string          `json:"intent,omitempty"`
}

// Step looks up a step by id.
func (p *Plan) Step(id string) (Step, bool) {
	for _, s := range p.Steps {
		if s.ID == id {
			return s, true
		}
	}
	return Step{}, false
}

// Limits bound what validation accepts, so that a hostile or runaway plan is
// refused with a clear error instead of costing memory or time.
type Limits struct {
	// MaxSteps is the most steps a plan may have; more is ReasonTooLong.
	// Default: 24.
	MaxSteps int
	// MaxPlanBytes bounds a planner's raw output. Default: 1 MiB.
	MaxPlanBytes int
	// MaxIDLength bounds step ids. Default: 64 bytes.
	MaxIDLength int
	// MaxArgumentDepth bounds the nesting of a step's arguments. Default: 32.
	MaxArgumentDepth int
	// MaxReferences bounds the references to earlier outcomes a plan may
	// hold (see RefKey); more is ReasonReference. A step's arguments, once
	// its references are resolved, are bounded by MaxPlanBytes too.
	// Default: 128.
	MaxReferences int
}

func (l Limits) withDefaults() Limits {
	if l.MaxSteps <= 0 {
		l.MaxSteps = 24
	}
	if l.MaxPlanBytes <= 0 {
		l.MaxPlanBytes = 1 << 20
	}
	if l.MaxIDLength <= 0 {
		l.MaxIDLength = 64
	}
	if l.MaxArgumentDepth <= 0 {
		l.MaxArgumentDepth = 32
	}
	if l.MaxReferences <= 0 {
		l.MaxReferences = 128
	}
	return l
}

// planWire is the shape a planner writes: a goal and steps. The executor, not
// the model, assigns the plan's id and revision.
type planWire struct {
	Goal     string     `json:"goal,omitempty"`
	Steps    []stepWire `json:"steps,omitempty"` // absent: empty, not malformed
	Answer   *string    `json:"answer,omitempty"`
	Question *string    `json:"question,omitempty"`
}

type stepWire struct {
	ID        string          `json:"id"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
	DependsOn []string        `json:"depends_on,omitempty"`
	Intent    string          `json:"intent,omitempty"`
}

var planDecoder = mustDecoder(reflect.TypeFor[planWire]())

func mustDecoder(t reflect.Type) *strictjson.Decoder {
	d, err := strictjson.For(t)
	if err != nil {
		panic(err)
	}
	return d
}

// DecodePlan decodes a planner's raw output strictly. Output larger than
// MaxPlanBytes is ReasonMalformed, whatever it holds. Output that is empty
// (only JSON whitespace), null, or a plan with no steps ({} and
// {"steps": []} alike) and neither an answer nor a question is
// ReasonEmpty; an answer or a question beside steps, or both together, is
// ReasonMalformed; output that is not a plan's shape
// (not JSON, whitespace JSON does not allow, unknown fields, wrong types) is
// ReasonMalformed. The returned plan has no id or revision yet; the executor
// assigns them. Validation of tools, arguments and dependencies is
// Run.Validate's job.
func DecodePlan(raw []byte, lim Limits) (Plan, error) {
	lim = lim.withDefaults()
	refuse := func(r Reason, v []Violation) (Plan, error) {
		return Plan{}, &PlanValidationError{Reason: r, Violations: v, Payload: raw}
	}
	if len(raw) > lim.MaxPlanBytes {
		return refuse(ReasonMalformed, []Violation{{Why: "plan larger than " + strconv.Itoa(lim.MaxPlanBytes) + " bytes"}})
	}
	trimmed := bytes.Trim(raw, " \t\r\n") // JSON's whitespace, no other
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		return refuse(ReasonEmpty, nil)
	}
	var w planWire
	// Arguments are decoded later by their contract; here they only need to be
	// JSON, nested no deeper than the limit allows (plus the plan's own levels).
	if vs := planDecoder.Decode(raw, &w, strictjson.Limits{MaxDepth: lim.MaxArgumentDepth + 3, MaxBytes: lim.MaxPlanBytes}); vs != nil {
		return refuse(ReasonMalformed, violations(vs))
	}
	answer, question := orEmpty(w.Answer), orEmpty(w.Question)
	switch {
	case answer != "" && question != "":
		return refuse(ReasonMalformed, []Violation{{Path: "/question", Why: "an answer ends the run and a question waits on the person: write one of them"}})
	case (answer != "" || question != "") && len(w.Steps) > 0:
		return refuse(ReasonMalformed, []Violation{{Path: "/steps", Why: "a plan that answers or asks has no steps: steps run first, and the next round answers from what they found"}})
	case answer != "" || question != "":
		return Plan{Goal: w.Goal, Answer: answer, Question: question}, nil
	case len(w.Steps) == 0:
		return refuse(ReasonEmpty, nil)
	}
	p := Plan{Goal: w.Goal, Steps: make([]Step, len(w.Steps))}
	for i, s := range w.Steps {
		p.Steps[i] = Step(s)
	}
	return p, nil
}

func orEmpty(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func violations(vs []strictjson.Violation) []Violation {
	out := make([]Violation, len(vs))
	for i, v := range vs {
		out[i] = Violation{Path: v.Path, Why: v.Problem}
	}
	return out
}

// vplan is a plan that passed validation, with what execution needs.
type vplan struct {
	rounds *roundsState // the run of rounds the plan is a round of; nil for a plan on its own
	refs   bool         // a step's arguments hold references
	// update is true once the run's record is known to be in the store
	// (read, or written by this call): a save then only replaces it.
	update bool
	// create is true for the first save of a run of rounds, made before
	// its first round is planned: a record already stored is not saved
	// over.
	create bool
	plan   Plan
	doc    []byte // the plan's document as stored, once encoded: see document
	steps  []vstep
	graph  *dag.Graph
	order  []int
}

// document returns the plan's JSON document as a store keeps it
// (store.PlanRecord.Plan), encoded once for every save of the plan: what
// encoding/json writes for a Plan without HTML escaping, except that each
// step's arguments stand byte for byte as the planner wrote them (they were
// checked as JSON by validation).
//
// The document of a round of a run of rounds holds the run's rounds too
// (see roundsState), so that a round's plan and what the rounds before it
// found are stored in one write.
func (v *vplan) document() []byte {
	if v.doc == nil {
		v.doc = appendPlan(nil, &v.plan)
	}
	if v.rounds == nil {
		return v.doc
	}
	rounds, _ := json.Marshal(v.rounds) // strings, numbers and raw outcomes: it cannot fail
	b := make([]byte, 0, len(v.doc)+len(rounds)+12)
	b = append(b, v.doc[:len(v.doc)-1]...)
	b = append(b, `,"rounds":`...)
	b = append(b, rounds...)
	return append(b, '}')
}

// appendPlan appends p's document to b. It writes what encoding/json would
// (field order, omitted empty fields, string escapes) without its
// reflection and without compacting the arguments, only to put them back.
func appendPlan(b []byte, p *Plan) []byte {
	size := 64 + len(p.ID) + len(p.Goal)
	for i := range p.Steps {
		s := &p.Steps[i]
		size += 64 + len(s.ID) + len(s.Tool) + len(s.Arguments) + len(s.Intent)
		for _, d := range s.DependsOn {
			size += 3 + len(d)
		}
	}
	b = slices.Grow(b, size)
	b = append(b, `{"id":`...)
	b = appendJSONString(b, p.ID)
	b = append(b, `,"goal":`...)
	b = appendJSONString(b, p.Goal)
	b = append(b, `,"revision":`...)
	b = strconv.AppendInt(b, int64(p.Revision), 10)
	if p.Round != 0 {
		b = append(b, `,"round":`...)
		b = strconv.AppendInt(b, int64(p.Round), 10)
	}
	b = append(b, `,"steps":`...)
	if p.Steps == nil {
		b = append(b, "null"...)
		return appendOutcome(b, p)
	}
	b = append(b, '[')
	for i := range p.Steps {
		s := &p.Steps[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"id":`...)
		b = appendJSONString(b, s.ID)
		b = append(b, `,"tool":`...)
		b = appendJSONString(b, s.Tool)
		b = append(b, `,"arguments":`...)
		if len(s.Arguments) == 0 {
			b = append(b, "null"...)
		} else {
			b = append(b, s.Arguments...)
		}
		if len(s.DependsOn) > 0 {
			b = append(b, `,"depends_on":[`...)
			for j, d := range s.DependsOn {
				if j > 0 {
					b = append(b, ',')
				}
				b = appendJSONString(b, d)
			}
			b = append(b, ']')
		}
		if s.Intent != "" {
			b = append(b, `,"intent":`...)
			b = appendJSONString(b, s.Intent)
		}
		b = append(b, '}')
	}
	b = append(b, ']')
	return appendOutcome(b, p)
}

// appendOutcome ends a plan's document with its answer and question.
func appendOutcome(b []byte, p *Plan) []byte {
	if p.Answer != "" {
		b = append(b, `,"answer":`...)
		b = appendJSONString(b, p.Answer)
	}
	if p.Question != "" {
		b = append(b, `,"question":`...)
		b = appendJSONString(b, p.Question)
	}
	return append(b, '}')
}

// appendJSONString appends s quoted as encoding/json quotes a string when it
// does not escape HTML: '"' and '\\' escaped, control characters as \b, \f,
// \n, \r, \t or \u00XX, invalid UTF-8 as \ufffd, U+2028 and U+2029 escaped.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// decodeStored decodes a plan document a store gave back. One that does not
// decode is a damaged record.
func decodeStored(rec *store.PlanRecord) (Plan, error) {
	var p Plan
	if err := json.Unmarshal(rec.Plan, &p); err != nil {
		return Plan{}, &store.Error{Op: "load plan", Err: fmt.Errorf("the plan of run %s: %w: %v", quote(rec.RunID), store.ErrCorruptRecord, err)}
	}
	if p.ID != rec.PlanID {
		return Plan{}, &store.Error{Op: "load plan", Err: fmt.Errorf("the plan of run %s names plan %s, its record %s: %w", quote(rec.RunID), quote(p.ID), quote(rec.PlanID), store.ErrCorruptRecord)}
	}
	return p, nil
}

type vstep struct {
	step *Step
	tool *Tool
	args decoded
	key  Key
	// refs are the step's references to earlier outcomes: with any, args
	// and key are known only when the step is about to run (see
	// Run.prepare).
	refs []reference
}

// validate checks plan as a plan to act on under d; a step naming a tool in
// barred (one that failed twice in a run of rounds) is refused with
// ReasonNotAllowed.
func (r *Run) validate(plan *Plan, payload []byte, barred []string, d *Delegation) (*vplan, *PlanValidationError) {
	lim := r.ex.cfg.Limits
	names := max(lim.MaxIDLength, 64)
	refuse := func(r Reason, step, tool string, vs ...Violation) *PlanValidationError {
		return &PlanValidationError{Reason: r, Step: clip(step, names), Tool: clip(tool, names), Violations: vs, Payload: payload,
			RunID: d.RunID, Tenant: d.Tenant, PlanID: plan.ID, Revision: plan.Revision}
	}
	if len(plan.Steps) == 0 {
		return nil, refuse(ReasonEmpty, "", "")
	}
	if len(plan.Steps) > lim.MaxSteps {
		return nil, refuse(ReasonTooLong, "", "", Violation{Path: "/steps",
			Why: fmt.Sprintf("%d steps, more than the %d allowed", len(plan.Steps), lim.MaxSteps)})
	}
	size := 0
	for i := range plan.Steps {
		s := &plan.Steps[i]
		size += len(s.ID) + len(s.Tool) + len(s.Arguments) + len(s.Intent)
		for _, dep := range s.DependsOn {
			size += len(dep)
		}
	}
	if size > lim.MaxPlanBytes {
		return nil, refuse(ReasonMalformed, "", "", Violation{Why: fmt.Sprintf("plan larger than %d bytes", lim.MaxPlanBytes)})
	}
	v := &vplan{plan: *plan, steps: make([]vstep, len(plan.Steps))}
	index := make(map[string]int, len(plan.Steps))
	keys := newKeyer(d.Tenant, d.RunID, plan.Round)
	nrefs := 0
	for i := range plan.Steps {
		s := &plan.Steps[i]
		if problem := checkID(s.ID, lim.MaxIDLength); problem != "" {
			return nil, refuse(ReasonMalformed, s.ID, s.Tool, Violation{Path: fmt.Sprintf("/steps/%d/id", i), Why: problem})
		}
		if _, dup := index[s.ID]; dup {
			return nil, refuse(ReasonDuplicateID, s.ID, s.Tool, Violation{Path: fmt.Sprintf("/steps/%d/id", i), Why: "another step has this id"})
		}
		index[s.ID] = i
		t, ok := r.tool(s.Tool)
		if !ok {
			return nil, refuse(ReasonUnknownTool, s.ID, s.Tool)
		}
		if !d.allows(s.Tool) {
			return nil, refuse(ReasonNotAllowed, s.ID, s.Tool)
		}
		if slices.Contains(barred, s.Tool) {
			return nil, refuse(ReasonNotAllowed, s.ID, s.Tool, Violation{Path: fmt.Sprintf("/steps/%d/tool", i),
				Why: "the tool failed twice in this run and is no longer offered"})
		}
		refs, vs := findRefs(s.Arguments, lim)
		if vs != nil {
			return nil, refuse(ReasonReference, s.ID, s.Tool, vs...)
		}
		if nrefs += len(refs); nrefs > lim.MaxReferences {
			return nil, refuse(ReasonReference, s.ID, s.Tool, Violation{Path: fmt.Sprintf("/steps/%d/arguments", i),
				Why: fmt.Sprintf("the plan holds more than the %d references to earlier outcomes allowed", lim.MaxReferences)})
		}
		if refs != nil {
			// The values, and so the key, are known when the step is
			// about to run.
			if vs := withRefs(t.contract, s.Arguments, refs, lim); vs != nil {
				return nil, refuse(ReasonArguments, s.ID, s.Tool, vs...)
			}
			v.steps[i] = vstep{step: &v.plan.Steps[i], tool: t, refs: refs}
			v.refs = true
			continue
		}
		args, vs := t.contract.decode(s.Arguments, lim)
		if vs != nil {
			return nil, refuse(ReasonArguments, s.ID, s.Tool, vs...)
		}
		v.steps[i] = vstep{step: &v.plan.Steps[i], tool: t, args: args,
			key: Key{Tenant: d.Tenant, Digest: keys.digest(s.Tool, args.keyJSON, t.contract.perTenant, t.contract.irreversible)}}
	}
	// Two steps with one key would be one effect: the second would replay
	// the first, or wait on it as if another holder had it.
	effects := make(map[string]int, len(v.steps))
	for i := range v.steps {
		if v.steps[i].refs != nil {
			continue
		}
		k := v.steps[i].key.Digest
		if first, dup := effects[k]; dup {
			s := &plan.Steps[i]
			return nil, refuse(ReasonDuplicateEffect, s.ID, s.Tool, Violation{Path: fmt.Sprintf("/steps/%d", i),
				Why: fmt.Sprintf("performs the same effect as step %s (same tool and key arguments)", quote(plan.Steps[first].ID))})
		}
		effects[k] = i
	}
	// Every step's dependencies in one backing array: those it names and
	// those its references imply.
	edges := 0
	for i := range plan.Steps {
		edges += len(plan.Steps[i].DependsOn) + len(v.steps[i].refs)
	}
	deps, all := make([][]int, len(plan.Steps)), make([]int, 0, edges)
	for i := range plan.Steps {
		s := &plan.Steps[i]
		start := len(all)
		for j, dep := range s.DependsOn {
			k, ok := index[dep]
			if !ok {
				return nil, refuse(ReasonDependency, s.ID, s.Tool, Violation{Path: fmt.Sprintf("/steps/%d/depends_on/%d", i, j), Why: "waits on a step nobody planned"})
			}
			if k == i {
				return nil, refuse(ReasonCycle, s.ID, s.Tool, Violation{Path: fmt.Sprintf("/steps/%d/depends_on/%d", i, j), Why: "the step waits on itself"})
			}
			all = append(all, k)
		}
		for k := range v.steps[i].refs {
			ref := &v.steps[i].refs[k]
			j, ok := index[ref.step]
			at := fmt.Sprintf("/steps/%d/arguments%s", i, pointer(ref.at))
			switch {
			case !ok:
				return nil, refuse(ReasonDependency, s.ID, s.Tool, Violation{Path: at, Why: "the " + ref.describe() + " names a step nobody planned"})
			case j == i:
				return nil, refuse(ReasonCycle, s.ID, s.Tool, Violation{Path: at, Why: "the " + ref.describe() + " reads the step's own outcome"})
			}
			ref.from = j
			if !slices.Contains(all[start:], j) {
				all = append(all, j)
			}
		}
		deps[i] = all[start:len(all):len(all)]
	}
	v.graph = dag.New(deps)
	order, blocked := v.graph.Order()
	if blocked != nil {
		inCycle := v.graph.InCycle(blocked)
		vs := make([]Violation, len(blocked))
		first := -1
		for n, b := range blocked {
			what := "waits on a step in a cycle"
			if inCycle[n] {
				what = "is in a cycle"
				if first < 0 {
					first = b
				}
			}
			vs[n] = Violation{Path: fmt.Sprintf("/steps/%d", b), Why: fmt.Sprintf("step %s %s", quote(plan.Steps[b].ID), what)}
		}
		s := plan.Steps[first]
		return nil, refuse(ReasonCycle, s.ID, s.Tool, vs...)
	}
	v.order = order
	// Each reference fits the type of what it reads.
	for i := range v.steps {
		s := &v.steps[i]
		for k := range s.refs {
			ref := &s.refs[k]
			if why := checkRef(ref, v.steps[ref.from].tool, s.tool.contract); why != "" {
				return nil, refuse(ReasonReference, s.step.ID, s.step.Tool, Violation{Path: pointer(ref.at), Why: "the " + ref.describe() + ": " + why})
			}
		}
	}
	return v, nil
}

// firstViolation summarises a refusal for an event: paths and problems only.
func firstViolation(e *PlanValidationError) string {
	if len(e.Violations) == 0 {
		return ""
	}
	s := e.Violations[0].String()
	if n := len(e.Violations) - 1; n > 0 {
		s += fmt.Sprintf(" (and %d more)", n)
	}
	return s
}

// keyer digests idempotency keys: the canonical JSON object
// {"arguments": ..., "round": ..., "run": ..., "tenant": ..., "tool": ...}
// ("run" left out for an effect once per tenant, "round" for all but the
// reversible steps of the rounds after the first), built by hand (members
// in sorted order) in one reused buffer.
type keyer struct {
	roundRunTenant []byte // `,"round":N,"run":"…","tenant":"…","tool":`
	runTenant      []byte // `,"run":"…","tenant":"…","tool":`
	tenant         []byte // `,"tenant":"…","tool":`, for effects once per tenant
	buf            []byte
}

// newKeyer digests the keys of a run's steps in round (0 for a plan run on
// its own). An irreversible effect has one key in every round, so it is
// done at most once per run whichever round asks for it; a reversible one
// (a read) asked for again in a later round runs again, for fresh data.
func newKeyer(tenant, run string, round int) *keyer {
	b := append([]byte(nil), `,"round":`...)
	b = strconv.AppendInt(b, int64(round), 10)
	atRun := len(b)
	b = append(b, `,"run":`...)
	b = canonjson.AppendString(b, run)
	at := len(b)
	b = append(b, `,"tenant":`...)
	b = canonjson.AppendString(b, tenant)
	b = append(b, `,"tool":`...)
	k := &keyer{runTenant: b[atRun:], tenant: b[at:]}
	if round > 1 {
		k.roundRunTenant = b
	}
	return k
}

// digest is the key of tool's effect with arguments: of this run, or of
// the tenant when perTenant (the object has no "run" member then, so the
// two never meet); of this round too for a reversible effect after the
// first round.
func (k *keyer) digest(tool string, arguments []byte, perTenant, irreversible bool) string {
	k.buf = append(k.buf[:0], `{"arguments":`...)
	k.buf = append(k.buf, arguments...)
	switch {
	case perTenant:
		k.buf = append(k.buf, k.tenant...)
	case !irreversible && k.roundRunTenant != nil:
		k.buf = append(k.buf, k.roundRunTenant...)
	default:
		k.buf = append(k.buf, k.runTenant...)
	}
	k.buf = canonjson.AppendString(k.buf, tool)
	k.buf = append(k.buf, '}')
	return canonjson.Sum(k.buf)
}

// invisible reports characters that change how an id looks without being
// seen: format characters (bidi controls, zero-width joiners, soft hyphen),
// other default-ignorable code points, variation selectors, private-use and
// unassigned code points. A step id is shown to the person who approves the
// step; it must read as what it is.
func invisible(c rune) bool {
	return unicode.In(c, unicode.Cf, unicode.Co, unicode.Other_Default_Ignorable_Code_Point, unicode.Variation_Selector) ||
		!unicode.In(c, unicode.L, unicode.M, unicode.N, unicode.P, unicode.S, unicode.Z, unicode.Cc)
}

// checkID says what makes id unfit as a step's id, at most maxLen bytes
// long, or "".
func checkID(id string, maxLen int) string {
	switch {
	case id == "":
		return "a step needs an id"
	case len(id) > maxLen:
		return fmt.Sprintf("step id longer than %d bytes", maxLen)
	case !utf8.ValidString(id):
		return "step id is not valid UTF-8"
	}
	for _, c := range id {
		if ' ' < c && c < utf8.RuneSelf && c != 0x7f {
			continue // printable ASCII: nothing below applies
		}
		switch {
		case unicode.IsControl(c) || unicode.IsSpace(c):
			return "step id holds a space or control character"
		case invisible(c):
			return "step id holds an invisible or direction-changing character"
		}
	}
	return ""
}
