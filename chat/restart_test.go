package chat_test

import (
	"bufio"
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/chat"
	"github.com/planexec/planexec/llm"
	"github.com/planexec/planexec/llm/scripted"
	"github.com/planexec/planexec/store/sqlite"
)

// restartChild is set in the child process of the restart test: the path
// of the SQLite file it talks over.
const restartChild = "PLANEXEC_CHAT_RESTART_CHILD"

// TestRestartChild is the child of the restart test: it starts a turn whose
// second call hangs, says so, and waits to be killed.
func TestRestartChild(t *testing.T) {
	path := os.Getenv(restartChild)
	if path == "" {
		t.Skip("run by TestARestartedProcessReloadsTheSessionRepairsItsTranscriptAndGoesOn")
	}
	ctx := context.Background()
	st, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	tr := newTracker()
	hang := planexec.MustTool("hang", "Never returns.", func(ctx context.Context, a struct{}) (string, error) {
		os.Stdout.WriteString("HANGING\n")
		select {}
	})
	engine, err := planexec.NewExecutor(planexec.Config{Tools: tr.writes(), Store: st})
	if err != nil {
		t.Fatal(err)
	}
	model := scripted.New(say("Looking.", call("list_items", `{}`), call("hang", `{}`), call("get_item", `{"id":"T-1"}`)))
	c, err := chat.New(chat.Config{Model: model, Store: st, Reads: append(tr.reads(), hang), Engine: engine, Lease: time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	person := ana()
	person.Scope = nil
	if _, err := c.Create(ctx, person, chat.SessionOptions{ID: "s1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Send(ctx, person, "s1", "Look around"); err != nil {
		t.Fatal(err)
	}
	select {}
}

func TestARestartedProcessReloadsTheSessionRepairsItsTranscriptAndGoesOn(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	path := filepath.Join(t.TempDir(), "chat.db")
	child := exec.Command(os.Args[0], "-test.run=^TestRestartChild$", "-test.v")
	child.Env = append(os.Environ(), restartChild+"="+path)
	stdout, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer child.Process.Kill()
	lines := bufio.NewScanner(stdout)
	hanging := false
	for lines.Scan() {
		if lines.Text() == "HANGING" {
			hanging = true
			break
		}
	}
	if !hanging {
		t.Fatal("the child never reached its hanging call")
	}
	if err := child.Process.Kill(); err != nil { // mid-turn, mid-call
		t.Fatal(err)
	}
	child.Wait()

	// A new process over the same file, whose clock is past the dead
	// turn's lease.
	ctx := context.Background()
	st, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	model := scripted.Respond(func(req *llm.Request) scripted.Reply { return say("Picking up where we were.") })
	tr := newTracker()
	hang := planexec.MustTool("hang", "Never returns.", func(ctx context.Context, a struct{}) (string, error) { return "", nil })
	engine, err := planexec.NewExecutor(planexec.Config{Tools: tr.writes(), Store: st})
	if err != nil {
		t.Fatal(err)
	}
	later := func() time.Time { return time.Now().Add(5 * time.Second) }
	c, err := chat.New(chat.Config{Model: model, Store: st, Reads: append(tr.reads(), hang), Engine: engine, Now: later, PollInterval: 10 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)

	sess, err := c.Session(ctx, "acme", "s1")
	if err != nil {
		t.Fatal(err)
	}
	if sess.Running {
		t.Fatal("a session whose turn died still looks running")
	}
	all, err := c.Transcript(ctx, "acme", "s1", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := "message message tool_call tool_call tool_call tool_result tool_result tool_result error done"
	if got := kinds(all); got != want {
		t.Fatalf("the repaired transcript:\n got %s\nwant %s", got, want)
	}
	results := of(all, chat.KindToolResult)
	if results[0].Result.Status != chat.CallOK {
		t.Fatalf("the call that ran: %+v", results[0].Result)
	}
	for _, r := range results[1:] {
		if r.Result.Status != chat.CallNotRun || r.Result.Error.Code != "interrupted" {
			t.Fatalf("a call the dead turn never finished: %+v", r.Result)
		}
	}
	if d := all[len(all)-1].Done; d.Reason != chat.Failed {
		t.Fatalf("done = %+v", d)
	}

	person := ana()
	person.Scope = nil
	sent, err := c.Send(ctx, person, "s1", "Are you there?")
	if err != nil {
		t.Fatal(err)
	}
	var out []chat.Output
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for o, err := range c.Watch(wctx, "acme", "s1", sent.Seq-1) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, o)
		if o.Kind == chat.KindDone {
			break
		}
	}
	if d := out[len(out)-1].Done; d.Reason != chat.EndTurn {
		t.Fatalf("the conversation did not go on: %s", kinds(out))
	}
	told := lastUser(&model.Requests()[0])
	if !strings.Contains(told, `"status":"not_run"`) || !strings.Contains(told, "interrupted") || !strings.Contains(told, "ana: Are you there?") {
		t.Fatalf("the next request does not carry the repaired calls:\n%s", told)
	}
}
