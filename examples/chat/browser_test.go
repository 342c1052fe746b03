package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/planexec/planexec/llm"
)

// browser finds a Chromium to drive; without one the test is skipped,
// unless PLANEXEC_REQUIRE_BROWSER=1 (as in CI), when it fails.
func browser(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	if os.Getenv("PLANEXEC_REQUIRE_BROWSER") == "1" {
		t.Fatal("no Chromium found, and PLANEXEC_REQUIRE_BROWSER=1: install the chromium package")
	}
	t.Skip("no Chromium found (install the chromium package to run the browser test)")
	return ""
}

// service is the example's service on a loopback port, served as run
// serves it, with known tokens.
type service struct {
	*server
	url    string
	tokens map[string]string
}

// startService starts the service over items, its handler wrapped in
// wrap; it stops when the test ends.
func startService(t *testing.T, items *tracker, wrap ...func(http.Handler) http.Handler) *service {
	t.Helper()
	return startServiceWith(t, scriptedModel(), items, wrap...)
}

// startServiceWith is startService planning with model.
func startServiceWith(t *testing.T, model llm.Model, items *tracker, wrap ...func(http.Handler) http.Handler) *service {
	t.Helper()
	tokens := map[string]string{"ana": "ana-token-0123456789", "ben": "ben-token-0123456789"}
	ts := httptest.NewUnstartedServer(nil)
	srv, err := newServer(model, items, options{tokens: tokens, hosts: hostsOf(ts.Listener.Addr(), nil)})
	if err != nil {
		t.Fatal(err)
	}
	var h http.Handler = srv
	for _, w := range wrap {
		h = w(h)
	}
	base, endRequests := context.WithCancel(context.Background())
	ts.Config = httpServer(h, base)
	ts.Start()
	t.Cleanup(func() {
		endRequests()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
		ts.Close()
	})
	return &service{server: srv, url: ts.URL, tokens: tokens}
}

// signIn signs the browser in as person with a one-time link, and waits
// for the page to be ready to send.
func (s *service) signIn(person string) chromedp.Action[chromedp.Void] {
	return chromedp.Steps(
		chromedp.Navigate(s.url+"/signin?code="+s.access.link(person)),
		chromedp.Click(chromedp.CSS(`#signin`)),
		chromedp.WaitEnabled(chromedp.CSS(`#send`)),
	)
}

// openBrowser starts headless Chromium at exe with one page, for at most
// 20 seconds; it stops when the test ends, before the servers the test
// started close (the page's event stream ends with the browser). threw
// returns what the page's scripts threw so far.
func openBrowser(t *testing.T, exe string) (page context.Context, threw func() []string) {
	t.Helper()
	// Generous: on a loaded two-core machine Chromium alone can take
	// seconds to start.
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	opts := append(slices.Clone(chromedp.DefaultExecAllocatorOptions[:]),
		chromedp.ExecPath(exe), chromedp.Headless, chromedp.NoSandbox, chromedp.Flag("disable-dev-shm-usage", true))
	alloc, stopAlloc := chromedp.NewExecAllocator(ctx, opts...)
	var mu sync.Mutex
	var thrown []string
	page, stopPage := chromedp.NewContext(alloc, chromedp.WithListener(func(ev any) {
		if e, ok := ev.(*runtime.EventExceptionThrown); ok {
			mu.Lock()
			defer mu.Unlock()
			d := e.ExceptionDetails
			if d.Exception != nil && d.Exception.Description != "" {
				thrown = append(thrown, d.Exception.Description)
			} else {
				thrown = append(thrown, d.Text)
			}
		}
	}))
	t.Cleanup(func() { stopPage(); stopAlloc(); cancel() })
	return page, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(thrown)
	}
}

// TestAPersonAppliesAProposalInThePage: in a real browser, ana asks for two
// items; the page shows the planner's tool calls as they happen and its
// proposal as a card; she applies one step of it, then the rest, the page
// shows each step done, and the tracker holds the items (each once), the
// second waiting for the first.
func TestAPersonAppliesAProposalInThePage(t *testing.T) {
	exe := browser(t)
	items := newTracker()
	svc := startService(t, items)
	page, threw := openBrowser(t, exe)

	// The page as a person uses it: sign in, ask, wait for the proposal,
	// apply it, and wait for the steps' results, which come on the event
	// stream.
	err := chromedp.Do(page,
		svc.signIn("ana"),
		chromedp.SendKeys(chromedp.CSS(`#message`), "plan items for design review and launch checklist"),
		chromedp.Click(chromedp.CSS(`#send`)),
		chromedp.WaitVisible(chromedp.CSS(`.proposal button.apply`)),
	)
	var calls, steps, outcome, tracker string
	if err == nil {
		calls, err = chromedp.Run(page, chromedp.Text(chromedp.CSS(`#log`)))
	}
	// First a part: s1 alone. The rest stays open to apply, and the
	// proposal can no longer be rejected.
	off := func(sel string) bool { // whether the control is disabled; an error ends the test below
		var b bool
		if err == nil {
			b, err = chromedp.Run(page, chromedp.Evaluate[bool](`document.querySelector(`+strconv.Quote(sel)+`).disabled`))
		}
		return b
	}
	var part string
	if err == nil {
		err = chromedp.Do(page,
			chromedp.Click(chromedp.CSS(`.step[data-step="s2"] input`)),
			chromedp.Click(chromedp.CSS(`.step[data-step="d2"] input`)),
			chromedp.Click(chromedp.CSS(`.proposal button.apply`)),
			chromedp.WaitVisible(chromedp.CSS(`.proposal.applied .step[data-step="s1"][data-status="done"]`)),
			chromedp.WaitVisible(chromedp.CSS(`#items li:nth-child(3)`)),
			chromedp.WaitNotPresent(chromedp.CSS(`.proposal[data-busy]`)), // the apply's answer is in
		)
	}
	if err == nil {
		part, err = chromedp.Run(page, chromedp.Text(chromedp.CSS(`.proposal ol`)))
	}
	applyOff, rejectOff, s1Off := off(".proposal button.apply"), off(".proposal button.reject"), off(`.step[data-step="s1"] input`)
	if err == nil && (applyOff || !rejectOff || !s1Off || strings.Count(part, "done") != 1) {
		t.Errorf("after applying s1: apply off %v, reject off %v, s1 off %v; steps:\n%s", applyOff, rejectOff, s1Off, part)
	}
	// Then the rest.
	if err == nil {
		err = chromedp.Do(page,
			chromedp.Click(chromedp.CSS(`.step[data-step="s2"] input`)),
			chromedp.Click(chromedp.CSS(`.step[data-step="d2"] input`)),
			chromedp.Click(chromedp.CSS(`.proposal button.apply`)),
			chromedp.WaitVisible(chromedp.CSS(`.proposal.applied .step[data-step="d2"][data-status="done"]`)),
			chromedp.WaitVisible(chromedp.CSS(`#items li:nth-child(4)`)),
			chromedp.WaitNotPresent(chromedp.CSS(`.proposal[data-busy]`)),
		)
	}
	if applyOff = off(".proposal button.apply"); err == nil && !applyOff {
		t.Error("with every step applied and the run completed, Apply is still on")
	}
	if err == nil {
		steps, err = chromedp.Run(page, chromedp.Text(chromedp.CSS(`.proposal ol`)))
	}
	if err == nil {
		outcome, err = chromedp.Run(page, chromedp.Text(chromedp.CSS(`.proposal .outcome`)))
	}
	if err == nil {
		tracker, err = chromedp.Run(page, chromedp.Text(chromedp.CSS(`#items`)))
	}
	if thrown := threw(); len(thrown) > 0 {
		t.Errorf("the page threw: %q", thrown)
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"→ list_items ok", "→ propose_plan ok", "I propose creating"} {
		if !strings.Contains(calls, want) {
			t.Errorf("the transcript before applying does not show %q:\n%s", want, calls)
		}
	}
	if !strings.Contains(outcome, "completed") || strings.Count(steps, "done") != 3 {
		t.Errorf("after applying: %q, steps:\n%s", outcome, steps)
	}
	if n := strings.Count(tracker, "Design review"); n != 1 {
		t.Errorf("the page's tracker shows Design review %d times:\n%s", n, tracker)
	}
	design, ok1 := items.find("Design review")
	launch, ok2 := items.find("Launch checklist")
	if !ok1 || !ok2 || !slices.Equal(launch.DependsOn, []string{design.ID}) {
		t.Fatalf("the tracker holds %+v and %+v", design, launch)
	}
	if !strings.Contains(tracker, "Launch checklist") || !strings.Contains(tracker, "waits for "+design.ID) {
		t.Errorf("the page's tracker shows:\n%s", tracker)
	}
}
