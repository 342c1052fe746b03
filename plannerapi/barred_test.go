package plannerapi_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/llm"
	"github.com/planexec/planexec/llm/scripted"
	"github.com/planexec/planexec/plannerapi"
	"github.com/planexec/planexec/store/memory"
)

// A tool that failed twice in a session is not offered again in it: not
// in its turn, nor in any later turn (each a run of its own), whatever the
// tools the later runs were offered.
func TestAToolThatFailedTwiceIsNotOfferedOnLaterTurns(t *testing.T) {
	var fails, searches atomic.Int32
	flaky := planexec.MustTool("check_seat", "Check a seat.", func(ctx context.Context, b booking) (string, error) {
		fails.Add(1)
		return "", errors.New("the seat service is down")
	})
	search := planexec.MustTool("search_flights", "Find flights.", func(ctx context.Context, s search) ([]string, error) {
		searches.Add(1)
		return []string{"BA117"}, nil
	})
	ex, err := planexec.NewExecutor(planexec.Config{Tools: []*planexec.Tool{flaky, search}, Store: memory.New()})
	if err != nil {
		t.Fatal(err)
	}
	const (
		checkRound = `{"goal":"check","steps":[{"id":"k","tool":"check_seat","arguments":{"flight":"BA117"}}],"answer":null,"question":null}`
		answer     = `{"goal":"","steps":[],"answer":"Done.","question":null}`
	)
	// The planner asks for the seat check whenever it is offered, until
	// it has tried it twice in the run; then it searches, and answers.
	model := scripted.Respond(func(req *llm.Request) scripted.Reply {
		told := req.Messages[0].Content
		tried := strings.Count(told, " ran (goal: check)")
		switch {
		case strings.Contains(told, `"name": "check_seat"`) && tried < 2:
			return scripted.Reply{Content: checkRound}
		case !strings.Contains(told, " ran (goal: search)"):
			return scripted.Reply{Content: searchRound}
		}
		return scripted.Reply{Content: answer}
	})
	srv, err := plannerapi.New(plannerapi.Config{Executor: ex, Models: map[string]llm.Model{"planexec": model}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer hs.Close()

	turn := ask1
	for n := 1; n <= 3; n++ {
		before := len(model.Requests())
		r := post(t, hs, "", "s1", turn, "")
		if r.status != 200 || *r.Choices[0].Message.Content != "Done." {
			t.Fatalf("turn %d: %+v", n, r)
		}
		if n == 1 {
			if fails.Load() != 2 {
				t.Fatalf("turn 1: the seat check ran %d times, want twice", fails.Load())
			}
			turn = turn[:len(turn)-1] + `,{"role":"assistant","content":"Done."},{"role":"user","content":"and again"}]`
			continue
		}
		for _, req := range model.Requests()[before:] {
			if strings.Contains(req.Messages[0].Content, `"name": "check_seat"`) || strings.Contains(string(req.Output.Schema), "check_seat") {
				t.Errorf("turn %d: the planner was offered the tool that failed twice", n)
			}
		}
		if fails.Load() != 2 {
			t.Errorf("turn %d: the seat check ran %d times in all, want twice", n, fails.Load())
		}
		turn = turn[:len(turn)-1] + `,{"role":"assistant","content":"Done."},{"role":"user","content":"once more"}]`
	}
	if searches.Load() != 3 {
		t.Errorf("%d searches, want one a turn", searches.Load())
	}
}
