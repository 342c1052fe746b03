package planexec

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
)

// Tool is a function a plan may call, with the contract its arguments are
// held to. Build one with NewTool: its name is written once and its argument
// type once, and the contract is generated from that type.
//
// A Tool is immutable and safe to share between executors.
type Tool struct {
	name        string
	description string
	contract    *Contract
	output      reflect.Type                                     // what the tool returns; nil when it says nothing (an interface)
	outSchema   json.RawMessage                                  // the JSON Schema of its outcome, as recorded; nil with output
	call        func(ctx context.Context, args any) (any, error) // args: a *A
	client      bool                                             // its caller runs it: a step is handed back (NewClientTool)
}

// NewTool declares a tool: fn, called with arguments of type A, a struct, as
// its contract decoded them (never a map). opts say what the contract says
// beyond the type: Irreversible, KeyArguments, RequireApproval.
//
// What fn returns is recorded as JSON (encoding/json), so a later replay
// returns the same outcome. The description is shown to the planner beside the
// tool's schema.
//
// It returns a *ConfigurationError when the name is empty, fn is nil, or the
// contract cannot be built from A (see NewContract).
func NewTool[A, R any](name, description string, fn func(ctx context.Context, args A) (R, error), opts ...ContractOption) (*Tool, error) {
	if fn == nil {
		return nil, &ConfigurationError{Tool: name, Why: "has no function to call"}
	}
	c, err := NewContract[A](name, opts...)
	if err != nil {
		return nil, err
	}
	out := reflect.TypeFor[R]()
	var outSchema json.RawMessage
	if out.Kind() == reflect.Interface {
		out = nil
	} else if outSchema, err = outcomeSchema(out, name); err != nil {
		return nil, &ConfigurationError{Tool: name, Why: "cannot generate the JSON Schema of its outcome: " + err.Error()}
	}
	return &Tool{
		name:        name,
		description: description,
		contract:    c,
		output:      out,
		outSchema:   outSchema,
		call: func(ctx context.Context, args any) (any, error) {
			a, ok := args.(*A)
			if !ok {
				// Unreachable: the contract decodes exactly an A.
				return nil, fmt.Errorf("planexec: tool %s called with %T", quote(name), args)
			}
			return fn(ctx, *a)
		},
	}, nil
}

// MustTool is NewTool for package-level declarations: it panics on error.
func MustTool[A, R any](name, description string, fn func(ctx context.Context, args A) (R, error), opts ...ContractOption) *Tool {
	t, err := NewTool(name, description, fn, opts...)
	if err != nil {
		panic(err)
	}
	return t
}

// Name is the tool's name, as plans write it.
func (t *Tool) Name() string { return t.name }

// Description is shown to the planner.
func (t *Tool) Description() string { return t.description }

// Contract is what the tool's arguments are held to. A test can check raw
// arguments against it without an executor (see Contract.Check).
func (t *Tool) Contract() *Contract { return t.contract }

// stepKey is the context key of the step a tool runs for.
type stepKey struct{}

// stepContext is what a tool's context carries: one value, not one per fact.
type stepContext struct {
	info StepInfo
	key  string // "" without an idempotency store
}

// toolContext is the context a tool runs under: the step's, carrying the
// step as its one value without a context.WithValue of its own.
type toolContext struct {
	context.Context
	step stepContext
}

func (c *toolContext) Value(key any) any {
	if key == (stepKey{}) {
		return &c.step
	}
	return c.Context.Value(key)
}

// IdempotencyKey returns the idempotency key of the step a tool is running
// for, so the tool can pass it on to a remote API that deduplicates (a
// payment provider's Idempotency-Key header, say). ok is false outside a step
// or when the executor's store keeps no claims.
func IdempotencyKey(ctx context.Context) (key string, ok bool) {
	sc, _ := ctx.Value(stepKey{}).(*stepContext)
	if sc == nil || sc.key == "" {
		return "", false
	}
	return sc.key, true
}

// StepInfo describes the step a tool is running for.
type StepInfo struct {
	RunID, Tenant, User, PlanID string
	Revision                    int
	StepID                      string
	Tool                        string
}

// CurrentStep returns the step a tool is running for.
func CurrentStep(ctx context.Context) (StepInfo, bool) {
	sc, _ := ctx.Value(stepKey{}).(*stepContext)
	if sc == nil {
		return StepInfo{}, false
	}
	return sc.info, true
}

// NewSchemaTool declares a tool that the executor runs, like NewTool, whose
// arguments a JSON Schema describes instead of a Go type: a tool another
// system declares, an MCP server's say. A step's arguments are held to the
// schema exactly as NewClientTool's are (strictly, draft 2020-12, no
// reference to another document), and call receives them as checked, in
// canonical JSON. What call returns must be one JSON value; it is the
// step's outcome, recorded and replayed like any tool's.
//
// The options are those of any contract: Irreversible, KeyArguments,
// RequireApproval, OncePerTenant; a Precondition, which takes a Go type, is
// a *ConfigurationError, as are an empty name, a nil call and a schema that
// is not one (see NewClientTool).
func NewSchemaTool(name, description string, schema json.RawMessage, call func(ctx context.Context, args json.RawMessage) (json.RawMessage, error), opts ...ContractOption) (*Tool, error) {
	if call == nil {
		return nil, &ConfigurationError{Tool: name, Why: "has no function to call"}
	}
	c, err := newSchemaContract(name, schema, opts...)
	if err != nil {
		return nil, err
	}
	if c.pre != nil {
		return nil, &ConfigurationError{Tool: name, Why: "a precondition takes a Go type, and its arguments are described by a JSON Schema"}
	}
	return &Tool{
		name:        name,
		description: description,
		contract:    c,
		call: func(ctx context.Context, args any) (any, error) {
			a, ok := args.(json.RawMessage)
			if !ok {
				// Unreachable: a schema contract decodes exactly a json.RawMessage.
				return nil, fmt.Errorf("planexec: tool %s called with %T", quote(name), args)
			}
			out, err := call(ctx, a)
			if err != nil {
				return nil, err
			}
			if !json.Valid(out) {
				return nil, fmt.Errorf("planexec: tool %s returned an outcome that is not one JSON value", quote(name))
			}
			return out, nil
		},
	}, nil
}
