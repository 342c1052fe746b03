package plannerapi_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/llm"
	"github.com/planexec/planexec/llm/scripted"
	"github.com/planexec/planexec/plannerapi"
	"github.com/planexec/planexec/store/memory"
)

var (
	receipt    = []byte("\x89PNG\r\n\x1a\nreceipt")
	receiptURL = "data:image/png;base64," + base64.StdEncoding.EncodeToString(receipt)
)

// seer is a service whose stand-in model answers at once: "Hello." to a
// completion, the trip's answer to a planner. model records what it was shown.
func seer(t *testing.T) (*httptest.Server, *scripted.Model) {
	t.Helper()
	searchTool := planexec.MustTool("search_flights", "Find flights.", func(ctx context.Context, s search) ([]string, error) {
		return []string{"BA117"}, nil
	})
	ex, err := planexec.NewExecutor(planexec.Config{Tools: []*planexec.Tool{searchTool}, Store: memory.New()})
	if err != nil {
		t.Fatal(err)
	}
	model := scripted.Respond(func(req *llm.Request) scripted.Reply {
		if req.Output == nil {
			return scripted.Reply{Content: "Hello."}
		}
		return scripted.Reply{Content: tripAnswer}
	})
	h, err := plannerapi.New(plannerapi.Config{Executor: ex, Models: map[string]llm.Model{"planexec": model},
		Agent: planexec.Agent{Name: "seer"}, MaxBodyBytes: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, model
}

// shown is the images of the first message of the model's first request.
func shown(t *testing.T, model *scripted.Model) []llm.Image {
	t.Helper()
	reqs := model.Requests()
	if len(reqs) == 0 || len(reqs[0].Messages) == 0 {
		t.Fatal("the model was never asked")
	}
	return reqs[0].Messages[0].Images
}

func wantReceiptAndURL(t *testing.T, got []llm.Image) {
	t.Helper()
	if len(got) != 2 || got[0].MediaType != "image/png" || !slices.Equal(got[0].Data, receipt) ||
		got[1].URL != "https://example.com/cat.jpg" || got[1].Data != nil {
		t.Errorf("the model was shown %+v, want the receipt's bytes, then the URL", got)
	}
}

func imageMessage() openai.ChatCompletionMessageParamUnion {
	return openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{
		openai.TextContentPart("What do these show?"),
		openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: receiptURL}),
		openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: "https://example.com/cat.jpg", Detail: "low"}),
	})
}

func TestACompletionsImagesReachTheModel(t *testing.T) {
	srv, model := seer(t)
	c := openai.NewClient(option.WithBaseURL(srv.URL+"/v1"), option.WithAPIKey("test"), option.WithMaxRetries(0))
	resp, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: "planexec", Messages: []openai.ChatCompletionMessageParamUnion{imageMessage()}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Choices[0].Message.Content != "Hello." {
		t.Errorf("completion %+v", resp)
	}
	if got := model.Requests()[0].Messages[0].Content; got != "What do these show?" {
		t.Errorf("the text shown was %q", got)
	}
	wantReceiptAndURL(t, shown(t, model))
}

func TestAPlannerRunsImagesReachThePlanner(t *testing.T) {
	srv, model := seer(t)
	c := openai.NewClient(option.WithBaseURL(srv.URL+"/v1"), option.WithAPIKey("test"), option.WithMaxRetries(0))
	resp, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: "planexec", Messages: []openai.ChatCompletionMessageParamUnion{imageMessage()}}, planner("img-1")...)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Choices[0].Message.Content != "BA117 leaves at 09:00." {
		t.Errorf("answer %q", resp.Choices[0].Message.Content)
	}
	if task := model.Requests()[0].Messages[0].Content; !strings.Contains(task, "Task: What do these show?") {
		t.Errorf("the task shown was %q", task)
	}
	wantReceiptAndURL(t, shown(t, model))
}

// statuses streams a planner request and returns each plan_status the
// stream said, in order.
func statuses(t *testing.T, url, session, messages string) []string {
	t.Helper()
	body := `{"model":"planexec","planner_mode":true,"stream":true,"messages":` + messages + `}`
	req, _ := http.NewRequest("POST", url+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("x-session-id", session)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	var out []string
	lines := bufio.NewScanner(resp.Body)
	for lines.Scan() {
		data, ok := strings.CutPrefix(lines.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var ev struct {
			Metadata struct {
				Type   string `json:"type"`
				Status string `json:"plan_status"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatalf("an event that is not JSON: %s", data)
		}
		if ev.Metadata.Type == "plan_state" && ev.Metadata.Status != "" {
			out = append(out, ev.Metadata.Status)
		}
	}
	return out
}

func TestAStreamWithImagesSaysAnalyzingImageFirst(t *testing.T) {
	srv, model := seer(t)
	got := statuses(t, srv.URL, "img-s", `[{"role":"user","content":[{"type":"text","text":"What is this?"},{"type":"image_url","image_url":{"url":"`+receiptURL+`"}}]}]`)
	if len(got) < 2 || got[0] != "analyzing_image" || got[len(got)-1] != "completed" {
		t.Errorf("plan statuses %v, want analyzing_image first and completed last", got)
	}
	if im := shown(t, model); len(im) != 1 || !slices.Equal(im[0].Data, receipt) {
		t.Errorf("the planner was shown %+v", im)
	}
}

func TestAStreamWithoutImagesDoesNotSayAnalyzingImage(t *testing.T) {
	srv, _ := seer(t)
	got := statuses(t, srv.URL, "text-s", `[{"role":"user","content":"What is this?"}]`)
	if len(got) == 0 || slices.Contains(got, "analyzing_image") {
		t.Errorf("plan statuses %v, want no analyzing_image", got)
	}
}

func TestImagePartsThatCannotBeTakenAre400NamingThePart(t *testing.T) {
	srv, model := seer(t)
	part := func(url string) string {
		return `{"type":"image_url","image_url":{"url":"` + url + `"}}`
	}
	user := func(parts ...string) string {
		return `{"role":"user","content":[{"type":"text","text":"look"},` + strings.Join(parts, ",") + `]}`
	}
	huge := "data:image/png;base64," + base64.StdEncoding.EncodeToString(make([]byte, llm.MaxImageBytes+1))
	for _, tc := range []struct {
		name, messages, param string
	}{
		{"an ftp URL", user(part("ftp://example.com/a.png")), "messages[0].content[1].image_url.url"},
		{"a file URL", user(part(receiptURL), part("file:///etc/passwd")), "messages[0].content[2].image_url.url"},
		{"a data URL that is not base64", user(part("data:image/png,rawbytes")), "messages[0].content[1].image_url.url"},
		{"bad base64", user(part("data:image/png;base64,!!!!")), "messages[0].content[1].image_url.url"},
		{"a media type that is not an image's", user(part("data:image/svg+xml;base64,PHN2Zz4=")), "messages[0].content[1].image_url.url"},
		{"an image larger than the bound", user(part(huge)), "messages[0].content[1].image_url.url"},
		{"no url", user(`{"type":"image_url","image_url":{}}`), "messages[0].content[1].image_url.url"},
		{"an image on an assistant message", `{"role":"user","content":"hi"},{"role":"assistant","content":[` + part(receiptURL) + `]}`, "messages[1].content[0]"},
		{"a part of another type", `{"role":"user","content":[{"type":"input_audio","input_audio":{}}]}`, "messages[0].content"},
	} {
		for _, mode := range []string{"completion", "planner"} {
			t.Run(tc.name+" in a "+mode, func(t *testing.T) {
				body := `{"model":"planexec","planner_mode":` + map[string]string{"completion": "false", "planner": "true"}[mode] + `,"messages":[` + tc.messages + `]}`
				req, _ := http.NewRequest("POST", srv.URL+"/v1/chat/completions", strings.NewReader(body))
				req.Header.Set("x-session-id", "bad-"+mode)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				var e struct {
					Error struct {
						Message string `json:"message"`
						Param   string `json:"param"`
					} `json:"error"`
				}
				if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
					t.Fatal(err)
				}
				if resp.StatusCode != http.StatusBadRequest || e.Error.Param != tc.param {
					t.Errorf("%d %+v, want 400 naming %s", resp.StatusCode, e.Error, tc.param)
				}
				if strings.Contains(e.Error.Message, "etc/passwd") || strings.Contains(e.Error.Message, "rawbytes") {
					t.Errorf("the message repeats the url: %q", e.Error.Message)
				}
			})
		}
	}
	if n := len(model.Requests()); n != 0 {
		t.Errorf("the model was asked %d times", n)
	}
}
