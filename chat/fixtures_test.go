package chat_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/chat"
	"github.com/planexec/planexec/llm"
	"github.com/planexec/planexec/llm/scripted"
	"github.com/planexec/planexec/store"
	"github.com/planexec/planexec/store/memory"
	"github.com/planexec/planexec/store/postgres"
	"github.com/planexec/planexec/store/sqlite"
)

// tracker is a tracker-like world: items the planner reads and a plan
// changes.
type tracker struct {
	mu      sync.Mutex
	items   map[string]*item
	next    int
	calls   map[string]int // tool calls, by tool
	release chan struct{}  // when set, list_items waits on it
	created chan struct{}  // when set, create_item waits on it, whatever its context says
	drained bool           // when set, create_item returns, done, once its context is cancelled
	started chan string    // when set, each tool call says its tool here
}

type item struct {
	ID      string `json:"id"`
	Title   string `json:"title"`
	State   string `json:"state"`
	Version int    `json:"version"`
}

type listArgs struct {
	State string `json:"state,omitempty" jsonschema:"enum=open,enum=done"`
}

type getArgs struct {
	ID string `json:"id" validate:"required"`
}

type createArgs struct {
	Title string `json:"title" validate:"required,max=200"`
}

type updateArgs struct {
	ID      string `json:"id" validate:"required"`
	State   string `json:"state" validate:"oneof=open done"`
	Version int    `json:"version" validate:"min=1"`
}

func newTracker() *tracker {
	return &tracker{
		items: map[string]*item{"T-1": {ID: "T-1", Title: "Write the README", State: "open", Version: 1}},
		next:  2, calls: map[string]int{},
	}
}

func (tr *tracker) count(tool string) {
	tr.mu.Lock()
	tr.calls[tool]++
	started := tr.started
	tr.mu.Unlock()
	if started != nil {
		started <- tool
	}
}

func (tr *tracker) called(tool string) int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.calls[tool]
}

func (tr *tracker) reads() []*planexec.Tool {
	list := planexec.MustTool("list_items", "The tracker's items, optionally by state.", func(ctx context.Context, a listArgs) ([]item, error) {
		tr.count("list_items")
		if tr.release != nil {
			select {
			case <-tr.release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		tr.mu.Lock()
		defer tr.mu.Unlock()
		var out []item
		for _, it := range tr.items {
			if a.State == "" || a.State == it.State {
				out = append(out, *it)
			}
		}
		slices.SortFunc(out, func(a, b item) int { return strings.Compare(a.ID, b.ID) })
		return out, nil
	})
	get := planexec.MustTool("get_item", "One item.", func(ctx context.Context, a getArgs) (item, error) {
		tr.count("get_item")
		tr.mu.Lock()
		defer tr.mu.Unlock()
		it, ok := tr.items[a.ID]
		if !ok {
			return item{}, &chat.ToolError{Code: "not_found", Message: "no item " + a.ID}
		}
		return *it, nil
	})
	return []*planexec.Tool{list, get}
}

func (tr *tracker) writes() []*planexec.Tool {
	create := planexec.MustTool("create_item", "Create an item.", func(ctx context.Context, a createArgs) (item, error) {
		tr.count("create_item")
		if tr.created != nil {
			<-tr.created
		}
		if tr.drained {
			<-ctx.Done()
		}
		tr.mu.Lock()
		defer tr.mu.Unlock()
		it := &item{ID: fmt.Sprintf("T-%d", tr.next), Title: a.Title, State: "open", Version: 1}
		tr.next++
		tr.items[it.ID] = it
		return *it, nil
	})
	update := planexec.MustTool("update_item", "Change an item's state; send the version read.", func(ctx context.Context, a updateArgs) (item, error) {
		tr.count("update_item")
		tr.mu.Lock()
		defer tr.mu.Unlock()
		it, ok := tr.items[a.ID]
		if !ok {
			return item{}, fmt.Errorf("%w: no item %s", planexec.ErrNotApplied, a.ID)
		}
		if it.Version != a.Version {
			return item{}, fmt.Errorf("%w: version %d is not %d", planexec.ErrNotApplied, a.Version, it.Version)
		}
		it.State, it.Version = a.State, it.Version+1
		return *it, nil
	})
	return []*planexec.Tool{create, update}
}

// Permissions, as a service would map them to tools.
var (
	readScope  = []string{"list_items", "get_item"}
	writeScope = []string{"list_items", "get_item", "create_item", "update_item"}
)

func ana() planexec.Delegation {
	return planexec.Delegation{Tenant: "acme", User: "ana", Scope: writeScope}
}

func ben() planexec.Delegation {
	return planexec.Delegation{Tenant: "acme", User: "ben", Scope: readScope}
}

// rig is a chat over a tracker, with an engine for its proposals.
type rig struct {
	t       testing.TB
	tracker *tracker
	store   *memory.Store
	engine  *planexec.Executor
	chat    *chat.Chat
}

func newRig(t testing.TB, model llm.Model, tune ...func(*chat.Config)) *rig {
	t.Helper()
	return newRigOn(t, newTracker(), model, tune...)
}

// newRigOn is newRig over tr, for a test that builds its own engine over
// the tracker's tools.
func newRigOn(t testing.TB, tr *tracker, model llm.Model, tune ...func(*chat.Config)) *rig {
	t.Helper()
	st := memory.New()
	engine, err := planexec.NewExecutor(planexec.Config{Tools: append(tr.reads(), tr.writes()...), Store: st})
	if err != nil {
		t.Fatal(err)
	}
	cfg := chat.Config{Model: model, Store: st, Reads: tr.reads(), Engine: engine, Lease: 2 * time.Second, PollInterval: 10 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)}
	for _, f := range tune {
		f(&cfg)
	}
	c, err := chat.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return &rig{t: t, tracker: tr, store: st, engine: engine, chat: c}
}

// session creates a session for ana.
func (r *rig) session(id string) string {
	r.t.Helper()
	if _, err := r.chat.Create(context.Background(), ana(), chat.SessionOptions{ID: id}); err != nil {
		r.t.Fatal(err)
	}
	return id
}

// turn sends text as person and returns the turn's outputs up to its done.
func (r *rig) turn(person planexec.Delegation, session, text string) []chat.Output {
	r.t.Helper()
	sent, err := r.chat.Send(context.Background(), person, session, text)
	if err != nil {
		r.t.Fatal(err)
	}
	return r.until(session, sent.Seq-1, chat.KindDone)
}

// transcript is the session's whole transcript.
func (r *rig) transcript(session string) []chat.Output {
	r.t.Helper()
	all, err := r.chat.Transcript(context.Background(), "acme", session, 0, 0)
	if err != nil {
		r.t.Fatalf("the transcript of %s: %v", session, err)
	}
	return all
}

// until watches the session after seq until an output of kind.
func (r *rig) until(session string, after int64, kind chat.Kind) []chat.Output {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out []chat.Output
	for o, err := range r.chat.Watch(ctx, "acme", session, after) {
		if err != nil {
			r.t.Fatalf("watching %s: %v (so far: %s)", session, err, kinds(out))
		}
		out = append(out, o)
		if o.Kind == kind {
			return out
		}
	}
	return out
}

// kinds lists the outputs' kinds, for a message.
func kinds(out []chat.Output) string {
	var b []string
	for _, o := range out {
		b = append(b, string(o.Kind))
	}
	return strings.Join(b, " ")
}

// of returns the outputs of the kinds given.
func of(out []chat.Output, kinds ...chat.Kind) []chat.Output {
	var r []chat.Output
	for _, o := range out {
		if slices.Contains(kinds, o.Kind) {
			r = append(r, o)
		}
	}
	return r
}

// say is a model answer.
func say(text string, calls ...string) scripted.Reply {
	return scripted.Reply{Content: fmt.Sprintf(`{"text":%q,"calls":[%s]}`, text, strings.Join(calls, ","))}
}

// call is one call in a model answer.
func call(tool, args string) string {
	return fmt.Sprintf(`{"tool":%q,"arguments":%s}`, tool, args)
}

// lastUser is the last user message of a request.
func lastUser(req *llm.Request) string {
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == llm.RoleUser {
			return req.Messages[i].Content
		}
	}
	return ""
}

// counter counts calls, for scripts that follow a turn.
type counter struct{ n atomic.Int64 }

func (c *counter) next() int64 { return c.n.Add(1) }

var _ store.TranscriptStore = (*memory.Store)(nil)

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// testStores are the stores the tests of what a store must keep run over:
// in memory, a SQLite file, and PostgreSQL when PLANEXEC_POSTGRES_URL names
// a server (each test in a schema of its own, dropped when it ends).
var testStores = []struct {
	name string
	open func(t testing.TB) benchStore
}{
	{"memory", func(t testing.TB) benchStore { return memory.New() }},
	{"sqlite", func(t testing.TB) benchStore {
		st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "chat.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}},
	{"postgres", func(t testing.TB) benchStore {
		dsn := os.Getenv("PLANEXEC_POSTGRES_URL")
		if dsn == "" {
			t.Skip("PLANEXEC_POSTGRES_URL is not set")
		}
		ctx := context.Background()
		schema := fmt.Sprintf("chat_%d", time.Now().UnixNano())
		t.Cleanup(func() {
			conn, err := pgx.Connect(ctx, dsn)
			if err != nil {
				t.Errorf("dropping the test's schema: %v", err)
				return
			}
			defer conn.Close(ctx)
			if _, err := conn.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
				t.Errorf("dropping the test's schema: %v", err)
			}
		})
		st, err := postgres.Open(ctx, dsn, postgres.WithSchema(schema))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}},
}

// replicas are n Chats over one store and one tracker, as n processes of a
// service are: each with its own engine over the store.
func replicas(t testing.TB, st benchStore, tr *tracker, model llm.Model, n int) []*chat.Chat {
	t.Helper()
	out := make([]*chat.Chat, n)
	for i := range out {
		engine, err := planexec.NewExecutor(planexec.Config{Tools: tr.writes(), Store: st})
		if err != nil {
			t.Fatal(err)
		}
		c, err := chat.New(chat.Config{Model: model, Store: st, Reads: tr.reads(), Engine: engine, Lease: 2 * time.Second,
			PollInterval: 10 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := c.Close(context.Background()); err != nil {
				t.Error(err)
			}
		})
		out[i] = c
	}
	return out
}
