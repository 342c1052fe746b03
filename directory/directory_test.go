package directory_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/directory"
)

// cards are a few agents a service might hold.
func cards() []directory.Card {
	return []directory.Card{
		{Name: "Concierge", Description: "Restaurant reservations and tables in European cities.", URL: "https://concierge.example/a2a",
			Skills: []directory.Skill{{ID: "book", Name: "Book a table", Tags: []string{"restaurant", "reservation"}, Examples: []string{"a table for four in Lisbon tonight"}}}},
		{Name: "Lingua", Description: "Translates documents between forty languages.", URL: "https://lingua.example/a2a",
			Skills: []directory.Skill{{ID: "translate", Name: "Translate", Tags: []string{"translation", "german", "french"}, Examples: []string{"translate this contract into German"}}}},
		{Name: "Ledger", Description: "Reads invoices and books them; can translate currency codes.", URL: "https://ledger.example/a2a",
			Skills: []directory.Skill{{ID: "invoice", Name: "Book an invoice", Tags: []string{"accounting", "invoice"}}}},
		{Name: "Weather", Description: "Forecasts for any city.", URL: "https://weather.example/a2a"},
	}
}

func names(ms []directory.Match) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Card.Name)
	}
	return out
}

func TestANeedFindsTheAgentsThatMatchItBestFirst(t *testing.T) {
	d, err := directory.New(cards()...)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tc := range []struct {
		need  string
		first string
		not   []string
	}{
		{"translate a contract into German", "Lingua", []string{"Concierge", "Weather"}},
		{"book tables for four in Lisbon", "Concierge", []string{"Weather"}},
		{"book an invoice from our supplier", "Ledger", []string{"Weather"}},
		{"WEATHER in Porto?", "Weather", []string{"Lingua"}},
	} {
		found, err := d.Search(ctx, tc.need, 0)
		if err != nil {
			t.Fatalf("%q: %v", tc.need, err)
		}
		if len(found) == 0 || found[0].Card.Name != tc.first {
			t.Errorf("%q found %v, want %s first", tc.need, names(found), tc.first)
			continue
		}
		for i := 1; i < len(found); i++ {
			if found[i].Score > found[i-1].Score {
				t.Errorf("%q: not ranked best first: %v", tc.need, found)
			}
		}
		for _, n := range tc.not {
			for _, m := range found {
				if m.Card.Name == n {
					t.Errorf("%q found %s, which has none of its words", tc.need, n)
				}
			}
		}
	}
	if found, err := d.Search(ctx, "quantum chromodynamics", 0); err != nil || len(found) != 0 {
		t.Errorf("a need nothing matches: %v, %v; want none", names(found), err)
	}
}

func TestANameOrTagWeighsMoreThanADescription(t *testing.T) {
	// Ledger mentions translating in its description; Lingua is a
	// translator by name, skill and tag.
	d, _ := directory.New(cards()...)
	found, err := d.Search(context.Background(), "translate", 0)
	if err != nil || len(found) != 2 || found[0].Card.Name != "Lingua" || found[1].Card.Name != "Ledger" {
		t.Fatalf("found %v, %v; want Lingua, then Ledger", names(found), err)
	}
}

func TestASearchIsBounded(t *testing.T) {
	var many []directory.Card
	for i := range 50 {
		many = append(many, directory.Card{Name: fmt.Sprintf("translator-%02d", i), Description: "Translates text."})
	}
	d, _ := directory.New(many...)
	ctx := context.Background()
	for _, tc := range []struct{ limit, want int }{{0, directory.DefaultLimit}, {-1, directory.DefaultLimit}, {3, 3}, {1000, directory.MaxLimit}} {
		found, err := d.Search(ctx, "translate text", tc.limit)
		if err != nil || len(found) != tc.want {
			t.Errorf("limit %d: %d found, %v; want %d", tc.limit, len(found), err, tc.want)
		}
	}
	// Ties keep the order the cards were given in.
	found, _ := d.Search(ctx, "translates", 3)
	if got := strings.Join(names(found), ","); got != "translator-00,translator-01,translator-02" {
		t.Errorf("ties: %s", got)
	}
}

func TestANeedThatIsNoNeedIsRefused(t *testing.T) {
	d, _ := directory.New(cards()...)
	ctx := context.Background()
	for _, need := range []string{"", "   ", "to the of", strings.Repeat("translate ", 200), "translate \xff\xfe"} {
		if found, err := d.Search(ctx, need, 0); !errors.Is(err, directory.ErrInvalidNeed) || found != nil {
			t.Errorf("need %.20q: %v, %v; want ErrInvalidNeed", need, names(found), err)
		}
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := d.Search(cancelled, "translate", 0); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled search: %v", err)
	}
}

func TestADirectoryRefusesCardsItCannotTellApart(t *testing.T) {
	if _, err := directory.New(directory.Card{Name: "A"}, directory.Card{Name: "A"}); err == nil {
		t.Error("two cards of one name were taken")
	}
	if _, err := directory.New(directory.Card{Description: "nameless"}); err == nil {
		t.Error("a card with no name was taken")
	}
	d, err := directory.New()
	if err != nil || d.Len() != 0 {
		t.Fatalf("an empty directory: %v", err)
	}
	if found, err := d.Search(context.Background(), "anything", 0); err != nil || len(found) != 0 {
		t.Errorf("a search of an empty directory: %v, %v", found, err)
	}
}

// BenchmarkSearchThousandCards searches a directory of 1,000 cards and
// reports the cards found per search.
func BenchmarkSearchThousandCards(b *testing.B) {
	topics := []string{"translation", "restaurant", "invoice", "weather", "flight", "hotel", "legal", "tax", "shipping", "payroll",
		"calendar", "email", "contract", "insurance", "medical", "recipe", "fitness", "music", "podcast", "security"}
	var many []directory.Card
	for i := range 1000 {
		t1, t2 := topics[i%len(topics)], topics[(i*7+3)%len(topics)]
		many = append(many, directory.Card{
			Name:        fmt.Sprintf("%s-agent-%d", t1, i),
			Description: fmt.Sprintf("Handles %s and %s requests for teams in city %d.", t1, t2, i%37),
			Skills: []directory.Skill{{ID: t1, Name: "Handle " + t1, Tags: []string{t1, t2},
				Examples: []string{fmt.Sprintf("sort out my %s for next week", t1)}}},
		})
	}
	d, err := directory.New(many...)
	if err != nil {
		b.Fatal(err)
	}
	needs := []string{"translate a contract into German", "book a flight and a hotel in Lisbon", "file my payroll tax", "what is the weather"}
	ctx := context.Background()
	found := 0
	for i := 0; b.Loop(); i++ {
		ms, err := d.Search(ctx, needs[i%len(needs)], directory.MaxLimit)
		if err != nil {
			b.Fatal(err)
		}
		found += len(ms)
	}
	b.ReportMetric(float64(found)/float64(b.N), "found/search")
}

// A planner searches the directory through a tool, a read like any other:
// validated, run through the executor, its outcome the agents found,
// without where they are.
func TestAPlannerSearchesTheDirectoryThroughATool(t *testing.T) {
	d, _ := directory.New(cards()...)
	tool, err := directory.SearchAgents(d)
	if err != nil {
		t.Fatal(err)
	}
	ex, err := planexec.NewExecutor(planexec.Config{Tools: []*planexec.Tool{tool}})
	if err != nil {
		t.Fatal(err)
	}
	run, err := ex.Run(planexec.Delegation{RunID: "r1", Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	res, err := run.Execute(ctx, planexec.Plan{Goal: "find a translator", Steps: []planexec.Step{
		{ID: "s1", Tool: directory.SearchTool, Arguments: json.RawMessage(`{"need":"translate a contract into German","limit":2}`)}}})
	if err != nil {
		t.Fatal(err)
	}
	var found []directory.Found
	if err := json.Unmarshal(res.Steps["s1"].Outcome, &found); err != nil || len(found) == 0 || found[0].Name != "Lingua" || found[0].Skills[0] != "Translate" {
		t.Fatalf("outcome %s, %v; want Lingua first", res.Steps["s1"].Outcome, err)
	}
	if strings.Contains(string(res.Steps["s1"].Outcome), "https://") {
		t.Errorf("the planner is shown where agents are: %s", res.Steps["s1"].Outcome)
	}
	for _, args := range []string{`{"need":""}`, `{"need":"x","limit":50}`, `{"need":"x","colour":"red"}`} {
		_, err := run.Execute(ctx, planexec.Plan{Goal: "g", Steps: []planexec.Step{{ID: "s1", Tool: directory.SearchTool, Arguments: json.RawMessage(args)}}})
		if !errors.Is(err, planexec.ReasonArguments) {
			t.Errorf("arguments %s: %v, want refused (arguments)", args, err)
		}
	}
	if _, err := run.Execute(ctx, planexec.Plan{Goal: "g", Steps: []planexec.Step{{ID: "s1", Tool: directory.SearchTool,
		Arguments: json.RawMessage(`{"need":"the of to"}`)}}}); !errors.Is(err, directory.ErrInvalidNeed) {
		t.Errorf("a need with no word: %v, want the step failed with ErrInvalidNeed", err)
	}
}
