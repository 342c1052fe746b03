package mcptools_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/mcptools"
	"github.com/planexec/planexec/store/memory"
)

// No goroutine outlives the call that started it.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// patience only turns a hang into a failure; no test measures time with it.
const patience = 10 * time.Second

// everything is the command line of the reference server, or the test is
// skipped (failed when PLANEXEC_REQUIRE_NODE=1) without node or the package.
func everything(t *testing.T, args ...string) []string {
	t.Helper()
	node, err := exec.LookPath("node")
	script := filepath.Join("testdata", "node", "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	if err == nil {
		_, err = os.Stat(script)
	}
	if err != nil {
		if os.Getenv("PLANEXEC_REQUIRE_NODE") == "1" {
			t.Fatalf("the reference MCP server cannot run (npm ci --prefix mcptools/testdata/node): %v", err)
		}
		t.Skipf("the reference MCP server cannot run: %v", err)
	}
	return append([]string{node, script}, args...)
}

// overStdio starts the reference server and connects to it.
func overStdio(t *testing.T, opts ...mcptools.Option) (*mcptools.Client, *exec.Cmd) {
	t.Helper()
	argv := everything(t, "stdio")
	cmd := exec.Command(argv[0], argv[1:]...)
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	c, err := mcptools.Command(ctx, cmd, append([]mcptools.Option{mcptools.Grace(100 * time.Millisecond)}, opts...)...)
	if err != nil {
		t.Fatalf("Command: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return c, cmd
}

// gate approves every step and remembers what it was asked, and when.
type gate struct {
	mu    sync.Mutex
	asked []planexec.ApprovalRequest
	calls func() int // calls made when asked
	made  []int
}

func (g *gate) RequestApproval(_ context.Context, req planexec.ApprovalRequest) (planexec.Decision, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.asked = append(g.asked, req)
	if g.calls != nil {
		g.made = append(g.made, g.calls())
	}
	return req.Approve("dana"), nil
}

// execute runs a plan of one step through an executor over tools.
func execute(t *testing.T, st *memory.Store, g planexec.ApprovalGate, tools []*planexec.Tool, tool, args string) (*planexec.Result, error) {
	t.Helper()
	cfg := planexec.Config{Tools: tools, Gate: g}
	if st != nil {
		cfg.Store = st
	}
	ex, err := planexec.NewExecutor(cfg)
	if err != nil {
		t.Fatalf("NewExecutor: %v", err)
	}
	run, err := ex.Run(planexec.Delegation{RunID: "run-1", Tenant: "acme", User: "dana", Agent: "courier"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	return run.Execute(ctx, planexec.Plan{Goal: "try it", Steps: []planexec.Step{{ID: "s1", Tool: tool, Arguments: json.RawMessage(args)}}})
}

func named(tools []*planexec.Tool) map[string]*planexec.Tool {
	m := map[string]*planexec.Tool{}
	for _, t := range tools {
		m[t.Name()] = t
	}
	return m
}

func TestTheReferenceServersToolsAreOfferedWithTheirSchemas(t *testing.T) {
	c, _ := overStdio(t, mcptools.Prefix("ev_"))
	tools := named(c.Tools())
	for _, name := range []string{"ev_echo", "ev_get-sum", "ev_get-structured-content", "ev_trigger-long-running-operation"} {
		if tools[name] == nil {
			t.Errorf("%s is not offered; offered %d tools", name, len(tools))
		}
	}
	echo := tools["ev_echo"]
	if echo == nil {
		t.FailNow()
	}
	if echo.Contract().Irreversible() || !strings.Contains(string(echo.Contract().Schema()), `"message"`) || echo.Description() == "" {
		t.Errorf("echo: irreversible %v, schema %s, description %q", echo.Contract().Irreversible(), echo.Contract().Schema(), echo.Description())
	}
	if err := echo.Contract().Check(json.RawMessage(`{"message":5}`)); err == nil {
		t.Errorf("echo's contract takes a number for its message")
	}
}

func TestEchoRunsThroughTheExecutorAndItsOutcomeIsRecorded(t *testing.T) {
	c, _ := overStdio(t)
	st := memory.New()
	res, err := execute(t, st, nil, c.Tools(), "echo", `{"message":"hello"}`)
	if err != nil {
		t.Fatalf("Execute: %v", err)
	}
	const want = `[{"type":"text","text":"Echo: hello"}]`
	if s1 := res.Steps["s1"]; s1.Status != planexec.StepDone || string(s1.Outcome) != want {
		t.Errorf("s1: %s %s, want done with %s", s1.Status, s1.Outcome, want)
	}
	again, err := execute(t, st, nil, c.Tools(), "echo", `{"message":"hello"}`)
	if err != nil || !again.Steps["s1"].Replayed || string(again.Steps["s1"].Outcome) != want {
		t.Errorf("the repeat: %+v, %v; want the recorded outcome replayed", again.Steps["s1"], err)
	}
}

func TestStructuredContentIsTheOutcomeWhenTheServerGivesIt(t *testing.T) {
	c, _ := overStdio(t)
	res, err := execute(t, nil, nil, c.Tools(), "get-structured-content", `{"location":"Chicago"}`)
	if err != nil {
		t.Fatal(err)
	}
	var w struct{ Conditions string }
	if err := res.Outcome("s1", &w); err != nil || w.Conditions == "" {
		t.Errorf("outcome %s: %v", res.Steps["s1"].Outcome, err)
	}
}

// syncBuffer is a buffer the transport's log writes to while a test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestArgumentsTheSchemaRefusesAreRefusedAtValidationAndNothingIsCalled(t *testing.T) {
	argv := everything(t, "stdio")
	var wire syncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	c, err := mcptools.Connect(ctx, &mcp.LoggingTransport{Transport: &mcp.CommandTransport{Command: exec.Command(argv[0], argv[1:]...), TerminateDuration: 100 * time.Millisecond}, Writer: &wire})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, args := range []string{`{"message":5}`, `{}`, `{"message":"hi","message":"again"}`} {
		_, err = execute(t, nil, nil, c.Tools(), "echo", args)
		var pv *planexec.PlanValidationError
		if !errors.As(err, &pv) || pv.Reason != planexec.ReasonArguments || pv.Step != "s1" || pv.Tool != "echo" {
			t.Errorf("%s: %v, want ReasonArguments naming s1 and echo", args, err)
		}
	}
	if strings.Contains(wire.String(), "tools/call") {
		t.Errorf("a call reached the server:\n%s", wire.String())
	}
	// The log does see a call that is made.
	if _, err := execute(t, nil, nil, c.Tools(), "echo", `{"message":"hi"}`); err != nil || !strings.Contains(wire.String(), "tools/call") {
		t.Errorf("a valid call: %v; the wire log does not show it", err)
	}
}

func TestTheServerKilledMidCallLeavesAnIrreversibleStepInDoubt(t *testing.T) {
	progressed := make(chan struct{})
	var once sync.Once
	c, cmd := overStdio(t,
		mcptools.Overrides(map[string]mcptools.Override{"trigger-long-running-operation": {Effect: mcptools.Irreversible}}),
		mcptools.OnProgress(func(p mcptools.Progress) {
			if p.Step.StepID == "s1" {
				once.Do(func() { close(progressed) })
			}
		}))
	killed := make(chan error, 1)
	go func() {
		select {
		case <-progressed:
			killed <- cmd.Process.Kill()
		case <-time.After(patience):
			killed <- errors.New("no progress from the server")
		}
	}()
	res, err := execute(t, nil, &gate{}, c.Tools(), "trigger-long-running-operation", `{"duration":60,"steps":600}`)
	if kerr := <-killed; kerr != nil {
		t.Fatalf("killing the server: %v", kerr)
	}
	var in *planexec.IndeterminateOutcomeError
	if !errors.As(err, &in) || !in.InDoubt || res.Steps["s1"].Status != planexec.StepInDoubt {
		t.Errorf("Execute: %v, s1 %s; want the step in doubt", err, res.Steps["s1"].Status)
	}
}

// goServer is an MCP server in this process, over streamable HTTP: a row
// store whose tools say different things of themselves.
func goServer(t *testing.T, calls *atomic.Int32, opts *mcp.ServerOptions) string {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "rows", Version: "v0"}, opts)
	schema := json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"}},"required":["id"],"additionalProperties":false}`)
	no, yes := false, true
	count := func(res *mcp.CallToolResult) mcp.ToolHandler {
		return func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			calls.Add(1)
			return res, nil
		}
	}
	ok := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}
	s.AddTool(&mcp.Tool{Name: "delete_row", InputSchema: schema}, count(ok))
	s.AddTool(&mcp.Tool{Name: "drop_table", InputSchema: schema, Annotations: &mcp.ToolAnnotations{DestructiveHint: &yes}}, count(ok))
	s.AddTool(&mcp.Tool{Name: "get_row", InputSchema: schema, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, count(ok))
	s.AddTool(&mcp.Tool{Name: "add_row", InputSchema: schema, Annotations: &mcp.ToolAnnotations{DestructiveHint: &no}}, count(ok))
	s.AddTool(&mcp.Tool{Name: "broken", InputSchema: schema, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		count(&mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "row locked " + strings.Repeat("x", 5000)}}}))
	s.AddTool(&mcp.Tool{Name: "dump", InputSchema: schema, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		count(&mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("r", 100<<10)}}}))
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

func overHTTP(t *testing.T, url string, opts ...mcptools.Option) *mcptools.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	c, err := mcptools.URL(ctx, url, opts...)
	if err != nil {
		t.Fatalf("URL: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestAnnotationsAreHintsAndOverridesWin(t *testing.T) {
	var calls atomic.Int32
	url := goServer(t, &calls, &mcp.ServerOptions{PageSize: 2}) // six tools: three pages
	c := overHTTP(t, url)
	tools := named(c.Tools())
	want := map[string]bool{"delete_row": true, "drop_table": true, "get_row": false, "add_row": false, "broken": false, "dump": false}
	if len(tools) != len(want) {
		t.Errorf("offered %d tools, want %d: every page", len(tools), len(want))
	}
	for name, irr := range want {
		if tl := tools[name]; tl == nil || tl.Contract().Irreversible() != irr {
			t.Errorf("%s: offered %v, want irreversible %v", name, tl != nil, irr)
		}
	}
	o := overHTTP(t, url, mcptools.Overrides(map[string]mcptools.Override{
		"delete_row": {Effect: mcptools.Reversible},
		"get_row":    {Effect: mcptools.Irreversible, KeyArguments: []string{"id"}},
		"add_row":    {RequireApproval: true},
		"dump":       {Skip: true},
	}))
	tools = named(o.Tools())
	if tools["delete_row"].Contract().Irreversible() || !tools["get_row"].Contract().Irreversible() ||
		!tools["add_row"].Contract().RequiresApproval() || tools["dump"] != nil || !tools["drop_table"].Contract().Irreversible() {
		t.Errorf("the overrides did not win")
	}
}

func TestAToolWithoutDestructiveHintAsksTheGateBeforeItRuns(t *testing.T) {
	var calls atomic.Int32
	c := overHTTP(t, goServer(t, &calls, nil))
	g := &gate{calls: func() int { return int(calls.Load()) }}
	res, err := execute(t, nil, g, c.Tools(), "delete_row", `{"id":"r1"}`)
	if err != nil {
		t.Fatal(err)
	}
	if len(g.asked) != 1 || g.made[0] != 0 || calls.Load() != 1 || res.Steps["s1"].ApprovedBy != "dana" {
		t.Errorf("asked %d times (calls made then %v), %d calls", len(g.asked), g.made, calls.Load())
	}
	if _, err := execute(t, nil, g, c.Tools(), "get_row", `{"id":"r1"}`); err != nil || len(g.asked) != 1 {
		t.Errorf("a read: %v, asked %d times in all", err, len(g.asked))
	}
}

func TestAnErrorTheToolReportsFailsTheStepWithItsTextBounded(t *testing.T) {
	var calls atomic.Int32
	c := overHTTP(t, goServer(t, &calls, nil), mcptools.Prefix("rows_"))
	res, err := execute(t, nil, &gate{}, c.Tools(), "rows_broken", `{"id":"r1"}`)
	var te *mcptools.ToolError
	if !errors.As(err, &te) || te.Tool != "rows_broken" || !strings.HasPrefix(te.Text, "row locked") || len(te.Text) > 1100 {
		t.Fatalf("Execute: %v, want a ToolError naming rows_broken with bounded text", err)
	}
	if res.Steps["s1"].Status != planexec.StepFailed {
		t.Errorf("s1: %s", res.Steps["s1"].Status)
	}
}

func TestAnOutcomeLargerThanTheBoundFailsTheStep(t *testing.T) {
	var calls atomic.Int32
	url := goServer(t, &calls, nil)
	_, err := execute(t, nil, &gate{}, overHTTP(t, url).Tools(), "dump", `{"id":"r1"}`)
	var big *mcptools.OutcomeTooLargeError
	if !errors.As(err, &big) || big.Tool != "dump" || big.Max != mcptools.DefaultMaxOutcome || big.Size <= big.Max {
		t.Errorf("Execute: %v, want an OutcomeTooLargeError", err)
	}
	if _, err := execute(t, nil, &gate{}, overHTTP(t, url, mcptools.MaxOutcome(200<<10)).Tools(), "dump", `{"id":"r1"}`); err != nil {
		t.Errorf("with a larger bound: %v", err)
	}
}

func TestTwoServersToolsDoNotCollideUnderPrefixesAndFilters(t *testing.T) {
	var calls atomic.Int32
	url := goServer(t, &calls, nil)
	a := overHTTP(t, url, mcptools.Prefix("a_"))
	b := overHTTP(t, url, mcptools.Prefix("b_"), mcptools.Filter(func(name string) bool { return name == "get_row" }))
	if len(b.Tools()) != 1 || b.Tools()[0].Name() != "b_get_row" {
		t.Errorf("filtered: %d tools", len(b.Tools()))
	}
	if _, err := planexec.NewExecutor(planexec.Config{Tools: append(a.Tools(), b.Tools()...), Gate: &gate{}}); err != nil {
		t.Errorf("NewExecutor: %v", err)
	}
	if _, err := planexec.NewExecutor(planexec.Config{Tools: append(a.Tools(), a.Tools()...), Gate: &gate{}}); err == nil {
		t.Errorf("the same names twice were accepted")
	}
}

// freePort is a loopback port nothing listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func TestTheReferenceServerOverStreamableHTTP(t *testing.T) {
	argv := everything(t, "streamableHttp")
	port := freePort(t)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "PORT="+strconv.Itoa(port))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	// It says on stderr when it listens.
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "listening on port") {
				ready <- true
				break
			}
		}
		ready <- false
		for sc.Scan() {
		}
	}()
	select {
	case ok := <-ready:
		if !ok {
			t.Fatal("the server ended before it listened")
		}
	case <-time.After(patience):
		t.Fatal("the server did not listen")
	}
	c := overHTTP(t, "http://127.0.0.1:"+strconv.Itoa(port)+"/mcp")
	if named(c.Tools())["get-sum"] == nil {
		t.Fatalf("get-sum is not offered")
	}
	res, err := execute(t, nil, nil, c.Tools(), "get-sum", `{"a":2,"b":3}`)
	if err != nil || !strings.Contains(string(res.Steps["s1"].Outcome), "The sum of 2 and 3 is 5.") {
		t.Errorf("Execute: %v, %s", err, res.Steps["s1"].Outcome)
	}
}
