package plannerapi_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/planexec/planexec/store/memory"
)

const (
	// laterCallRound hands back another call, in a later round.
	laterCallRound = `{"goal":"confirm again","steps":[{"id":"c","tool":"confirm","arguments":{"flight":"VS3"}}],"answer":null,"question":null}`
	// bookTwoRound asks a person to approve two bookings.
	bookTwoRound = `{"goal":"book both","steps":[{"id":"b1","tool":"book_flight","arguments":{"flight":"BA117"}},` +
		`{"id":"b2","tool":"book_flight","arguments":{"flight":"VS3"}}],"answer":null,"question":null}`
)

// paused is a planner response read whole: the answer, or the error.
type paused struct {
	status  int
	Choices []struct {
		Message struct {
			Content   *string `json:"content"`
			ToolCalls []struct {
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Metadata struct {
		PlanStatus string `json:"plan_status"`
		Approvals  []struct {
			Request   string          `json:"request"`
			Tool      string          `json:"tool"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"approvals"`
	} `json:"metadata"`
	Error struct {
		Message  string  `json:"message"`
		Param    *string `json:"param"`
		Code     *string `json:"code"`
		Metadata struct {
			SessionStatus string `json:"session_status"`
			PlanStatus    string `json:"plan_status"`
			ToolCalls     []struct {
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
			Approvals []struct {
				Request string `json:"request"`
				Tool    string `json:"tool"`
			} `json:"approvals"`
		} `json:"metadata"`
	} `json:"error"`
	raw string
}

func (p paused) calls() []string {
	var ids []string
	if len(p.Choices) == 1 {
		for _, c := range p.Choices[0].Message.ToolCalls {
			ids = append(ids, c.ID+" "+c.Function.Name+" "+c.Function.Arguments)
		}
	}
	return ids
}

func (p paused) requests() []string {
	var ids []string
	for _, a := range p.Metadata.Approvals {
		ids = append(ids, a.Request+" "+a.Tool+" "+string(a.Arguments))
	}
	return ids
}

func (p paused) param() string {
	if p.Error.Param == nil {
		return ""
	}
	return *p.Error.Param
}

// send posts a planner request as alice on session s1 with messages and
// extra members.
func send(t *testing.T, hs *httptest.Server, messages, extra string) paused {
	t.Helper()
	body := `{"model":"planexec","planner_mode":true,"messages":` + messages + extra + `}`
	req, _ := http.NewRequest("POST", hs.URL+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("x-session-id", "s1")
	req.Header.Set("Authorization", "Bearer alice")
	resp, err := hs.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var p paused
	if err := json.Unmarshal(raw, &p); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	p.status, p.raw = resp.StatusCode, string(raw)
	return p
}

// withResults is ask1, the assistant's calls, and a result for each call
// (id: content).
func withResults(results ...string) string {
	msgs := []string{`{"role":"user","content":"book BA117"}`, `{"role":"assistant","content":null}`}
	for _, r := range results {
		id, content, _ := strings.Cut(r, ": ")
		msgs = append(msgs, fmt.Sprintf(`{"role":"tool","tool_call_id":%q,"content":%q}`, id, content))
	}
	return "[" + strings.Join(msgs, ",") + "]"
}

// A client whose response was lost sends its request again: it is answered
// with the same pause, whatever the session waits for, so the client
// learns what it is.
func TestARequestSentAgainGetsTheSamePause(t *testing.T) {
	t.Run("a tool call", func(t *testing.T) {
		d := newDesk(t, memory.New())
		hs := d.serve(t, clientRound)
		first := send(t, hs, ask1, `,"tools":`+confirmTools)
		again := send(t, hs, ask1, `,"tools":`+confirmTools)
		if len(first.calls()) != 1 || again.status != 200 || again.Choices[0].FinishReason != "tool_calls" || !slices.Equal(again.calls(), first.calls()) {
			t.Errorf("first %v; sent again: %d %s", first.calls(), again.status, again.raw)
		}
	})
	t.Run("an approval", func(t *testing.T) {
		d := newDesk(t, memory.New())
		hs := d.serve(t, bookRound)
		first := send(t, hs, ask1, "")
		again := send(t, hs, ask1, "")
		if len(first.requests()) != 1 || again.status != 200 || again.Metadata.PlanStatus != "card_interaction_requested" || !slices.Equal(again.requests(), first.requests()) {
			t.Errorf("first %v; sent again: %d %s", first.requests(), again.status, again.raw)
		}
		if d.bookings.Load() != 0 {
			t.Error("booked with no decision")
		}
	})
	t.Run("a call after the results before it were taken", func(t *testing.T) {
		d := newDesk(t, memory.New())
		hs := d.serve(t, clientRound, laterCallRound)
		first := send(t, hs, ask1, `,"tools":`+confirmTools)
		call := first.Choices[0].Message.ToolCalls[0].ID
		second := send(t, hs, withResults(call+": yes"), `,"tools":`+confirmTools)
		if len(second.calls()) != 1 || second.calls()[0] == first.calls()[0] {
			t.Fatalf("second: %s", second.raw)
		}
		// The second response is lost: the request that brought the
		// result comes again, and is told of the later call.
		again := send(t, hs, withResults(call+": yes"), `,"tools":`+confirmTools)
		if again.status != 200 || !slices.Equal(again.calls(), second.calls()) {
			t.Errorf("sent again: %d %s, want the later call %v", again.status, again.raw, second.calls())
		}
	})
}

// A request that does not fit the pause is 400, and says what the session
// waits for: in the message, and in the error's metadata.
func TestARequestWrongForThePauseSaysWhatTheSessionWaitsFor(t *testing.T) {
	t.Run("a result for another call", func(t *testing.T) {
		d := newDesk(t, memory.New())
		hs := d.serve(t, clientRound)
		handed := send(t, hs, ask1, `,"tools":`+confirmTools).Choices[0].Message.ToolCalls[0]
		call := handed.ID
		bad := send(t, hs, withResults("call_nothing: yes"), `,"tools":`+confirmTools)
		m := bad.Error.Metadata
		if bad.status != 400 || bad.param() != "messages[2].tool_call_id" || !strings.Contains(bad.Error.Message, call) ||
			m.SessionStatus != "awaiting_tool" || len(m.ToolCalls) != 1 || m.ToolCalls[0].ID != call || m.ToolCalls[0].Function.Name != "confirm" ||
			m.ToolCalls[0].Function.Arguments == "" || m.ToolCalls[0].Function.Arguments != handed.Function.Arguments {
			t.Errorf("%d %s", bad.status, bad.raw)
		}
	})
	t.Run("a decision on another request", func(t *testing.T) {
		d := newDesk(t, memory.New())
		hs := d.serve(t, bookRound)
		req := send(t, hs, ask1, "").Metadata.Approvals[0].Request
		bad := send(t, hs, ask1, `,"decisions":[{"request":"sha256:made-up","approved":true}]`)
		m := bad.Error.Metadata
		if bad.status != 400 || bad.param() != "decisions[0].request" || !strings.Contains(bad.Error.Message, req) ||
			m.PlanStatus != "card_interaction_requested" || len(m.Approvals) != 1 || m.Approvals[0].Request != req || m.Approvals[0].Tool != "book_flight" {
			t.Errorf("%d %s", bad.status, bad.raw)
		}
	})
}

// Decisions are all or nothing: a list with a wrong entry records none of
// them, and a later right list goes on. A list that decides only some of
// the requests is taken, and the answer names those still waiting.
func TestADecisionsListWithAWrongEntryRecordsNothing(t *testing.T) {
	d := newDesk(t, memory.New())
	hs := d.serve(t, bookTwoRound)
	first := send(t, hs, ask1, "")
	if len(first.Metadata.Approvals) != 2 {
		t.Fatalf("first: %s", first.raw)
	}
	r1, r2 := first.Metadata.Approvals[0].Request, first.Metadata.Approvals[1].Request
	bad := send(t, hs, ask1, fmt.Sprintf(`,"decisions":[{"request":%q,"approved":false},{"request":"sha256:made-up","approved":true}]`, r1))
	if bad.status != 400 || bad.param() != "decisions[1].request" {
		t.Fatalf("a list with a wrong entry: %d %s", bad.status, bad.raw)
	}
	twice := send(t, hs, ask1, fmt.Sprintf(`,"decisions":[{"request":%q,"approved":false},{"request":%q,"approved":true}]`, r1, r1))
	if twice.status != 400 || twice.param() != "decisions[1].request" {
		t.Fatalf("a request decided twice in a list: %d %s", twice.status, twice.raw)
	}
	// Nothing of them was recorded: r1 is still the person's to decide,
	// and this time they approve it.
	some := send(t, hs, ask1, fmt.Sprintf(`,"decisions":[{"request":%q,"approved":true}]`, r1))
	if some.status != 200 || len(some.Metadata.Approvals) != 1 || some.Metadata.Approvals[0].Request != r2 {
		t.Fatalf("a list deciding one of two: %d %s, want %s still waiting", some.status, some.raw, r2)
	}
	done := send(t, hs, ask1, fmt.Sprintf(`,"decisions":[{"request":%q,"approved":true}]`, r2))
	if done.status != 200 || done.Choices[0].FinishReason != "stop" || *done.Choices[0].Message.Content != "Done." {
		t.Fatalf("the rest decided: %d %s", done.status, done.raw)
	}
	if n := d.bookings.Load(); n != 2 {
		t.Errorf("%d bookings, want 2: both approved, the refused list's denial not on record", n)
	}
}

// Tool results are all or nothing too.
func TestToolResultsWithAWrongEntryRecordNothing(t *testing.T) {
	d := newDesk(t, memory.New())
	hs := d.serve(t, clientRound)
	first := send(t, hs, ask1, `,"tools":`+confirmTools)
	if len(first.calls()) != 1 {
		t.Fatalf("first: %s", first.raw)
	}
	call := first.Choices[0].Message.ToolCalls[0].ID
	bad := send(t, hs, withResults(call+": first", "call_nothing: x"), `,"tools":`+confirmTools)
	if bad.status != 400 || bad.param() != "messages[3].tool_call_id" {
		t.Fatalf("results with a wrong entry: %d %s", bad.status, bad.raw)
	}
	twice := send(t, hs, withResults(call+": first", call+": again"), `,"tools":`+confirmTools)
	if twice.status != 400 || twice.param() != "messages[3].tool_call_id" {
		t.Fatalf("two results for a call: %d %s", twice.status, twice.raw)
	}
	// The call's result was not recorded: the one sent now is.
	done := send(t, hs, withResults(call+": second"), `,"tools":`+confirmTools)
	if done.status != 200 || *done.Choices[0].Message.Content != "Done." {
		t.Fatalf("the result alone: %d %s", done.status, done.raw)
	}
	reqs := d.model.Requests()
	told := reqs[len(reqs)-1].Messages[0].Content
	if !strings.Contains(told, "second") || strings.Contains(told, "first") {
		t.Errorf("the planner was told %q: want the result as sent last, not as in the refused request", told)
	}
}
