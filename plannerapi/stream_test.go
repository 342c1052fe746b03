package plannerapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/llm"
	"github.com/planexec/planexec/llm/scripted"
	"github.com/planexec/planexec/plannerapi"
	"github.com/planexec/planexec/store/memory"
)

// sse is a planner stream read raw: its plan_state updates merged, its
// chunks' finish reasons, and the error event that ended it, if one did.
type sse struct {
	status int
	state  map[string]any
	finish []string
	err    map[string]any
	done   bool
}

// stream sends a streaming planner request, as caller if not "".
func stream(t *testing.T, url, caller, session, messages string) sse {
	t.Helper()
	body := `{"model":"planexec","planner_mode":true,"stream":true,"messages":` + messages + `}`
	req, _ := http.NewRequest("POST", url+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("x-session-id", session)
	if caller != "" {
		req.Header.Set("Authorization", "Bearer "+caller)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := sse{status: resp.StatusCode, state: map[string]any{}}
	if resp.Header.Get("Content-Type") != "text/event-stream" {
		var e struct {
			Error map[string]any `json:"error"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&e)
		out.err = e.Error
		return out
	}
	lines := bufio.NewScanner(resp.Body)
	lines.Buffer(nil, 1<<20)
	for lines.Scan() {
		data, ok := strings.CutPrefix(lines.Text(), "data: ")
		switch {
		case !ok:
			continue
		case data == "[DONE]":
			out.done = true
			continue
		}
		var ev struct {
			Error    map[string]any `json:"error"`
			Metadata map[string]any `json:"metadata"`
			Choices  []struct {
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatalf("an event that is not JSON: %s", data)
		}
		if ev.Error != nil {
			out.err = ev.Error
		}
		if ev.Metadata != nil {
			merge(out.state, ev.Metadata)
		}
		for _, c := range ev.Choices {
			if c.FinishReason != nil {
				out.finish = append(out.finish, *c.FinishReason)
			}
		}
	}
	return out
}

// Once the run answered, the stream's plan_state says so: the plan is
// completed, and so is every phase, the answering round's too.
func TestAStreamEndsWithThePlanAndItsPhasesCompleted(t *testing.T) {
	tr := newTrip(t, searchPlan)
	got := stream(t, tr.srv.URL, "", "s1", ask1)
	phases, _ := got.state["phases"].(map[string]any)
	if got.state["plan_status"] != "completed" || len(phases) != 2 {
		t.Fatalf("plan_state %v", got.state)
	}
	for n, p := range phases {
		if status := p.(map[string]any)["status"]; status != "completed" {
			t.Errorf("phase %s is %v, want completed", n, status)
		}
	}
	// The answer sent again, from the record, says so too.
	again := stream(t, tr.srv.URL, "", "s1", ask1)
	if again.state["plan_status"] != "completed" || !again.done {
		t.Errorf("the answer again: %+v", again)
	}
}

// refusingServer serves a planner that only names tools there are none
// of: every run's plan is refused, after its stream began.
func refusingServer(t *testing.T) *httptest.Server {
	t.Helper()
	ex, err := planexec.NewExecutor(planexec.Config{Store: memory.New(), Tools: []*planexec.Tool{
		planexec.MustTool("search_flights", "Find flights.", func(ctx context.Context, s search) ([]string, error) { return nil, nil }),
	}})
	if err != nil {
		t.Fatal(err)
	}
	model := scripted.Respond(func(*llm.Request) scripted.Reply {
		return scripted.Reply{Content: `{"goal":"x","steps":[{"id":"a","tool":"teleport","arguments":{}}],"answer":null,"question":null}`}
	})
	srv, err := plannerapi.New(plannerapi.Config{Executor: ex, Models: map[string]llm.Model{"planexec": model}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return hs
}

// An error after the stream began is an OpenAI error event, with the type
// and code the same error has as an HTTP answer.
func TestAnErrorInAStreamHasItsTypeAndCode(t *testing.T) {
	hs := refusingServer(t)
	got := stream(t, hs.URL, "", "s1", ask1)
	if got.status != 200 || got.err == nil || got.err["code"] != "plan_refused" || got.err["type"] != "invalid_request_error" || got.err["message"] == "" || !got.done {
		t.Errorf("the stream ended %+v", got)
	}
	if plain := post(t, hs, "", "s2", ask1, ""); plain.status != http.StatusUnprocessableEntity {
		t.Errorf("without a stream: %d, want 422", plain.status)
	}
}

// A stream for a session another replica is running ends with
// session_busy, saying where the session stands; the session is left as
// it was, and answers once the other is done.
func TestAStreamForASessionRunningElsewhereIsBusy(t *testing.T) {
	st := memory.New()
	one, two := newDesk(t, st), newDesk(t, st)
	one.hold = make(chan struct{})
	a, b := one.serve(t, searchRound), two.serve(t, searchRound)
	first := make(chan reply, 1)
	go func() { first <- post(t, a, "alice", "s1", ask1, "") }()
	<-one.started
	busy := stream(t, b.URL, "alice", "s1", ask1)
	meta, _ := busy.err["metadata"].(map[string]any)
	if busy.err["code"] != "session_busy" || meta["session_status"] != "running" || !busy.done {
		t.Errorf("while another replica runs the session: %+v", busy)
	}
	close(one.hold)
	if r := <-first; r.status != 200 {
		t.Errorf("the run under way: %+v", r)
	}
	if r := post(t, b, "alice", "s1", ask1, ""); r.status != 200 || *r.Choices[0].Message.Content != "Done." {
		t.Errorf("after: %+v", r)
	}
	if n := one.searches.Load() + two.searches.Load(); n != 1 {
		t.Errorf("%d searches, want 1", n)
	}
}
