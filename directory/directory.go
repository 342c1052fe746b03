// Package directory finds agents by a need written in words: the service
// says which agents it holds (their cards), and a planner's search ("book
// a table for four in Lisbon") returns the cards that match best, ranked
// and bounded. It knows no protocol: a card names where its agent is, and
// the adapter of that protocol messages it.
//
//	dir, err := directory.New(cards...)
//	found, err := dir.Search(ctx, "translate a contract into German", 5)
//
// A planner searches through a tool like any other read (SearchAgents):
// it is shown what each agent found is for, never where it is.
//
// A need is written by a model, so it is untrusted: it is bounded
// (MaxNeedBytes), must be valid UTF-8, and only its words count. Ranking is
// Okapi BM25 over each card's name, description and skills (their names,
// descriptions, tags and examples), a word in a name or a tag weighing more
// than one in a description.
package directory

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Card describes an agent as a directory holds it: what it is for, in
// words, and where it is.
type Card struct {
	// Name is the agent's name, unique in a directory.
	Name        string
	Description string
	// URL is where the agent is reached, by its protocol's adapter.
	URL    string
	Skills []Skill
}

// Skill is one thing an agent does.
type Skill struct {
	ID          string
	Name        string
	Description string
	Tags        []string
	Examples    []string
}

// Match is a card found for a need, and how well it matched (higher is
// better; only the order means anything).
type Match struct {
	Card  Card
	Score float64
}

// Searcher finds agents for a need. Directory is one; a service may plug in
// its own (a registry, a search index).
type Searcher interface {
	// Search returns at most limit cards for need, best first; none when
	// nothing matches.
	Search(ctx context.Context, need string, limit int) ([]Match, error)
}

// Limits of a search.
const (
	// MaxNeedBytes bounds a need.
	MaxNeedBytes = 1024
	// DefaultLimit is the cards a search returns when its limit is not
	// positive; MaxLimit the most it ever returns.
	DefaultLimit = 5
	MaxLimit     = 20
)

// ErrInvalidNeed reports a need that is empty (no word in it), longer than
// MaxNeedBytes, or not valid UTF-8.
var ErrInvalidNeed = errors.New("directory: invalid need")

// Directory is a fixed set of cards, searched in memory. It is safe for
// concurrent use.
type Directory struct {
	cards []Card
	docs  []doc
	df    map[string]int // documents holding each term
	avg   float64        // average document length
}

// doc is a card's terms, weighted by the field they came from.
type doc struct {
	tf  map[string]float64
	len float64
}

// Field weights: a word that names what the agent is weighs more than one
// in the prose describing it.
const (
	weightName        = 3
	weightSkillName   = 2
	weightTag         = 2
	weightDescription = 1
	weightExample     = 1
)

// New builds a directory of cards. A card with no name, or two with one
// name, is an error.
func New(cards ...Card) (*Directory, error) {
	d := &Directory{df: map[string]int{}}
	names := map[string]bool{}
	total := 0.0
	for _, c := range cards {
		if strings.TrimSpace(c.Name) == "" {
			return nil, errors.New("directory: a card has no name")
		}
		if names[c.Name] {
			return nil, fmt.Errorf("directory: two cards are named %q", c.Name)
		}
		names[c.Name] = true
		dc := doc{tf: map[string]float64{}}
		add := func(text string, w float64) {
			for _, t := range terms(text) {
				dc.tf[t] += w
				dc.len += w
			}
		}
		add(c.Name, weightName)
		add(c.Description, weightDescription)
		for _, s := range c.Skills {
			add(s.Name, weightSkillName)
			add(s.Description, weightDescription)
			for _, tag := range s.Tags {
				add(tag, weightTag)
			}
			for _, e := range s.Examples {
				add(e, weightExample)
			}
		}
		for t := range dc.tf {
			d.df[t]++
		}
		total += dc.len
		d.cards = append(d.cards, c)
		d.docs = append(d.docs, dc)
	}
	if len(cards) > 0 {
		d.avg = total / float64(len(cards))
	}
	return d, nil
}

// Len is the number of cards.
func (d *Directory) Len() int { return len(d.cards) }

// BM25's parameters, as most engines set them.
const (
	bm25K1 = 1.2
	bm25B  = 0.75
)

// Search implements Searcher: the cards whose words match need's, ranked
// by BM25, at most limit (DefaultLimit when not positive, never more than
// MaxLimit). Ties keep the order the cards were given in.
func (d *Directory) Search(ctx context.Context, need string, limit int) ([]Match, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(need) > MaxNeedBytes || !utf8.ValidString(need) {
		return nil, fmt.Errorf("%w: at most %d bytes of valid UTF-8", ErrInvalidNeed, MaxNeedBytes)
	}
	query := terms(need)
	if len(query) == 0 {
		return nil, fmt.Errorf("%w: it holds no word", ErrInvalidNeed)
	}
	slices.Sort(query)
	query = slices.Compact(query)
	if limit <= 0 {
		limit = DefaultLimit
	}
	limit = min(limit, MaxLimit)
	n := float64(len(d.cards))
	var out []Match
	for i, dc := range d.docs {
		score := 0.0
		for _, t := range query {
			tf := dc.tf[t]
			if tf == 0 {
				continue
			}
			df := float64(d.df[t])
			idf := math.Log(1 + (n-df+0.5)/(df+0.5))
			score += idf * tf * (bm25K1 + 1) / (tf + bm25K1*(1-bm25B+bm25B*dc.len/d.avg))
		}
		if score > 0 {
			out = append(out, Match{Card: d.cards[i], Score: score})
		}
	}
	slices.SortStableFunc(out, func(a, b Match) int {
		switch {
		case a.Score > b.Score:
			return -1
		case a.Score < b.Score:
			return 1
		}
		return 0
	})
	return out[:min(len(out), limit)], nil
}

// terms are the words of text, lower case, each cut of a plural's s, with
// the words too common to tell cards apart left out.
func terms(text string) []string {
	words := strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
	out := words[:0]
	for _, w := range words {
		if stopWords[w] {
			continue
		}
		if len(w) > 3 && strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss") {
			w = w[:len(w)-1]
		}
		out = append(out, w)
	}
	return out
}

// stopWords carry no meaning of their own in a need.
var stopWords = map[string]bool{
	"a": true, "an": true, "and": true, "are": true, "as": true, "at": true, "be": true, "by": true, "can": true,
	"for": true, "from": true, "i": true, "in": true, "into": true, "is": true, "it": true, "me": true, "my": true,
	"of": true, "on": true, "or": true, "please": true, "that": true, "the": true, "this": true, "to": true,
	"with": true, "you": true, "your": true, "who": true, "which": true, "we": true, "our": true, "need": true,
}
