// Command approvals is a small refund service on planexec: submit a task,
// see what waits for a person, approve or deny, watch the run finish, list
// runs. Refunds up to 50 GBP a day act under an autonomy grant; larger ones
// wait for a person; a refund of one order happens once, whichever task
// asks. The store keeps everything: runs, their histories, decisions, the
// ceiling's spends. Start it again after a crash and it recovers what was
// interrupted.
//
//	go run ./examples/approvals                       # SQLite, approvals.db
//	go run ./examples/approvals -postgres postgres://localhost/db
//
//	curl -d 'refund order O-77: 12.50 GBP' localhost:8080/tasks
//	curl 'localhost:8080/runs?status=awaiting_approval'
//	curl -d '{"request":"sha256:…","approve":true,"by":"dana"}' localhost:8080/runs/RUN/decisions
//	curl -N 'localhost:8080/runs/RUN/events?follow=1'
//
// The tenant is the X-Tenant header ("demo" without one). With no model key
// the planner is a stand-in that reads the order and the amount from the
// task; set one and pass a real llm.Model to newService instead.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os/signal"
	"regexp"
	"strconv"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/llm"
	"github.com/planexec/planexec/store"
	"github.com/planexec/planexec/store/postgres"
	"github.com/planexec/planexec/store/sqlite"
)

// Refund is the refund tool's arguments; the order identifies the effect.
type Refund struct {
	Order    string          `json:"order" validate:"required"`
	Amount   decimal.Decimal `json:"amount" validate:"gt=0,lte=10000"`
	Currency string          `json:"currency" validate:"oneof=GBP"`
}

// service is the HTTP API over one executor.
type service struct {
	ex      *planexec.Executor
	planner planexec.Planner
}

// newService builds the executor over st, with the refund tool, a ladder that
// lets refunds up to 50 GBP a day act, and a gate that leaves the rest to a
// person (pending until someone decides over HTTP).
func newService(st store.Store, model llm.Model, refund func(context.Context, Refund) (string, error)) (*service, error) {
	tool, err := planexec.NewTool("refund", "Refund an order.", refund,
		planexec.Irreversible(), planexec.KeyArguments("order"), planexec.OncePerTenant())
	if err != nil {
		return nil, err
	}
	ladder, err := planexec.NewAutonomyLadder(planexec.ActionClass{Name: "refunds", Tools: []string{"refund"}, Amount: "amount", Currency: "currency"})
	if err != nil {
		return nil, err
	}
	if err := ladder.Grant(planexec.Grant{ID: "small-refunds", Tenant: "demo", Class: "refunds", Level: planexec.LevelActWithinLimits,
		Ceiling: &planexec.Ceiling{Amount: decimal.NewFromInt(50), Currency: "GBP", Window: 24 * time.Hour}}); err != nil {
		return nil, err
	}
	ex, err := planexec.NewExecutor(planexec.Config{Tools: []*planexec.Tool{tool}, Store: st, Ladder: ladder, Gate: planexec.DecideLater})
	if err != nil {
		return nil, err
	}
	planner, err := planexec.NewAgentPlanner(model, planexec.Agent{Name: "refunds"})
	return &service{ex: ex, planner: planner}, err
}

func (s *service) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /tasks", s.submit)
	mux.HandleFunc("GET /runs", s.list)
	mux.HandleFunc("GET /runs/{id}/events", s.events)
	mux.HandleFunc("POST /runs/{id}/decisions", s.decide)
	return mux
}

// tenant is the request's tenant: its X-Tenant header, "demo" without one.
func tenant(r *http.Request) string {
	if t := r.Header.Get("X-Tenant"); t != "" {
		return t
	}
	return "demo"
}

func (s *service) run(r *http.Request, id string) (*planexec.Run, error) {
	return s.ex.Run(planexec.Delegation{RunID: id, Tenant: tenant(r), User: r.Header.Get("X-User"), Agent: "refunds"})
}

// submit plans a task and runs the plan: done, or waiting for a person.
// A refund is one plan, so the service plans once and executes (Run.Do
// would go on in rounds, telling the planner what the refund did, until it
// answers).
func (s *service) submit(w http.ResponseWriter, r *http.Request) {
	task, err := io.ReadAll(io.LimitReader(r.Body, 4<<10))
	run, rerr := s.run(r, uuid.NewString())
	if err = errors.Join(err, rerr); err != nil {
		reply(w, http.StatusBadRequest, err, nil)
		return
	}
	plan, err := run.Plan(r.Context(), s.planner, string(task))
	if err != nil {
		s.outcome(w, run, nil, err)
		return
	}
	res, err := run.Execute(r.Context(), plan)
	s.outcome(w, run, res, err)
}

// outcome answers with where the run stands, and what it waits for.
func (s *service) outcome(w http.ResponseWriter, run *planexec.Run, res *planexec.Result, err error) {
	status := planexec.StatusOf(err)
	body := map[string]any{"run": run.ID(), "status": status}
	var pending *planexec.ApprovalPendingError
	if errors.As(err, &pending) {
		body["waiting"], err = pending.Requests, nil
	} else if res != nil {
		body["result"] = res.Steps
	}
	code := http.StatusUnprocessableEntity // failed, in doubt, interrupted
	switch status {
	case planexec.RunCompleted:
		code = http.StatusOK
	case planexec.RunAwaitingApproval:
		code = http.StatusAccepted
	}
	reply(w, code, err, body)
}

func (s *service) list(w http.ResponseWriter, r *http.Request) {
	q := planexec.RunQuery{After: r.URL.Query().Get("after")}
	for _, st := range r.URL.Query()["status"] {
		q.Status = append(q.Status, planexec.RunStatus(st))
	}
	page, err := s.ex.Runs(r.Context(), tenant(r), q)
	if errors.Is(err, planexec.ErrInvalidQuery) {
		reply(w, http.StatusBadRequest, err, nil)
		return
	}
	reply(w, http.StatusOK, err, page)
}

// events answers with the run's history, or follows it as server-sent events.
func (s *service) events(w http.ResponseWriter, r *http.Request) {
	run, err := s.run(r, r.PathValue("id"))
	after, _ := strconv.ParseInt(r.URL.Query().Get("after"), 10, 64)
	if err != nil {
		reply(w, http.StatusBadRequest, err, nil)
		return
	}
	if r.URL.Query().Get("follow") == "" {
		history, err := run.History(r.Context(), after, 1000)
		reply(w, http.StatusOK, err, history)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	for e, err := range run.Follow(r.Context(), after) {
		if err != nil {
			return
		}
		b, _ := json.Marshal(e)
		fmt.Fprintf(w, "id: %d\ndata: %s\n\n", e.Seq, b)
		w.(http.Flusher).Flush()
		if e.Kind == planexec.EventPlanCompleted || e.Kind == planexec.EventPlanFailed {
			return
		}
	}
}

// decide records a person's decision and goes on with the run.
func (s *service) decide(w http.ResponseWriter, r *http.Request) {
	var d struct {
		Request string `json:"request"`
		Approve bool   `json:"approve"`
		By      string `json:"by"`
		Why     string `json:"why"`
	}
	run, err := s.run(r, r.PathValue("id"))
	if err = errors.Join(err, json.NewDecoder(io.LimitReader(r.Body, 4<<10)).Decode(&d)); err != nil {
		reply(w, http.StatusBadRequest, err, nil)
		return
	}
	status := planexec.Denied
	if d.Approve {
		status = planexec.Approved
	}
	err = run.Decide(r.Context(), planexec.Decision{RequestID: d.Request, Status: status, Approver: d.By, Why: d.Why})
	if errors.Is(err, planexec.ErrNotPending) || errors.Is(err, planexec.ErrInvalidDecision) {
		reply(w, http.StatusConflict, err, nil)
		return
	} else if err != nil {
		reply(w, http.StatusInternalServerError, err, nil)
		return
	}
	res, err := run.Resume(r.Context())
	s.outcome(w, run, res, err)
}

// reply writes body as JSON; with an error and no body, the error's text
// (a 500 unless code says otherwise).
func reply(w http.ResponseWriter, code int, err error, body any) {
	switch m, ok := body.(map[string]any); {
	case err == nil:
	case ok:
		m["error"] = err.Error()
	case code == http.StatusOK:
		code, body = http.StatusInternalServerError, map[string]string{"error": err.Error()}
	default:
		body = map[string]string{"error": err.Error()}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(body)
}

// standIn is the planner's model when none is configured: it writes the
// refund plan for the order and amount the task names.
type standIn struct{}

var taskRe = regexp.MustCompile(`(O-\d+)\D+(\d+(?:\.\d+)?)`)

func (standIn) Generate(_ context.Context, req *llm.Request) (*llm.Response, error) {
	m := taskRe.FindStringSubmatch(req.Messages[0].Content)
	if m == nil {
		return &llm.Response{Content: `{"steps":[]}`}, nil // refused as empty: no order named
	}
	plan := fmt.Sprintf(`{"goal":"refund %s","steps":[{"id":"refund","tool":"refund","arguments":{"order":%q,"amount":%s,"currency":"GBP"}}]}`, m[1], m[1], m[2])
	return &llm.Response{Content: plan, Model: "stand-in"}, nil
}

func main() {
	addr := flag.String("addr", "localhost:8080", "address to listen on")
	file := flag.String("db", "approvals.db", "SQLite file")
	dsn := flag.String("postgres", "", "PostgreSQL URL (instead of SQLite)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	st, err := open(ctx, *file, *dsn)
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	svc, err := newService(st, standIn{}, func(_ context.Context, r Refund) (string, error) {
		return fmt.Sprintf("refunded %s %s to order %s", r.Amount, r.Currency, r.Order), nil
	})
	if err != nil {
		log.Fatal(err)
	}
	go svc.upkeep(ctx, time.Minute)
	server := &http.Server{Addr: *addr, Handler: svc.routes()}
	go func() { <-ctx.Done(); _ = server.Shutdown(context.Background()) }()
	log.Printf("listening on %s", *addr)
	if err := server.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		log.Fatal(err)
	}
}

// open opens the store: Postgres when dsn is given, else the SQLite file.
func open(ctx context.Context, file, dsn string) (interface {
	store.Store
	Close() error
}, error) {
	if dsn != "" {
		return postgres.Open(ctx, dsn)
	}
	return sqlite.Open(ctx, file)
}

// upkeep recovers interrupted runs at once and then every tick, and prunes
// what finished more than 30 days ago, until ctx ends.
func (s *service) upkeep(ctx context.Context, every time.Duration) {
	for t := time.NewTicker(every); ; {
		if got, err := s.ex.Recover(ctx, 0); err != nil || len(got) > 0 {
			log.Printf("recovered %d runs (%v)", len(got), err)
		}
		if _, err := s.ex.Prune(ctx, "demo", 0); err != nil {
			log.Printf("prune: %v", err)
		}
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}
