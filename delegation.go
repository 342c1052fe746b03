package planexec

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
)

// Agent is who acts. For an executor, Tools is the allowlist: the tools the
// agent may call (an empty list allows none, and the executor refuses to be
// built with it). For a planner, the agent must declare no tools at all.
type Agent struct {
	Name string
	// Instructions frame the planner's task (a planning agent only).
	Instructions string
	// Tools an executing agent may call; a planning agent must leave it empty.
	Tools []string
	// ApprovalRequired lists tools whose steps go to a person even when they
	// are reversible and no autonomy class covers them.
	ApprovalRequired []string
	// Output is a value of the type the agent produces. A planning agent
	// produces a Plan: leave it nil or set Plan{} or &Plan{}.
	Output any
}

// Delegation is the authority a run acts under: whose it is and what it may
// touch. A child delegation only narrows (see Delegate).
type Delegation struct {
	// RunID identifies the run; plan records and idempotency keys are scoped
	// by it. Default: a new UUID when the executor is built.
	RunID string
	// Tenant scopes every record; one tenant never sees another's.
	Tenant string
	// User is the person the run acts for.
	User string
	// Agent is the agent the authority was delegated to.
	Agent string
	// Scope lists the tools delegated. nil places no limit beyond the agent's
	// allowlist; an empty, non-nil scope allows nothing.
	Scope []string
	// Expires ends the delegation; zero never expires. It is checked again
	// just before each step runs.
	Expires time.Time
	// Parent is the run this one was delegated from (see Delegate).
	Parent string
}

// Delegate returns a child delegation for agent that may touch at most scope
// until at most expires. The child is a run of its own (a new RunID, with
// Parent naming this one), for the same tenant and user. Asking for a tool
// outside the parent's scope, or for a later expiry, is an error: children
// only narrow.
func (d Delegation) Delegate(agent string, scope []string, expires time.Time) (Delegation, error) {
	if d.Scope != nil {
		if scope == nil {
			return Delegation{}, fmt.Errorf("planexec: a child of a scoped delegation needs a scope")
		}
		for _, t := range scope {
			if !slices.Contains(d.Scope, t) {
				return Delegation{}, fmt.Errorf("planexec: tool %s is outside the parent's scope: a child delegation only narrows", quote(t))
			}
		}
	}
	if !d.Expires.IsZero() && (expires.IsZero() || expires.After(d.Expires)) {
		return Delegation{}, fmt.Errorf("planexec: a child delegation cannot outlive its parent (%s)", d.Expires.Format(time.RFC3339))
	}
	c := d
	c.RunID, c.Parent = uuid.NewString(), d.RunID
	c.Agent = agent
	c.Scope = slices.Clone(scope)
	c.Expires = expires
	return c, nil
}

// allows reports whether the delegation covers tool.
func (d *Delegation) allows(tool string) bool {
	return d.Scope == nil || slices.Contains(d.Scope, tool)
}

// expired reports whether the delegation has ended at now.
func (d *Delegation) expired(now time.Time) bool {
	return !d.Expires.IsZero() && !now.Before(d.Expires)
}

// Authorizer is asked just before each step runs whether the delegation still
// covers it, so a revocation takes effect between steps. Return a non-nil
// error to stop the step; it is wrapped in a *DelegationError.
type Authorizer interface {
	Authorize(ctx context.Context, d Delegation, step Step) error
}

// AuthorizerFunc adapts a function to Authorizer.
type AuthorizerFunc func(ctx context.Context, d Delegation, step Step) error

// Authorize calls f.
func (f AuthorizerFunc) Authorize(ctx context.Context, d Delegation, step Step) error {
	return f(ctx, d, step)
}
