package llm_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/planexec/planexec/llm"
)

func TestImageValidation(t *testing.T) {
	data := []byte("img")
	for _, c := range []struct {
		name string
		im   llm.Image
		why  string // "" when valid
	}{
		{"png bytes", llm.Image{MediaType: "image/png", Data: data}, ""},
		{"jpeg bytes", llm.Image{MediaType: "image/jpeg", Data: data}, ""},
		{"gif bytes", llm.Image{MediaType: "image/gif", Data: data}, ""},
		{"webp bytes", llm.Image{MediaType: "image/webp", Data: data}, ""},
		{"an https URL", llm.Image{URL: "https://example.com/a.png"}, ""},
		{"an http URL with a type", llm.Image{URL: "http://example.com/a", MediaType: "image/png"}, ""},
		{"both", llm.Image{MediaType: "image/png", Data: data, URL: "https://example.com/a.png"}, "both"},
		{"neither", llm.Image{MediaType: "image/png"}, "neither"},
		{"another media type", llm.Image{MediaType: "image/svg+xml", Data: data}, "media type"},
		{"bytes without a type", llm.Image{Data: data}, "no media type"},
		{"too large", llm.Image{MediaType: "image/png", Data: make([]byte, llm.MaxImageBytes+1)}, "more than"},
		{"a file URL", llm.Image{URL: "file:///etc/passwd"}, "http or https"},
		{"a data URL", llm.Image{URL: "data:image/png;base64,aW1n"}, "http or https"},
		{"a relative URL", llm.Image{URL: "/a.png"}, "http or https"},
		{"a long URL", llm.Image{URL: "https://example.com/" + strings.Repeat("a", llm.MaxImageURLBytes)}, "longer"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.im.Validate()
			if c.why == "" {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			var ie *llm.ImageError
			if !errors.As(err, &ie) || !strings.Contains(ie.Why, c.why) {
				t.Fatalf("Validate = %v, want an *llm.ImageError saying %q", err, c.why)
			}
		})
	}
}

func TestValidateImagesNamesThePositionOfTheFault(t *testing.T) {
	ok := llm.Image{URL: "https://example.com/a.png"}
	req := &llm.Request{Messages: []llm.Message{
		{Role: llm.RoleUser, Images: []llm.Image{ok}},
		{Role: llm.RoleUser, Images: []llm.Image{ok, {URL: "ftp://example.com/a.png"}}},
	}}
	var ie *llm.ImageError
	if err := req.ValidateImages(); !errors.As(err, &ie) || ie.Message != 1 || ie.Image != 1 {
		t.Fatalf("ValidateImages = %v, want message 1, image 1", err)
	}
	req.Messages[1].Images = nil
	if err := req.ValidateImages(); err != nil {
		t.Fatalf("ValidateImages = %v, want nil", err)
	}
}
