// Command server serves planner mode over HTTP for the trip tools of
// examples/planner.go (search_flights, hold_room, book_flight, which is
// irreversible, and send_itinerary): an OpenAI-compatible chat-completions
// API (package plannerapi) on which a request with "planner_mode": true and
// an x-session-id header plans and runs the trip in rounds, streamed as
// plan_state chunks when "stream" is true.
//
//	go run ./examples/server                      # 127.0.0.1:8080, SQLite in server.db
//	go run ./examples/server -yes                 # approve every booking without asking
//	go run ./examples/server -addr :9090 -model-name trips
//	go run ./examples/server -postgres postgres://localhost/db
//	go run ./examples/server -model openai:MODEL     # with OPENAI_API_KEY (and OPENAI_BASE_URL)
//	go run ./examples/server -model anthropic:MODEL  # with ANTHROPIC_API_KEY
//
//	curl -N localhost:8080/v1/chat/completions -H 'x-session-id: trip-1' \
//	  -d '{"model":"planexec","planner_mode":true,"stream":true,
//	       "messages":[{"role":"user","content":"Get me to New York"}]}'
//
// With no model configured it plans with a scripted model (no key, no
// network) that plans the same trip whatever it is asked, and answers once
// told what the first round did. The provider adapters are not compiled into
// the default build: with -model and the provider's key set, the command
// builds itself again with them (-tags providers) and hands over.
//
// Without -yes the booking waits for a person: the response ends with
// plan_status card_interaction_requested and the approval requests in its
// metadata, and the client decides in the follow-up request's "decisions"
// field. Runs are kept in the store: on start, before serving, and then
// every minute, the server resumes runs that were left interrupted, and
// prunes those that finished more than 30 days ago.
package main

import (
	"context"
	"errors"
	"flag"
	"log"
	"net"
	"net/http"
	"os/signal"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"time"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/examples/internal/trip"
	"github.com/planexec/planexec/llm"
	"github.com/planexec/planexec/plannerapi"
	"github.com/planexec/planexec/store"
	"github.com/planexec/planexec/store/postgres"
	"github.com/planexec/planexec/store/sqlite"
)

// scriptedModel stands in for a model: the trip's plan, then, once told
// what round 1 did, the answer; an ordinary completion gets a line saying
// what it is.
func scriptedModel() llm.Model { return trip.Model(false) }

// chooseModel returns the model -model names, or the stand-in, and logs
// which it is.
func chooseModel(spec string) (llm.Model, error) {
	return trip.ChooseModel(spec, false, func(line string) { log.Print(line) })
}

// tenant is every caller: this example authenticates nobody. A service
// names its callers in plannerapi.Config.Authenticate, and each tenant's
// sessions are its own.
const tenant = "anonymous"

// options are the command's flags.
type options struct {
	addr      string // where to listen
	modelName string // the name requests give as "model"
	yes       bool   // approve every request without asking
	db        string // the SQLite file
	postgres  string // a PostgreSQL URL, instead of SQLite
	model     string // "", "openai:MODEL" or "anthropic:MODEL"

	book  func(context.Context, trip.Booking) (string, error) // default: trip.Book
	every time.Duration                                       // upkeep's period; default: a minute
	grace time.Duration                                       // how long shutdown waits for runs under way; default: 10s
}

// withDefaults fills in what o leaves zero.
func (o options) withDefaults() options {
	if o.modelName == "" {
		o.modelName = "planexec"
	}
	if o.book == nil {
		o.book = trip.Book
	}
	if o.every <= 0 {
		o.every = time.Minute
	}
	if o.grace <= 0 {
		o.grace = 10 * time.Second
	}
	return o
}

func main() {
	var o options
	flag.StringVar(&o.addr, "addr", "127.0.0.1:8080", "address to listen on")
	flag.StringVar(&o.modelName, "model-name", "planexec", `the model name requests give as "model"`)
	flag.BoolVar(&o.yes, "yes", false, "approve every approval request (the booking) without asking the client")
	flag.StringVar(&o.db, "db", "server.db", "SQLite file")
	flag.StringVar(&o.postgres, "postgres", "", "PostgreSQL URL (instead of SQLite)")
	flag.StringVar(&o.model, "model", "", "plan with openai:MODEL (OPENAI_API_KEY, OPENAI_BASE_URL) or anthropic:MODEL (ANTHROPIC_API_KEY); default: the scripted model")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	err := run(ctx, o, nil)
	if errors.Is(err, trip.ErrNeedsProviders) {
		err = withProviders(ctx)
	}
	if err != nil {
		stop()
		log.Fatal(err)
	}
}

// run serves until ctx ends, then shuts down: it stops listening, gives
// runs under way up to o.grace to finish (then interrupts them: they are
// stored, and resumed by the next start), and returns once every request
// and the upkeep have. listening, when set, is told the address listened
// on.
func run(ctx context.Context, o options, listening func(net.Addr)) error {
	o = o.withDefaults()
	model, err := chooseModel(o.model)
	if err != nil {
		return err
	}
	st, err := openStore(ctx, o.db, o.postgres)
	if err != nil {
		return err
	}
	defer st.Close()
	handler, ex, err := newServer(st, model, o)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return err
	}
	// Runs an earlier process left interrupted are resumed before any
	// request comes in: a client resuming its session while Recover resumes
	// it would find its steps in flight.
	tidy(ctx, ex)
	log.Printf("serving planner mode on http://%s/v1/chat/completions (model %q)", ln.Addr(), o.modelName)
	if listening != nil {
		listening(ln.Addr())
	}

	// Requests run under their own context, ended only if shutdown's grace
	// runs out, so a signal lets runs under way finish first.
	reqs, interrupt := context.WithCancel(context.WithoutCancel(ctx))
	defer interrupt()
	hs := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return reqs }}
	var wg sync.WaitGroup
	served := make(chan error, 1)
	wg.Go(func() { served <- hs.Serve(ln) })
	kept, stopUpkeep := context.WithCancel(ctx)
	defer stopUpkeep()
	wg.Go(func() { upkeep(kept, ex, o.every) })

	select {
	case <-ctx.Done():
		err = nil
	case err = <-served: // it failed: shut down the rest
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.grace)
	defer cancel()
	if serr := hs.Shutdown(sctx); serr != nil {
		log.Printf("runs still under way after %v: interrupting them (they are stored, and resumed on the next start)", o.grace)
		interrupt()
		_ = hs.Shutdown(context.WithoutCancel(ctx)) // waits for their handlers to return
	}
	stopUpkeep()
	wg.Wait()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	log.Print("stopped")
	return err
}

// newServer builds the API the command serves over st: the trip tools, the
// approval gate (-yes approves every request; otherwise the client decides,
// planexec.DecideLater), and model under o.modelName. It returns the
// executor too, for upkeep.
func newServer(st store.Store, model llm.Model, o options) (http.Handler, *planexec.Executor, error) {
	o = o.withDefaults()
	gate := planexec.DecideLater
	if o.yes {
		gate = planexec.ApprovalGateFunc(func(_ context.Context, req planexec.ApprovalRequest) (planexec.Decision, error) {
			return req.Approve("server (-yes)"), nil
		})
	}
	ex, err := planexec.NewExecutor(planexec.Config{Tools: trip.Tools(o.book), Store: st, Gate: gate})
	if err != nil {
		return nil, nil, err
	}
	srv, err := plannerapi.New(plannerapi.Config{
		Executor:     ex,
		Models:       map[string]llm.Model{o.modelName: model},
		Agent:        planexec.Agent{Name: "trip-planner", Instructions: "Plan business trips."},
		Authenticate: func(*http.Request) (string, error) { return tenant, nil },
	})
	if err != nil {
		return nil, nil, err
	}
	return srv, ex, nil
}

// openStore opens the store: Postgres when dsn is given, else the SQLite
// file.
func openStore(ctx context.Context, file, dsn string) (interface {
	store.Store
	Close() error
}, error) {
	if dsn != "" {
		return postgres.Open(ctx, dsn)
	}
	return sqlite.Open(ctx, file)
}

// upkeep tidies the store every tick until ctx ends.
func upkeep(ctx context.Context, ex *planexec.Executor, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			tidy(ctx, ex)
		}
	}
}

// tidy resumes runs left interrupted (or running by an executor that died)
// and prunes what finished more than 30 days ago.
func tidy(ctx context.Context, ex *planexec.Executor) {
	if got, err := ex.Recover(ctx, 0); err != nil || len(got) > 0 {
		log.Printf("recovered %d runs (%v)", len(got), err)
	}
	if _, err := ex.Prune(ctx, tenant, 0); err != nil && ctx.Err() == nil {
		log.Printf("prune: %v", err)
	}
}

// withProviders builds this command again with the provider adapters and
// runs it in this one's place (trip.Rebuild).
func withProviders(ctx context.Context) error {
	_, self, _, _ := runtime.Caller(0)
	return trip.Rebuild(ctx, filepath.Dir(self), trip.ErrNeedsProviders)
}
