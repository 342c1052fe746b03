package directory

import (
	"context"

	"github.com/planexec/planexec"
)

// SearchTool is the name of the tool SearchAgents makes.
const SearchTool = "search_agents"

// Need is what a planner asks a directory for: the need, in words, and how
// many agents to return at most.
type Need struct {
	Need  string `json:"need" validate:"required,max=1024" jsonschema_description:"what the agent must be able to do, in words"`
	Limit int    `json:"limit,omitempty" validate:"omitempty,min=1,max=20" jsonschema_description:"the most agents to return (default 5)"`
}

// Found is an agent a search found, as the planner is shown it: what it is
// for, never where it is.
type Found struct {
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Skills      []string `json:"skills,omitempty"`
}

// SearchAgents makes the tool a planner searches s with: a read (it
// changes nothing, so it runs again in a later round for fresh results),
// named SearchTool, whose outcome is the agents found, best first. A need
// with no word in it fails the step.
func SearchAgents(s Searcher) (*planexec.Tool, error) {
	return planexec.NewTool(SearchTool, "Find agents that can do what a task needs, described in words. Returns the best matches first.",
		func(ctx context.Context, n Need) ([]Found, error) {
			ms, err := s.Search(ctx, n.Need, n.Limit)
			if err != nil {
				return nil, err
			}
			out := make([]Found, 0, len(ms))
			for _, m := range ms {
				f := Found{Name: m.Card.Name, Description: m.Card.Description}
				for _, sk := range m.Card.Skills {
					f.Skills = append(f.Skills, sk.Name)
				}
				out = append(out, f)
			}
			return out, nil
		})
}
