package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/store/sqlite"

	"github.com/planexec/planexec/examples/internal/trip"
)

// server is the command serving on a random loopback port, as main runs
// it, over a SQLite file; its requests are ana's unless sent as another.
type server struct {
	*caller
	db       string
	bookings atomic.Int32
	stop     context.CancelFunc
	done     chan error
}

// caller sends requests to a server with a person's key.
type caller struct {
	url    string
	key    string // sent as Authorization: Bearer <key>, unless ""
	client *http.Client
}

// The people of the keys file start writes, and their keys.
const (
	anaKey = "ana-0123456789abcdef"
	benKey = "ben-fedcba9876543210"
)

// keysFile writes a keys file giving ana and ben their keys, and returns
// its name.
func keysFile(t *testing.T) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "keys")
	text := "# person=key\nana=" + anaKey + "\nben=" + benKey + "\n"
	if err := os.WriteFile(f, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// as is a caller to the same server with key.
func (s *caller) as(key string) *caller {
	return &caller{url: s.url, key: key, client: s.client}
}

// start runs the command with o over the SQLite file db (a new one in a
// temporary directory when empty) until the test ends; with no keys in o,
// ana's and ben's (keysFile).
func start(t *testing.T, o options, db string) *server {
	t.Helper()
	if db == "" {
		db = filepath.Join(t.TempDir(), "server.db")
	}
	s := &server{db: db, done: make(chan error, 1),
		caller: &caller{key: anaKey, client: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}}}
	if o.keys == "" && os.Getenv(keysVariable) == "" {
		o.keys = keysFile(t)
	}
	if o.addr == "" {
		o.addr = "127.0.0.1:0"
	}
	o.db = db
	if o.book == nil {
		o.book = func(ctx context.Context, b trip.Booking) (string, error) {
			s.bookings.Add(1)
			return trip.Book(ctx, b)
		}
	}
	ctx, stop := context.WithCancel(context.Background())
	s.stop = stop
	addrs := make(chan net.Addr, 1)
	go func() { s.done <- run(ctx, o, func(a net.Addr) { addrs <- a }) }()
	select {
	case a := <-addrs:
		s.url = "http://" + a.String()
	case err := <-s.done:
		stop()
		t.Fatalf("run: %v", err)
	}
	t.Cleanup(func() { s.shutdown(t) })
	return s
}

// shutdown stops the command, as a signal does, and waits for run to
// return; once only.
func (s *server) shutdown(t *testing.T) {
	t.Helper()
	if s.done == nil {
		return
	}
	s.stop()
	select {
	case err := <-s.done:
		if err != nil {
			t.Errorf("run returned %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("run did not return after its context ended")
	}
	s.done = nil
}

// post sends a chat-completions request for session with body.
func (s *caller) post(t *testing.T, session, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequest("POST", s.url+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-session-id", session)
	if s.key != "" {
		req.Header.Set("Authorization", "Bearer "+s.key)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = resp.Body.Close() })
	return resp
}

// events is what a stream carried: each data line, and the chunks decoded.
type events struct {
	lines  []string
	chunks []chunk
}

type chunk struct {
	Object  string `json:"object"`
	Choices []struct {
		Delta struct {
			Content string `json:"content"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Metadata map[string]any `json:"metadata"`
}

// stream sends a streaming request and reads its server-sent events, as
// curl -N shows them, to the end.
func (s *caller) stream(t *testing.T, session, body string) events {
	t.Helper()
	resp := s.post(t, session, body)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("%s, content type %q", resp.Status, resp.Header.Get("Content-Type"))
	}
	var ev events
	lines := bufio.NewScanner(resp.Body)
	lines.Buffer(nil, 1<<20)
	for lines.Scan() {
		line := lines.Text()
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("not an SSE data line: %q", line)
		}
		ev.lines = append(ev.lines, line)
		if data == "[DONE]" {
			continue
		}
		var c chunk
		if err := json.Unmarshal([]byte(data), &c); err != nil || c.Object != "chat.completion.chunk" {
			t.Fatalf("not a chunk: %s (%v)", data, err)
		}
		ev.chunks = append(ev.chunks, c)
	}
	if err := lines.Err(); err != nil {
		t.Fatalf("reading the stream: %v", err)
	}
	if len(ev.lines) == 0 || ev.lines[len(ev.lines)-1] != "data: [DONE]" {
		t.Fatalf("the stream does not end with data: [DONE]:\n%s", strings.Join(ev.lines, "\n"))
	}
	return ev
}

// content is the stream's text.
func (ev events) content() string {
	var b strings.Builder
	for _, c := range ev.chunks {
		for _, ch := range c.Choices {
			b.WriteString(ch.Delta.Content)
		}
	}
	return b.String()
}

// states are the stream's plan_state updates.
func (ev events) states() []map[string]any {
	var out []map[string]any
	for _, c := range ev.chunks {
		if c.Metadata != nil && c.Metadata["type"] == "plan_state" {
			out = append(out, c.Metadata)
		}
	}
	return out
}

// task is the status a plan_state update gives step, or "".
func task(state map[string]any, step string) string {
	phases, _ := state["phases"].(map[string]any)
	for _, p := range phases {
		tasks, _ := p.(map[string]any)["tasks"].(map[string]any)
		if t, ok := tasks[step].(map[string]any); ok {
			s, _ := t["status"].(string)
			return s
		}
	}
	return ""
}

// lastStatus is the plan_status of the stream's last plan_state.
func (ev events) lastStatus() string {
	states := ev.states()
	if len(states) == 0 {
		return ""
	}
	s, _ := states[len(states)-1]["plan_status"].(string)
	return s
}

func tripRequest(extra string) string {
	return `{"model":"planexec","planner_mode":true,"stream":true,` +
		`"messages":[{"role":"user","content":"Get me to New York on 14 December, three nights near the office."}]` + extra + `}`
}

// stored is the run of person's session as another replica over the same
// file reads it.
func stored(t *testing.T, db, person, session string) *planexec.Run {
	t.Helper()
	st, err := sqlite.Open(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	ex, err := newExecutor(st, options{})
	if err != nil {
		t.Fatal(err)
	}
	run, err := ex.Run(planexec.Delegation{RunID: session, Tenant: person})
	if err != nil {
		t.Fatal(err)
	}
	return run
}

// history is the stored events of person's session; none if it has no
// record.
func history(t *testing.T, db, person, session string) []planexec.Event {
	t.Helper()
	events, err := stored(t, db, person, session).History(t.Context(), 0, 1000)
	if err != nil && !errors.Is(err, planexec.ErrNoRecord) {
		t.Fatal(err)
	}
	return events
}

// status is where person's session stands.
func status(t *testing.T, db, person, session string) planexec.RunStatus {
	t.Helper()
	info, err := stored(t, db, person, session).Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return info.Status
}

func TestAStreamedPlannerRequestWithYesRunsTheTripToItsAnswer(t *testing.T) {
	s := start(t, options{yes: true}, "")
	ev := s.stream(t, "trip-a", tripRequest(""))

	ran := map[string]bool{}
	for _, st := range ev.states() {
		for _, step := range []string{"s1", "s2", "s3", "s4"} {
			if task(st, step) == "completed" {
				ran[step] = true
			}
		}
	}
	if len(ran) != 4 {
		t.Errorf("steps shown completed: %v, want s1 to s4:\n%s", ran, strings.Join(ev.lines, "\n"))
	}
	if got := ev.lastStatus(); got != "completed" {
		t.Errorf("last plan_status %q, want completed", got)
	}
	if got := ev.content(); !strings.HasPrefix(got, "Booked BA117") {
		t.Errorf("content %q", got)
	}
	if n := s.bookings.Load(); n != 1 {
		t.Errorf("booked %d times, want once", n)
	}
	// The stream does not carry an approval a gate granted: the record does.
	granted := false
	for _, e := range history(t, s.db, "ana", "trip-a") {
		if e.Kind == planexec.EventApprovalGranted && e.Tool == "book_flight" && e.Approver == "server (-yes)" {
			granted = true
		}
	}
	if !granted {
		t.Error("no APPROVAL_GRANTED of book_flight by server (-yes) in the session's history")
	}
}

// pause starts the trip in session and returns the approval requests it
// paused on.
func pause(t *testing.T, s *caller, bookings *atomic.Int32, session string) []map[string]any {
	t.Helper()
	ev := s.stream(t, session, tripRequest(""))
	if got := ev.lastStatus(); got != "card_interaction_requested" {
		t.Fatalf("last plan_status %q, want card_interaction_requested:\n%s", got, strings.Join(ev.lines, "\n"))
	}
	states := ev.states()
	list, _ := states[len(states)-1]["approvals"].([]any)
	var reqs []map[string]any
	for _, r := range list {
		reqs = append(reqs, r.(map[string]any))
	}
	if len(reqs) != 1 || reqs[0]["tool"] != "book_flight" || reqs[0]["irreversible"] != true || reqs[0]["request"] == "" {
		t.Fatalf("approvals %v, want the booking", reqs)
	}
	if args, _ := reqs[0]["arguments"].(map[string]any); args["flight"] != "BA117" {
		t.Errorf("the approval shows %v, not the flight the search found", args)
	}
	if !strings.Contains(ev.content(), "Approval needed") {
		t.Errorf("content %q", ev.content())
	}
	if n := bookings.Load(); n != 0 {
		t.Fatalf("booked %d times before anyone approved", n)
	}
	return reqs
}

// complete sends a non-streaming request and decodes its completion.
func (s *caller) complete(t *testing.T, session, body string) (content, finish string) {
	t.Helper()
	resp := s.post(t, session, body)
	var c struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil || resp.StatusCode != http.StatusOK || len(c.Choices) != 1 {
		t.Fatalf("%s: %+v (%v)", resp.Status, c, err)
	}
	return c.Choices[0].Message.Content, c.Choices[0].FinishReason
}

func TestWithoutYesTheSessionPausesAndTheClientsDecisionFinishesIt(t *testing.T) {
	s := start(t, options{}, "")
	reqs := pause(t, s.caller, &s.bookings, "trip-b")

	// Without a decision the session says again what it waits for.
	if content, _ := s.complete(t, "trip-b", strings.Replace(tripRequest(""), `"stream":true,`, "", 1)); !strings.Contains(content, "Approval needed") {
		t.Errorf("a follow-up with no decisions: %q, want the pause again", content)
	}
	if n := s.bookings.Load(); n != 0 {
		t.Fatalf("booked %d times with no decision", n)
	}

	decision := fmt.Sprintf(`,"decisions":[{"request":%q,"approved":true,"by":"dana"}]`, reqs[0]["request"])
	body := strings.Replace(tripRequest(decision), `"stream":true,`, "", 1)
	content, finish := s.complete(t, "trip-b", body)
	if !strings.HasPrefix(content, "Booked BA117") || finish != "stop" {
		t.Errorf("after approval: %q, finish %q", content, finish)
	}
	if n := s.bookings.Load(); n != 1 {
		t.Errorf("booked %d times, want once", n)
	}
	found := false
	for _, e := range history(t, s.db, "ana", "trip-b") {
		if e.Kind == planexec.EventApprovalGranted && strings.HasPrefix(e.Approver, "ana") && strings.Contains(e.Approver, "dana") {
			found = true
		}
	}
	if !found {
		t.Error("the client's approval is not on the record")
	}
}

func TestADeniedBookingIsNotMadeAndTheAnswerSaysSo(t *testing.T) {
	s := start(t, options{}, "")
	reqs := pause(t, s.caller, &s.bookings, "trip-d")
	decision := fmt.Sprintf(`,"decisions":[{"request":%q,"approved":false,"by":"dana","reason":"too dear"}]`, reqs[0]["request"])
	ev := s.stream(t, "trip-d", tripRequest(decision))
	if got := ev.content(); !strings.HasPrefix(got, "Not booked") {
		t.Errorf("content %q", got)
	}
	if n := s.bookings.Load(); n != 0 {
		t.Errorf("booked %d times although denied", n)
	}
}

// readmeCommands are the curl commands of the README's "Planner mode over
// HTTP" section, in order: each code block that starts with one.
func readmeCommands(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Planner mode over HTTP\n")
	if !ok {
		t.Fatal(`README.md has no "## Planner mode over HTTP" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var cmds []string
	blocks := strings.Split(section, "```")
	for i := 1; i < len(blocks); i += 2 { // the odd pieces are inside fences
		block := blocks[i]
		if nl := strings.IndexByte(block, '\n'); nl >= 0 {
			block = block[nl+1:] // after the fence's info string
		}
		if strings.HasPrefix(block, "curl ") {
			cmds = append(cmds, strings.TrimSpace(block))
		}
	}
	return cmds
}

// The README's session, run with curl as it shows it (the key in
// PLANEXEC_API_KEY), against the command on a loopback port: the trip
// pauses for the booking, and the decision in the second command finishes
// it.
func TestTheREADMEsCurlSession(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not on PATH")
	}
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("sh is not on PATH")
	}
	cmds := readmeCommands(t)
	if len(cmds) != 2 {
		t.Fatalf("the README shows %d curl commands, want 2 (start, decide):\n%s", len(cmds), strings.Join(cmds, "\n\n"))
	}
	for _, c := range cmds {
		if !strings.HasPrefix(c, "curl -N localhost:8080/") || !strings.Contains(c, "-H 'x-session-id: ") ||
			!strings.Contains(c, `"planner_mode":true`) || !strings.Contains(c, `"stream":true`) {
			t.Fatalf("the README's command is not a streamed planner request to localhost:8080:\n%s", c)
		}
		if !strings.Contains(c, `-H "Authorization: Bearer $PLANEXEC_API_KEY"`) {
			t.Fatalf(`the README's command sends no key (-H "Authorization: Bearer $PLANEXEC_API_KEY"):`+"\n%s", c)
		}
	}
	s := start(t, options{}, "")
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(s.url, "http://"))
	curl := func(cmd string) string {
		t.Helper()
		cmd = strings.Replace(cmd, "localhost:8080", "localhost:"+port, 1)
		sh := exec.CommandContext(t.Context(), "sh", "-c", "set -e\n"+cmd)
		sh.Env = append(os.Environ(), "PLANEXEC_API_KEY="+anaKey)
		out, err := sh.CombinedOutput()
		if err != nil {
			t.Fatalf("%s\n%v\n%s", cmd, err, out)
		}
		if !strings.Contains(string(out), "data: [DONE]") {
			t.Fatalf("no data: [DONE] in the output of\n%s\n%s", cmd, out)
		}
		return string(out)
	}
	first := curl(cmds[0])
	if !strings.Contains(first, `"plan_status":"card_interaction_requested"`) {
		t.Fatalf("the first command did not pause for the booking:\n%s", first)
	}
	request := regexp.MustCompile(`"request":"(sha256:[0-9a-f]+)"`).FindStringSubmatch(first)
	if request == nil {
		t.Fatalf("no approval request in:\n%s", first)
	}
	if !strings.Contains(cmds[1], `"request":"sha256:…"`) {
		t.Fatalf(`the second command does not decide "sha256:…":`+"\n%s", cmds[1])
	}
	second := curl(strings.Replace(cmds[1], "sha256:…", request[1], 1))
	if !strings.Contains(second, "Booked BA117") || !strings.Contains(second, `"plan_status":"completed"`) {
		t.Errorf("the second command did not finish the trip:\n%s", second)
	}
	if n := s.bookings.Load(); n != 1 {
		t.Errorf("booked %d times, want once", n)
	}
}

// A signal lets a run under way finish for the grace period, then
// interrupts it; run returns with nothing left running, and the client's
// next request, to the next start over the same file, resumes the session,
// which finishes, booking once.
func TestShutdownInterruptsARunPastItsGraceAndTheClientResumesItAfterTheRestart(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) }) // after the servers' cleanups
	db := filepath.Join(t.TempDir(), "server.db")
	var attempts, booked atomic.Int32
	book := func(ctx context.Context, b trip.Booking) (string, error) {
		if attempts.Add(1) == 1 {
			<-ctx.Done() // the first attempt is under way when the server stops
			return "", fmt.Errorf("booking not sent: %w: %w", ctx.Err(), planexec.ErrNotApplied)
		}
		booked.Add(1)
		return "PNR-" + b.Flight, nil
	}
	s := start(t, options{yes: true, book: book, grace: 200 * time.Millisecond}, db)
	resp := s.post(t, "trip-s", tripRequest(""))
	lines := bufio.NewScanner(resp.Body)
	for lines.Scan() {
		if strings.Contains(lines.Text(), `"s3":{"status":"running"`) {
			break
		}
	}
	began := time.Now()
	s.shutdown(t)
	if took := time.Since(began); took > 10*time.Second {
		t.Errorf("shutdown took %v", took)
	}
	for lines.Scan() { // the stream ends
	}
	_ = resp.Body.Close()
	if n := attempts.Load(); n != 1 {
		t.Fatalf("the booking was attempted %d times before the restart", n)
	}

	s2 := start(t, options{yes: true, book: book}, db)
	ev := s2.stream(t, "trip-s", tripRequest(""))
	if got := ev.content(); !strings.HasPrefix(got, "Booked BA117") {
		t.Errorf("after the restart: %q\n%s", got, strings.Join(ev.lines, "\n"))
	}
	if n := booked.Load(); n != 1 {
		t.Errorf("booked %d times, want once", n)
	}
	s2.shutdown(t)
	s2.client.CloseIdleConnections()
	s.client.CloseIdleConnections()
}

// An OpenAI-compatible endpoint stands for the model. The command is run as
// a user runs it: its default build has no provider adapters, so it builds
// itself again with them and hands over, and a signal to it stops both.
func TestARealModelIsUsedWhenItsKeyIsSet(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the command with the provider adapters")
	}
	var calls atomic.Int32
	model := httptest.NewServer(trip.OpenAIStandIn("test-key", &calls))
	defer model.Close()

	dir := t.TempDir()
	bin := filepath.Join(dir, "server")
	if out, err := exec.CommandContext(t.Context(), "go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "-yes", "-addr", "127.0.0.1:0", "-db", filepath.Join(dir, "server.db"), "-model", "openai:trip-model")
	// With no keys given, the command makes one and says how to send it.
	cmd.Env = append(os.Environ(), "OPENAI_API_KEY=test-key", "OPENAI_BASE_URL="+model.URL, keysVariable+"=")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var exitErr error
	exited := make(chan struct{}) // closed once the command has exited; exitErr is then its error
	t.Cleanup(func() {
		_ = cmd.Process.Kill() // if the test failed before stopping it
		<-exited
	})
	type serving struct{ addr, key string }
	logged := make(chan serving, 1)
	var stderrText strings.Builder
	go func() {
		var at serving
		lines := bufio.NewScanner(stderr)
		for lines.Scan() {
			stderrText.WriteString(lines.Text() + "\n")
			if _, addr, ok := strings.Cut(lines.Text(), "serving planner mode on http://"); ok {
				at.addr = strings.TrimSuffix(strings.Fields(addr)[0], "/v1/chat/completions")
			}
			if _, key, ok := strings.Cut(lines.Text(), "export PLANEXEC_API_KEY="); ok && at.addr != "" {
				at.key = key
				logged <- at
			}
		}
		exitErr = cmd.Wait()
		close(exited)
		close(logged)
	}()
	var at serving
	select {
	case at = <-logged:
	case <-time.After(5 * time.Minute):
		t.Fatal("the command did not start serving")
	}
	if at.addr == "" {
		t.Fatalf("the command exited, or did not say its key:\n%s", stderrText.String())
	}
	addr := at.addr
	s := &caller{url: "http://" + addr, key: at.key, client: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}}
	if resp := s.as("").post(t, "trip-m", tripRequest("")); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("with no key: %s, want 401", resp.Status)
	}
	ev := s.stream(t, "trip-m", tripRequest(""))
	if got := ev.content(); !strings.HasPrefix(got, "Booked BA117") {
		t.Errorf("content %q", got)
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("the model was called %d times, want twice: the plan, then the answer", n)
	}

	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	for range logged { // to the end of its output
	}
	<-exited
	if exitErr != nil {
		t.Errorf("the command exited with %v", exitErr)
	}
	text := stderrText.String()
	for _, want := range []string{"building with the provider adapters", "model: trip-model via the OpenAI-compatible API", "stopped"} {
		if !strings.Contains(text, want) {
			t.Errorf("the log does not say %q:\n%s", want, text)
		}
	}
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Errorf("something still listens on %s after the command exited", addr)
	}
}

func TestAProviderModelWithoutItsKeyFallsBackAndAnUnknownOneIsRefused(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	if m, err := chooseModel("openai:some-model"); err != nil || m == nil {
		t.Errorf("without its key: %v, %v; want the scripted model", m, err)
	}
	if _, err := chooseModel("mystery:x"); err == nil {
		t.Error("an unknown provider was accepted")
	}
	if trip.ProvidersCompiledIn() {
		return // built with -tags providers
	}
	t.Setenv("OPENAI_API_KEY", "test-key")
	if _, err := chooseModel("openai:some-model"); !errors.Is(err, trip.ErrNeedsProviders) {
		t.Errorf("with its key, in the default build: %v, want trip.ErrNeedsProviders", err)
	}
}
