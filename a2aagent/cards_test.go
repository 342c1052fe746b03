package a2aagent_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"

	"github.com/planexec/planexec/a2aagent"
	"github.com/planexec/planexec/directory"
)

// agent serves an A2A agent card, as a2a-go's server serves it, and counts
// the requests it gets. edit changes the card once its URL is known.
func agent(t *testing.T, edit func(*a2a.AgentCard)) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var hits atomic.Int32
	var card a2a.AgentCard
	mux := http.NewServeMux()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	card = a2a.AgentCard{Name: "Lingua", Description: "Translates documents.", URL: srv.URL + "/a2a", Version: "1.0",
		ProtocolVersion: "0.3.0", PreferredTransport: a2a.TransportProtocolJSONRPC,
		DefaultInputModes: []string{"text/plain"}, DefaultOutputModes: []string{"text/plain"},
		Skills: []a2a.AgentSkill{{ID: "translate", Name: "Translate", Description: "Any of forty languages.",
			Tags: []string{"translation", "german"}, Examples: []string{"translate this contract into German"}}}}
	if edit != nil {
		edit(&card)
	}
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(&card))
	return srv, &hits
}

func TestACardFromAnAllowedOriginBecomesADirectoryEntry(t *testing.T) {
	srv, _ := agent(t, nil)
	cards, err := a2aagent.Fetch(context.Background(), a2aagent.Config{Allow: []string{srv.URL}}, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if len(cards) != 1 {
		t.Fatalf("cards = %+v", cards)
	}
	c := cards[0]
	if c.Name != "Lingua" || c.URL != srv.URL+"/a2a" || len(c.Skills) != 1 || c.Skills[0].Tags[1] != "german" ||
		c.Skills[0].Examples[0] != "translate this contract into German" {
		t.Errorf("card = %+v", c)
	}
	dir, err := directory.New(cards...)
	if err != nil {
		t.Fatal(err)
	}
	if found, err := dir.Search(context.Background(), "translate into German", 0); err != nil || len(found) != 1 {
		t.Errorf("searching the fetched card: %+v, %v", found, err)
	}
}

func TestACardTheServiceDoesNotAllowIsRefused(t *testing.T) {
	ctx := context.Background()
	t.Run("an origin not allowed: nothing is asked of it", func(t *testing.T) {
		srv, hits := agent(t, nil)
		_, err := a2aagent.Fetch(ctx, a2aagent.Config{Allow: []string{"https://agents.example"}}, srv.URL)
		var ce *a2aagent.CardError
		if !errors.As(err, &ce) || !errors.Is(err, a2aagent.ErrNotAllowed) || ce.URL != srv.URL {
			t.Fatalf("Fetch: %v; want a *CardError wrapping ErrNotAllowed", err)
		}
		if n := hits.Load(); n != 0 {
			t.Errorf("the origin not allowed got %d requests", n)
		}
	})
	t.Run("an agent's endpoint on another origin", func(t *testing.T) {
		srv, _ := agent(t, func(c *a2a.AgentCard) { c.URL = "https://elsewhere.example/a2a" })
		_, err := a2aagent.Fetch(ctx, a2aagent.Config{Allow: []string{srv.URL, "https://elsewhere.example"}}, srv.URL)
		if !errors.Is(err, a2aagent.ErrNotAllowed) || !strings.Contains(err.Error(), "endpoint") {
			t.Fatalf("Fetch: %v; want the endpoint refused", err)
		}
	})
	t.Run("a card past its bound", func(t *testing.T) {
		srv, _ := agent(t, func(c *a2a.AgentCard) { c.Description = strings.Repeat("x", 4096) })
		_, err := a2aagent.Fetch(ctx, a2aagent.Config{Allow: []string{srv.URL}, MaxCardBytes: 1024}, srv.URL)
		var ce *a2aagent.CardError
		if !errors.As(err, &ce) || ce.Why != "could not be read" {
			t.Fatalf("Fetch: %v; want the card refused as unreadable", err)
		}
	})
	t.Run("a card that names no agent", func(t *testing.T) {
		srv, _ := agent(t, func(c *a2a.AgentCard) { c.Name = " " })
		if _, err := a2aagent.Fetch(ctx, a2aagent.Config{Allow: []string{srv.URL}}, srv.URL); err == nil {
			t.Fatal("a card with no name was taken")
		}
	})
	t.Run("not an http URL", func(t *testing.T) {
		for _, raw := range []string{"file:///etc/passwd", "ftp://agents.example", "https://user:pw@agents.example", "::"} {
			if _, err := a2aagent.Fetch(ctx, a2aagent.Config{Allow: []string{"https://agents.example"}}, raw); err == nil {
				t.Errorf("%q was fetched", raw)
			}
		}
	})
}
