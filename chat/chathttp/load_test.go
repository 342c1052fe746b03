package chathttp_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"runtime"
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
	"github.com/planexec/planexec/store/memory"
)

// The load: each of many people holds one session's event stream, reads
// it slowly, and sends a few messages one after another. Each message is
// sent twice at once and once more after its 202, as an eager client
// retries; the turn it starts waits (in its one read, "hold") until the
// client lets it go, so every retry lands while the turn runs.

// TestTwoHundredSessionsAtOnce: every retry of a send while its turn runs
// is 409 turn_busy and starts nothing; every turn is answered exactly once;
// every stream carries its session's whole transcript in order, with no
// gap and no duplicate, across drops and resumes. With a lag of one, each
// write of two entries drops the streams behind it, so every stream is
// resumed again and again.
func TestTwoHundredSessionsAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("a load test")
	}
	fig := runLoad(t, 200, 3, 1)
	t.Logf("%d sessions, %d turns in %v: %.0f sessions/s; turn p50 %v, p99 %v; per open session (client and server): %.1f KiB of live heap, %.1f goroutines, %.1f file descriptors; %d retries refused, %d streams resumed",
		fig.sessions, fig.sessions*fig.turns, fig.elapsed.Round(time.Millisecond), fig.sessionsPerSecond(),
		fig.percentile(50), fig.percentile(99), fig.heapPerSession/1024, fig.goroutinesPerSession, fig.fdsPerSession, fig.refused, fig.resumed)
}

// BenchmarkTwoHundredSessions runs the load, with the chat's default lag,
// and reports its figures.
func BenchmarkTwoHundredSessions(b *testing.B) {
	var fig loadFigures
	for b.Loop() {
		fig = runLoad(b, 200, 3, 0)
	}
	b.ReportMetric(fig.sessionsPerSecond(), "sessions/s")
	b.ReportMetric(float64(fig.percentile(50).Microseconds())/1000, "p50-turn-ms")
	b.ReportMetric(float64(fig.percentile(99).Microseconds())/1000, "p99-turn-ms")
	b.ReportMetric(fig.heapPerSession, "heap-B/open-session")
	b.ReportMetric(fig.goroutinesPerSession, "goroutines/open-session")
	if fig.fdsPerSession > 0 {
		b.ReportMetric(fig.fdsPerSession, "fds/open-session")
	}
}

// loadFigures are what one run of the load measured.
type loadFigures struct {
	sessions, turns int
	elapsed         time.Duration   // from the first session created to the last turn's done
	latencies       []time.Duration // each turn's, from its first send to its done on the stream
	// heapPerSession is the live heap, goroutinesPerSession the goroutines
	// and fdsPerSession the file descriptors held (/proc/self/fd), per
	// session with every stream open and idle: the client's side and the
	// server's, as both run here.
	heapPerSession, goroutinesPerSession, fdsPerSession float64
	refused, resumed                                    int // retries answered 409; streams resumed after a drop
}

func (f loadFigures) sessionsPerSecond() float64 { return float64(f.sessions) / f.elapsed.Seconds() }

func (f loadFigures) percentile(p int) time.Duration {
	if len(f.latencies) == 0 {
		return 0
	}
	s := slices.Clone(f.latencies)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}

// holdModel is the planner of the load: asked a message, it calls hold
// with the message's text; told hold's result, it answers. It keeps no
// requests, so the load's memory is the service's.
type holdModel struct{}

var loadMessage = regexp.MustCompile(`turn \d+ of l-\d+`)

func (holdModel) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	last := req.Messages[len(req.Messages)-1].Content
	content := `{"text": "Answered.", "calls": []}`
	if !strings.HasPrefix(last, "Results of your tool calls") {
		content = `{"text": "Holding.", "calls": [{"tool": "hold", "arguments": {"key": "` + loadMessage.FindString(last) + `"}}]}`
	}
	return &llm.Response{Content: content, FinishReason: "stop", Model: "hold"}, nil
}

// gates hold each turn until its client lets it go, by message.
type gates struct{ m sync.Map }

func (g *gates) of(key string) chan struct{} {
	ch, _ := g.m.LoadOrStore(key, make(chan struct{}))
	return ch.(chan struct{})
}

type holdArgs struct {
	Key string `json:"key" validate:"required"`
}

// runLoad runs the load of sessions sessions of turns turns each, with
// chat.Config.WatchLag lag, checks it, and measures it.
func runLoad(tb testing.TB, sessions, turns, lag int) loadFigures {
	tb.Helper()
	g := &gates{}
	hold := planexec.MustTool("hold", "Wait until the client lets the turn go.", func(ctx context.Context, a holdArgs) (string, error) {
		select {
		case <-g.of(a.Key):
			return "let go", nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	})
	// Entries written here wake this process's watchers at once: the poll
	// is for other processes, of which there are none.
	c, err := chat.New(chat.Config{Model: holdModel{}, Store: memory.New(), Reads: []*planexec.Tool{hold},
		PollInterval: 5 * time.Second, WatchLag: lag, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		tb.Fatal(err)
	}
	h := chathttp.New(c, chathttp.Config{Logger: slog.New(slog.DiscardHandler),
		Authenticate: func(r *http.Request) (planexec.Delegation, error) {
			return planexec.Delegation{Tenant: "load", User: r.Header.Get("X-Person")}, nil
		}})
	g0 := runtime.NumGoroutine()
	srv := httptest.NewServer(h)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4 * sessions}, Timeout: 30 * time.Second}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := c.Close(ctx); err != nil {
			tb.Errorf("Close: %v", err)
		}
		client.CloseIdleConnections()
		srv.Close()
		// Nothing of the load outlives it (and the next run measures from
		// where this one started).
		for runtime.NumGoroutine() > g0 {
			if ctx.Err() != nil {
				tb.Errorf("%d goroutines outlive the load, %d ran before it", runtime.NumGoroutine(), g0)
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()

	settle()
	var m0 runtime.MemStats
	runtime.ReadMemStats(&m0)
	fd0 := openFiles()
	start := time.Now()

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	clients := make([]*loadClient, sessions)
	var readers sync.WaitGroup
	var wg sync.WaitGroup
	errs := make(chan error, 4*sessions)
	for i := range clients {
		lc := &loadClient{client: client, url: srv.URL, person: "p-" + strconv.Itoa(i), session: "l-" + strconv.Itoa(i),
			done: make(chan int64, turns)}
		clients[i] = lc
		wg.Go(func() {
			if err := lc.post("/sessions", `{"id": "`+lc.session+`"}`, http.StatusCreated, nil); err != nil {
				errs <- err
				return
			}
			resp, err := lc.open(ctx, 0)
			if err != nil {
				errs <- err
				return
			}
			readers.Go(func() {
				if err := lc.read(ctx, resp); err != nil {
					errs <- err
				}
			})
		})
	}
	wg.Wait()
	fig := loadFigures{sessions: sessions, turns: turns}
	if !drain(tb, errs) {
		stop()
		readers.Wait()
		return fig
	}

	// Every stream is open and idle.
	settle()
	var m1 runtime.MemStats
	runtime.ReadMemStats(&m1)
	fig.heapPerSession = float64(int64(m1.HeapAlloc)-int64(m0.HeapAlloc)) / float64(sessions)
	fig.goroutinesPerSession = float64(runtime.NumGoroutine()-g0) / float64(sessions) // the server's own are few
	if fd0 > 0 {
		fig.fdsPerSession = float64(openFiles()-fd0) / float64(sessions)
	}

	var mu sync.Mutex
	for _, lc := range clients {
		wg.Go(func() {
			for turn := 1; turn <= turns; turn++ {
				began := time.Now()
				refused, err := lc.turn(ctx, g, int64(turn))
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				fig.latencies = append(fig.latencies, time.Since(began))
				fig.refused += refused
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	fig.elapsed = time.Since(start)
	stop()
	readers.Wait()
	if !drain(tb, errs) {
		return fig
	}

	// What each stream carried is its transcript, and each turn is there
	// once: its message, its answer and its done.
	for _, lc := range clients {
		var out []chat.Output
		if err := lc.get("/sessions/"+lc.session+"/transcript?limit=1000", &out); err != nil {
			tb.Fatal(err)
		}
		if err := lc.check(out, turns); err != nil {
			tb.Errorf("%s: %v", lc.session, err)
		}
		fig.resumed += lc.resumed
	}
	if n := c.Stats().Turns; n != int64(sessions*turns) {
		tb.Errorf("%d turns ran, want %d", n, sessions*turns)
	}
	if want := 2 * sessions * turns; fig.refused != want {
		tb.Errorf("%d retries were refused, want %d", fig.refused, want)
	}
	return fig
}

// settle collects garbage, twice, so that what sync.Pools hold is let go
// too.
func settle() { runtime.GC(); runtime.GC() }

// drain reports the errors sent so far; it says whether there were none.
func drain(tb testing.TB, errs chan error) bool {
	tb.Helper()
	ok := true
	for {
		select {
		case err := <-errs:
			tb.Error(err)
			ok = false
		default:
			return ok
		}
	}
}

// openFiles counts this process's file descriptors, or 0 where
// /proc/self/fd is not.
func openFiles() int {
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0
	}
	return len(fds)
}

// loadClient is one person's client: their session, its stream, what the
// stream carried.
type loadClient struct {
	client               *http.Client
	url, person, session string
	done                 chan int64 // the turn of each done the stream carries
	events               []chat.Output
	resumed              int
	lastID               int64
}

// turn sends the turn's message, twice at once and again after its 202,
// lets the turn go, and waits for its done on the stream. It returns how
// many sends were refused as turn_busy.
func (lc *loadClient) turn(ctx context.Context, g *gates, turn int64) (int, error) {
	text := fmt.Sprintf("turn %d of %s", turn, lc.session)
	body := `{"text": "` + text + `"}`
	statuses := make([]int, 3)
	var sent chat.Sent
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() { statuses[i] = lc.status("/sessions/"+lc.session+"/messages", body, &sent) })
	}
	wg.Wait()
	statuses[2] = lc.status("/sessions/"+lc.session+"/messages", body, nil)
	slices.Sort(statuses)
	if !slices.Equal(statuses, []int{http.StatusAccepted, http.StatusConflict, http.StatusConflict}) {
		return 0, fmt.Errorf("%s: the sends of turn %d were answered %v, want one 202 and two 409", lc.session, turn, statuses)
	}
	if sent.Turn != turn {
		return 0, fmt.Errorf("%s: the send started turn %d, want %d", lc.session, sent.Turn, turn)
	}
	close(g.of(text))
	select {
	case got := <-lc.done:
		if got != turn {
			return 0, fmt.Errorf("%s: the stream's done is of turn %d, want %d", lc.session, got, turn)
		}
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(15 * time.Second):
		return 0, fmt.Errorf("%s: no done of turn %d", lc.session, turn)
	}
	return 2, nil
}

// status posts body and returns the status; a 202's body goes into v.
func (lc *loadClient) status(path, body string, v any) int {
	req, err := http.NewRequest("POST", lc.url+path, strings.NewReader(body))
	if err != nil {
		return 0
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Person", lc.person)
	resp, err := lc.client.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0
	}
	if resp.StatusCode == http.StatusAccepted && v != nil && json.Unmarshal(raw, v) != nil {
		return 0
	}
	if resp.StatusCode == http.StatusConflict && !strings.Contains(string(raw), `"turn_busy"`) {
		return 0
	}
	return resp.StatusCode
}

func (lc *loadClient) post(path, body string, want int, v any) error {
	if got := lc.status(path, body, v); got != want {
		return fmt.Errorf("%s: POST %s: %d, want %d", lc.session, path, got, want)
	}
	return nil
}

func (lc *loadClient) get(path string, v any) error {
	req, err := http.NewRequest("GET", lc.url+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("X-Person", lc.person)
	resp, err := lc.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %d", path, resp.StatusCode)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// open opens the session's stream after the given id.
func (lc *loadClient) open(ctx context.Context, after int64) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", lc.url+"/sessions/"+lc.session+"/events", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("X-Person", lc.person)
	req.Header.Set("Last-Event-ID", strconv.FormatInt(after, 10))
	// The client's timeout would end the stream: this one lasts as ctx.
	stream := *lc.client
	stream.Timeout = 0
	resp, err := stream.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("%s: events: %d", lc.session, resp.StatusCode)
	}
	return resp, nil
}

// read reads the stream slowly until ctx ends, resuming after a drop from
// the last id it saw, and tells each done.
func (lc *loadClient) read(ctx context.Context, resp *http.Response) error {
	for {
		dropped, err := lc.readOne(resp)
		resp.Body.Close()
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: reading the stream: %w", lc.session, err)
		}
		if !dropped {
			return fmt.Errorf("%s: the stream ended", lc.session)
		}
		lc.resumed++
		if resp, err = lc.open(ctx, lc.lastID); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
}

// readOne reads one connection's events; it reports whether the stream
// said dropped.
func (lc *loadClient) readOne(resp *http.Response) (dropped bool, err error) {
	lines := bufio.NewReader(resp.Body)
	var name, data, id string
	for {
		line, err := lines.ReadString('\n')
		if err != nil {
			return false, err
		}
		field, value, _ := strings.Cut(strings.TrimSuffix(line, "\n"), ": ")
		switch {
		case line == "\n" && name == "dropped":
			return true, nil
		case line == "\n" && name != "":
			var o chat.Output
			if err := json.Unmarshal([]byte(data), &o); err != nil {
				return false, err
			}
			if id != "" {
				lc.lastID, _ = strconv.ParseInt(id, 10, 64)
				lc.events = append(lc.events, o)
			}
			if o.Kind == chat.KindDone {
				select {
				case lc.done <- o.Turn:
				default:
					return false, errors.New("the stream carried more dones than turns were sent")
				}
			}
			name, data, id = "", "", ""
			time.Sleep(time.Millisecond) // a slow reader
		case field == "event":
			name = value
		case field == "data":
			data = value
		case field == "id":
			id = value
		}
	}
}

// check checks what the stream carried against the session's transcript,
// and that each turn is there once.
func (lc *loadClient) check(transcript []chat.Output, turns int) error {
	if len(lc.events) != len(transcript) {
		return fmt.Errorf("the stream carried %d outputs, the transcript holds %d", len(lc.events), len(transcript))
	}
	for i, o := range transcript {
		if o.Seq != int64(i+1) || lc.events[i].Seq != o.Seq || lc.events[i].Kind != o.Kind {
			return fmt.Errorf("output %d: streamed seq %d (%s), stored seq %d (%s)", i, lc.events[i].Seq, lc.events[i].Kind, o.Seq, o.Kind)
		}
	}
	type count struct{ messages, answers, dones int }
	per := map[int64]*count{}
	for _, o := range transcript {
		if per[o.Turn] == nil {
			per[o.Turn] = &count{}
		}
		switch {
		case o.Kind == chat.KindMessage && o.Role == "user":
			if want := fmt.Sprintf("turn %d of %s", o.Turn, lc.session); o.Text != want {
				return fmt.Errorf("turn %d's message is %q", o.Turn, o.Text)
			}
			per[o.Turn].messages++
		case o.Kind == chat.KindMessage && o.Text == "Answered.":
			per[o.Turn].answers++
		case o.Kind == chat.KindDone:
			if o.Done.Reason != chat.EndTurn {
				return fmt.Errorf("turn %d ended %s", o.Turn, o.Done.Reason)
			}
			per[o.Turn].dones++
		}
	}
	if len(per) != turns {
		return fmt.Errorf("the transcript holds %d turns, want %d", len(per), turns)
	}
	for turn, n := range per {
		if *n != (count{1, 1, 1}) {
			return fmt.Errorf("turn %d has %d messages, %d answers, %d dones; want one each", turn, n.messages, n.answers, n.dones)
		}
	}
	return nil
}
