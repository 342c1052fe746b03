package chathttp_test

import (
	"net/http"
	"testing"

	"github.com/planexec/planexec/chat"
	"github.com/planexec/planexec/chat/chathttp"
)

// TestARequestFromAnotherOriginChangesNothing: what a browser sends from a
// page of another origin to change something (Sec-Fetch-Site cross-site or
// same-site, or an Origin of another host from a browser without
// Sec-Fetch-Site) is 403 cross_origin, whoever it authenticates as, and
// nothing is created, sent, applied, rejected or cancelled. The same origin,
// and a client that is no browser, go through; so do reads.
func TestARequestFromAnotherOriginChangesNothing(t *testing.T) {
	f := newFixture(t, options{})
	_, p := f.proposed("s1", "plan the launch")
	var before chat.Session
	f.must(http.StatusOK, "ana", "GET", "/sessions/s1", nil, &before)

	from := map[string]http.Header{
		"another site":            {"Sec-Fetch-Site": {"cross-site"}, "Origin": {"https://evil.example"}},
		"another port, same site": {"Sec-Fetch-Site": {"same-site"}, "Origin": {"http://127.0.0.1:1"}},
		"an old browser":          {"Origin": {"https://evil.example"}},
		"a sandboxed frame":       {"Sec-Fetch-Site": {"cross-site"}, "Origin": {"null"}},
	}
	routes := []struct{ path, body string }{
		{"/sessions", `{"id": "evil"}`},
		{"/sessions/s1/messages", `{"text": "plan the launch"}`},
		{"/sessions/s1/proposals/" + p.ID + "/apply", `{}`},
		{"/sessions/s1/proposals/" + p.ID + "/reject", `{"reason": "evil"}`},
		{"/sessions/s1/cancel", ``},
	}
	for name, h := range from {
		for _, r := range routes {
			t.Run(name+" "+r.path, func(t *testing.T) {
				h := h.Clone()
				h.Set("Content-Type", "application/json")
				status, body := f.doWith("ana", "POST", r.path, r.body, h)
				checkError(t, status, body, http.StatusForbidden, "cross_origin")
			})
		}
	}
	status, body := f.do("ana", "GET", "/sessions/evil", nil)
	checkError(t, status, body, http.StatusNotFound, "no_session")
	var after chat.Session
	f.must(http.StatusOK, "ana", "GET", "/sessions/s1", nil, &after)
	if after.Seq != before.Seq || after.Turns != before.Turns {
		t.Errorf("the session went from seq %d, turn %d to seq %d, turn %d", before.Seq, before.Turns, after.Seq, after.Turns)
	}
	f.mu.Lock()
	created := len(f.created)
	f.mu.Unlock()
	if created != 0 {
		t.Errorf("create_item ran %d times", created)
	}

	// A read from anywhere is answered (a browser keeps the answer from a
	// page of another origin unless the service allows it by CORS).
	status, body = f.doWith("ana", "GET", "/sessions/s1", nil, http.Header{"Sec-Fetch-Site": {"cross-site"}, "Origin": {"https://evil.example"}})
	if status != http.StatusOK {
		t.Errorf("a cross-site read: %d %s", status, body)
	}
	// The page's own origin, and a client that is no browser.
	for i, h := range []http.Header{
		{"Sec-Fetch-Site": {"same-origin"}, "Origin": {f.url}},
		{"Origin": {f.url}},
		{},
	} {
		h.Set("Content-Type", "application/json")
		if status, body := f.doWith("ana", "POST", "/sessions", `{}`, h); status != http.StatusCreated {
			t.Errorf("%d: %v: %d %s", i, h, status, body)
		}
	}
}

// TestATrustedOriginIsLetThrough: Config.CrossOrigin's trusted origins
// may change things; others still may not.
func TestATrustedOriginIsLetThrough(t *testing.T) {
	cop := http.NewCrossOriginProtection()
	if err := cop.AddTrustedOrigin("https://app.example"); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, options{config: func(c *chathttp.Config) { c.CrossOrigin = cop }})
	h := http.Header{"Sec-Fetch-Site": {"cross-site"}, "Origin": {"https://app.example"}, "Content-Type": {"application/json"}}
	if status, body := f.doWith("ana", "POST", "/sessions", `{"id": "s1"}`, h); status != http.StatusCreated {
		t.Errorf("from the trusted origin: %d %s", status, body)
	}
	h.Set("Origin", "https://evil.example")
	status, body := f.doWith("ana", "POST", "/sessions", `{"id": "s2"}`, h)
	checkError(t, status, body, http.StatusForbidden, "cross_origin")
}
