package chathttp_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/chat"
	"github.com/planexec/planexec/chat/chathttp"
	"github.com/planexec/planexec/llm"
	"github.com/planexec/planexec/llm/scripted"
	"github.com/planexec/planexec/store"
	"github.com/planexec/planexec/store/memory"
)

// The service under test: a tracker's list_items and a read that waits
// until the test lets it go, for the planner; create_item for the plans
// people apply. The scripted planner follows the conversation: "plan ..."
// reads the list and proposes creating an item "Launch"; "wait" calls the
// read that waits; anything else is answered with text.

type noArgs struct{}

type newItem struct {
	Title string `json:"title" validate:"required"`
}

type item struct {
	ID    string `json:"id"`
	Title string `json:"title"`
}

type fixture struct {
	t      *testing.T
	url    string
	client *http.Client
	logs   *lockedWriter

	waiting chan struct{} // gets a value when the waiting read starts
	release chan struct{} // closed to let it return

	chat *chat.Chat

	mu      sync.Mutex
	created []string // the titles create_item was called with
}

// options change the fixture's configuration.
type options struct {
	heartbeat time.Duration
	watchLag  int
	maxBody   int64
	store     func(store.TranscriptStore) store.TranscriptStore
	// chat changes the chat's configuration.
	chat func(*chat.Config)
	// config changes the handler's configuration; server, the HTTP
	// server's, before it starts.
	config func(*chathttp.Config)
	server func(*http.Server)
}

func newFixture(t *testing.T, o options) *fixture {
	t.Helper()
	f := &fixture{t: t, logs: &lockedWriter{}, waiting: make(chan struct{}, 1), release: make(chan struct{}),
		client: &http.Client{Transport: &http.Transport{}}}
	list := planexec.MustTool("list_items", "List the items.", func(context.Context, noArgs) ([]item, error) {
		return []item{{ID: "T-1", Title: "Write the notes"}}, nil
	})
	wait := planexec.MustTool("wait", "Wait until released.", func(ctx context.Context, _ noArgs) (string, error) {
		f.waiting <- struct{}{}
		select {
		case <-f.release:
			return "released", nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	})
	create := planexec.MustTool("create_item", "Create an item.", func(_ context.Context, n newItem) (item, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		if n.Title == "Boom" {
			return item{}, &chat.ToolError{Code: "conflict", Message: "The tracker is read-only today."}
		}
		f.created = append(f.created, n.Title)
		return item{ID: "T-" + strconv.Itoa(len(f.created)+1), Title: n.Title}, nil
	}, planexec.KeyArguments("title"))
	publish := planexec.MustTool("publish", "Publish the release notes.", func(context.Context, noArgs) (string, error) {
		return "published", nil
	}, planexec.RequireApproval())
	plans := memory.New()
	engine, err := planexec.NewExecutor(planexec.Config{Tools: []*planexec.Tool{list, create, publish}, Store: plans, Gate: planexec.DecideLater})
	if err != nil {
		t.Fatal(err)
	}
	var transcripts store.TranscriptStore = memory.New()
	if o.store != nil {
		transcripts = o.store(transcripts)
	}
	logger := slog.New(slog.NewTextHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ccfg := chat.Config{
		Model: planner(), Store: transcripts, Reads: []*planexec.Tool{list, wait}, Engine: engine,
		WatchLag: o.watchLag, PollInterval: 20 * time.Millisecond, Logger: logger,
	}
	if o.chat != nil {
		o.chat(&ccfg)
	}
	c, err := chat.New(ccfg)
	if err != nil {
		t.Fatal(err)
	}
	f.chat = c
	cfg := chathttp.Config{Authenticate: authenticate, Heartbeat: o.heartbeat, MaxBodyBytes: o.maxBody, Logger: logger}
	if o.config != nil {
		o.config(&cfg)
	}
	srv := httptest.NewUnstartedServer(chathttp.New(c, cfg))
	if o.server != nil {
		o.server(srv.Config)
	}
	srv.Start()
	f.url = srv.URL
	t.Cleanup(func() {
		select {
		case <-f.release:
		default:
			close(f.release)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := c.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
		srv.Close()
		f.client.CloseIdleConnections()
	})
	return f
}

// authenticate is the test's people: ana may use every tool, ben and dan
// only the reads; "bot" is an agent acting for ana.
func authenticate(r *http.Request) (planexec.Delegation, error) {
	switch r.Header.Get("X-Person") {
	case "ana":
		return planexec.Delegation{Tenant: "acme", User: "ana"}, nil
	case "ben":
		return planexec.Delegation{Tenant: "acme", User: "ben", Scope: []string{"list_items", "wait"}}, nil
	case "bot":
		return planexec.Delegation{Tenant: "acme", User: "ana", Agent: "bot"}, nil
	case "dan":
		return planexec.Delegation{Tenant: "acme", User: "dan", Scope: []string{"list_items", "wait"}}, nil
	}
	return planexec.Delegation{}, errors.New("no such person: token 8f2a")
}

// planner is the scripted model (see the top of this file).
func planner() llm.Model {
	answer := func(text string, calls ...string) scripted.Reply {
		b, _ := json.Marshal(map[string]any{"text": text, "calls": json.RawMessage("[" + strings.Join(calls, ",") + "]")})
		return scripted.Reply{Content: string(b)}
	}
	return scripted.Respond(func(req *llm.Request) scripted.Reply {
		last := req.Messages[len(req.Messages)-1].Content
		if rest, ok := strings.CutPrefix(last, "Results of your tool calls:\n"); ok {
			var results []struct {
				Tool string `json:"tool"`
			}
			_ = json.Unmarshal([]byte(rest), &results)
			switch results[len(results)-1].Tool {
			case "list_items":
				if strings.Contains(req.Messages[0].Content, "release") {
					return answer("I propose publishing.", `{"tool": "propose_plan", "arguments": {"goal": "Release",
						"steps": [{"id": "s1", "tool": "publish", "arguments": {}, "depends_on": [], "intent": "Publish."}]}}`)
				}
				title := "Launch"
				if strings.Contains(req.Messages[0].Content, "boom") {
					title = "Boom"
				}
				return answer("I propose creating it.", `{"tool": "propose_plan", "arguments": {"goal": "Track it",
					"steps": [{"id": "s1", "tool": "create_item", "arguments": {"title": "`+title+`"}, "depends_on": [], "intent": "Create the item."}]}}`)
			case "propose_plan":
				return answer("Apply it when you are ready.")
			}
			return answer("Done.")
		}
		switch {
		case strings.Contains(last, "plan"):
			return answer("Reading the tracker.", `{"tool": "list_items", "arguments": {}}`)
		case strings.Contains(last, "many calls"):
			list := `{"tool": "list_items", "arguments": {}}`
			return answer("Reading five times.", list, list, list, list, list)
		case strings.Contains(last, "wait"):
			return answer("Waiting.", `{"tool": "wait", "arguments": {}}`)
		}
		return answer("Hello.")
	})
}

// do makes a request as person (none when ""), with body as JSON unless it
// is a string, and returns the status and the body. A request with a body
// says it is application/json.
func (f *fixture) do(person, method, path string, body any) (int, []byte) {
	f.t.Helper()
	var h http.Header
	if body != nil {
		h = http.Header{"Content-Type": {"application/json"}}
	}
	return f.doWith(person, method, path, body, h)
}

// doWith is do with the request's headers given.
func (f *fixture) doWith(person, method, path string, body any, header http.Header) (int, []byte) {
	f.t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			f.t.Fatal(err)
		}
		r = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, f.url+path, r)
	if err != nil {
		f.t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if person != "" {
		req.Header.Set("X-Person", person)
	}
	resp, err := f.client.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		f.t.Fatal(err)
	}
	return resp.StatusCode, out
}

// must makes a request that must answer want, and decodes its body into v
// (unless nil).
func (f *fixture) must(want int, person, method, path string, body, v any) {
	f.t.Helper()
	status, out := f.do(person, method, path, body)
	if status != want {
		f.t.Fatalf("%s %s: status %d, want %d: %s", method, path, status, want, out)
	}
	if v != nil {
		if err := json.Unmarshal(out, v); err != nil {
			f.t.Fatalf("%s %s: %v: %s", method, path, err, out)
		}
	}
}

// session creates a session of ana's.
func (f *fixture) session(id string) {
	f.t.Helper()
	var s chat.Session
	f.must(http.StatusCreated, "ana", "POST", "/sessions", map[string]string{"id": id}, &s)
	if s.ID != id || s.Tenant != "acme" || s.CreatedBy != "ana" {
		f.t.Fatalf("created %+v", s)
	}
}

// send sends ana's message.
func (f *fixture) send(session, text string) chat.Sent {
	f.t.Helper()
	var sent chat.Sent
	f.must(http.StatusAccepted, "ana", "POST", "/sessions/"+session+"/messages", map[string]string{"text": text}, &sent)
	return sent
}

// event is one Server-Sent Event as a client reads it.
type event struct {
	id, name, data string
	hasID          bool
}

func (e event) output(t *testing.T) chat.Output {
	t.Helper()
	var o chat.Output
	if err := json.Unmarshal([]byte(e.data), &o); err != nil {
		t.Fatalf("event %s: %v: %s", e.name, err, e.data)
	}
	return o
}

// stream is an event stream read by a plain HTTP client.
type stream struct {
	t        *testing.T
	resp     *http.Response
	lines    *bufio.Reader
	comments []string
	stop     context.CancelFunc
}

// events opens the session's event stream as ana, with the header given
// ("Last-Event-ID", say) and the query.
func (f *fixture) events(session, query string, header ...string) *stream {
	f.t.Helper()
	status, body, s := f.eventsAs("ana", session, query, header...)
	if status != http.StatusOK {
		f.t.Fatalf("events: %d %s", status, body)
	}
	return s
}

// eventsAs opens the session's event stream as person: the status, and the
// stream when it is 200 (closed when the test ends), else the body.
func (f *fixture) eventsAs(person, session, query string, header ...string) (int, []byte, *stream) {
	f.t.Helper()
	ctx, stop := context.WithTimeout(context.Background(), 10*time.Second)
	req, err := http.NewRequestWithContext(ctx, "GET", f.url+"/sessions/"+session+"/events"+query, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	req.Header.Set("X-Person", person)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := f.client.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		stop()
		return resp.StatusCode, body, nil
	}
	if resp.Header.Get("Content-Type") != "text/event-stream" {
		f.t.Fatalf("events: %s", resp.Header.Get("Content-Type"))
	}
	s := &stream{t: f.t, resp: resp, lines: bufio.NewReader(resp.Body), stop: stop}
	f.t.Cleanup(s.close)
	return http.StatusOK, nil, s
}

func (s *stream) close() {
	s.stop()
	s.resp.Body.Close()
}

// next reads the next event; false at the end of the stream.
func (s *stream) next() (event, bool) {
	s.t.Helper()
	var e event
	for {
		line, err := s.lines.ReadString('\n')
		if err != nil {
			if err != io.EOF {
				s.t.Fatalf("reading the stream: %v", err)
			}
			return e, false
		}
		line = strings.TrimSuffix(line, "\n")
		switch field, value, _ := strings.Cut(line, ": "); {
		case line == "":
			if e.name != "" || e.data != "" {
				return e, true
			}
		case strings.HasPrefix(line, ":"):
			s.comments = append(s.comments, line)
		case field == "id":
			e.id, e.hasID = value, true
		case field == "event":
			e.name = value
		case field == "data":
			e.data = value
		default:
			s.t.Fatalf("unexpected line %q", line)
		}
	}
}

// until reads events up to and including the first named name.
func (s *stream) until(name string) []event {
	s.t.Helper()
	var got []event
	for {
		e, ok := s.next()
		if !ok {
			s.t.Fatalf("the stream ended before %s; read %v", name, names(got))
		}
		got = append(got, e)
		if e.name == name {
			return got
		}
	}
}

// proposed creates session, sends text, follows the turn to its done, and
// returns the stream (past the done) and the proposal the turn made.
func (f *fixture) proposed(session, text string) (*stream, *chat.Proposal) {
	f.t.Helper()
	f.session(session)
	s := f.events(session, "")
	f.send(session, text)
	got := s.until("done")
	return s, got[indexOf(got, 0, "proposal")].output(f.t).Proposal
}

// last is the last of events: the one until looked for.
func last(events []event) event { return events[len(events)-1] }

func names(events []event) []string {
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = e.name
	}
	return out
}

// checkSequence checks that events carry the session's entries in order,
// each once, numbered from first with no gap, and that each text event, which
// carries no id, comes just before the assistant message of its seq.
func checkSequence(t *testing.T, events []event, first int64) {
	t.Helper()
	want := first
	for i, e := range events {
		o := e.output(t)
		if e.name != string(o.Kind) {
			t.Fatalf("event %d is named %s but holds a %s", i, e.name, o.Kind)
		}
		if e.name == "text" {
			if e.hasID {
				t.Errorf("text event %d carries id %s; a client resuming from it would miss its message", i, e.id)
			}
			if i+1 == len(events) || events[i+1].name != "message" || events[i+1].output(t).Seq != o.Seq {
				t.Errorf("text event %d (seq %d) is not followed by its message", i, o.Seq)
			}
			continue
		}
		if e.id != strconv.FormatInt(o.Seq, 10) {
			t.Errorf("event %d (%s) has id %q, seq %d", i, e.name, e.id, o.Seq)
		}
		if o.Seq != want {
			t.Fatalf("event %d (%s) is seq %d, want %d: a gap or a duplicate; names %v", i, e.name, o.Seq, want, names(events))
		}
		want++
	}
}

// indexOf is the index of the first event named name at or after from, or -1.
func indexOf(events []event, from int, name string) int {
	for i := from; i < len(events); i++ {
		if events[i].name == name {
			return i
		}
	}
	return -1
}

// TestATurnStreamsEachOutputAsAnEventAsItHappens: a message is 202 at once,
// and the stream shows the person's message, the planner's text, its tool
// call and result, the proposal and done, in the transcript's order.
func TestATurnStreamsEachOutputAsAnEventAsItHappens(t *testing.T) {
	f := newFixture(t, options{})
	f.session("s1")
	s := f.events("s1", "?after=0")
	sent := f.send("s1", "plan the launch")
	if sent.Turn != 1 || sent.Seq != 1 {
		t.Fatalf("sent %+v, want turn 1, seq 1", sent)
	}
	got := s.until("done")
	checkSequence(t, got, 1)
	at := 0
	for _, name := range []string{"message", "text", "message", "tool_call", "tool_result", "tool_call", "tool_result", "proposal", "done"} {
		if at = indexOf(got, at, name); at < 0 {
			t.Fatalf("no %s in order in %v", name, names(got))
		}
		at++
	}
	if o := got[indexOf(got, 0, "tool_call")].output(t); o.Call.Tool != "list_items" {
		t.Errorf("first call %+v, want list_items", o.Call)
	}
	p := got[indexOf(got, 0, "proposal")].output(t).Proposal
	if p == nil || len(p.Plan.Steps) != 1 || p.Plan.Steps[0].Tool != "create_item" {
		t.Fatalf("proposal %+v", p)
	}
	if d := got[len(got)-1].output(t).Done; d.Reason != chat.EndTurn {
		t.Errorf("done %+v, want end_turn", d)
	}

	// The transcript holds the same entries.
	var out []chat.Output
	f.must(http.StatusOK, "ana", "GET", "/sessions/s1/transcript", nil, &out)
	var streamed []int64
	for _, e := range got {
		if e.hasID {
			streamed = append(streamed, e.output(t).Seq)
		}
	}
	var stored []int64
	for _, o := range out {
		stored = append(stored, o.Seq)
	}
	if !slices.Equal(streamed, stored) {
		t.Errorf("streamed seqs %v, transcript %v", streamed, stored)
	}
	f.must(http.StatusOK, "ana", "GET", "/sessions/s1/transcript?after=2&limit=3", nil, &out)
	if len(out) != 3 || out[0].Seq != 3 {
		t.Errorf("transcript after 2, limit 3: %d outputs from %d", len(out), out[0].Seq)
	}
	var sess chat.Session
	f.must(http.StatusOK, "ana", "GET", "/sessions/s1", nil, &sess)
	if sess.Running || sess.Turns != 1 || sess.Seq != stored[len(stored)-1] {
		t.Errorf("session %+v", sess)
	}
}

// TestCurlReadsTheStream: the stream is plain HTTP; curl shows the events as
// they come.
func TestCurlReadsTheStream(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed")
	}
	f := newFixture(t, options{})
	f.session("s1")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	curl := exec.CommandContext(ctx, "curl", "-sN", "-H", "X-Person: ana", f.url+"/sessions/s1/events?after=0")
	out, err := curl.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := curl.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = curl.Wait() }()
	time.Sleep(50 * time.Millisecond) // curl connects; the stream would replay anyway
	f.send("s1", "plan the launch")
	seen := map[string]bool{}
	lines := bufio.NewScanner(out)
	for lines.Scan() && !seen["event: done"] {
		seen[lines.Text()] = true
	}
	for _, line := range []string{"event: message", "event: tool_call", "event: tool_result", "event: proposal", "event: done", "id: 1"} {
		if !seen[line] {
			t.Errorf("curl did not show %q", line)
		}
	}
}

// TestASecondMessageWhileATurnRunsIsRefused: 409 while the turn's read
// waits, and the message is not stored; once the turn is done the next
// message goes.
func TestASecondMessageWhileATurnRunsIsRefused(t *testing.T) {
	f := newFixture(t, options{})
	f.session("s1")
	s := f.events("s1", "")
	f.send("s1", "wait for it")
	<-f.waiting
	status, body := f.do("ana", "POST", "/sessions/s1/messages", map[string]string{"text": "and another thing"})
	checkError(t, status, body, http.StatusConflict, "turn_busy")
	var sess chat.Session
	f.must(http.StatusOK, "ana", "GET", "/sessions/s1", nil, &sess)
	if !sess.Running {
		t.Errorf("session %+v is not running while its read waits", sess)
	}
	close(f.release)
	got := s.until("done")
	for _, e := range got {
		if o := e.output(t); o.Kind == chat.KindMessage && o.Text == "and another thing" {
			t.Fatal("the refused message was stored")
		}
	}
	if sent := f.send("s1", "hello"); sent.Turn != 2 {
		t.Errorf("next message: %+v, want turn 2", sent)
	}
	s.until("done")
}

// TestCancellingATurnEndsIt: cancel answers whether a turn ran, and the
// turn ends cancelled.
func TestCancellingATurnEndsIt(t *testing.T) {
	f := newFixture(t, options{})
	f.session("s1")
	s := f.events("s1", "")
	f.send("s1", "wait for it")
	<-f.waiting
	var c struct{ Cancelled bool }
	f.must(http.StatusOK, "ana", "POST", "/sessions/s1/cancel", nil, &c)
	if !c.Cancelled {
		t.Error("cancel said no turn was running")
	}
	got := s.until("done")
	if d := got[len(got)-1].output(t).Done; d.Reason != chat.Cancelled {
		t.Errorf("done %+v, want cancelled", d)
	}
	f.must(http.StatusOK, "ana", "POST", "/sessions/s1/cancel", "", &c)
	if c.Cancelled {
		t.Error("cancel said a turn was running after done")
	}
}

// TestAResumedStreamGoesOnFromTheLastEventID: a client that drops and
// reconnects with Last-Event-ID gets every entry after it once: no
// duplicate, no gap, whether the entries were stored meanwhile or come live.
func TestAResumedStreamGoesOnFromTheLastEventID(t *testing.T) {
	f := newFixture(t, options{})
	f.session("s1")
	first := f.events("s1", "?after=0")
	f.send("s1", "plan the launch")
	part := first.until("tool_result")
	first.close()
	last := part[len(part)-1].id

	// The header wins over the after parameter, as EventSource sends both.
	rest := f.events("s1", "?after=0", "Last-Event-ID", last).until("done")
	checkSequence(t, slices.Concat(part, rest), 1)
	if rest[0].output(t).Seq != part[len(part)-1].output(t).Seq+1 {
		t.Errorf("resumed at seq %d after id %s", rest[0].output(t).Seq, last)
	}

	// After the turn, from the stored transcript alone, by the parameter.
	var sess chat.Session
	f.must(http.StatusOK, "ana", "GET", "/sessions/s1", nil, &sess)
	again := f.events("s1", "?after=3")
	tail := again.until("done") // the first turn's, stored
	f.send("s1", "hello")
	tail = append(tail, again.until("done")...)
	checkSequence(t, tail, 4)
	if got := tail[len(tail)-1].output(t).Seq; got != sess.Seq+3 {
		t.Errorf("the second turn ended at seq %d, want %d (its message, answer and done)", got, sess.Seq+3)
	}
}

// TestAnIdleStreamGetsHeartbeats keeps proxies from closing it.
func TestAnIdleStreamGetsHeartbeats(t *testing.T) {
	f := newFixture(t, options{heartbeat: 20 * time.Millisecond})
	f.session("s1")
	s := f.events("s1", "")
	time.AfterFunc(200*time.Millisecond, func() { f.send("s1", "hello") })
	s.until("done")
	if len(s.comments) == 0 || s.comments[0] != ": heartbeat" {
		t.Errorf("comments %q, want heartbeats", s.comments)
	}
}

// TestAWatcherTooFarBehindIsDropped: the stream says dropped and ends, so
// that EventSource reconnects from its last id, and the reconnected stream
// goes on with no gap.
func TestAWatcherTooFarBehindIsDropped(t *testing.T) {
	f := newFixture(t, options{watchLag: 4})
	f.session("s1")
	s := f.events("s1", "")
	// Three entries, fewer than the lag: whenever the watcher reads them, it
	// has caught up, and is live from then on.
	f.send("s1", "hello")
	seen := s.until("done")
	// One write of six entries (an answer and its five calls) leaves a live
	// watcher of a lag of 4 behind, however quick it is.
	f.send("s1", "many calls")
	for {
		e, ok := s.next()
		if !ok {
			t.Fatalf("the stream ended without dropped, after %v", names(seen))
		}
		if e.name == "dropped" {
			if e.hasID {
				t.Errorf("dropped carries id %s", e.id)
			}
			break
		}
		seen = append(seen, e)
	}
	if e, ok := s.next(); ok {
		t.Fatalf("the stream went on after dropped: %+v", e)
	}
	f.idle("s1")
	last := seen[len(seen)-1]
	rest := f.events("s1", "", "Last-Event-ID", last.id).until("done")
	checkSequence(t, slices.Concat(seen, rest), 1)
}

// idle waits until no turn of the session runs.
func (f *fixture) idle(session string) {
	f.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for sess := (chat.Session{Running: true}); sess.Running; {
		if time.Now().After(deadline) {
			f.t.Fatal("the turn did not end")
		}
		f.must(http.StatusOK, "ana", "GET", "/sessions/"+session, nil, &sess)
	}
}

// TestApplyingAProposalRunsItsSteps: apply over HTTP runs the plan on the
// engine as the person, says what each step did, and puts it on the
// stream; the proposal can no longer be rejected.
func TestApplyingAProposalRunsItsSteps(t *testing.T) {
	f := newFixture(t, options{})
	s, p := f.proposed("s1", "plan the launch")

	var res struct {
		Run    string `json:"run"`
		Status string `json:"status"`
		Steps  map[string]struct {
			Tool   string          `json:"tool"`
			Status string          `json:"status"`
			Output json.RawMessage `json:"output"`
		} `json:"steps"`
	}
	f.must(http.StatusOK, "ana", "POST", "/sessions/s1/proposals/"+p.ID+"/apply", map[string]any{}, &res)
	if res.Run == "" || res.Status != "completed" || res.Steps["s1"].Status != "done" || res.Steps["s1"].Tool != "create_item" {
		t.Fatalf("apply: %+v", res)
	}
	var made item
	if err := json.Unmarshal(res.Steps["s1"].Output, &made); err != nil || made.Title != "Launch" {
		t.Errorf("s1's output %s (%v)", res.Steps["s1"].Output, err)
	}
	f.mu.Lock()
	created := slices.Clone(f.created)
	f.mu.Unlock()
	if !slices.Equal(created, []string{"Launch"}) {
		t.Errorf("create_item got %q, want one call for Launch", created)
	}
	decided := s.until("applied")
	if got := names(decided); !slices.Equal(got, []string{"applying", "applied"}) {
		t.Errorf("the stream after the turn: %v, want the decision to apply and then what it did", got)
	}
	applied := decided[len(decided)-1].output(t)
	if applied.By != "ana" || applied.Decision.Proposal != p.ID || applied.Decision.Status != "completed" {
		t.Errorf("applied %+v %+v", applied, applied.Decision)
	}

	status, body := f.do("ana", "POST", "/sessions/s1/proposals/"+p.ID+"/reject", map[string]string{"reason": "too late"})
	checkError(t, status, body, http.StatusConflict, "decided")
	status, body = f.do("ana", "POST", "/sessions/s1/proposals/nope/apply", nil)
	checkError(t, status, body, http.StatusNotFound, "no_proposal")
}

// TestAStepThatFailsIsInTheAnswer: the run ran, so the answer is what it
// did, failed, with the tool's own words for the person.
func TestAStepThatFailsIsInTheAnswer(t *testing.T) {
	f := newFixture(t, options{})
	s, p := f.proposed("s1", "plan a boom")

	status, body := f.do("ana", "POST", "/sessions/s1/proposals/"+p.ID+"/apply", map[string]any{"steps": []string{"s9"}})
	checkError(t, status, body, http.StatusBadRequest, "no_step")

	var res struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Steps  map[string]struct {
			Status string `json:"status"`
			Error  string `json:"error"`
		} `json:"steps"`
	}
	f.must(http.StatusOK, "ana", "POST", "/sessions/s1/proposals/"+p.ID+"/apply", map[string]any{"steps": []string{"s1"}}, &res)
	if res.Status != "failed" || res.Steps["s1"].Status != "failed" || res.Steps["s1"].Error != "The tracker is read-only today." {
		t.Errorf("apply: %+v", res)
	}
	if !strings.Contains(res.Error, `"s1"`) || !strings.Contains(res.Error, "read-only today") {
		t.Errorf("error %q does not say which step failed and why", res.Error)
	}
	o := last(s.until("applied")).output(t)
	if o.Decision.Status != "failed" {
		t.Errorf("applied %+v", o.Decision)
	}
}

// TestAStepThatWaitsForAPersonIsAccepted: 202, with the approvals the run
// waits for; nothing ran.
func TestAStepThatWaitsForAPersonIsAccepted(t *testing.T) {
	f := newFixture(t, options{})
	_, p := f.proposed("s1", "plan the release")
	var res struct {
		Run       string         `json:"run"`
		Status    string         `json:"status"`
		Steps     map[string]any `json:"steps"`
		Approvals []struct {
			ID, Step, Tool string
		} `json:"approvals"`
	}
	f.must(http.StatusAccepted, "ana", "POST", "/sessions/s1/proposals/"+p.ID+"/apply", nil, &res)
	if res.Run == "" || res.Status != "awaiting_approval" || len(res.Steps) != 0 ||
		len(res.Approvals) != 1 || res.Approvals[0].Step != "s1" || res.Approvals[0].Tool != "publish" || res.Approvals[0].ID == "" {
		t.Errorf("apply: %+v", res)
	}
}

// TestAProposalThePersonMayNotRunIsRefused: ben may not create items, so
// his applying ana's proposal is forbidden, naming the tool, and nothing
// runs.
func TestAProposalThePersonMayNotRunIsRefused(t *testing.T) {
	f := newFixture(t, options{})
	_, p := f.proposed("s1", "plan the launch")
	status, body := f.do("ben", "POST", "/sessions/s1/proposals/"+p.ID+"/apply", map[string]any{"steps": []string{"s1"}})
	e := checkError(t, status, body, http.StatusForbidden, "forbidden")
	if !strings.Contains(e.Message, `"create_item"`) {
		t.Errorf("message %q does not name the tool ben may not use", e.Message)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.created) != 0 {
		t.Errorf("create_item ran: %q", f.created)
	}
}

// TestRejectingAProposal records the person's reason.
func TestRejectingAProposal(t *testing.T) {
	f := newFixture(t, options{})
	s, p := f.proposed("s1", "plan the launch")
	f.must(http.StatusOK, "ana", "POST", "/sessions/s1/proposals/"+p.ID+"/reject", map[string]string{"reason": "not now"}, nil)
	o := last(s.until("rejected")).output(t)
	if o.By != "ana" || o.Decision.Reason != "not now" {
		t.Errorf("rejected %+v %+v", o, o.Decision)
	}
	status, body := f.do("ana", "POST", "/sessions/s1/proposals/"+p.ID+"/apply", nil)
	checkError(t, status, body, http.StatusConflict, "decided")
}

// apiError is the error body.
type apiError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// checkError checks an error answer: the status, and a body that is the
// error object, with the code, and nothing else.
func checkError(t *testing.T, status int, body []byte, want int, code string) apiError {
	t.Helper()
	if status != want {
		t.Fatalf("status %d, want %d: %s", status, want, body)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var e struct{ Error apiError }
	if err := dec.Decode(&e); err != nil || e.Error.Code != code || e.Error.Message == "" {
		t.Fatalf("body %s (%v), want the error object with code %s", body, err, code)
	}
	return e.Error
}

// TestRefusalsAreFixedJSON: each refusal is its status and code, in the
// error object, with no internal words.
func TestRefusalsAreFixedJSON(t *testing.T) {
	f := newFixture(t, options{maxBody: 64})
	f.session("s1")
	for _, c := range []struct {
		name, person, method, path string
		body                       any
		status                     int
		code                       string
	}{
		{"no person", "", "POST", "/sessions", map[string]string{}, 401, "unauthenticated"},
		{"an unknown person", "eve", "GET", "/sessions/s1", nil, 401, "unauthenticated"},
		{"an unknown member", "ana", "POST", "/sessions", `{"id": "s2", "colour": "red"}`, 400, "invalid_request"},
		{"not JSON", "ana", "POST", "/sessions", `{"id": `, 400, "invalid_request"},
		{"two values", "ana", "POST", "/sessions", `{"id": "a"} {"id": "b"}`, 400, "invalid_request"},
		{"a wrong type", "ana", "POST", "/sessions/s1/messages", `{"text": 7}`, 400, "invalid_request"},
		{"no text", "ana", "POST", "/sessions/s1/messages", `{}`, 400, "invalid_request"},
		{"an empty message", "ana", "POST", "/sessions/s1/messages", `{"text": "  "}`, 400, "invalid_message"},
		{"a body too large", "ana", "POST", "/sessions/s1/messages", map[string]string{"text": strings.Repeat("a", 100)}, 413, "too_large"},
		{"a session id with a control character", "ana", "POST", "/sessions", `{"id": "a\u0007"}`, 400, "invalid_session_id"},
		{"a session id that is a path", "ana", "POST", "/sessions", `{"id": "s1/proposals/t1r2c1/apply?"}`, 400, "invalid_session_id"},
		{"a session id that is a path's parent", "ana", "POST", "/sessions", `{"id": ".."}`, 400, "invalid_session_id"},
		{"a project with a control character", "ana", "POST", "/sessions", `{"id": "s3", "project": "a\u0007"}`, 400, "invalid_project"},
		{"a session that exists", "ana", "POST", "/sessions", `{"id": "s1"}`, 409, "session_exists"},
		{"no such session", "ana", "GET", "/sessions/nope", nil, 404, "no_session"},
		{"a message to no session", "ana", "POST", "/sessions/nope/messages", `{"text": "hi"}`, 404, "no_session"},
		{"the events of no session", "ana", "GET", "/sessions/nope/events", nil, 404, "no_session"},
		{"the transcript of no session", "ana", "GET", "/sessions/nope/transcript", nil, 404, "no_session"},
		{"a negative after", "ana", "GET", "/sessions/s1/transcript?after=-1", nil, 400, "invalid_request"},
		{"a limit of 0", "ana", "GET", "/sessions/s1/transcript?limit=0", nil, 400, "invalid_request"},
		{"a Last-Event-ID not a seq", "ana", "GET", "/sessions/s1/events?after=x", nil, 400, "invalid_request"},
		{"an agent sending", "bot", "POST", "/sessions/s1/messages", `{"text": "hi"}`, 403, "not_a_person"},
		{"no such proposal", "ana", "POST", "/sessions/s1/proposals/p9/reject", `{"reason": "no"}`, 404, "no_proposal"},
		{"no such route", "ana", "GET", "/nowhere", nil, 404, "not_found"},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, body := f.do(c.person, c.method, c.path, c.body)
			checkError(t, status, body, c.status, c.code)
			if strings.Contains(string(body), "8f2a") || strings.Contains(string(body), "chat:") || strings.Contains(string(body), "planexec:") {
				t.Errorf("the body shows internal words: %s", body)
			}
		})
	}
	if !strings.Contains(f.logs.String(), "token 8f2a") {
		t.Errorf("the authentication error was not logged: %s", f.logs)
	}
}

// failingStore fails reading the session "broken", with words no client may
// see.
type failingStore struct{ store.TranscriptStore }

func (s failingStore) Session(ctx context.Context, tenant, id string) (store.SessionRecord, error) {
	if id == "broken" {
		return store.SessionRecord{}, &store.Error{Op: "load session", Err: errors.New("dial tcp 10.0.0.7:5432: password authentication failed")}
	}
	return s.TranscriptStore.Session(ctx, tenant, id)
}

// TestAStoreFailureIsLoggedNotShown: 500 in fixed words; the store's words
// go to the log.
func TestAStoreFailureIsLoggedNotShown(t *testing.T) {
	f := newFixture(t, options{store: func(s store.TranscriptStore) store.TranscriptStore { return failingStore{s} }})
	status, body := f.do("ana", "GET", "/sessions/broken", nil)
	checkError(t, status, body, http.StatusInternalServerError, "internal")
	if strings.Contains(string(body), "10.0.0.7") {
		t.Errorf("the body shows the store's words: %s", body)
	}
	if !strings.Contains(f.logs.String(), "password authentication failed") {
		t.Errorf("the store's error was not logged: %s", f.logs)
	}
}

// lockedWriter is a log the test reads while the service writes it.
type lockedWriter struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lockedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// TestADenialIsAnsweredInFixedWords: the approver and reason a gate records
// are the service's own; the answer says only which step was not approved.
func TestADenialIsAnsweredInFixedWords(t *testing.T) {
	f := newFixture(t, options{})
	_, p := f.proposed("s1", "plan the release")
	var pending struct {
		Approvals []struct{ ID string } `json:"approvals"`
	}
	f.must(http.StatusAccepted, "ana", "POST", "/sessions/s1/proposals/"+p.ID+"/apply", nil, &pending)
	if len(pending.Approvals) != 1 {
		t.Fatalf("approvals: %+v", pending)
	}
	ana := planexec.Delegation{Tenant: "acme", User: "ana"}
	run, err := f.chat.AppliedRun(ana, "s1", p.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := run.Decide(context.Background(), planexec.Decision{RequestID: pending.Approvals[0].ID, Status: planexec.Denied,
		Approver: "policy-bot@10.1.2.3", Why: "rule 42 of /etc/policy.yaml"}); err != nil {
		t.Fatal(err)
	}
	status, body := f.do("ana", "POST", "/sessions/s1/proposals/"+p.ID+"/apply", nil)
	e := checkError(t, status, body, http.StatusUnprocessableEntity, "apply_refused")
	if e.Message != `Step "s1" ("publish") was not approved.` {
		t.Errorf("the denial answered %q", e.Message)
	}
}

// A session created with a project keeps it: the planner is told it, and
// the session says it.
func TestASessionIsCreatedWithItsProject(t *testing.T) {
	f := newFixture(t, options{})
	var s chat.Session
	f.must(http.StatusCreated, "ana", "POST", "/sessions", map[string]string{"id": "s1", "project": "Release 2.4"}, &s)
	if s.Project != "Release 2.4" {
		t.Fatalf("created %+v, want project Release 2.4", s)
	}
	var got chat.Session
	f.must(http.StatusOK, "ana", "GET", "/sessions/s1", nil, &got)
	if got.Project != "Release 2.4" {
		t.Errorf("read back %+v, want project Release 2.4", got)
	}
}

// A session's summary, made for ana from a read ben may not make, is in
// the session ana reads and not in the one ben reads.
func TestASessionShowsItsSummaryOnlyToAPersonWhoCouldReadItAll(t *testing.T) {
	salaries := planexec.MustTool("get_salaries", "What each person earns.", func(context.Context, noArgs) (map[string]int, error) {
		return map[string]int{"alice": 987654}, nil
	})
	model := scripted.Respond(func(req *llm.Request) scripted.Reply {
		var told []string
		for _, m := range req.Messages {
			told = append(told, m.Content)
		}
		last := told[len(told)-1]
		switch {
		case strings.HasPrefix(req.System, "You summarise"):
			return scripted.Reply{Content: "SUMMARY: " + strings.Join(told, " | ")}
		case strings.HasSuffix(last, "salaries?"):
			return scripted.Reply{Content: `{"text": "", "calls": [{"tool": "get_salaries", "arguments": {}}]}`}
		}
		return scripted.Reply{Content: `{"text": "Noted.", "calls": []}`}
	})
	f := newFixture(t, options{chat: func(c *chat.Config) {
		c.Model, c.Reads, c.CompactAtTokens = model, append(c.Reads, salaries), 1
	}})
	f.session("s1")
	s := f.events("s1", "")
	f.send("s1", "What are the salaries?")
	s.until("done")
	f.send("s1", "Thanks.") // compacts the first turn, for ana
	s.until("done")

	var anas chat.Session
	f.must(http.StatusOK, "ana", "GET", "/sessions/s1", nil, &anas)
	if anas.Compactions != 1 || anas.Summary == nil || anas.Summary.For != "ana" || !strings.Contains(anas.Summary.Text, "987654") {
		t.Fatalf("the session ana reads: %+v, want her summary of the salaries", anas)
	}
	status, body := f.do("ben", "GET", "/sessions/s1", nil)
	var bens chat.Session
	if err := json.Unmarshal(body, &bens); status != http.StatusOK || err != nil {
		t.Fatalf("the session ben reads: %d %v: %s", status, err, body)
	}
	if bens.Summary != nil || strings.Contains(string(body), "987654") || bens.Seq != anas.Seq || bens.Compactions != 1 {
		t.Errorf("the session ben reads shows ana's summary of what ben may not read, or is not the session: %s", body)
	}
}
