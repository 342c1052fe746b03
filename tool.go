package planexec

import (
	"context"
	"fmt"
	"reflect"
)

// Tool is a function the executor may call for a step. Build one with
// NewTool; its argument type must be the one its Contract declares, and the
// executor checks that when it is built.
type Tool struct {
	name        string
	description string
	argType     reflect.Type
	call        func(ctx context.Context, args any) (any, error)
}

// NewTool registers fn under name. The executor calls fn with the arguments
// its contract decoded, as an A, never a map. What fn returns is recorded as
// JSON (encoding/json), so a later replay returns the same outcome.
//
// The description is shown to the planner beside the tool's schema.
func NewTool[A, R any](name, description string, fn func(ctx context.Context, args A) (R, error)) Tool {
	return Tool{
		name:        name,
		description: description,
		argType:     reflect.TypeFor[A](),
		call: func(ctx context.Context, args any) (any, error) {
			a, ok := args.(A)
			if !ok {
				// Unreachable when the executor was built: it checks the types.
				return nil, fmt.Errorf("planexec: tool %q called with %T, want %s", name, args, reflect.TypeFor[A]())
			}
			return fn(ctx, a)
		},
	}
}

// Name is the tool's registered name.
func (t Tool) Name() string { return t.name }

// Description is shown to the planner.
func (t Tool) Description() string { return t.description }

// ArgumentType is the Go type the tool takes.
func (t Tool) ArgumentType() reflect.Type { return t.argType }

// stepKey is the context key of the step a tool runs for.
type stepKey struct{}

// stepContext is what a tool's context carries: one value, not one per fact.
type stepContext struct {
	info StepInfo
	key  string // "" without an idempotency store
}

// IdempotencyKey returns the idempotency key of the step a tool is running
// for, so the tool can pass it on to a remote API that deduplicates (a
// payment provider's Idempotency-Key header, say). ok is false outside a step
// or when the executor has no idempotency store.
func IdempotencyKey(ctx context.Context) (key string, ok bool) {
	sc, _ := ctx.Value(stepKey{}).(*stepContext)
	if sc == nil || sc.key == "" {
		return "", false
	}
	return sc.key, true
}

// StepInfo describes the step a tool is running for.
type StepInfo struct {
	RunID, Tenant, PlanID string
	Revision              int
	StepID                string
	Tool                  string
}

// CurrentStep returns the step a tool is running for.
func CurrentStep(ctx context.Context) (StepInfo, bool) {
	sc, _ := ctx.Value(stepKey{}).(*stepContext)
	if sc == nil {
		return StepInfo{}, false
	}
	return sc.info, true
}
