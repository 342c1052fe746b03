package scripted_test

import (
	"context"
	"errors"
	"testing"

	"github.com/planexec/planexec/llm"
	"github.com/planexec/planexec/llm/scripted"
)

func TestRepliesComeInOrderAndRequestsAreRecorded(t *testing.T) {
	boom := errors.New("boom")
	m := scripted.New(scripted.Reply{Content: "one"}, scripted.Reply{Err: boom})
	ctx := context.Background()
	r, err := m.Generate(ctx, &llm.Request{System: "sys", Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}})
	if err != nil || r.Content != "one" || r.FinishReason != "stop" || r.Usage.Calls != 1 || r.Usage.InputTokens == 0 {
		t.Fatalf("first reply = %+v, %v", r, err)
	}
	if _, err := m.Generate(ctx, &llm.Request{}); !errors.Is(err, boom) {
		t.Errorf("second reply err = %v, want boom", err)
	}
	if _, err := m.Generate(ctx, &llm.Request{}); !errors.Is(err, scripted.ErrScriptExhausted) {
		t.Errorf("third call err = %v, want ErrScriptExhausted", err)
	}
	reqs := m.Requests()
	if len(reqs) != 3 || reqs[0].System != "sys" || reqs[0].Messages[0].Content != "hi" {
		t.Errorf("requests = %+v", reqs)
	}
}

func TestACancelledContextIsNotAnswered(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := scripted.New(scripted.Reply{Content: "x"}).Generate(ctx, &llm.Request{}); !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}
