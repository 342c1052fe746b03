package anthropic_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/planexec/planexec/llm"
)

func TestImagesAreSentAsImageBlocksBeforeTheText(t *testing.T) {
	f := newAPI(t, message("end_turn", 10, 2, text("a cat")))
	req := &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "What is this?", Images: []llm.Image{
		{MediaType: "image/png", Data: []byte("\x89PNG\r\n\x1a\nfake")},
		{URL: "https://example.com/cat.jpg"},
	}}}}
	if _, err := f.model(t).Generate(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(f.requests()[0].Body["messages"])
	want := `[{"role":"user","content":[
		{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgpmYWtl"}},
		{"type":"image","source":{"type":"url","url":"https://example.com/cat.jpg"}},
		{"type":"text","text":"What is this?"}]}]`
	if !jsonEqual(t, got, []byte(want)) {
		t.Errorf("messages = %s\nwant %s", got, want)
	}
}

func TestAnImageWithoutTextSendsNoEmptyTextBlock(t *testing.T) {
	f := newAPI(t, message("end_turn", 10, 2, text("a cat")))
	req := &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Images: []llm.Image{{MediaType: "image/webp", Data: []byte("RIFF")}}}}}
	if _, err := f.model(t).Generate(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(f.requests()[0].Body["messages"])
	want := `[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/webp","data":"UklGRg=="}}]}]`
	if !jsonEqual(t, got, []byte(want)) {
		t.Errorf("messages = %s\nwant %s", got, want)
	}
}

func TestAnImageOnAnAssistantMessageIsRefusedBeforeAnythingIsSent(t *testing.T) {
	f := newAPI(t, message("end_turn", 10, 2, text("hi")))
	req := &llm.Request{Messages: []llm.Message{
		{Role: llm.RoleUser, Content: "hi"},
		{Role: llm.RoleAssistant, Content: "here", Images: []llm.Image{{URL: "https://example.com/a.png"}}},
	}}
	_, err := f.model(t).Generate(context.Background(), req)
	var ie *llm.ImageError
	if !errors.As(err, &ie) || ie.Message != 1 {
		t.Fatalf("err = %v, want an *llm.ImageError at message 1", err)
	}
	if n := len(f.requests()); n != 0 {
		t.Errorf("%d calls were made", n)
	}
}
