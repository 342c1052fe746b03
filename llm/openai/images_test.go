package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/planexec/planexec/llm"
)

var png = []byte("\x89PNG\r\n\x1a\nfake")

func TestImagesAreSentAsImageURLContentParts(t *testing.T) {
	s := newServer(t, reply(answer{content: "a cat"}))
	req := &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "What is this?", Images: []llm.Image{
		{MediaType: "image/png", Data: png},
		{URL: "https://example.com/cat.jpg"},
	}}}}
	if _, err := newModel(t, s).Generate(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	var want any
	if err := json.Unmarshal([]byte(`[{"role":"user","content":[
		{"type":"text","text":"What is this?"},
		{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgpmYWtl"}},
		{"type":"image_url","image_url":{"url":"https://example.com/cat.jpg"}}]}]`), &want); err != nil {
		t.Fatal(err)
	}
	if got := s.body(0)["messages"]; !reflect.DeepEqual(got, want) {
		t.Errorf("messages = %v\nwant %v", got, want)
	}
}

func TestAMessageWithoutImagesIsStillPlainText(t *testing.T) {
	s := newServer(t, reply(answer{content: "hi"}))
	req := &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hello"}}}
	if _, err := newModel(t, s).Generate(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	want := []any{map[string]any{"role": "user", "content": "hello"}}
	if got := s.body(0)["messages"]; !reflect.DeepEqual(got, want) {
		t.Errorf("messages = %v, want %v", got, want)
	}
}

func TestAnInvalidImageIsRefusedBeforeAnythingIsSent(t *testing.T) {
	s := newServer(t, reply(answer{content: "hi"}))
	req := &llm.Request{Messages: []llm.Message{
		{Role: llm.RoleUser, Content: "first"},
		{Role: llm.RoleUser, Content: "look", Images: []llm.Image{{MediaType: "image/bmp", Data: png}}},
	}}
	_, err := newModel(t, s).Generate(context.Background(), req)
	var ie *llm.ImageError
	if !errors.As(err, &ie) || ie.Message != 1 || ie.Image != 0 {
		t.Fatalf("err = %v, want an *llm.ImageError at message 1, image 0", err)
	}
	if n := s.calls(); n != 0 {
		t.Errorf("%d calls were made", n)
	}
}
