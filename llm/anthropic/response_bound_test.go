package anthropic_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/planexec/planexec/llm"
	"github.com/planexec/planexec/llm/anthropic"
	"github.com/planexec/planexec/llm/internal/providertest"
)

// huge is an answer of providertest.Huge bytes, streamed: its length
// announced or not, as JSON the client could read if it held it all.
func huge(status int, announced bool) reply {
	const prefix, suffix = `{"content":[{"type":"text","text":"`, `"}],"stop_reason":"end_turn"}`
	r := reply{status: status, write: func(w io.Writer) { providertest.WriteHuge(w, prefix, providertest.Huge, suffix) }}
	if announced {
		r.header = map[string]string{"Content-Length": strconv.Itoa(len(prefix) + providertest.Huge + len(suffix))}
	}
	return r
}

// gzipped is body gzip-encoded, whether or not the client asked for it.
func gzipped(body []byte) reply {
	return reply{body: string(body), header: map[string]string{"Content-Encoding": "gzip"}}
}

// unasked is a client that asks for no gzip: a server may send it anyway.
var unasked = anthropic.WithHTTPClient(&http.Client{Transport: &http.Transport{DisableCompression: true}})

// An answer is read only up to the bound, counted after decompression, so a
// server cannot make Generate hold what it sends: past the bound the call
// fails at once with llm.ErrResponseTooLarge, is not retried (as a body that
// broke off would be), and has allocated about the bound, not the answer.
func TestAnAnswerPastTheBoundIsRefusedUnread(t *testing.T) {
	for name, c := range map[string]struct {
		r      reply
		opts   []anthropic.Option
		status int
	}{
		"length announced":                {r: huge(http.StatusOK, true), status: 200},
		"length not announced":            {r: huge(http.StatusOK, false), status: 200},
		"an error answer":                 {r: huge(http.StatusInternalServerError, false), status: 500},
		"gzip the transport inflates":     {r: gzipped(providertest.GzipBomb()), status: 200},
		"gzip the client did not ask for": {r: gzipped(providertest.GzipBomb()), opts: []anthropic.Option{unasked}, status: 200},
	} {
		t.Run(name, func(t *testing.T) {
			api := newAPI(t, c.r)
			m := api.model(t, c.opts...)
			var err error
			alloc := providertest.Allocated(func() { _, err = m.Generate(context.Background(), planRequest) })
			if !errors.Is(err, llm.ErrResponseTooLarge) {
				t.Fatalf("err = %v, want ErrResponseTooLarge", err)
			}
			if pe := providerError(t, err); pe.Status != c.status || pe.Retryable || pe.RequestID != "req_001" {
				t.Errorf("ProviderError = %+v, want status %d, not retryable", pe, c.status)
			}
			if n := len(api.requests()); n != 1 {
				t.Errorf("%d requests: a refused answer was fetched again", n)
			}
			t.Logf("Generate allocated %.1f MiB", float64(alloc)/(1<<20))
			if limit := uint64(5 * anthropic.DefaultMaxResponseBytes); alloc > limit {
				t.Errorf("Generate allocated %d MiB for a %d MiB answer, want under %d MiB", alloc>>20, providertest.Huge>>20, limit>>20)
			}
		})
	}
}

func TestWithMaxResponseBytesSetsTheBound(t *testing.T) {
	api := newAPI(t, planned(goodPlan))
	if _, err := api.model(t, anthropic.WithMaxResponseBytes(256)).Generate(context.Background(), planRequest); !errors.Is(err, llm.ErrResponseTooLarge) {
		t.Errorf("a 256-byte bound: err = %v, want ErrResponseTooLarge", err)
	}
	if _, err := api.model(t, anthropic.WithMaxResponseBytes(64<<10)).Generate(context.Background(), planRequest); err != nil {
		t.Errorf("a 64 KiB bound: %v", err)
	}
	for _, n := range []int64{0, -1} {
		if m, err := anthropic.New("claude-test-1", anthropic.WithAPIKey(testKey), anthropic.WithMaxResponseBytes(n)); err == nil || m != nil {
			t.Errorf("WithMaxResponseBytes(%d): New = %v, %v", n, m, err)
		}
	}
}

// A gzip answer within the bound is read, whoever asked for gzip; one that
// is not valid gzip is malformed, not a dropped connection to retry.
func TestAGzipAnswerIsReadWhenItFits(t *testing.T) {
	good := planned(goodPlan).body
	for name, opts := range map[string][]anthropic.Option{"the transport": nil, "nobody": {unasked}} {
		api := newAPI(t, gzipped(providertest.Gzip(good)))
		resp, err := api.model(t, opts...).Generate(context.Background(), planRequest)
		if err != nil || !jsonEqual(t, []byte(resp.Content), []byte(goodPlan)) || resp.Usage.OutputTokens != 90 {
			t.Errorf("%s asked for gzip: Generate = %+v, %v", name, resp, err)
		}
		api = newAPI(t, gzipped([]byte(good[:40])))
		start := time.Now()
		_, err = api.model(t, opts...).Generate(context.Background(), planRequest)
		if pe := providerError(t, err); !errors.Is(err, llm.ErrMalformedResponse) || pe.Retryable || pe.Status != 200 {
			t.Errorf("%s asked for gzip: a body that is not gzip: err = %v", name, err)
		}
		if n := len(api.requests()); n != 1 || time.Since(start) > 2*time.Second {
			t.Errorf("%s asked for gzip: a body that is not gzip was fetched %d times", name, n)
		}
	}
}
