package planexec

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strconv"

	"github.com/planexec/planexec/internal/strictjson"
)

// Plan is what a planner writes: a goal and the steps that reach it. It names
// tools and carries arguments; it never carries a sentence somebody has to
// interpret. The executor gives each plan an id and a revision.
type Plan struct {
	ID       string `json:"id"`
	Goal     string `json:"goal"`
	Revision int    `json:"revision"`
	Steps    []Step `json:"steps"`
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
	return l
}

// planWire is the shape a planner writes: a goal and steps. The executor, not
// the model, assigns the plan's id and revision.
type planWire struct {
	Goal  string     `json:"goal,omitempty"`
	Steps []stepWire `json:"steps"`
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

// DecodePlan decodes a planner's raw output strictly. Output that is empty or
// null is ReasonEmpty; output that is not a plan's shape (not JSON, unknown or
// missing fields, wrong types) is ReasonMalformed. The returned plan has no id
// or revision yet; the executor assigns them. Validation of tools, arguments
// and dependencies is Executor.Validate's job.
func DecodePlan(raw []byte, lim Limits) (Plan, error) {
	lim = lim.withDefaults()
	refuse := func(r Reason, v []Violation) (Plan, error) {
		return Plan{}, &PlanValidationError{Reason: r, Violations: v, Payload: raw}
	}
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		return refuse(ReasonEmpty, nil)
	}
	if len(raw) > lim.MaxPlanBytes {
		return refuse(ReasonMalformed, []Violation{{Problem: "plan larger than " + strconv.Itoa(lim.MaxPlanBytes) + " bytes"}})
	}
	var w planWire
	// Arguments are decoded later by their contract; here they only need to be
	// JSON, nested no deeper than the limit allows (plus the plan's own levels).
	if vs := planDecoder.Decode(raw, &w, strictjson.Limits{MaxDepth: lim.MaxArgumentDepth + 3, MaxBytes: lim.MaxPlanBytes}); vs != nil {
		return refuse(ReasonMalformed, violations(vs))
	}
	p := Plan{Goal: w.Goal, Steps: make([]Step, len(w.Steps))}
	for i, s := range w.Steps {
		p.Steps[i] = Step(s)
	}
	return p, nil
}

func violations(vs []strictjson.Violation) []Violation {
	out := make([]Violation, len(vs))
	for i, v := range vs {
		out[i] = Violation{Path: v.Path, Problem: v.Problem}
	}
	return out
}
