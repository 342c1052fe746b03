package planexec

import (
	"context"
	"slices"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
)

// Agent is the planning agent: who writes plans, and how it is told to. It
// has no tools to declare: a planner holds none, by construction. The tools
// a plan may use are the executor's, narrowed per run by the delegation.
type Agent struct {
	Name string
	// Instructions frame the planner's task, after planexec's own.
	Instructions string
	// Temperature, when set, is asked of the model for each plan; nil
	// leaves it to the model's provider.
	Temperature *float64
}

// Delegation is the authority a run acts under: whose it is and what it may
// touch. A child delegation only narrows (see Delegate).
type Delegation struct {
	// RunID identifies the run; plan records and idempotency keys are scoped
	// by it. Default: a new UUID when the run is made.
	RunID string `json:"run_id"`
	// Tenant scopes every record; one tenant never sees another's.
	Tenant string `json:"tenant"`
	// User is the person the run acts for.
	User string `json:"user,omitempty"`
	// Agent is the agent the authority was delegated to.
	Agent string `json:"agent,omitempty"`
	// Scope lists the tools delegated. nil (JSON null) allows every tool
	// the executor has; an empty, non-nil scope ([]) allows nothing.
	Scope []string `json:"scope"`
	// Expires ends the delegation; zero never expires. It is checked again
	// just before each step runs.
	Expires time.Time `json:"expires,omitzero"`
	// Parent is the run this one was delegated from (see Delegate).
	Parent string `json:"parent,omitempty"`
}

// Delegate returns a child delegation for agent that may touch at most scope
// until at most expires. The child is a run of its own (a new RunID, with
// Parent naming this one), for the same tenant and user. Asking for a tool
// outside the parent's scope, or for a later expiry, is a *DelegationError:
// children only narrow.
func (d Delegation) Delegate(agent string, scope []string, expires time.Time) (Delegation, error) {
	if d.Scope != nil {
		if scope == nil {
			return Delegation{}, &DelegationError{RunID: d.RunID, Why: "a child of a scoped delegation needs a scope"}
		}
		for _, t := range scope {
			if !slices.Contains(d.Scope, t) {
				return Delegation{}, &DelegationError{RunID: d.RunID, Tool: t, Why: "the tool is outside the parent's scope: a child delegation only narrows"}
			}
		}
	}
	if !d.Expires.IsZero() && (expires.IsZero() || expires.After(d.Expires)) {
		return Delegation{}, &DelegationError{RunID: d.RunID, Why: "a child delegation cannot outlive its parent (" + d.Expires.Format(time.RFC3339) + ")"}
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

// check refuses a delegation whose names could not be stored and shown
// faithfully: run id, tenant, user and agent must be valid UTF-8 without
// control characters (two ids that differ only in invalid bytes would share
// keys and approvals). It fills in a missing run id.
func (d *Delegation) check() error {
	if d.RunID == "" {
		d.RunID = uuid.NewString()
	}
	for _, f := range [...]struct{ name, v string }{{"run id", d.RunID}, {"tenant", d.Tenant}, {"user", d.User}, {"agent", d.Agent}, {"parent", d.Parent}} {
		if why := nameProblem(f.v); why != "" {
			return &DelegationError{RunID: clip(d.RunID, 64), Why: "the " + f.name + " " + why}
		}
	}
	return nil
}

// nameProblem says what makes s unfit as an id, or "".
func nameProblem(s string) string {
	if !utf8.ValidString(s) {
		return "is not valid UTF-8"
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return "holds a control character"
		}
	}
	return ""
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

// narrowedBy is d as a caller's delegation c may narrow it: c's scope, if
// it has one, within d's; the earlier of the two expiries. c names d's run
// and tenant. A caller who acts for the run (same) acts for its user and
// agent, never others: a user or agent c names must be d's.
func (d Delegation) narrowedBy(c *Delegation, same bool) (Delegation, error) {
	switch {
	case same && c.User != "" && c.User != d.User:
		return d, &DelegationError{RunID: d.RunID, Why: "the run acts for another user"}
	case same && c.Agent != "" && c.Agent != d.Agent:
		return d, &DelegationError{RunID: d.RunID, Why: "the run was delegated to another agent"}
	}
	if c.Scope != nil {
		if d.Scope == nil {
			d.Scope = slices.Clone(c.Scope)
		} else {
			d.Scope = slices.DeleteFunc(slices.Clone(d.Scope), func(t string) bool { return !slices.Contains(c.Scope, t) })
		}
	}
	if !c.Expires.IsZero() && (d.Expires.IsZero() || c.Expires.Before(d.Expires)) {
		d.Expires = c.Expires
	}
	return d, nil
}
