package main

import (
	"net"
	"net/http"
	"strings"
	"testing"
)

// A page of another site whose name was made to resolve to the server's
// address (DNS rebinding) sends that name as its Host: the server answers
// for its address, localhost and the names it was given only.
func TestARequestForAnotherHostIsRefused(t *testing.T) {
	s := start(t, options{hosts: []string{"trips.example.com"}}, "")
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(s.url, "http://"))
	get := func(host, key string) *http.Response {
		t.Helper()
		req, err := http.NewRequest("GET", s.url+"/v1/models", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := s.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = resp.Body.Close() })
		return resp
	}
	for _, host := range []string{"attacker.example:" + port, "attacker.example", "trips.example.com.attacker.example", "localhost.attacker.example:" + port} {
		for _, key := range []string{anaKey, ""} {
			resp := get(host, key)
			if e := decodeError(t, resp); resp.StatusCode != http.StatusForbidden || e.Error.Code != "invalid_host" {
				t.Errorf("Host %s (key given: %v): %s, code %q; want 403, invalid_host", host, key != "", resp.Status, e.Error.Code)
			}
		}
	}
	for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "LOCALHOST", "[::1]:" + port, "trips.example.com", "Trips.Example.Com.:443"} {
		if resp := get(host, anaKey); resp.StatusCode != http.StatusOK {
			t.Errorf("Host %s: %s, want 200", host, resp.Status)
		}
	}
	// The check comes before the key's: without a key, a host the server
	// answers for is 401.
	if resp := get("localhost:"+port, ""); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("Host localhost without a key: %s, want 401", resp.Status)
	}
}

// The test server listens on an address; a service may listen on a name.
func TestTheNameListenedOnIsAHostTheServerAnswersFor(t *testing.T) {
	h := checkHost("api.internal:8080", nil, http.NotFoundHandler())
	for host, want := range map[string]bool{"api.internal:8080": true, "api.internal": true, "10.1.2.3": true, "app.localhost": true,
		"other.internal": false, "api.internal.other.internal": false, "localhost.other.internal": false} {
		if got := h.answersFor(host); got != want {
			t.Errorf("%s: answered for %v, want %v", host, got, want)
		}
	}
}
