package planexec

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/go-playground/validator/v10"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/planexec/planexec/internal/canonjson"
	"github.com/planexec/planexec/internal/strictjson"
)

// Contract says what one tool takes, as a Go type, and whether its effect can
// be undone. Every tool an agent may call needs one: a tool without a contract
// is a step nothing could have checked.
//
// The JSON Schema the model sees is generated from the same type, and value
// rules come from its `validate:` tags (go-playground/validator): one source of
// truth. Decoding is strict: an unknown key, a key that differs only in case, a
// duplicate key, a missing required key (one without omitempty), a wrong JSON
// type or a failed rule refuses the step. Nothing is coerced, trimmed or
// dropped. decimal.Decimal fields take JSON numbers exactly.
//
// Every rule is checked against its field's type when the contract is
// built: a rule that could not apply (gt on a bool, len on a decimal, an
// unknown rule, min=abc, rules of slice elements without dive) is a
// *ConfigurationError naming the field. Decimals (and pointers to them) take
// gt, gte, lt, lte, min, max, eq, ne and oneof, compared exactly:
// `validate:"gt=0,lte=1000"` refuses 1000.0000000000000001. The rules the
// schema can say go into it, and the rest the model is told in words (see
// Strict).
//
// Describe a field with a jsonschema_description tag, which keeps commas:
// `jsonschema_description:"departure date, YYYY-MM-DD"`. In the jsonschema
// tag a comma separates options, so NewContract refuses a part it does not
// know (the rest of a description cut at a comma) rather than drop it.
//
// A Contract is immutable and safe to share between executors. A tool carries
// its own (see NewTool and Tool.Contract); NewContract builds one alone, for a
// test that checks arguments against it.
type Contract struct {
	tool         string
	irreversible bool
	approval     bool // a person clears every step, whatever its effect
	keyArgs      []string
	perTenant    bool // the key identifies an effect of the tenant, not of one run
	typ          reflect.Type
	dec          *strictjson.Decoder
	schema       json.RawMessage
	strict       bool             // the schema is within what strict structured output accepts
	rules        bool             // the type has validate rules somewhere: decode runs them
	plain        *canonjson.Plain // renders the canonical form, if the type is plain
	// jschema, for a tool its caller runs (NewClientTool), holds the
	// arguments to a JSON Schema instead of a Go type; typ is nil then.
	jschema *jsonschema.Schema
	// pre is the tool's precondition (Precondition), called with a *T;
	// preType is the T it was declared for.
	pre     func(ctx context.Context, d Delegation, args any) error
	preType reflect.Type
}

// ContractOption says what a contract says beyond its argument type.
type ContractOption func(*Contract)

// Irreversible marks a tool whose effect cannot be undone (a booking, a
// payment). Its steps are cleared by a person or a grant before any step runs,
// and a failure that does not wrap ErrNotApplied leaves the step in doubt.
func Irreversible() ContractOption { return func(c *Contract) { c.irreversible = true } }

// Precondition declares a check of a step's arguments against the world as
// it stands now (the item exists, the edge closes no cycle): read only, and
// under the delegation the step would run under. Run.CheckPreconditions
// runs it (a plan refused before anyone applies it), and the gate again
// just before the step acts, its key claimed; a step whose arguments hold
// references is checked only then. A check whose error wraps an
// *UnmetError (Unmet) refuses the step with ReasonPrecondition and the
// error's words, which a planner is shown; any other error (the check
// could not be made) fails the step, its text never shown. Either way the
// step did nothing: it is failed, never in doubt, and its key is free. A
// check is bounded by half the executor's Config.Lease. A is the contract's
// argument type: another is a *ConfigurationError.
func Precondition[A any](check func(ctx context.Context, d Delegation, args A) error) ContractOption {
	return func(c *Contract) {
		c.preType = reflect.TypeFor[A]()
		c.pre = func(ctx context.Context, d Delegation, args any) error {
			a, ok := args.(*A)
			if !ok {
				return fmt.Errorf("planexec: the precondition of %s takes %s, not %T", c.tool, c.preType, args)
			}
			return check(ctx, d, *a)
		}
	}
}

// KeyArguments names the top-level arguments that identify the effect, when
// only some do (an order id, not the note attached to it). The idempotency key
// digests only these. A step missing one is refused with ReasonArguments:
// there is never a silent run without a key.
func KeyArguments(names ...string) ContractOption {
	return func(c *Contract) { c.keyArgs = append(c.keyArgs, names...) }
}

// OncePerTenant makes the tool's effect happen once per tenant rather than
// once per run: the idempotency key digests the tenant, the tool and the
// key arguments, not the run, so a second run that asks for the same effect
// gets the first one's recorded outcome (or, while another holder has it in
// flight or it is in doubt, an *IndeterminateOutcomeError), and the tool is
// not called again.
//
// Choose it for effects the world should see once whichever run asks: a
// refund of one order, a welcome email to one address, a report for one
// day (put the order, the address, the day in KeyArguments). Keep the
// default, once per run, for effects a user may rightly ask for again in a
// new run: a second booking on another day is a new run, not a repeat.
func OncePerTenant() ContractOption { return func(c *Contract) { c.perTenant = true } }

// RequireApproval sends every step of the tool to a person, even when its
// effect can be undone and no autonomy class covers it.
func RequireApproval() ContractOption { return func(c *Contract) { c.approval = true } }

// NewContract declares the contract of tool: its arguments are a T, a struct.
// It returns a *ConfigurationError if T cannot be decoded strictly (an
// interface field, a map with non-string keys, a channel) or a key argument
// names no field of T. NewTool builds a tool's contract this way.
func NewContract[T any](tool string, opts ...ContractOption) (*Contract, error) {
	c := &Contract{
		tool: tool,
		typ:  reflect.TypeFor[T](),
	}
	for _, o := range opts {
		o(c)
	}
	if tool == "" {
		return nil, &ConfigurationError{Why: "a tool needs a name"}
	}
	if c.typ.Kind() != reflect.Struct {
		return nil, &ConfigurationError{Tool: tool, Why: fmt.Sprintf("arguments are a JSON object, so the contract type must be a struct, not %s", c.typ)}
	}
	if c.pre != nil && c.preType != c.typ {
		return nil, &ConfigurationError{Tool: tool, Why: fmt.Sprintf("its precondition takes %s, its arguments are %s", c.preType, c.typ)}
	}
	dec, err := strictjson.For(c.typ)
	if err != nil {
		return nil, &ConfigurationError{Tool: tool, Why: err.Error()}
	}
	c.dec = dec
	if err := checkTags(c.typ); err != nil {
		return nil, &ConfigurationError{Tool: tool, Why: err.Error()}
	}
	c.rules = (&ruleWalk{ruled: map[reflect.Type]bool{}}).hasRules(c.typ)
	c.plain = canonjson.PlainFor(c.typ)
	fields := topLevelFields(c.typ)
	for _, k := range c.keyArgs {
		if !slices.Contains(fields, k) {
			return nil, &ConfigurationError{Tool: tool, Why: fmt.Sprintf("key argument %q is not an argument of %s", k, c.typ)}
		}
	}
	if c.schema, c.strict, err = strictSchema(c.typ, tool); err != nil {
		return nil, &ConfigurationError{Tool: tool, Why: "cannot generate its JSON Schema: " + err.Error()}
	}
	return c, nil
}

// Tool is the name of the tool the contract is for.
func (c *Contract) Tool() string { return c.tool }

// RequiresApproval reports whether a person clears every step of the tool.
func (c *Contract) RequiresApproval() bool { return c.approval }

// Irreversible reports whether the tool's effect cannot be undone.
func (c *Contract) Irreversible() bool { return c.irreversible }

// KeyArguments are the arguments the idempotency key digests; nil means all.
func (c *Contract) KeyArguments() []string { return slices.Clone(c.keyArgs) }

// Schema is the JSON Schema of the arguments, strict-mode ready: every
// property is listed as required (optional ones accept null) and no object
// allows additional properties. The slice is shared: do not modify it.
//
// Value rules appear as the keywords strict mode accepts: minimum, maximum,
// exclusiveMinimum and exclusiveMaximum for number and decimal bounds, enum
// for oneof, minItems and maxItems for slice lengths, format for email,
// uuid, ipv4 and ipv6. A string length (len, min, max) is said in the
// field's description ("exactly 3 characters"), because strict mode rejects
// minLength and maxLength.
//
// Some Go types have no strict-mode schema (a map, whose keys are free; a
// json.RawMessage, which is any value; a minLength or other keyword strict
// mode rejects written in a jsonschema tag): see Strict.
func (c *Contract) Schema() json.RawMessage { return c.schema }

// Strict reports whether Schema stays within what strict structured-output
// modes accept, as OpenAI's Structured Outputs define it. When a plan may use
// a tool whose contract is not strict, the planner asks the model for the
// plan without strict enforcement; the executor validates it in full either
// way. (Anthropic's constrained decoding accepts less, no numeric bounds
// among it: its adapter moves those into descriptions.)
func (c *Contract) Strict() bool { return c.strict }

// Check holds arguments to the contract as validation would, without an
// executor: it returns nil, or a *PlanValidationError with ReasonArguments
// naming the tool and every violation. Limits are the defaults.
func (c *Contract) Check(arguments json.RawMessage) error {
	if _, vs := c.decode(arguments, Limits{}.withDefaults()); vs != nil {
		return &PlanValidationError{Reason: ReasonArguments, Tool: c.tool, Violations: vs}
	}
	return nil
}

// decoded is one step's arguments after its contract accepted them.
type decoded struct {
	value     any    // a *T: the T the tool is called with
	canonical []byte // canonical JSON of value: what approval records digest
	keyJSON   []byte // the part of it the idempotency key digests
}

// decode checks raw strictly, runs the validate rules, and renders the
// canonical forms digests use. A key argument that the value leaves out
// (omitempty) or sets to null is a violation: the step would run without a
// key.
func (c *Contract) decode(raw json.RawMessage, lim Limits) (decoded, []Violation) {
	if c.jschema != nil {
		return c.decodeBySchema(raw, lim)
	}
	ptr, svs := c.dec.New(raw, strictjson.Limits{MaxDepth: lim.MaxArgumentDepth, MaxBytes: lim.MaxPlanBytes})
	if svs != nil {
		return decoded{}, violations(svs)
	}
	// A type without rules has nothing for the validator to find, and
	// walking it would still cost an allocation per field.
	if c.rules {
		if vs := checkValues(ptr); vs != nil {
			return decoded{}, vs
		}
	}
	var canon []byte
	var err error
	if c.plain != nil {
		canon = c.plain.Append(make([]byte, 0, len(raw)), reflect.ValueOf(ptr).Elem())
	} else if canon, err = canonjson.Marshal(ptr); err != nil {
		return decoded{}, []Violation{{Why: "cannot be rendered as JSON"}}
	}
	d := decoded{value: ptr, canonical: canon}
	var vs []Violation
	if d.keyJSON, vs = c.keyOf(canon); vs != nil {
		return decoded{}, vs
	}
	return d, nil
}

// keyOf is the part of canonical arguments the idempotency key digests: all
// of it, or the key arguments. A key argument that the value leaves out
// (omitempty) or sets to null is a violation: the step would run without a
// key.
func (c *Contract) keyOf(canon []byte) ([]byte, []Violation) {
	if len(c.keyArgs) == 0 {
		return canon, nil
	}
	var whole map[string]json.RawMessage
	if err := json.Unmarshal(canon, &whole); err != nil {
		return nil, []Violation{{Why: "cannot be rendered as JSON"}}
	}
	picked := make(map[string]json.RawMessage, len(c.keyArgs))
	var missing []Violation
	for _, k := range c.keyArgs {
		v, ok := whole[k]
		if !ok || bytes.Equal(v, []byte("null")) {
			missing = append(missing, Violation{Path: "/" + strictjson.Segment(k), Why: "key argument missing: the step would run without an idempotency key"})
			continue
		}
		picked[k] = v
	}
	if missing != nil {
		return nil, missing
	}
	key, err := canonjson.Marshal(picked)
	if err != nil {
		return nil, []Violation{{Why: "cannot be rendered as JSON"}}
	}
	return key, nil
}

// ruleViolations turns validator errors into JSON Pointer violations. The
// value that failed is never included: it came from the model.
func ruleViolations(err error) []Violation {
	if err == nil {
		return nil
	}
	var ves validator.ValidationErrors
	if !errors.As(err, &ves) {
		return []Violation{{Why: "cannot be validated"}}
	}
	out := make([]Violation, 0, min(len(ves), strictjson.MaxViolations))
	for _, fe := range ves[:min(len(ves), strictjson.MaxViolations)] {
		rule := fe.Tag()
		if fe.Param() != "" {
			rule += "=" + fe.Param()
		}
		out = append(out, Violation{Path: namespacePointer(fe.Namespace()), Why: "fails rule " + rule})
	}
	return out
}

// namespacePointer turns validator's "Booking.passengers[0].name" into the
// JSON Pointer "/passengers/0/name". A map key inside brackets is taken whole,
// dots and all: it ends at the "]" that is followed by ".", "[" or the end.
func namespacePointer(ns string) string {
	_, rest, ok := strings.Cut(ns, ".")
	if !ok {
		return ""
	}
	var b strings.Builder
	for i := 0; i < len(rest); {
		switch rest[i] {
		case '.':
			i++
		case '[':
			j := i + 1
			for j < len(rest) && !(rest[j] == ']' && (j+1 == len(rest) || rest[j+1] == '.' || rest[j+1] == '[')) {
				j++
			}
			b.WriteByte('/')
			b.WriteString(strictjson.Segment(rest[i+1 : j]))
			i = j + 1
		default:
			j := i
			for j < len(rest) && rest[j] != '.' && rest[j] != '[' {
				j++
			}
			b.WriteByte('/')
			b.WriteString(strictjson.Segment(rest[i:j]))
			i = j
		}
	}
	return b.String()
}

// topLevelFields lists the JSON names of a struct's fields, the way
// encoding/json sees them (embedded structs promoted).
func topLevelFields(t reflect.Type) []string {
	var names []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				names = append(names, topLevelFields(ft)...)
				continue
			}
		}
		if name == "" {
			name = f.Name
		}
		names = append(names, name)
	}
	return names
}
