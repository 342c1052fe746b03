package scripted_test

import (
	"context"
	"errors"
	"strings"
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

func TestARespondingModelAnswersEachRequestByWhatItSays(t *testing.T) {
	m := scripted.Respond(func(req *llm.Request) scripted.Reply {
		if strings.Contains(req.Messages[len(req.Messages)-1].Content, "again") {
			return scripted.Reply{Content: "second"}
		}
		return scripted.Reply{Content: "first"}
	})
	for i, tc := range []struct{ say, want string }{{"hello", "first"}, {"hello again", "second"}, {"hello", "first"}} {
		resp, err := m.Generate(context.Background(), &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: tc.say}}})
		if err != nil || resp.Content != tc.want {
			t.Errorf("call %d: %q, %v; want %q", i+1, resp.Content, err, tc.want)
		}
	}
	if n := len(m.Requests()); n != 3 {
		t.Errorf("%d requests recorded, want 3", n)
	}
}

func TestTheImagesARequestCarriedAreRecordedAsSent(t *testing.T) {
	m := scripted.New(scripted.Reply{Content: "a cat"})
	data := []byte("png-bytes")
	req := &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "what?", Images: []llm.Image{
		{MediaType: "image/png", Data: data}, {URL: "https://example.com/cat.jpg"},
	}}}}
	if _, err := m.Generate(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	copy(data, "XXX") // the caller reuses its buffer
	req.Messages[0].Images[1].URL = "changed"
	got := m.Requests()[0].Messages[0].Images
	if len(got) != 2 || string(got[0].Data) != "png-bytes" || got[0].MediaType != "image/png" || got[1].URL != "https://example.com/cat.jpg" {
		t.Errorf("recorded images = %+v", got)
	}
}
