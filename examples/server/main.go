// Command server serves planner mode over HTTP for the trip tools of
// examples/planner.go (search_flights, hold_room, book_flight, which is
// irreversible, and send_itinerary): an OpenAI-compatible chat-completions
// API (package plannerapi) on which a request with "planner_mode": true and
// an x-session-id header plans and runs the trip in rounds, streamed as
// plan_state chunks when "stream" is true.
//
//	go run ./examples/server                      # 127.0.0.1:8080, SQLite in server.db
//	go run ./examples/server -yes                 # approve every booking without asking
//	go run ./examples/server -keys keys.txt       # person=key lines: each person's API key
//	go run ./examples/server -addr :9090 -hosts trips.example.com -model-name trips
//	go run ./examples/server -postgres postgres://localhost/db
//	go run ./examples/server -model openai:MODEL     # with OPENAI_API_KEY (and OPENAI_BASE_URL)
//	go run ./examples/server -model anthropic:MODEL  # with ANTHROPIC_API_KEY
//
//	curl -N localhost:8080/v1/chat/completions -H "Authorization: Bearer $PLANEXEC_API_KEY" \
//	  -H 'x-session-id: trip-1' \
//	  -d '{"model":"planexec","planner_mode":true,"stream":true,
//	       "messages":[{"role":"user","content":"Get me to New York"}]}'
//
// Every request carries a person's API key as a bearer token, as OpenAI
// clients send theirs; the person is the tenant of their sessions, so no
// one reads, resumes or approves another's. The keys come from -keys (a
// file of person=key lines) or the PLANEXEC_SERVER_KEYS variable
// (person=key pairs separated by commas); given neither, the server makes
// one key, of the person "local", and prints it. A request whose Host
// header names neither an IP address, localhost, the name listened on nor
// a name given with -hosts is refused: DNS rebinding.
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
// field. Sessions are kept in the store, and only their clients resume
// them: a session whose client went away, or that a shutdown interrupted,
// goes on with the next request that gives its session id, and not before
// (no booking is made for a client that left). On start, and then every
// minute, the server prunes sessions that finished more than 30 days ago.
//
// A request's header and body are read within 30 seconds, an idle
// connection is closed after a minute, and at most 512 connections are
// open at once (-max-conns). A response has no overall deadline, as a
// planner stream lasts as long as its run; each of its writes has one
// (plannerapi.Config.WriteTimeout), so a client that stops reading is let
// go.
package main

import (
	"context"
	"errors"
	"flag"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
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

// chooseModel returns the model -model names, or the stand-in, and logs
// which it is.
func chooseModel(spec string) (llm.Model, error) {
	return trip.ChooseModel(spec, false, func(line string) { log.Print(line) })
}

// options are the command's flags.
type options struct {
	addr      string   // where to listen
	hosts     []string // names the server answers for besides its address and localhost (-hosts)
	keys      string   // a file of person=key lines (-keys); default: PLANEXEC_SERVER_KEYS, else a key made at start
	maxConns  int      // connections open at once; default: 512
	modelName string   // the name requests give as "model"
	yes       bool     // approve every request without asking
	db        string   // the SQLite file
	postgres  string   // a PostgreSQL URL, instead of SQLite
	model     string   // "", "openai:MODEL" or "anthropic:MODEL"

	book  func(context.Context, trip.Booking) (string, error) // default: trip.Book
	every time.Duration                                       // upkeep's period; default: a minute
	grace time.Duration                                       // how long shutdown waits for runs under way; default: 10s

	readHeaderTimeout time.Duration // to read a request's header; default: 10s
	readTimeout       time.Duration // to read a request, header and body; default: 30s
	idleTimeout       time.Duration // a kept-alive connection waits for its next request; default: a minute
	tidied            func()        // told after each tick of the upkeep; default: nothing
}

// maxHeaderBytes bounds a request's header.
const maxHeaderBytes = 64 << 10

// withDefaults fills in what o leaves zero.
func (o options) withDefaults() options {
	if o.maxConns <= 0 {
		o.maxConns = 512
	}
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
	if o.readHeaderTimeout <= 0 {
		o.readHeaderTimeout = 10 * time.Second
	}
	if o.readTimeout <= 0 {
		o.readTimeout = 30 * time.Second
	}
	if o.idleTimeout <= 0 {
		o.idleTimeout = time.Minute
	}
	return o
}

func main() {
	var o options
	var hosts string
	flag.StringVar(&o.addr, "addr", "127.0.0.1:8080", "address to listen on")
	flag.StringVar(&hosts, "hosts", "", "names, separated by commas, that requests may give as their Host besides an IP address, localhost and the -addr name")
	flag.StringVar(&o.keys, "keys", "", "file of person=key lines, each person's API key (default: $"+keysVariable+", person=key pairs separated by commas; else one key made at start)")
	flag.IntVar(&o.maxConns, "max-conns", 512, "connections open at once; more wait to be accepted")
	flag.StringVar(&o.modelName, "model-name", "planexec", `the model name requests give as "model"`)
	flag.BoolVar(&o.yes, "yes", false, "approve every approval request (the booking) without asking the client")
	flag.StringVar(&o.db, "db", "server.db", "SQLite file")
	flag.StringVar(&o.postgres, "postgres", "", "PostgreSQL URL (instead of SQLite)")
	flag.StringVar(&o.model, "model", "", "plan with openai:MODEL (OPENAI_API_KEY, OPENAI_BASE_URL) or anthropic:MODEL (ANTHROPIC_API_KEY); default: the scripted model")
	flag.Parse()
	if hosts != "" {
		o.hosts = strings.Split(hosts, ",")
	}
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
// stored, and their clients resume them), and returns once every request
// and the upkeep have. listening, when set, is told the address listened
// on.
func run(ctx context.Context, o options, listening func(net.Addr)) error {
	o = o.withDefaults()
	keys, err := loadKeys(o.keys, os.Getenv(keysVariable))
	if err != nil {
		return err
	}
	model, err := chooseModel(o.model)
	if err != nil {
		return err
	}
	st, err := openStore(ctx, o.db, o.postgres)
	if err != nil {
		return err
	}
	defer st.Close()
	ex, err := newExecutor(st, o)
	if err != nil {
		return err
	}
	api, err := newAPI(ex, model, keys, o)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return err
	}
	tidy(ctx, ex, keys.people)
	log.Printf("serving planner mode on http://%s/v1/chat/completions (model %q)", ln.Addr(), o.modelName)
	if keys.generated != "" {
		announce(keys.generated, ln.Addr())
	} else {
		log.Printf("keys of: %s", strings.Join(keys.people, ", "))
	}
	if listening != nil {
		listening(ln.Addr())
	}

	// Requests run under their own context, ended only if shutdown's grace
	// runs out, so a signal lets runs under way finish first.
	reqs, interrupt := context.WithCancel(context.WithoutCancel(ctx))
	defer interrupt()
	hs := &http.Server{
		Handler: checkHost(o.addr, o.hosts, api),
		// A slow header, a slow body and an idle connection each hold a
		// descriptor for a bounded time. WriteTimeout stays 0: it would
		// cut a planner stream, which goes on for as long as its run;
		// plannerapi bounds each write of a response instead
		// (plannerapi.Config.WriteTimeout), so a client that stops
		// reading is let go.
		ReadHeaderTimeout: o.readHeaderTimeout,
		ReadTimeout:       o.readTimeout,
		IdleTimeout:       o.idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		BaseContext:       func(net.Listener) context.Context { return reqs },
	}
	var wg sync.WaitGroup
	served := make(chan error, 1)
	wg.Go(func() { served <- hs.Serve(limitConns(ln, o.maxConns)) })
	kept, stopUpkeep := context.WithCancel(ctx)
	defer stopUpkeep()
	wg.Go(func() { upkeep(kept, ex, keys.people, o.every, o.tidied) })

	select {
	case <-ctx.Done():
		err = nil
	case err = <-served: // it failed: shut down the rest
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.grace)
	defer cancel()
	if serr := hs.Shutdown(sctx); serr != nil {
		log.Printf("runs still under way after %v: interrupting them (they are stored, and their clients resume them)", o.grace)
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

// announce says the key made for this process, and how a client sends it.
func announce(key string, addr net.Addr) {
	log.Printf(`no keys given (-keys FILE, or %s="person=key,..."): this process's key, of person %q, is
	%s
Clients send it as a bearer token, as OpenAI clients send their API key:
	export PLANEXEC_API_KEY=%[3]s
	curl -N http://%[4]s/v1/chat/completions -H "Authorization: Bearer $PLANEXEC_API_KEY" -H 'x-session-id: trip-1' -d '...'
	Python: OpenAI(base_url="http://%[4]s/v1", api_key=os.environ["PLANEXEC_API_KEY"])
	Node:   new OpenAI({ baseURL: "http://%[4]s/v1", apiKey: process.env.PLANEXEC_API_KEY })`,
		keysVariable, generatedPerson, key, addr)
}

// newExecutor builds the executor of the trip tools over st, with the
// approval gate: -yes approves every request; otherwise the client
// decides (planexec.DecideLater).
func newExecutor(st store.Store, o options) (*planexec.Executor, error) {
	o = o.withDefaults()
	gate := planexec.DecideLater
	if o.yes {
		gate = planexec.ApprovalGateFunc(func(_ context.Context, req planexec.ApprovalRequest) (planexec.Decision, error) {
			return req.Approve("server (-yes)"), nil
		})
	}
	return planexec.NewExecutor(planexec.Config{Tools: trip.Tools(o.book), Store: st, Gate: gate})
}

// newAPI builds the API the command serves: ex's runs, planned by model
// under o.modelName, for the people keys names.
func newAPI(ex *planexec.Executor, model llm.Model, keys *keyring, o options) (http.Handler, error) {
	o = o.withDefaults()
	return plannerapi.New(plannerapi.Config{
		Executor:     ex,
		Models:       map[string]llm.Model{o.modelName: model},
		Agent:        planexec.Agent{Name: "trip-planner", Instructions: "Plan business trips."},
		Authenticate: keys.authenticate,
	})
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

// upkeep tidies the store every tick until ctx ends, and tells tidied
// after each.
func upkeep(ctx context.Context, ex *planexec.Executor, people []string, every time.Duration, tidied func()) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			tidy(ctx, ex, people)
			if tidied != nil {
				tidied()
			}
		}
	}
}

// tidy prunes what people's sessions finished more than 30 days ago. It
// resumes nothing (no Executor.Recover): a planner session goes on only
// when its client asks, as a client that went away stopped it.
func tidy(ctx context.Context, ex *planexec.Executor, people []string) {
	for _, p := range people {
		if _, err := ex.Prune(ctx, p, 0); err != nil && ctx.Err() == nil {
			log.Printf("prune: %v", err)
		}
	}
}

// withProviders builds this command again with the provider adapters and
// runs it in this one's place (trip.Rebuild).
func withProviders(ctx context.Context) error {
	_, self, _, _ := runtime.Caller(0)
	return trip.Rebuild(ctx, filepath.Dir(self), trip.ErrNeedsProviders)
}
