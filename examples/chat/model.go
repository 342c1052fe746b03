package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/planexec/planexec/examples/internal/trip"
	"github.com/planexec/planexec/llm"
	"github.com/planexec/planexec/llm/scripted"
)

// chooseModel returns the model spec names ("openai:MODEL",
// "anthropic:MODEL") when its provider's key is set, else the scripted
// stand-in; say is told which, in a line. A provider's model in a build
// without the adapters is trip.ErrNeedsProviders (see withProviders).
func chooseModel(spec string, say func(string)) (llm.Model, error) {
	provider, _, _ := strings.Cut(spec, ":")
	key := map[string]string{"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}[provider]
	switch {
	case spec == "":
		say("model: scripted (no provider configured; no key, no network)")
	case key != "" && os.Getenv(key) == "":
		say(fmt.Sprintf("model: scripted (%s is not set, so -model %s is not used)", key, spec))
	default:
		return trip.ChooseModel(spec, false, say) // the provider's, or why not
	}
	return scriptedModel(), nil
}

// scriptedModel stands in for a model: a planner that follows the
// conversation, with no key and no network. Asked to plan, create or add
// something, it reads the tracker and proposes a plan creating the items
// named (quoted, or listed after the verb: "plan items for design review
// and launch checklist"), each waiting for the one before; asked to list or
// show, it reads the tracker and says what is there; otherwise it says what
// it can do.
func scriptedModel() llm.Model {
	return scripted.Respond(func(req *llm.Request) scripted.Reply {
		b, _ := json.Marshal(respond(req.Messages)) // strings and plain values: it cannot fail
		return scripted.Reply{Content: string(b)}
	})
}

// answer is what the planner writes each call; call is one tool call in it.
type answer struct {
	Text  string `json:"text"`
	Calls []call `json:"calls"`
}

type call struct {
	Tool      string `json:"tool"`
	Arguments any    `json:"arguments"`
}

// result is one call's result, as the planner is told it.
type result struct {
	Tool   string          `json:"tool"`
	Status string          `json:"status"`
	Output json.RawMessage `json:"output"`
	Error  *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

const resultsHeader = "Results of your tool calls:\n"

var (
	wantsPlan = regexp.MustCompile(`(?i)\b(plan|create|add|make|track)\b`)
	wantsList = regexp.MustCompile(`(?i)\b(list|show|what|which|items?|status|tracker)\b`)
	// a person's message as the planner is told it: "ana: text"
	said = regexp.MustCompile(`(?:^|\n\n)[a-z][\w.-]*: `)
)

// respond answers the conversation so far.
func respond(msgs []llm.Message) answer {
	if len(msgs) == 0 {
		return answer{Text: "Hello.", Calls: []call{}}
	}
	request := personText(msgs)
	if rest, ok := strings.CutPrefix(msgs[len(msgs)-1].Content, resultsHeader); ok {
		var results []result
		if json.Unmarshal([]byte(rest), &results) != nil || len(results) == 0 {
			return answer{Text: "I could not read what the tools returned.", Calls: []call{}}
		}
		return afterResults(request, results[len(results)-1])
	}
	switch {
	case wantsPlan.MatchString(request):
		return answer{Text: "Let me look at the tracker first.", Calls: []call{{Tool: "list_items", Arguments: map[string]any{}}}}
	case wantsList.MatchString(request):
		return answer{Text: "Reading the tracker.", Calls: []call{{Tool: "list_items", Arguments: map[string]any{}}}}
	}
	return answer{Text: `I can read the tracker for you ("what is open?") or plan changes to it ("plan items for design review and launch checklist"). A plan changes nothing until you apply it.`, Calls: []call{}}
}

// personText is the latest person's message.
func personText(msgs []llm.Message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		m := msgs[i].Content
		if msgs[i].Role != llm.RoleUser || strings.HasPrefix(m, resultsHeader) {
			continue
		}
		if at := said.FindAllStringIndex(m, -1); len(at) > 0 {
			return m[at[len(at)-1][1]:]
		}
		return m
	}
	return ""
}

// afterResults answers once the last call of a round came back.
func afterResults(request string, r result) answer {
	done := func(text string) answer { return answer{Text: text, Calls: []call{}} }
	if r.Error != nil {
		switch {
		case r.Tool == "propose_plan" && r.Error.Code == "forbidden":
			return done("You may not make these changes: your permissions let you read the tracker, not change it. Ask someone who can.")
		case r.Error.Code == "forbidden":
			return done("You may not read the tracker.")
		}
		return done("That did not work: " + r.Error.Message)
	}
	switch r.Tool {
	case "propose_plan":
		return done("Here is the plan. Pick the steps you want and apply them, or reject it; nothing changes until you apply.")
	case "list_items":
		var items []Item
		_ = json.Unmarshal(r.Output, &items)
		if wantsPlan.MatchString(request) {
			return propose(request, items)
		}
		lines := []string{fmt.Sprintf("The tracker has %d items:", len(items))}
		for _, it := range items {
			lines = append(lines, "- "+it.String())
		}
		return done(strings.Join(lines, "\n"))
	}
	return done("Done.")
}

// propose plans the items the request names that the tracker does not have:
// a create_item step each, and an add_dependency step making each wait for
// the one before, which reads both ids from the create steps' outcomes.
func propose(request string, items []Item) answer {
	exists := map[string]bool{}
	for _, it := range items {
		exists[strings.ToLower(it.Title)] = true
	}
	var titles, skipped []string
	for _, t := range titlesIn(request) {
		if exists[strings.ToLower(t)] {
			skipped = append(skipped, fmt.Sprintf("%q", t))
		} else {
			titles = append(titles, t)
		}
	}
	if len(titles) == 0 {
		return answer{Text: "The tracker has those already: " + strings.Join(skipped, ", ") + ".", Calls: []call{}}
	}
	type step struct {
		ID        string         `json:"id"`
		Tool      string         `json:"tool"`
		Arguments map[string]any `json:"arguments"`
		DependsOn []string       `json:"depends_on"`
		Intent    string         `json:"intent"`
	}
	var steps []step
	for i, t := range titles {
		steps = append(steps, step{ID: fmt.Sprintf("s%d", i+1), Tool: "create_item",
			Arguments: map[string]any{"title": t}, DependsOn: []string{}, Intent: fmt.Sprintf("Create the item %q.", t)})
	}
	for i := 1; i < len(titles); i++ {
		steps = append(steps, step{ID: fmt.Sprintf("d%d", i+1), Tool: "add_dependency",
			Arguments: map[string]any{
				"item":       map[string]string{"$from": fmt.Sprintf("s%d", i+1), "path": "/id"},
				"depends_on": map[string]string{"$from": fmt.Sprintf("s%d", i), "path": "/id"},
			},
			DependsOn: []string{}, Intent: fmt.Sprintf("%q waits for %q.", titles[i], titles[i-1])})
	}
	text := fmt.Sprintf("The tracker has %d items, none of them these. I propose creating %s", len(items), quoteAll(titles))
	if len(titles) > 1 {
		text += ", each waiting for the one before"
	}
	text += "."
	if len(skipped) > 0 {
		text += " It has " + strings.Join(skipped, ", ") + " already."
	}
	return answer{Text: text, Calls: []call{{Tool: "propose_plan", Arguments: map[string]any{
		"goal": "Track " + quoteAll(titles), "steps": steps,
	}}}}
}

var (
	quoted  = regexp.MustCompile(`"([^"]+)"|“([^”]+)”`)
	asked   = regexp.MustCompile(`(?is)\b(?:plan|create|add|make|track)\b\s*(?:(?:an?|the|new|some|two|three)\s+)?(?:(?:items?|tasks?|tickets?)\s+)?(?:(?:for|to|called|named)\s+)?(.+)$`)
	and     = regexp.MustCompile(`\s*,\s*(?:and\s+)?|\s+and\s+`)
	article = regexp.MustCompile(`(?i)^(?:the|an?)\s+`)
)

// titlesIn finds the titles of the items a request asks for: the quoted
// ones, or those listed after the verb.
func titlesIn(request string) []string {
	var out []string
	for _, m := range quoted.FindAllStringSubmatch(request, -1) {
		out = append(out, title(m[1]+m[2]))
	}
	if len(out) > 0 {
		return out
	}
	m := asked.FindStringSubmatch(request)
	if m == nil {
		return []string{"New item"}
	}
	for _, t := range and.Split(strings.TrimSpace(m[1]), -1) {
		if t = title(t); t != "" {
			out = append(out, t)
		}
	}
	if len(out) == 0 {
		return []string{"New item"}
	}
	return out
}

// title cleans a title: trimmed, without an article before it or a full
// stop after it, capitalised.
func title(s string) string {
	s = strings.TrimFunc(s, func(r rune) bool { return unicode.IsSpace(r) || strings.ContainsRune(".!?", r) })
	s = article.ReplaceAllString(s, "")
	if len(s) > 200 {
		s = s[:200]
		for !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
	}
	if s == "" {
		return ""
	}
	r, n := utf8.DecodeRuneInString(s)
	return string(unicode.ToUpper(r)) + s[n:]
}

// quoteAll quotes titles in a list: "a", "b" and "c".
func quoteAll(titles []string) string {
	q := make([]string, len(titles))
	for i, t := range titles {
		q[i] = fmt.Sprintf("%q", t)
	}
	if len(q) == 1 {
		return q[0]
	}
	return strings.Join(q[:len(q)-1], ", ") + " and " + q[len(q)-1]
}

// withProviders builds this command again with the provider adapters and
// runs it in this one's place (trip.Rebuild).
func withProviders(ctx context.Context) error {
	_, self, _, _ := runtime.Caller(0)
	return trip.Rebuild(ctx, filepath.Dir(self), trip.ErrNeedsProviders)
}
