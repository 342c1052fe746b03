package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/planexec/planexec"
)

// openAIError is the body of a refusal.
type openAIError struct {
	Error struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Code    string `json:"code"`
	} `json:"error"`
}

func decodeError(t *testing.T, resp *http.Response) openAIError {
	t.Helper()
	var e openAIError
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
		t.Fatalf("%s: the body is not an OpenAI error: %v", resp.Status, err)
	}
	return e
}

func TestARequestWithoutAPersonsKeyIsRefused(t *testing.T) {
	s := start(t, options{yes: true}, "")
	for _, tc := range []struct{ name, header string }{
		{"no key", ""},
		{"a key that is no one's", "Bearer pex-not-anyones-key-0000"},
		{"a person's key with one more character", "Bearer " + anaKey + "x"},
		{"a prefix of a person's key", "Bearer " + anaKey[:len(anaKey)-1]},
		{"a person's key in another scheme", "Basic " + anaKey},
		{"the scheme alone", "Bearer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, path := range []string{"/v1/chat/completions", "/v1/models"} {
				method := "POST"
				if path == "/v1/models" {
					method = "GET"
				}
				req, err := http.NewRequest(method, s.url+path, strings.NewReader(tripRequest("")))
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set("x-session-id", "trip-k")
				if tc.header != "" {
					req.Header.Set("Authorization", tc.header)
				}
				resp, err := s.client.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				e := decodeError(t, resp)
				_ = resp.Body.Close()
				if resp.StatusCode != http.StatusUnauthorized || e.Error.Code != "invalid_api_key" {
					t.Errorf("%s %s: %s, code %q; want 401, invalid_api_key", method, path, resp.Status, e.Error.Code)
				}
			}
		})
	}
	if n := s.bookings.Load(); n != 0 {
		t.Errorf("booked %d times for requests with no one's key", n)
	}
	// The scheme is case-insensitive, as RFC 9110 has it.
	lower := s.as("")
	req, _ := http.NewRequest("GET", s.url+"/v1/models", nil)
	req.Header.Set("Authorization", "bearer "+benKey)
	resp, err := lower.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("ben's key after \"bearer\": %s, want 200", resp.Status)
	}
}

// The person a key names is the tenant of their sessions: ana, with ben's
// session id, has a session of her own, and neither reads, resumes nor
// approves his.
func TestAPersonCannotReadResumeOrApproveAnothersSession(t *testing.T) {
	s := start(t, options{}, "")
	ana, ben := s.as(anaKey), s.as(benKey)
	reqs := pause(t, ben, &s.bookings, "trip-x")
	his := reqs[0]["request"].(string)
	decision := fmt.Sprintf(`,"decisions":[{"request":%q,"approved":true,"by":"ben"}]`, his)

	// Ana resuming his session id starts a trip of her own, which waits
	// for her own approval.
	ev := ana.stream(t, "trip-x", tripRequest(""))
	if got := ev.lastStatus(); got != "card_interaction_requested" {
		t.Fatalf("ana's request under ben's session id: plan_status %q, want her own session paused", got)
	}
	states := ev.states()
	hers, _ := states[len(states)-1]["approvals"].([]any)
	if len(hers) != 1 || hers[0].(map[string]any)["request"] == his {
		t.Fatalf("ana was shown approvals %v: ben's request is %s", hers, his)
	}
	// Her session awaits her request, not his: his is not hers to give.
	resp := ana.post(t, "trip-x", tripRequest(decision))
	if e := decodeError(t, resp); resp.StatusCode != http.StatusBadRequest || !strings.Contains(e.Error.Message, "The session awaits no decision on request") {
		t.Errorf("ana deciding ben's request in her session: %s %q, want 400", resp.Status, e.Error.Message)
	}
	if n := s.bookings.Load(); n != 0 {
		t.Fatalf("booked %d times: ana approved ben's booking", n)
	}
	if got := status(t, s.db, "ben", "trip-x"); got != planexec.RunAwaitingApproval {
		t.Errorf("ben's session is %s after ana's requests, want %s", got, planexec.RunAwaitingApproval)
	}
	for _, e := range history(t, s.db, "ben", "trip-x") {
		if strings.Contains(e.Approver, "ana") || e.Kind == planexec.EventApprovalGranted {
			t.Errorf("ben's session has %s by %q", e.Kind, e.Approver)
		}
	}

	// Ben approves; repeating the request reads his answer, while ana's
	// reads her own session, paused still.
	content, _ := ben.complete(t, "trip-x", strings.Replace(tripRequest(decision), `"stream":true,`, "", 1))
	if !strings.HasPrefix(content, "Booked BA117") {
		t.Fatalf("ben's approval: %q", content)
	}
	if again, _ := ben.complete(t, "trip-x", strings.Replace(tripRequest(decision), `"stream":true,`, "", 1)); again != content {
		t.Errorf("ben reading his answer again: %q, want %q", again, content)
	}
	resp = ana.post(t, "trip-x", strings.Replace(tripRequest(""), `"stream":true,`, "", 1))
	if body, _ := io.ReadAll(resp.Body); strings.Contains(string(body), "Booked") || strings.Contains(string(body), his) {
		t.Errorf("ana read ben's session: %s %s", resp.Status, body)
	}
	if n := s.bookings.Load(); n != 1 {
		t.Errorf("booked %d times, want once (ben's)", n)
	}
	approved := false
	for _, e := range history(t, s.db, "ben", "trip-x") {
		if e.Kind == planexec.EventApprovalGranted && e.Approver == "ben" {
			approved = true
		}
	}
	if !approved {
		t.Error("ben's approval is not on his session's record as his")
	}
	if got := status(t, s.db, "ana", "trip-x"); got != planexec.RunAwaitingApproval {
		t.Errorf("ana's session is %s, want %s", got, planexec.RunAwaitingApproval)
	}
}

func TestKeysComeFromAFileOrTheVariableAndBadOnesAreRefused(t *testing.T) {
	t.Run("the variable", func(t *testing.T) {
		t.Setenv(keysVariable, "ana="+anaKey+", ben="+benKey)
		s := start(t, options{}, "")
		for person, key := range map[string]string{"ana": anaKey, "ben": benKey} {
			if content, _ := s.as(key).complete(t, "trip-v", strings.Replace(tripRequest(""), `"stream":true,`, "", 1)); !strings.Contains(content, "Approval needed") {
				t.Errorf("%s's request: %q", person, content)
			}
		}
	})
	t.Run("none: one made for this process", func(t *testing.T) {
		k, err := loadKeys("", "")
		if err != nil {
			t.Fatal(err)
		}
		other, _ := loadKeys("", "")
		if len(k.generated) < minKeyLength+4 || k.generated == other.generated {
			t.Errorf("made keys %q and %q: want long random ones", k.generated, other.generated)
		}
		r, _ := http.NewRequest("GET", "/", nil)
		r.Header.Set("Authorization", "Bearer "+k.generated)
		if who, err := k.authenticate(r); who != generatedPerson || err != nil {
			t.Errorf("the made key names %q (%v), want %q", who, err, generatedPerson)
		}
	})
	secret := "s3cr3t-s3cr3t-s3cr3t"
	for _, tc := range []struct{ name, text, want string }{
		{"a short key", "ana=short", "ana"},
		{"a key with a space", "ana=" + secret + " more", "ana"},
		{"no key", "ana", "person=key"},
		{"a name that is not one", "an a=" + secret, "person=key"},
		{"a person twice", "ana=" + secret + "\nana=" + anaKey, "has a key already"},
		{"a key twice", "ana=" + secret + ",ben=" + secret, "has the key of"},
		{"nothing", "# no one yet\n", "gives no keys"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "keys")
			if err := os.WriteFile(file, []byte(tc.text), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := loadKeys(file, "")
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%v: want it to say %q", err, tc.want)
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("the error shows the key: %v", err)
			}
		})
	}
	if _, err := loadKeys(keysFile(t), "ana="+anaKey); err == nil {
		t.Error("keys from -keys and the variable at once were accepted")
	}
	if err := run(t.Context(), options{keys: filepath.Join(t.TempDir(), "missing")}, nil); err == nil {
		t.Error("the command started with a keys file that does not exist")
	}
}
