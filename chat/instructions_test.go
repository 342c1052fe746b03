package chat_test

// What the planner is told of where it works: the tenant, the session's
// project and the turn's skill.

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/chat"
	"github.com/planexec/planexec/llm"
	"github.com/planexec/planexec/llm/scripted"
)

// skillAsk is one question to a skill provider.
type skillAsk struct {
	person  planexec.Delegation
	session chat.Session
}

func TestEachTurnAsksTheSkillProviderAndGoesOnWithTheStoredSkillWhenItFails(t *testing.T) {
	var (
		mu     sync.Mutex
		asked  []skillAsk
		broken bool
	)
	skills := func(ctx context.Context, person planexec.Delegation, session chat.Session) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, skillAsk{person, session})
		if broken {
			return "", errors.New("the skills service at 10.0.0.9 is down")
		}
		return "Release skill, revision " + string(rune('0'+len(asked))) + ": close nothing on a Friday.", nil
	}
	var logged strings.Builder
	model := scripted.Respond(func(*llm.Request) scripted.Reply { return say("Noted.") })
	r := newRig(t, model, func(c *chat.Config) {
		c.Skills = skills
		c.Logger = slog.New(slog.NewTextHandler(&logged, nil))
	})
	if _, err := r.chat.Create(context.Background(), ana(), chat.SessionOptions{ID: "s1", Skill: "The stored skill.", Project: "Apollo release"}); err != nil {
		t.Fatal(err)
	}
	r.turn(ana(), "s1", "Plan the release")
	r.turn(ben(), "s1", "What about Friday?")
	mu.Lock()
	broken = true
	mu.Unlock()
	out := r.turn(ana(), "s1", "And now?")

	reqs := model.Requests()
	for i, want := range []string{"revision 1: close nothing on a Friday.", "revision 2: close nothing on a Friday.", "The stored skill."} {
		if !strings.Contains(reqs[i].System, want) {
			t.Errorf("turn %d's instructions do not hold %q:\n%s", i+1, want, reqs[i].System)
		}
	}
	if strings.Contains(reqs[0].System, "The stored skill.") {
		t.Error("the stored skill was told beside the provider's")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 3 || asked[1].person.User != "ben" || asked[1].session.ID != "s1" || asked[1].session.Tenant != "acme" ||
		asked[1].session.Project != "Apollo release" || asked[1].session.Skill != "The stored skill." {
		t.Fatalf("the provider was asked %+v", asked)
	}
	if out[len(out)-1].Done.Reason != chat.EndTurn {
		t.Fatalf("the turn whose skill failed: %s", kinds(out))
	}
	if !strings.Contains(logged.String(), "skill provider failed") || strings.Contains(logged.String(), "And now?") {
		t.Fatalf("the log: %s", logged.String())
	}
}

func TestThePlannerIsToldItsTenantAndTheSessionsProject(t *testing.T) {
	model := scripted.Respond(func(*llm.Request) scripted.Reply { return say("Noted.") })
	r := newRig(t, model)
	ctx := context.Background()
	sess, err := r.chat.Create(ctx, ana(), chat.SessionOptions{ID: "s1", Project: "Apollo release"})
	if err != nil {
		t.Fatal(err)
	}
	if sess.Project != "Apollo release" {
		t.Fatalf("the session: %+v", sess)
	}
	r.session("s2")
	r.turn(ana(), "s1", "Hi")
	r.turn(ana(), "s2", "Hi")
	reqs := model.Requests()
	if !strings.Contains(reqs[0].System, `This conversation is in the tenant "acme", on the project "Apollo release".`) {
		t.Fatalf("the instructions of a session with a project:\n%s", reqs[0].System)
	}
	if !strings.Contains(reqs[1].System, `This conversation is in the tenant "acme".`) || strings.Contains(reqs[1].System, "project") {
		t.Fatalf("the instructions of a session without one:\n%s", reqs[1].System)
	}
	for _, project := range []string{"two\nlines", strings.Repeat("p", chat.MaxProjectRunes+1), "\xff"} {
		var ce *planexec.ConfigurationError
		if _, err := r.chat.Create(ctx, ana(), chat.SessionOptions{ID: "s3", Project: project}); !errors.As(err, &ce) {
			t.Errorf("project %q: %v, want a *ConfigurationError", project, err)
		}
	}
}
