package openai_test

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"testing"

	"github.com/openai/openai-go/v3/option"

	"github.com/planexec/planexec/llm"
	"github.com/planexec/planexec/llm/internal/providertest"
	"github.com/planexec/planexec/llm/openai"
)

// huge answers with a body of providertest.Huge bytes, streamed: its length
// announced or not, as JSON the client could read if it held it all.
func huge(status int, announced bool) http.HandlerFunc {
	const prefix, suffix = `{"choices":[{"message":{"content":"`, `"}}]}`
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if announced {
			w.Header().Set("Content-Length", strconv.Itoa(len(prefix)+providertest.Huge+len(suffix)))
		}
		w.WriteHeader(status)
		providertest.WriteHuge(w, prefix, providertest.Huge, suffix)
	}
}

// gzipped answers with body, gzip-encoded whether or not the client asked.
func gzipped(body []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Encoding", "gzip")
		_, _ = w.Write(body)
	}
}

// An answer is read only up to the bound, counted after decompression, so a
// server cannot make Generate hold what it sends: past the bound the call
// fails at once with llm.ErrResponseTooLarge, is not retried, and has
// allocated about the bound, not the answer.
func TestAnAnswerPastTheBoundIsRefusedUnread(t *testing.T) {
	askGzip := openai.WithRequestOptions(option.WithHeader("Accept-Encoding", "gzip"))
	for name, c := range map[string]struct {
		h      http.HandlerFunc
		opts   []openai.Option
		status int
	}{
		"length announced":                 {h: huge(http.StatusOK, true), status: 200},
		"length not announced":             {h: huge(http.StatusOK, false), status: 200},
		"an error answer":                  {h: huge(http.StatusInternalServerError, false), status: 500},
		"gzip the transport inflates":      {h: gzipped(providertest.GzipBomb()), status: 200},
		"gzip the caller asked for itself": {h: gzipped(providertest.GzipBomb()), opts: []openai.Option{askGzip}, status: 200},
	} {
		t.Run(name, func(t *testing.T) {
			s := newServer(t, c.h)
			m := newModel(t, s, append(c.opts, fastRetries)...)
			var err error
			alloc := providertest.Allocated(func() { _, err = m.Generate(context.Background(), hi) })
			if !errors.Is(err, llm.ErrResponseTooLarge) {
				t.Fatalf("err = %v, want ErrResponseTooLarge", err)
			}
			var pe *llm.ProviderError
			if !errors.As(err, &pe) || pe.Status != c.status || pe.Retryable {
				t.Errorf("ProviderError = %+v, want status %d, not retryable", pe, c.status)
			}
			if n := s.calls(); n != 1 {
				t.Errorf("%d requests: a refused answer was fetched again", n)
			}
			t.Logf("Generate allocated %.1f MiB", float64(alloc)/(1<<20))
			if limit := uint64(5 * openai.DefaultMaxResponseBytes); alloc > limit {
				t.Errorf("Generate allocated %d MiB for a %d MiB answer, want under %d MiB", alloc>>20, providertest.Huge>>20, limit>>20)
			}
		})
	}
}

func TestWithMaxResponseBytesSetsTheBound(t *testing.T) {
	s := newServer(t, reply(answer{content: goodPlan}))
	if _, err := newModel(t, s, openai.WithMaxResponseBytes(256)).Generate(context.Background(), hi); !errors.Is(err, llm.ErrResponseTooLarge) {
		t.Errorf("a 256-byte bound: err = %v, want ErrResponseTooLarge", err)
	}
	if _, err := newModel(t, s, openai.WithMaxResponseBytes(64<<10)).Generate(context.Background(), hi); err != nil {
		t.Errorf("a 64 KiB bound: %v", err)
	}
	for _, n := range []int64{0, -1} {
		if m, err := openai.New("gpt-4o-mini", openai.WithMaxResponseBytes(n)); err == nil || m != nil {
			t.Errorf("WithMaxResponseBytes(%d): New = %v, %v", n, m, err)
		}
	}
}

// A gzip answer within the bound is read, whoever asked for gzip; one that
// is not valid gzip is malformed, not a dropped connection.
func TestAGzipAnswerIsReadWhenItFits(t *testing.T) {
	good := []byte(`{"id":"chatcmpl-1","model":"m","choices":[{"message":{"content":"{\"goal\":\"x\"}"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":4}}`)
	askGzip := openai.WithRequestOptions(option.WithHeader("Accept-Encoding", "gzip"))
	for name, opts := range map[string][]openai.Option{"transport": nil, "caller": {askGzip}} {
		s := newServer(t, gzipped(providertest.Gzip(string(good))))
		resp, err := newModel(t, s, opts...).Generate(context.Background(), hi)
		if err != nil || resp.Content != `{"goal":"x"}` || resp.Usage.OutputTokens != 4 {
			t.Errorf("%s asked for gzip: Generate = %+v, %v", name, resp, err)
		}
		s = newServer(t, gzipped(good[:40]))
		_, err = newModel(t, s, append(opts, openai.WithMaxRetries(0))...).Generate(context.Background(), hi)
		var pe *llm.ProviderError
		if !errors.Is(err, llm.ErrMalformedResponse) || !errors.As(err, &pe) || pe.Retryable || pe.Status != 200 {
			t.Errorf("%s asked for gzip: a body that is not gzip: err = %v", name, err)
		}
	}
}
