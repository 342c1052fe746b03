// Command chat is a conversation with the planner in the browser, over a
// small issue tracker: the planner reads the tracker as it talks, and
// changes it only by proposing a plan that a person applies, in whole or in
// part, or rejects.
//
//	go run ./examples/chat                         # http://127.0.0.1:8081/
//	go run ./examples/chat -addr 127.0.0.1:9000
//	go run ./examples/chat -model openai:MODEL     # with OPENAI_API_KEY (and OPENAI_BASE_URL)
//	go run ./examples/chat -model anthropic:MODEL  # with ANTHROPIC_API_KEY
//
// The tools: list_items and get_item read (permission tracker.read), and the
// planner calls them itself; create_item, update_item and add_dependency
// write (tracker.write), and run only in a plan a person applied. Two people
// share the tracker: ana may read and write, ben may only read; the page
// sends the one chosen as the X-Person header, and each is a delegation
// whose scope lists the tools their permissions allow. Asked by ben, the
// planner can read but not propose; a plan ana's planner proposed, ben
// cannot apply.
//
// The page is the HTTP API of package chat/chathttp under /api, and a
// transcript that follows the session's event stream (Server-Sent Events):
// tool calls and results show as they happen, a proposal as a card whose
// steps can be picked, and once applied, what each step did.
//
// With no model configured it talks with a scripted model (no key, no
// network): ask it to "plan items for design review and launch checklist",
// or "what is open?". The provider adapters are not compiled into the
// default build: with -model and the provider's key set, the command builds
// itself again with them (-tags providers) and hands over.
package main

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/chat"
	"github.com/planexec/planexec/chat/chathttp"
	"github.com/planexec/planexec/examples/internal/trip"
	"github.com/planexec/planexec/llm"
	"github.com/planexec/planexec/store/memory"
)

//go:embed page.html
var page []byte

// tenant is the demo's one team: ana and ben share its sessions and
// tracker.
const tenant = "demo"

// instructions tell the planner about the service.
const instructions = `This is a team's issue tracker. Items have ids like T-1, a title, a status (open, in_progress, done), an assignee and the items they wait for. Read the tracker before proposing changes, and propose only what the person asked for.`

func main() {
	addr := flag.String("addr", "127.0.0.1:8081", "address to listen on")
	spec := flag.String("model", "", "talk with openai:MODEL (OPENAI_API_KEY, OPENAI_BASE_URL) or anthropic:MODEL (ANTHROPIC_API_KEY); default: the scripted model")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	err := run(ctx, *addr, *spec)
	if errors.Is(err, trip.ErrNeedsProviders) {
		err = withProviders(ctx)
	}
	if err != nil {
		stop()
		log.Fatal(err)
	}
}

// run serves the page and its API on addr until ctx ends.
func run(ctx context.Context, addr, spec string) error {
	model, err := chooseModel(spec, func(line string) { log.Print(line) })
	if err != nil {
		return err
	}
	srv, err := newServer(model, newTracker())
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	fmt.Printf("chat with the planner on http://%s/\n", ln.Addr())

	// Event streams never go idle: ending the requests' context ends them,
	// so that shutdown need not wait for the browsers to leave.
	reqs, endRequests := context.WithCancel(context.WithoutCancel(ctx))
	defer endRequests()
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return reqs }}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	select {
	case <-ctx.Done():
	case err = <-served:
		return err
	}
	endRequests()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = hs.Shutdown(sctx)
	return srv.Close(sctx)
}

// server is the page, the chat's API under /api, and the tracker's items
// under /items.
type server struct {
	http.Handler
	chat *chat.Chat
}

// newServer builds the service over items, talking with model: one store
// in memory for the sessions and the applied plans, the read tools for the
// planner, and an engine holding every tool for the plans people apply.
func newServer(model llm.Model, items *tracker) (*server, error) {
	st := memory.New()
	reads := items.reads()
	engine, err := planexec.NewExecutor(planexec.Config{Tools: slices.Concat(reads, items.writes()), Store: st})
	if err != nil {
		return nil, err
	}
	c, err := chat.New(chat.Config{Model: model, Store: st, Reads: reads, Engine: engine, Instructions: instructions})
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/api/", http.StripPrefix("/api", chathttp.New(c, chathttp.Config{Authenticate: authenticate})))
	mux.HandleFunc("GET /items", func(w http.ResponseWriter, r *http.Request) {
		if _, err := authenticate(r); err != nil {
			http.Error(w, "who are you?", http.StatusUnauthorized)
			return
		}
		list, _ := items.list(r.Context(), ListItems{})
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(list)
	})
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'")
		_, _ = w.Write(page)
	})
	return &server{Handler: mux, chat: c}, nil
}

// Close stops the turns under way and waits for them, or for ctx.
func (s *server) Close(ctx context.Context) error { return s.chat.Close(ctx) }

// authenticate names the person of a request: the X-Person header, or the
// person parameter for the page's event stream (a browser's EventSource
// cannot set headers; a real service would read its session cookie). This
// demo takes the person's word for it.
func authenticate(r *http.Request) (planexec.Delegation, error) {
	who := r.Header.Get("X-Person")
	if who == "" {
		who = r.URL.Query().Get("person")
	}
	if _, ok := people[who]; !ok {
		return planexec.Delegation{}, errUnknownPerson
	}
	return planexec.Delegation{Tenant: tenant, User: who, Scope: scope(who)}, nil
}

var errUnknownPerson = errors.New("no such person")
