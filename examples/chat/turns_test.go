package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// heldSends holds the answer to each message a page sends until the test
// lets it go, so that the stream's done reaches the page first.
type heldSends struct {
	next    http.Handler
	release chan struct{}
}

func (h heldSends) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/messages") {
		h.next.ServeHTTP(w, r)
		return
	}
	rec := httptest.NewRecorder()
	h.next.ServeHTTP(rec, r)
	select {
	case <-h.release:
	case <-r.Context().Done():
		return
	}
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

// TestTwoTurnsInARowWhateverLandsFirst: the answer to a send lands after
// the stream's done of the turn it started; the page still settles idle,
// and a second message is sent and answered without a reload.
func TestTwoTurnsInARowWhateverLandsFirst(t *testing.T) {
	exe := browser(t)
	release := make(chan struct{})
	svc := startService(t, newTracker(), func(h http.Handler) http.Handler { return heldSends{h, release} })
	page, threw := openBrowser(t, exe)
	if err := chromedp.Do(page, svc.signIn("ana")); err != nil {
		t.Fatal(err)
	}
	for turn, text := range []string{"hello", "what is open?"} {
		ended := `//div[contains(@class, "note") and contains(., "turn ` + string(rune('1'+turn)) + ` ended")]`
		err := chromedp.Do(page,
			chromedp.SendKeys(chromedp.CSS(`#message`), text),
			chromedp.Click(chromedp.CSS(`#send`)),
			chromedp.WaitVisible(chromedp.Search(ended)),
		)
		if err != nil {
			t.Fatalf("turn %d: %v", turn+1, err)
		}
		// Only now does the send's answer land.
		select {
		case release <- struct{}{}:
		case <-page.Done():
			t.Fatal("the browser went away")
		}
		err = chromedp.Do(page, chromedp.Poll[chromedp.Void](`document.querySelector("#message").value === ""`,
			chromedp.WithPollingInterval(10*time.Millisecond), chromedp.WithPollingTimeout(5*time.Second)))
		var state []bool
		if err == nil {
			state, err = chromedp.Run(page, chromedp.Evaluate[[]bool](`[document.querySelector("#send").disabled, document.querySelector("#cancel").disabled]`))
		}
		if err != nil {
			t.Fatalf("turn %d: %v", turn+1, err)
		}
		if state[0] || !state[1] {
			t.Fatalf("after turn %d ended and then its send was answered: send disabled %v, cancel disabled %v; the page is stuck running", turn+1, state[0], state[1])
		}
	}
	log, err := chromedp.Run(page, chromedp.Text(chromedp.CSS(`#log`)))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log, "what is open?") || !strings.Contains(log, "turn 2 ended: end_turn") {
		t.Errorf("the second turn is not in the transcript:\n%s", log)
	}
	if got := threw(); len(got) > 0 {
		t.Errorf("the page threw: %q", got)
	}
}
