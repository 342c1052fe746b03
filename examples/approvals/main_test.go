package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/store"
	"github.com/planexec/planexec/store/postgres"
)

// refunds counts what the refund tool did, by order.
type refunds struct {
	mu   sync.Mutex
	done map[string]int
}

func (f *refunds) refund(_ context.Context, r Refund) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.done[r.Order]++
	return "refunded " + r.Order, nil
}

func (f *refunds) count(order string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.done[order]
}

// serve starts the service over a fresh store, as main would: a SQLite
// file, or, when onPostgres, a schema of its own on PLANEXEC_POSTGRES_URL.
func serve(t *testing.T, onPostgres bool) (*httptest.Server, *refunds) {
	t.Helper()
	ctx := t.Context()
	var st interface {
		store.Store
		Close() error
	}
	var err error
	if onPostgres {
		dsn := os.Getenv("PLANEXEC_POSTGRES_URL")
		if dsn == "" {
			if os.Getenv("CI") == "true" {
				t.Fatal("PLANEXEC_POSTGRES_URL is not set")
			}
			t.Skip("PLANEXEC_POSTGRES_URL is not set")
		}
		schema := fmt.Sprintf("approvals_%d", time.Now().UnixNano())
		st, err = postgres.Open(ctx, dsn, postgres.WithSchema(schema))
		t.Cleanup(func() { dropSchema(t, dsn, schema) })
	} else {
		st, err = open(ctx, filepath.Join(t.TempDir(), "approvals.db"), "")
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	f := &refunds{done: map[string]int{}}
	svc, err := newService(st, standIn{}, f.refund)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(svc.routes())
	t.Cleanup(srv.Close)
	return srv, f
}

// call makes a request as tenant and decodes the JSON answer into out.
func call(t *testing.T, srv *httptest.Server, tenant, method, path, body string, out any) int {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Tenant", tenant)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
	}
	return resp.StatusCode
}

type outcome struct {
	Run     string                     `json:"run"`
	Status  planexec.RunStatus         `json:"status"`
	Waiting []planexec.ApprovalRequest `json:"waiting"`
	Error   string                     `json:"error"`
}

func TestTheServiceOverHTTP(t *testing.T) {
	for _, onPostgres := range []bool{false, true} {
		t.Run(map[bool]string{false: "sqlite", true: "postgres"}[onPostgres], func(t *testing.T) {
			srv, f := serve(t, onPostgres)
			const tenant = "demo"

			// A small refund acts under the grant, at once.
			var small outcome
			if code := call(t, srv, tenant, "POST", "/tasks", "refund order O-1: 12.50 GBP", &small); code != http.StatusOK || small.Status != planexec.RunCompleted {
				t.Fatalf("small refund: %d %+v", code, small)
			}
			// A large one waits for a person.
			var large outcome
			if code := call(t, srv, tenant, "POST", "/tasks", "refund order O-2: 120.00 GBP", &large); code != http.StatusAccepted ||
				large.Status != planexec.RunAwaitingApproval || len(large.Waiting) != 1 {
				t.Fatalf("large refund: %d %+v", code, large)
			}
			var waiting planexec.RunPage
			call(t, srv, tenant, "GET", "/runs?status=awaiting_approval", "", &waiting)
			if len(waiting.Runs) != 1 || waiting.Runs[0].ID != large.Run || waiting.Runs[0].Waiting[0].Request != large.Waiting[0].ID {
				t.Fatalf("waiting runs: %+v", waiting)
			}
			if f.count("O-2") != 0 {
				t.Fatalf("the large refund ran before anyone approved it")
			}
			// A decision for a request the run does not await changes nothing.
			if code := call(t, srv, tenant, "POST", "/runs/"+large.Run+"/decisions", `{"request":"sha256:made-up","approve":true,"by":"eve"}`, nil); code != http.StatusConflict {
				t.Errorf("a made-up request: %d, want 409", code)
			}
			// Approved, it runs.
			var approved outcome
			body := fmt.Sprintf(`{"request":%q,"approve":true,"by":"dana"}`, large.Waiting[0].ID)
			if code := call(t, srv, tenant, "POST", "/runs/"+large.Run+"/decisions", body, &approved); code != http.StatusOK || approved.Status != planexec.RunCompleted {
				t.Fatalf("after the approval: %d %+v", code, approved)
			}
			if code := call(t, srv, tenant, "POST", "/runs/"+large.Run+"/decisions", body, nil); code != http.StatusConflict {
				t.Errorf("deciding again: %d, want 409", code)
			}
			// Its history, read back and followed.
			var history []planexec.Event
			call(t, srv, tenant, "GET", "/runs/"+large.Run+"/events", "", &history)
			kinds := make([]planexec.EventKind, len(history))
			for i, e := range history {
				kinds[i] = e.Kind
			}
			if !slices.Contains(kinds, planexec.EventApprovalPending) || !slices.Contains(kinds, planexec.EventPlanResumed) || kinds[len(kinds)-1] != planexec.EventPlanCompleted {
				t.Errorf("history: %v", kinds)
			}
			if followed := follow(t, srv, tenant, large.Run); len(followed) != len(history) {
				t.Errorf("followed %d events, the history holds %d", len(followed), len(history))
			}
			// The same order again, in a new task: refunded once.
			var again outcome
			call(t, srv, tenant, "POST", "/tasks", "refund order O-1: 12.50 GBP", &again)
			if again.Status != planexec.RunCompleted || f.count("O-1") != 1 {
				t.Errorf("O-1 again: %+v; refunded %d times, want once", again, f.count("O-1"))
			}
			// Denied, it fails, and nothing ran.
			var denied, d2 outcome
			call(t, srv, tenant, "POST", "/tasks", "refund order O-3: 80 GBP", &denied)
			body = fmt.Sprintf(`{"request":%q,"approve":false,"by":"dana","why":"not ours"}`, denied.Waiting[0].ID)
			if code := call(t, srv, tenant, "POST", "/runs/"+denied.Run+"/decisions", body, &d2); code != http.StatusUnprocessableEntity || d2.Status != planexec.RunFailed || f.count("O-3") != 0 {
				t.Errorf("denied: %d %+v, refunded %d", code, d2, f.count("O-3"))
			}
			// Every run, by where it stands; another tenant sees none.
			var all planexec.RunPage
			call(t, srv, tenant, "GET", "/runs", "", &all)
			if len(all.Runs) != 4 {
				t.Errorf("listed %d runs, want 4: %+v", len(all.Runs), all.Runs)
			}
			var theirs planexec.RunPage
			call(t, srv, "globex", "GET", "/runs", "", &theirs)
			if len(theirs.Runs) != 0 {
				t.Errorf("another tenant sees %+v", theirs.Runs)
			}
			if code := call(t, srv, tenant, "GET", "/runs?status=archived", "", nil); code != http.StatusBadRequest {
				t.Errorf("a status no run is in: %d, want 400", code)
			}
		})
	}
}

func dropSchema(t *testing.T, dsn, schema string) {
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Error(err)
		return
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
		t.Error(err)
	}
}

// follow reads a run's events as server-sent events until it ends.
func follow(t *testing.T, srv *httptest.Server, tenant, run string) []planexec.Event {
	t.Helper()
	req, _ := http.NewRequest("GET", srv.URL+"/runs/"+run+"/events?follow=1", nil)
	req.Header.Set("X-Tenant", tenant)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var events []planexec.Event
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			var e planexec.Event
			if err := json.Unmarshal([]byte(data), &e); err != nil {
				t.Fatal(err)
			}
			events = append(events, e)
		}
	}
	return events
}
