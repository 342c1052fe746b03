package planexec

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/shopspring/decimal"
)

// Level is how much autonomy a grant gives an action class.
type Level string

// Grant levels.
const (
	// LevelAskAlways sends every step of the class to a person.
	LevelAskAlways Level = "ask_always"
	// LevelActWithinLimits acts without asking while the grant's ceiling
	// holds, and asks a person past it.
	LevelActWithinLimits Level = "act_within_limits"
	// LevelActAndReport acts without asking within the ceiling, like
	// LevelActWithinLimits, and reports each act that ran (an
	// AUTONOMY_REPORTED event) for review after the fact.
	LevelActAndReport Level = "act_and_report"
	// LevelNever forbids the class: its steps are refused and no person is
	// asked. It is the only way a step is refused outright; a step with no
	// live grant goes to a person.
	LevelNever Level = "never"
)

// AuthorityClass is the action class of tools that would issue or widen
// autonomy or authority: grant a level, extend a delegation, add a role.
// Its steps are refused for every agent, whatever the grants say, and
// nobody is asked; a grant for it is a *ConfigurationError.
const AuthorityClass = "autonomy.grant"

// reservedWhy says why a step of class is refused whatever the grants say,
// or "".
func reservedWhy(class string) string {
	if class == AuthorityClass {
		return "class " + AuthorityClass + " issues or widens authority: no agent may act in it, and nobody is asked"
	}
	return ""
}

// verdict is the ladder's decision for one step.
type verdict string

const (
	verdictAct      verdict = "ACT"      // proceed under the grant
	verdictEscalate verdict = "ESCALATE" // ask the approval gate
	verdictRefuse   verdict = "REFUSE"   // refuse: *AutonomyRefusedError, nothing runs
)

// ActionClass groups tools whose effects are alike ("refunds", "bookings") so
// grants can be given per class.
type ActionClass struct {
	Name  string
	Tools []string
	// Amount names the top-level argument holding the amount a ceiling counts
	// (a decimal). Empty: steps of the class carry no amount.
	Amount string
	// Currency names the top-level argument holding the currency code.
	// Empty: amounts are taken to be in the ceiling's currency.
	Currency string
}

// Grant gives a tenant (and optionally one user) a level of autonomy over an
// action class.
type Grant struct {
	ID     string
	Tenant string
	// SubTenants extends the grant to tenants below Tenant: "acme" covers
	// "acme/eu" and "acme/eu/fr".
	SubTenants bool
	Class      string
	Level      Level
	// User limits the grant to one user; empty covers every user.
	User string
	// Expires ends the grant; zero never expires.
	Expires time.Time
	// Ceiling bounds what the grant lets through without a person; nil
	// places no bound.
	Ceiling *Ceiling
}

// Ceiling bounds the amounts a grant covers: the sum of amounts acted on
// within one plan (across its resumes), and within Window across plans, may
// not pass Amount.
type Ceiling struct {
	Amount   decimal.Decimal
	Currency string
	// Window is the rolling period acts are summed over across plans; zero
	// bounds each plan on its own and nothing across plans.
	Window time.Duration
}

// AutonomyLadder decides, per step, whether a grant lets the agent act, a
// person must be asked, or the step is refused. Steps of tools in no action
// class are decided by their contract (irreversible) and the agent's
// RequireApproval option instead.
//
// A ladder is safe for concurrent use and may be shared by executors; grants
// can be added and revoked while plans run, and are checked again just before
// each step runs.
type AutonomyLadder struct {
	mu      sync.Mutex
	classes map[string]*ActionClass // by name
	byTool  map[string]*ActionClass
	grants  map[string]*Grant
}

// NewAutonomyLadder builds a ladder over classes. A tool in two classes, or a
// class without a name, is a *ConfigurationError.
func NewAutonomyLadder(classes ...ActionClass) (*AutonomyLadder, error) {
	l := &AutonomyLadder{
		classes: map[string]*ActionClass{},
		byTool:  map[string]*ActionClass{},
		grants:  map[string]*Grant{},
	}
	for i := range classes {
		c := classes[i]
		if c.Name == "" {
			return nil, &ConfigurationError{Why: "an action class needs a name"}
		}
		if _, dup := l.classes[c.Name]; dup {
			return nil, &ConfigurationError{Why: fmt.Sprintf("action class %q is declared twice", c.Name)}
		}
		l.classes[c.Name] = &c
		for _, t := range c.Tools {
			if other, dup := l.byTool[t]; dup {
				return nil, &ConfigurationError{Tool: t, Why: fmt.Sprintf("is in two action classes, %q and %q", other.Name, c.Name)}
			}
			l.byTool[t] = &c
		}
	}
	return l, nil
}

// Grant adds or replaces a grant (by ID). Replacing a grant withdraws it from
// steps already cleared under the old one: they will not start.
func (l *AutonomyLadder) Grant(g Grant) error {
	if g.ID == "" {
		return &ConfigurationError{Why: "a grant needs an id"}
	}
	if _, ok := l.classes[g.Class]; !ok {
		return &ConfigurationError{Why: fmt.Sprintf("grant %q names unknown action class %q", g.ID, g.Class)}
	}
	if why := reservedWhy(g.Class); why != "" {
		return &ConfigurationError{Why: fmt.Sprintf("grant %q: %s", g.ID, why)}
	}
	switch g.Level {
	case LevelAskAlways, LevelActWithinLimits, LevelActAndReport, LevelNever:
	default:
		return &ConfigurationError{Why: fmt.Sprintf("grant %q has unknown level %q", g.ID, g.Level)}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.grants[g.ID] = &g
	return nil
}

// Revoke withdraws a grant. A step cleared under it that has not started yet
// will not start. What was acted on under it still counts against its window
// (in the store) if the same id is granted again. It reports whether the grant existed.
func (l *AutonomyLadder) Revoke(id string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.grants[id]
	delete(l.grants, id)
	return ok
}

// Classify returns the action class of tool, if any.
func (l *AutonomyLadder) Classify(tool string) (ActionClass, bool) {
	c, ok := l.byTool[tool]
	if !ok {
		return ActionClass{}, false
	}
	return *c, true
}

// ladderDecision is the ladder's verdict for one step.
type ladderDecision struct {
	verdict  verdict
	class    string
	grant    *Grant
	amount   decimal.Decimal // what counts against the grant's ceiling
	currency string
	why      string
}

// windowSpent tells what a grant let through within its window before now,
// as the store counts it for every executor over it.
type windowSpent func(g *Grant, now time.Time) (decimal.Decimal, error)

// decide rules on one step. inPlan holds what the steps cleared before it put
// against each grant, and acted what the plan's finished steps did, so
// ceilings are cumulative within a plan. With a window, what finished is in
// the window's own sum already (committed when it ran) and is not counted
// twice; spent says what that sum is.
func (l *AutonomyLadder) decide(now time.Time, tenant, user, tool string, args []byte, inPlan, acted map[string]decimal.Decimal, spent windowSpent) (ladderDecision, error) {
	c := l.byTool[tool]
	d := ladderDecision{class: c.Name}
	if why := reservedWhy(c.Name); why != "" {
		d.verdict, d.why = verdictRefuse, why
		return d, nil
	}
	l.mu.Lock()
	g := l.grantFor(tenant, user, c.Name, now)
	l.mu.Unlock()
	if g == nil {
		d.verdict, d.why = verdictEscalate, fmt.Sprintf("no live grant for class %q", c.Name)
		return d, nil
	}
	d.grant = g
	if g.Level == LevelNever {
		d.verdict, d.why = verdictRefuse, fmt.Sprintf("the grant forbids class %q", c.Name)
		return d, nil
	}
	if g.Level == LevelAskAlways {
		d.verdict, d.why = verdictEscalate, "the grant says ask always"
		return d, nil
	}
	if g.Ceiling == nil {
		d.verdict = verdictAct
		return d, nil
	}
	amount, currency, why := amountOf(c, args)
	d.amount, d.currency = amount, currency
	if why != "" {
		d.verdict, d.why = verdictEscalate, why
		return d, nil
	}
	if amount.IsNegative() {
		d.verdict, d.why = verdictEscalate, "the amount is negative"
		return d, nil
	}
	if currency != "" && !strings.EqualFold(currency, g.Ceiling.Currency) {
		d.verdict, d.why = verdictEscalate, fmt.Sprintf("amount is not in the ceiling's currency %s", g.Ceiling.Currency)
		return d, nil
	}
	total := inPlan[g.ID].Add(amount)
	if g.Ceiling.Window > 0 {
		within, err := spent(g, now)
		if err != nil {
			return d, err
		}
		total = total.Add(within)
	} else {
		total = total.Add(acted[g.ID])
	}
	if total.GreaterThan(g.Ceiling.Amount) {
		d.verdict, d.why = verdictEscalate, fmt.Sprintf("over the ceiling of %s %s", g.Ceiling.Amount, g.Ceiling.Currency)
		return d, nil
	}
	d.verdict = verdictAct
	return d, nil
}

// errNoHeadroom is a windowed grant's refusal of a step that would take it
// past its ceiling.
var errNoHeadroom = errors.New("no headroom left within its window")

// commit re-checks a grant just before its step runs. It fails if the grant
// was revoked, replaced (a lower level or ceiling) or expired. With a window,
// it returns the grant's ceiling for the caller to count the step's amount
// against (windowed is nil otherwise).
func (l *AutonomyLadder) commit(now time.Time, cleared *Grant) (windowed *Ceiling, err error) {
	grantID := cleared.ID
	l.mu.Lock()
	defer l.mu.Unlock()
	g, ok := l.grants[grantID]
	if !ok {
		return nil, fmt.Errorf("grant %q was revoked", grantID)
	}
	if g != cleared {
		return nil, fmt.Errorf("grant %q was replaced after the plan was cleared", grantID)
	}
	if !g.Expires.IsZero() && !now.Before(g.Expires) {
		return nil, fmt.Errorf("grant %q expired", grantID)
	}
	if g.Ceiling == nil || g.Ceiling.Window <= 0 {
		return nil, nil
	}
	return g.Ceiling, nil
}

// longestWindow is the longest window of the ladder's grants' ceilings.
func (l *AutonomyLadder) longestWindow() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	var w time.Duration
	for _, g := range l.grants {
		if g.Ceiling != nil {
			w = max(w, g.Ceiling.Window)
		}
	}
	return w
}

// grantFor picks the most specific live grant: the tenant's own before an
// ancestor's, a user's own before one for every user. Callers hold l.mu.
func (l *AutonomyLadder) grantFor(tenant, user, class string, now time.Time) *Grant {
	var best *Grant
	bestScore := -1
	for _, g := range l.grants {
		if g.Class != class || (!g.Expires.IsZero() && !now.Before(g.Expires)) {
			continue
		}
		if g.User != "" && g.User != user {
			continue
		}
		score := 0
		switch {
		case g.Tenant == tenant:
			score = 2 + len(g.Tenant)
		case g.SubTenants && strings.HasPrefix(tenant, g.Tenant+"/"):
			score = 1 + len(g.Tenant)
		default:
			continue
		}
		score *= 2
		if g.User != "" {
			score++
		}
		if score > bestScore || (score == bestScore && g.ID < best.ID) {
			best, bestScore = g, score
		}
	}
	return best
}

// amountOf reads a step's amount and currency from its canonical arguments.
func amountOf(c *ActionClass, args []byte) (amount decimal.Decimal, currency, why string) {
	if c.Amount == "" {
		return decimal.Zero, "", ""
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(args, &m); err != nil {
		return decimal.Zero, "", "arguments carry no readable amount"
	}
	raw, ok := m[c.Amount]
	if !ok || string(raw) == "null" {
		return decimal.Zero, "", fmt.Sprintf("argument %q holds no amount", c.Amount)
	}
	// Decimals render as JSON strings, other numbers as numbers: take both.
	s := strings.Trim(string(raw), `"`)
	amount, err := decimal.NewFromString(s)
	if err != nil {
		return decimal.Zero, "", fmt.Sprintf("argument %q is not an amount", c.Amount)
	}
	if c.Currency != "" {
		if err := json.Unmarshal(m[c.Currency], &currency); err != nil || currency == "" {
			return decimal.Zero, "", fmt.Sprintf("argument %q holds no currency", c.Currency)
		}
	}
	return amount, currency, ""
}
