package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// attackPage is a page of another origin that tries, in the browser of a
// person signed in to the service, what a page can do without asking:
// fetches that need no preflight (text/plain, with the browser's cookies),
// the same with the person named in the URL, a fetch that needs a
// preflight, a beacon, and a form posted into a frame. SERVICE and
// PROPOSAL are filled in; the page says done when every fetch settled.
const attackPage = `<!doctype html>
<html><body>
<iframe name="sink"></iframe>
<form id="form" method="post" enctype="text/plain" target="sink" action="SERVICE/api/sessions/s1/messages">
<input name='{"text": "plan items for evil", "x": "' value='"}'>
</form>
<script>
const s = "SERVICE";
const plain = (path, body) => fetch(s + path, {method: "POST", mode: "no-cors", credentials: "include",
  headers: {"Content-Type": "text/plain"}, body});
Promise.allSettled([
  plain("/api/sessions", '{"id": "pwned"}'),
  plain("/api/sessions?person=ana", '{"id": "pwned2"}'),
  plain("/api/sessions/s1/messages", '{"text": "plan items for evil"}'),
  plain("/api/sessions/s1/proposals/PROPOSAL/apply", '{}'),
  fetch(s + "/api/sessions/s1/proposals/PROPOSAL/apply", {method: "POST", mode: "no-cors", credentials: "include",
    headers: {"Content-Type": "application/json"}, body: '{}'}),
  fetch(s + "/api/sessions/s1/proposals/PROPOSAL/apply", {method: "POST", credentials: "include",
    headers: {"Content-Type": "application/json"}, body: '{}'}),
  Promise.resolve(navigator.sendBeacon(s + "/api/sessions/s1/proposals/PROPOSAL/apply", '{}')),
  Promise.resolve(document.getElementById("form").submit()),
]).then(() => { document.title = "done"; });
</script>
</body></html>`

// attempt is a request the service got from the attack page.
type attempt struct {
	method, path, site string
	cookie             bool
}

// seen records the requests a handler gets from pages of another origin.
type seen struct {
	next http.Handler
	mu   sync.Mutex
	got  []attempt
	more chan struct{} // gets a value at each
}

func (s *seen) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		_, err := r.Cookie(cookieName)
		s.mu.Lock()
		s.got = append(s.got, attempt{r.Method, r.URL.Path, site, err == nil})
		s.mu.Unlock()
		defer func() { s.more <- struct{}{} }()
	}
	s.next.ServeHTTP(w, r)
}

// TestAPageOfAnotherOriginCannotActForThePerson: ana is signed in to the
// service in her browser and has a proposal to apply; a page of another
// origin on the same host (so her SameSite cookie goes with what it sends)
// tries to create a session, send a message and apply the proposal as
// her. Each request reaches the service and is refused: nothing is
// created, sent or applied.
func TestAPageOfAnotherOriginCannotActForThePerson(t *testing.T) {
	exe := browser(t)
	items := newTracker()
	watch := &seen{more: make(chan struct{}, 64)}
	svc := startService(t, items, func(h http.Handler) http.Handler { watch.next = h; return watch })
	ana := svc.as(t, "ana")
	ana.must(http.StatusCreated, "POST", "/api/sessions", `{"id": "s1"}`, nil)
	ana.must(http.StatusAccepted, "POST", "/api/sessions/s1/messages", `{"text": "plan items for design review and launch checklist"}`, nil)
	proposal := svc.proposalOf(t, "s1")

	html := strings.NewReplacer("SERVICE", svc.url, "PROPOSAL", proposal).Replace(attackPage)
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(html))
	}))
	t.Cleanup(evil.Close)

	page, threw := openBrowser(t, exe)
	err := chromedp.Do(page,
		svc.signIn("ana"),
		chromedp.Navigate(evil.URL),
		chromedp.Poll[chromedp.Void](`document.title === "done"`, chromedp.WithPollingInterval(10*time.Millisecond), chromedp.WithPollingTimeout(10*time.Second)),
	)
	if err != nil {
		t.Fatal(err)
	}
	// The page's six POSTs without a preflight, its beacon and its form
	// each reach the service, and the preflight of the seventh.
	const want = 8
	for n := 0; n < want; n++ {
		select {
		case <-watch.more:
		case <-time.After(10 * time.Second):
			t.Fatalf("the service got %d of the page's %d requests: %+v", n, want, watch.attempts())
		}
	}
	got := watch.attempts()
	t.Logf("the page's requests: %+v", got)
	cookies := 0
	for _, a := range got {
		if a.site != "same-site" {
			t.Errorf("%+v: the page is of the same site, another origin", a)
		}
		if a.cookie {
			cookies++
		}
	}
	if cookies == 0 {
		t.Errorf("no request of the page carried ana's cookie, so the test shows nothing: %+v", got)
	}

	for _, id := range []string{"pwned", "pwned2"} {
		resp, body := ana.do("GET", "/api/sessions/"+id, "", nil)
		refused(t, resp, body, http.StatusNotFound, "no_session")
	}
	var s struct {
		Turns   int  `json:"turns"`
		Running bool `json:"running"`
	}
	ana.must(http.StatusOK, "GET", "/api/sessions/s1", "", &s)
	var out []struct {
		Kind string `json:"kind"`
		Text string `json:"text"`
	}
	ana.must(http.StatusOK, "GET", "/api/sessions/s1/transcript", "", &out)
	for _, o := range out {
		if strings.Contains(o.Text, "evil") || o.Kind == "applying" || o.Kind == "applied" {
			t.Errorf("the page's request went through: %+v", o)
		}
	}
	if s.Turns != 1 {
		t.Errorf("the session has %d turns", s.Turns)
	}
	if list, _ := items.list(t.Context(), ListItems{}); len(list) != 2 {
		b, _ := json.Marshal(list)
		t.Errorf("the tracker holds %s", b)
	}
	if thrown := threw(); len(thrown) > 0 {
		t.Logf("the attack page threw (as it may): %q", thrown)
	}
}

func (s *seen) attempts() []attempt {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]attempt(nil), s.got...)
}
