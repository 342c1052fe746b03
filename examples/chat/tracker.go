package main

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/chat"
)

// Item is one item of the tracker: what every tool returns, so a plan's step
// can read an earlier step's item ({"$from": "s1", "path": "/id"}).
type Item struct {
	ID          string   `json:"id"`
	Title       string   `json:"title"`
	Description string   `json:"description,omitempty"`
	Status      string   `json:"status"`
	Assignee    string   `json:"assignee,omitempty"`
	DependsOn   []string `json:"depends_on,omitempty"`
}

// The tools' arguments: each contract is generated from one of these.

// ListItems is list_items' arguments.
type ListItems struct {
	Status string `json:"status,omitempty" validate:"omitempty,oneof=open in_progress done" jsonschema_description:"only items in this status (open, in_progress or done); empty for all"`
}

// GetItem is get_item's arguments.
type GetItem struct {
	ID string `json:"id" validate:"required" jsonschema_description:"the item's id, as T-1"`
}

// NewItem is create_item's arguments; the title identifies the effect, so
// one plan cannot create an item twice.
type NewItem struct {
	Title       string `json:"title" validate:"required,max=200"`
	Description string `json:"description,omitempty" validate:"max=2000"`
	Assignee    string `json:"assignee,omitempty" validate:"max=100"`
}

// ItemChange is update_item's arguments: what is given changes.
type ItemChange struct {
	ID       string `json:"id" validate:"required"`
	Title    string `json:"title,omitempty" validate:"max=200"`
	Status   string `json:"status,omitempty" validate:"omitempty,oneof=open in_progress done"`
	Assignee string `json:"assignee,omitempty" validate:"max=100"`
}

// Dependency is add_dependency's arguments: Item waits for DependsOn.
type Dependency struct {
	Item      string `json:"item" validate:"required" jsonschema_description:"the id of the item that waits"`
	DependsOn string `json:"depends_on" validate:"required" jsonschema_description:"the id of the item it waits for"`
}

// tracker is the items, in memory.
type tracker struct {
	mu    sync.Mutex
	items map[string]*Item
	next  int
}

// newTracker returns a tracker with a few items to read.
func newTracker() *tracker {
	t := &tracker{items: map[string]*Item{}}
	t.add(NewItem{Title: "Write the release notes", Assignee: "ana"})
	t.add(NewItem{Title: "Fix the login timeout", Assignee: "ben"})
	return t
}

// add stores a new open item.
func (t *tracker) add(n NewItem) Item {
	t.next++
	it := &Item{ID: "T-" + strconv.Itoa(t.next), Title: n.Title, Description: n.Description, Status: "open", Assignee: n.Assignee}
	t.items[it.ID] = it
	return *it
}

// find returns the item with the title, if one has it.
func (t *tracker) find(title string) (Item, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if it := t.titled(title); it != nil {
		return *it, true
	}
	return Item{}, false
}

// titled is the item with the title, case aside, or nil. Callers hold mu.
func (t *tracker) titled(title string) *Item {
	for _, it := range t.items {
		if strings.EqualFold(it.Title, title) {
			return it
		}
	}
	return nil
}

// get is the item with id, or the tool error the planner reads.
func (t *tracker) get(id string) (*Item, error) {
	it, ok := t.items[id]
	if !ok {
		return nil, &chat.ToolError{Code: "not_found", Message: "There is no item " + strconv.Quote(id) + "."}
	}
	return it, nil
}

// The tools, each a method: reads lock for reading the map, writes change it.

func (t *tracker) list(_ context.Context, a ListItems) ([]Item, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := []Item{}
	for _, it := range t.items {
		if a.Status == "" || it.Status == a.Status {
			out = append(out, *it)
		}
	}
	slices.SortFunc(out, func(a, b Item) int { return cmp.Compare(number(a.ID), number(b.ID)) })
	return out, nil
}

func (t *tracker) getItem(_ context.Context, a GetItem) (Item, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	it, err := t.get(a.ID)
	if err != nil {
		return Item{}, err
	}
	return *it, nil
}

func (t *tracker) create(_ context.Context, n NewItem) (Item, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if r := t.refuseCreate(n); r != nil {
		return Item{}, r.toolError()
	}
	return t.add(n), nil
}

func (t *tracker) update(_ context.Context, c ItemChange) (Item, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	it, err := t.get(c.ID)
	if err != nil {
		return Item{}, err
	}
	if c.Title != "" {
		it.Title = c.Title
	}
	if c.Status != "" {
		it.Status = c.Status
	}
	if c.Assignee != "" {
		it.Assignee = c.Assignee
	}
	return *it, nil
}

func (t *tracker) depend(_ context.Context, d Dependency) (Item, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if r := t.refuseDependency(d); r != nil {
		return Item{}, r.toolError()
	}
	it := t.items[d.Item]
	if !slices.Contains(it.DependsOn, d.DependsOn) {
		it.DependsOn = append(it.DependsOn, d.DependsOn)
	}
	return *it, nil
}

// number is the n of "T-n", for ordering.
func number(id string) int {
	n, _ := strconv.Atoi(strings.TrimPrefix(id, "T-"))
	return n
}

// reads are the tools the planner calls as it talks (permission
// tracker.read); writes are the tools only a plan a person applies runs
// (tracker.write).
func (t *tracker) reads() []*planexec.Tool {
	return []*planexec.Tool{
		planexec.MustTool("list_items", "List the tracker's items, oldest first.", t.list),
		planexec.MustTool("get_item", "Get one item by its id.", t.getItem),
	}
}

func (t *tracker) writes() []*planexec.Tool {
	return []*planexec.Tool{
		planexec.MustTool("create_item", "Create an open item. Returns it, with its new id.", t.create, planexec.KeyArguments("title"),
			planexec.Precondition(t.canCreate)),
		planexec.MustTool("update_item", "Change an item's title, status or assignee.", t.update,
			planexec.Precondition(t.canUpdate)),
		planexec.MustTool("add_dependency", "Make an item wait for another.", t.depend,
			planexec.Precondition(t.canDepend)),
	}
}

// The writes' preconditions: what the tracker as it stands must allow, read
// when a plan is proposed and applied, and just before each step acts.
// Their words go to the planner, so they name no value it wrote.

func (t *tracker) canCreate(_ context.Context, _ planexec.Delegation, n NewItem) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.refuseCreate(n).unmet()
}

func (t *tracker) canUpdate(_ context.Context, _ planexec.Delegation, c ItemChange) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.items[c.ID] == nil {
		return planexec.Unmet("the item does not exist")
	}
	return nil
}

func (t *tracker) canDepend(_ context.Context, _ planexec.Delegation, d Dependency) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.refuseDependency(d).unmet()
}

// refusal is why the tracker as it stands does not take a write. The
// precondition reads it before a plan runs; the tool reads it again in the
// critical section where it writes, so that two plans that passed their
// preconditions together cannot both land (a cycle, a title twice).
type refusal struct {
	code string // the tool error's Code
	why  string // the precondition's words: no value the plan wrote
}

var (
	titleTaken  = &refusal{"conflict", "an item with that title exists already"}
	noSuchItem  = &refusal{"not_found", "an item it names does not exist"}
	waitsOnSelf = &refusal{"invalid_arguments", "an item cannot wait for itself"}
	wouldCycle  = &refusal{"conflict", "the item it would wait for already waits for it: the dependency would close a cycle"}
)

// refuseCreate is why n cannot be created, or nil. Callers hold mu.
func (t *tracker) refuseCreate(n NewItem) *refusal {
	if t.titled(n.Title) != nil {
		return titleTaken
	}
	return nil
}

// refuseDependency is why d cannot be added, or nil. Callers hold mu.
func (t *tracker) refuseDependency(d Dependency) *refusal {
	switch {
	case t.items[d.Item] == nil || t.items[d.DependsOn] == nil:
		return noSuchItem
	case d.Item == d.DependsOn:
		return waitsOnSelf
	case t.waitsFor(d.DependsOn, d.Item):
		return wouldCycle
	}
	return nil
}

// unmet is r for a Precondition: nil when nothing is refused.
func (r *refusal) unmet() error {
	if r == nil {
		return nil
	}
	return planexec.Unmet(r.why)
}

// toolError is r for the tool to return, as a sentence.
func (r *refusal) toolError() error {
	return &chat.ToolError{Code: r.code, Message: strings.ToUpper(r.why[:1]) + r.why[1:] + ". Nothing was changed."}
}

// waitsFor reports whether item from waits, directly or not, for item to.
// Callers hold mu.
func (t *tracker) waitsFor(from, to string) bool {
	seen := map[string]bool{}
	next := []string{from}
	for len(next) > 0 {
		id := next[len(next)-1]
		next = next[:len(next)-1]
		if id == to {
			return true
		}
		if it := t.items[id]; it != nil && !seen[id] {
			seen[id] = true
			next = append(next, it.DependsOn...)
		}
	}
	return false
}

// permissions says which permission each tool needs.
var permissions = map[string]string{
	"list_items": "tracker.read", "get_item": "tracker.read",
	"create_item": "tracker.write", "update_item": "tracker.write", "add_dependency": "tracker.write",
}

// people are the demo's people and their permissions.
var people = map[string][]string{
	"ana": {"tracker.read", "tracker.write"},
	"ben": {"tracker.read"},
}

// scope lists the tools a person's permissions allow, sorted.
func scope(person string) []string {
	tools := []string{}
	for tool, need := range permissions {
		if slices.Contains(people[person], need) {
			tools = append(tools, tool)
		}
	}
	slices.Sort(tools)
	return tools
}

// String describes an item in a line.
func (it Item) String() string {
	s := fmt.Sprintf("%s %q (%s", it.ID, it.Title, it.Status)
	if it.Assignee != "" {
		s += ", " + it.Assignee
	}
	return s + ")"
}
