package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"
)

// client is a plain HTTP client of the service: a token, or a browser's
// cookie jar, or neither.
type client struct {
	t     *testing.T
	svc   *service
	http  *http.Client
	token string
}

// as is a client that sends person's token ("" for none).
func (s *service) as(t *testing.T, person string) *client {
	return &client{t: t, svc: s, http: &http.Client{CheckRedirect: noRedirects}, token: s.tokens[person]}
}

// browserClient keeps cookies, as a browser does, and follows no redirect.
func (s *service) browserClient(t *testing.T) *client {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &client{t: t, svc: s, http: &http.Client{Jar: jar, CheckRedirect: noRedirects}}
}

func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// do makes a request: a body is JSON, unless the header says otherwise.
func (c *client) do(method, path, body string, header http.Header) (*http.Response, []byte) {
	c.t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, c.svc.url+path, r)
	if err != nil {
		c.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if h := header.Get("Host"); h != "" {
		req.Host = h
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	return resp, out
}

// must makes a request that must answer want, and decodes the answer into
// v (unless nil).
func (c *client) must(want int, method, path, body string, v any) {
	c.t.Helper()
	resp, out := c.do(method, path, body, nil)
	if resp.StatusCode != want {
		c.t.Fatalf("%s %s: %d, want %d: %s", method, path, resp.StatusCode, want, out)
	}
	if v != nil {
		if err := json.Unmarshal(out, v); err != nil {
			c.t.Fatalf("%s %s: %v: %s", method, path, err, out)
		}
	}
}

// refused checks an error answer: its status and code.
func refused(t *testing.T, resp *http.Response, body []byte, status int, code string) {
	t.Helper()
	var e struct{ Error struct{ Code string } }
	if resp.StatusCode != status || json.Unmarshal(body, &e) != nil || e.Error.Code != code {
		t.Fatalf("%s %s: %d %s, want %d %s", resp.Request.Method, resp.Request.URL.Path, resp.StatusCode, body, status, code)
	}
}

// signIn posts the sign-in form.
func (c *client) signIn(field, value string) *http.Response {
	c.t.Helper()
	resp, _ := c.do("POST", "/signin", url.Values{field: {value}}.Encode(), http.Header{"Content-Type": {"application/x-www-form-urlencoded"}})
	return resp
}

// TestOnlyATokenOrASignInNamesAPerson: a request with no token and no
// sign-in is 401, whatever person it names (the X-Person header and the
// person parameter name no one); ana's token is ana whatever else the
// request says, and ben's token cannot do what only ana may.
func TestOnlyATokenOrASignInNamesAPerson(t *testing.T) {
	items := newTracker()
	svc := startService(t, items)
	nobody := svc.as(t, "")
	for _, r := range []struct{ method, path, body string }{
		{"POST", "/api/sessions", `{}`},
		{"POST", "/api/sessions?person=ana", `{}`},
		{"GET", "/api/sessions/s1/events?person=ana", ""},
		{"GET", "/items", ""},
		{"GET", "/me", ""},
	} {
		resp, body := nobody.do(r.method, r.path, r.body, http.Header{"X-Person": {"ana"}})
		refused(t, resp, body, http.StatusUnauthorized, "unauthenticated")
	}
	wrong := &client{t: t, svc: svc, http: http.DefaultClient, token: "ana-token-0123456788"}
	resp, body := wrong.do("GET", "/me", "", nil)
	refused(t, resp, body, http.StatusUnauthorized, "unauthenticated")
	if resp, _ := nobody.do("GET", "/", "", nil); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/signin" {
		t.Errorf("the page without a sign-in: %d to %q, want 303 to /signin", resp.StatusCode, resp.Header.Get("Location"))
	}

	ana, ben := svc.as(t, "ana"), svc.as(t, "ben")
	var s struct {
		ID        string `json:"id"`
		CreatedBy string `json:"created_by"`
	}
	resp, body = ana.do("POST", "/api/sessions?person=ben", `{"id": "s1"}`, http.Header{"X-Person": {"ben"}})
	if resp.StatusCode != http.StatusCreated || json.Unmarshal(body, &s) != nil || s.CreatedBy != "ana" {
		t.Fatalf("ana's token, saying ben: %d %s", resp.StatusCode, body)
	}
	ana.must(http.StatusAccepted, "POST", "/api/sessions/s1/messages", `{"text": "plan items for design review"}`, nil)
	proposal := svc.proposalOf(t, "s1")
	resp, body = ben.do("POST", "/api/sessions/s1/proposals/"+proposal+"/apply", `{}`, nil)
	refused(t, resp, body, http.StatusForbidden, "forbidden")
	if _, ok := items.find("Design review"); ok {
		t.Error("ben's apply created the item")
	}
}

// proposalOf waits for the session's turn to end and returns the id of
// the proposal it made.
func (s *service) proposalOf(t *testing.T, session string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	id := ""
	for o, err := range s.chat.Watch(ctx, tenant, session, 0) {
		if err != nil {
			t.Fatalf("watching %s: %v", session, err)
		}
		if o.Proposal != nil {
			id = o.Proposal.ID
		}
		if o.Done != nil {
			break
		}
	}
	if id == "" {
		t.Fatalf("the turn of %s proposed nothing", session)
	}
	return id
}

// TestABrowserSignsInOnceAndHoldsACookie: a one-time link gives the
// browser a cookie no script can read and no other site's page sends; it
// names the person until signing out. The link does not work twice; the
// token works as often as it is given; a cookie the service did not give
// names no one.
func TestABrowserSignsInOnceAndHoldsACookie(t *testing.T) {
	svc := startService(t, newTracker())
	browser := svc.browserClient(t)
	code := svc.access.link("ana")
	resp := browser.signIn("code", code)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
		t.Fatalf("sign-in: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	cookies := resp.Cookies()
	if len(cookies) != 1 || !cookies[0].HttpOnly || cookies[0].SameSite != http.SameSiteStrictMode || cookies[0].Path != "/" {
		t.Fatalf("the sign-in cookie: %+v", cookies)
	}
	var me struct{ Person string }
	browser.must(http.StatusOK, "GET", "/me", "", &me)
	if me.Person != "ana" {
		t.Errorf("signed in as %q", me.Person)
	}
	browser.must(http.StatusCreated, "POST", "/api/sessions", `{}`, nil)

	again := svc.browserClient(t)
	if resp := again.signIn("code", code); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the link used a second time: %d", resp.StatusCode)
	}
	if resp := again.signIn("token", "ben-token-0123456789x"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a wrong token: %d", resp.StatusCode)
	}
	if resp := again.signIn("token", svc.tokens["ben"]); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("ben's token: %d", resp.StatusCode)
	}
	again.must(http.StatusOK, "GET", "/me", "", &me)
	if me.Person != "ben" {
		t.Errorf("signed in with ben's token as %q", me.Person)
	}

	forged := svc.as(t, "")
	resp, body := forged.do("GET", "/me", "", http.Header{"Cookie": {cookieName + "=" + secret()}})
	refused(t, resp, body, http.StatusUnauthorized, "unauthenticated")

	if resp, _ := browser.do("POST", "/signout", "", nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign-out: %d", resp.StatusCode)
	}
	resp, body = forged.do("GET", "/me", "", http.Header{"Cookie": {cookieName + "=" + cookies[0].Value}})
	refused(t, resp, body, http.StatusUnauthorized, "unauthenticated")
}

// TestARequestFromAnotherOriginIsRefused: signed in or not, what a page of
// another origin sends to change something is 403 and creates nothing,
// signing in included; a body that is not JSON is 415.
func TestARequestFromAnotherOriginIsRefused(t *testing.T) {
	svc := startService(t, newTracker())
	browser := svc.browserClient(t)
	browser.signIn("code", svc.access.link("ana"))
	for _, h := range []http.Header{
		{"Origin": {"http://evil.example"}, "Sec-Fetch-Site": {"cross-site"}},
		{"Origin": {"http://127.0.0.1:1"}, "Sec-Fetch-Site": {"same-site"}},
		{"Origin": {"http://evil.example"}},
	} {
		resp, body := browser.do("POST", "/api/sessions", `{"id": "evil"}`, h)
		refused(t, resp, body, http.StatusForbidden, "cross_origin")
		h.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, body = svc.as(t, "").do("POST", "/signin", url.Values{"token": {svc.tokens["ana"]}}.Encode(), h)
		refused(t, resp, body, http.StatusForbidden, "cross_origin")
		if len(resp.Cookies()) != 0 {
			t.Errorf("a sign-in from another origin got a cookie")
		}
	}
	resp, body := browser.do("POST", "/api/sessions", `{"id": "evil"}`, http.Header{"Content-Type": {"text/plain"}})
	refused(t, resp, body, http.StatusUnsupportedMediaType, "unsupported_media_type")
	resp, body = svc.as(t, "ana").do("GET", "/api/sessions/evil", "", nil)
	refused(t, resp, body, http.StatusNotFound, "no_session")
}

// TestAnotherHostNameIsRefused: a request for a host name the service was
// not given (a name of someone else's pointed at its address: DNS
// rebinding) is 421, signed in or not; its own names are served.
func TestAnotherHostNameIsRefused(t *testing.T) {
	svc := startService(t, newTracker())
	ana := svc.as(t, "ana")
	_, port, _ := strings.Cut(strings.TrimPrefix(svc.url, "http://"), ":")
	for _, host := range []string{"evil.example:" + port, "evil.example", "127.0.0.2:" + port, "localhost.evil.example:" + port} {
		resp, body := ana.do("GET", "/me", "", http.Header{"Host": {host}})
		refused(t, resp, body, http.StatusMisdirectedRequest, "wrong_host")
	}
	for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "LOCALHOST:" + port} {
		if resp, body := ana.do("GET", "/me", "", http.Header{"Host": {host}}); resp.StatusCode != http.StatusOK {
			t.Errorf("Host %s: %d %s", host, resp.StatusCode, body)
		}
	}
}

// TestNoPageMayFrameTheService: every answer says that no page may frame
// it, that only its own scripts and styles run in it, and that its types
// are not to be sniffed.
func TestNoPageMayFrameTheService(t *testing.T) {
	svc := startService(t, newTracker())
	browser := svc.browserClient(t)
	browser.signIn("code", svc.access.link("ana"))
	for _, path := range []string{"/", "/signin", "/page.js", "/page.css", "/me", "/api/sessions/nope", "/nowhere"} {
		resp, _ := browser.do("GET", path, "", nil)
		csp := resp.Header.Get("Content-Security-Policy")
		for _, want := range []string{"frame-ancestors 'none'", "default-src 'self'", "form-action 'self'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("%s: Content-Security-Policy %q has no %s", path, csp, want)
			}
		}
		if resp.Header.Get("X-Content-Type-Options") != "nosniff" || resp.Header.Get("X-Frame-Options") != "DENY" {
			t.Errorf("%s: %v", path, resp.Header)
		}
	}
}

// TestWhatAClientHoldsIsBounded: a body past the bound is 413 and a header
// past it 431; the server lets go of slow and idle clients.
func TestWhatAClientHoldsIsBounded(t *testing.T) {
	svc := startService(t, newTracker())
	ana := svc.as(t, "ana")
	ana.must(http.StatusCreated, "POST", "/api/sessions", `{"id": "s1"}`, nil)
	resp, body := ana.do("POST", "/api/sessions/s1/messages", `{"text": "`+strings.Repeat("a", 70<<10)+`"}`, nil)
	refused(t, resp, body, http.StatusRequestEntityTooLarge, "too_large")
	if resp, _ := ana.do("GET", "/me", "", http.Header{"X-Padding": {strings.Repeat("a", 32<<10)}}); resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("a 32 KiB header: %d", resp.StatusCode)
	}
	hs := httpServer(http.NotFoundHandler(), t.Context())
	if hs.ReadHeaderTimeout <= 0 || hs.ReadTimeout <= 0 || hs.WriteTimeout <= 0 || hs.IdleTimeout <= 0 {
		t.Errorf("the server waits for ever on some client: %+v", hs)
	}
}

// TestATokensFileGivesEachPersonTheirs: person=token lines, comments and
// blank lines skipped; a line of another shape, a person the demo does not
// have, a short token, a person listed twice or one token for two people is
// refused at start, naming the line or the person and never the token.
func TestATokensFileGivesEachPersonTheirs(t *testing.T) {
	tokens, err := readTokens(strings.NewReader("# the people\nana = ana-token-0123456789\n\nben=ben-token-0123456789\n"))
	if err != nil {
		t.Fatal(err)
	}
	a, err := newAccess(tokens)
	if err != nil {
		t.Fatal(err)
	}
	if a.byToken("ana-token-0123456789") != "ana" || a.byToken("ben-token-0123456789") != "ben" || a.byToken("ana-token-012345678") != "" {
		t.Errorf("tokens read as %v", tokens)
	}
	if _, err := readTokens(strings.NewReader("ana ana-token-0123456789\n")); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("a line with no =: %v", err)
	}
	if _, err := readTokens(strings.NewReader("ana=ana-token-0123456789\nben=ben-token-0123456789\nana=ana-token-9876543210\n")); err == nil ||
		!strings.Contains(err.Error(), "line 3") || strings.Contains(err.Error(), "token-") {
		t.Errorf("a person listed twice: %v; want refused at line 3, with no token", err)
	}
	for _, bad := range []map[string]string{
		{"eve": "eve-token-0123456789"},
		{"ana": "short-secret"},
		{},
		{"ana": "one-token-0123456789", "ben": "one-token-0123456789"},
	} {
		_, err := newAccess(bad)
		if err == nil {
			t.Errorf("%v was taken", bad)
			continue
		}
		for _, token := range bad {
			if strings.Contains(err.Error(), token) {
				t.Errorf("the error shows the token: %v", err)
			}
		}
	}
}
