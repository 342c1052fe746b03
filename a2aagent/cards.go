// Package a2aagent connects planexec to agents that speak A2A
// (Agent2Agent, protocol 0.3): it reads their cards, from the origins the
// service allows, into the entries of a directory the planner searches.
// It is a module of its own, so a service that does not use A2A never
// downloads its SDK.
//
//	cards, err := a2aagent.Fetch(ctx, a2aagent.Config{Allow: []string{"https://agents.example"}},
//		"https://agents.example/lingua")
//	dir, err := directory.New(cards...)
package a2aagent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient/agentcard"

	"github.com/planexec/planexec/directory"
)

// DefaultMaxCardBytes bounds a card's document when Config.MaxCardBytes is
// not set.
const DefaultMaxCardBytes = 256 << 10

// Config says where cards may come from.
type Config struct {
	// Allow lists the origins (scheme://host[:port]) cards are fetched
	// from; a URL of another origin is refused before any request. Empty:
	// none.
	Allow []string
	// Client fetches the cards. Default: http.DefaultClient.
	Client *http.Client
	// MaxCardBytes bounds a card's document. Default: DefaultMaxCardBytes.
	MaxCardBytes int64
}

// CardError refuses the card of one agent: its URL, and why, in fixed
// words (a wrapped error, where there is one, says more).
type CardError struct {
	URL string
	Why string
	Err error
}

func (e *CardError) Error() string {
	msg := "a2aagent: the card at " + e.URL + ": " + e.Why
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *CardError) Unwrap() error { return e.Err }

// ErrNotAllowed is wrapped by a CardError for a card, or an agent's
// endpoint, of an origin the service does not allow.
var ErrNotAllowed = errors.New("a2aagent: origin not allowed")

// Fetch reads the card of each agent at urls (an agent's base URL: its
// card is at /.well-known/agent-card.json) and returns them as directory
// cards, in the order given. A card is refused, and Fetch returns a
// *CardError, when its URL's origin is not allowed, its document is past
// the bound or not a card, it names no agent, or its agent's endpoint is not
// on the card's own origin (a card cannot send the planner elsewhere).
func Fetch(ctx context.Context, cfg Config, urls ...string) ([]directory.Card, error) {
	client := cfg.Client
	if client == nil {
		client = http.DefaultClient
	}
	limit := cfg.MaxCardBytes
	if limit <= 0 {
		limit = DefaultMaxCardBytes
	}
	bounded := *client
	bounded.Transport = boundedBodies{next: client.Transport, limit: limit}
	resolver := agentcard.NewResolver(&bounded)
	var out []directory.Card
	for _, raw := range urls {
		origin, err := originOf(raw)
		if err != nil {
			return nil, &CardError{URL: raw, Why: "not an http(s) URL", Err: err}
		}
		if !slices.Contains(cfg.Allow, origin) {
			return nil, &CardError{URL: raw, Why: "its origin is not one the service allows", Err: ErrNotAllowed}
		}
		card, err := resolver.Resolve(ctx, raw)
		if err != nil {
			return nil, &CardError{URL: raw, Why: "could not be read", Err: err}
		}
		c, err := cardOf(card, origin)
		if err != nil {
			return nil, &CardError{URL: raw, Why: err.Error(), Err: errors.Unwrap(err)}
		}
		out = append(out, c)
	}
	return out, nil
}

// cardOf is an A2A card as a directory holds it, if its agent's endpoint
// is on origin.
func cardOf(card *a2a.AgentCard, origin string) (directory.Card, error) {
	if strings.TrimSpace(card.Name) == "" {
		return directory.Card{}, errors.New("it names no agent")
	}
	if o, err := originOf(card.URL); err != nil || o != origin {
		return directory.Card{}, fmt.Errorf("its agent's endpoint is not on the card's origin: %w", ErrNotAllowed)
	}
	c := directory.Card{Name: card.Name, Description: card.Description, URL: card.URL}
	for _, s := range card.Skills {
		c.Skills = append(c.Skills, directory.Skill{ID: s.ID, Name: s.Name, Description: s.Description,
			Tags: slices.Clone(s.Tags), Examples: slices.Clone(s.Examples)})
	}
	return c, nil
}

// originOf is the scheme://host[:port] of an http(s) URL, lower case.
func originOf(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", err
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return "", errors.New("want http(s)://host")
	}
	return strings.ToLower(u.Scheme + "://" + u.Host), nil
}

// boundedBodies reads at most limit bytes of a response's body: past it,
// the read fails.
type boundedBodies struct {
	next  http.RoundTripper
	limit int64
}

func (b boundedBodies) RoundTrip(req *http.Request) (*http.Response, error) {
	next := b.next
	if next == nil {
		next = http.DefaultTransport
	}
	resp, err := next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	resp.Body = &limitedBody{rc: resp.Body, left: b.limit}
	return resp, nil
}

// errTooLarge is a card past its bound.
var errTooLarge = errors.New("a2aagent: the card is larger than its bound")

type limitedBody struct {
	rc   io.ReadCloser
	left int64
}

func (l *limitedBody) Read(p []byte) (int, error) {
	if l.left <= 0 {
		// One byte more tells a body of exactly the bound from a longer one.
		var one [1]byte
		if n, _ := l.rc.Read(one[:]); n > 0 {
			return 0, errTooLarge
		}
		return 0, io.EOF
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.rc.Read(p)
	l.left -= int64(n)
	return n, err
}

func (l *limitedBody) Close() error { return l.rc.Close() }
