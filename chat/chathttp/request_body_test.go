package chathttp_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/planexec/planexec/chat"
)

// TestABodyMustSayItIsJSON: a body of any other Content-Type (text/plain
// and forms, which a page of another site can send without asking, or none)
// is 415 unsupported_media_type and changes nothing; application/json in
// UTF-8 is taken, and a request with no body needs none.
func TestABodyMustSayItIsJSON(t *testing.T) {
	f := newFixture(t, options{})
	f.session("s1")
	for _, ct := range []string{"", "text/plain", "text/plain; charset=utf-8", "application/x-www-form-urlencoded",
		"multipart/form-data; boundary=x", "application/json; charset=iso-8859-1", "application/jsonp", "json", "/"} {
		t.Run("Content-Type "+ct, func(t *testing.T) {
			h := http.Header{}
			if ct != "" {
				h.Set("Content-Type", ct)
			}
			status, body := f.doWith("ana", "POST", "/sessions", `{"id": "made"}`, h)
			checkError(t, status, body, http.StatusUnsupportedMediaType, "unsupported_media_type")
			status, body = f.doWith("ana", "POST", "/sessions/s1/messages", `{"text": "hello"}`, h)
			checkError(t, status, body, http.StatusUnsupportedMediaType, "unsupported_media_type")
		})
	}
	status, body := f.do("ana", "GET", "/sessions/made", nil)
	checkError(t, status, body, http.StatusNotFound, "no_session")
	var out []chat.Output
	if f.must(http.StatusOK, "ana", "GET", "/sessions/s1/transcript", nil, &out); len(out) != 0 {
		t.Fatalf("a message sent as another type was stored: %+v", out)
	}

	for i, ct := range []string{"application/json", "application/json; charset=utf-8", "Application/JSON; charset=UTF-8"} {
		status, body := f.doWith("ana", "POST", "/sessions", `{}`, http.Header{"Content-Type": {ct}})
		if status != http.StatusCreated {
			t.Errorf("%d: Content-Type %q: %d %s", i, ct, status, body)
		}
	}
	var c struct{ Cancelled bool }
	status, body = f.doWith("ana", "POST", "/sessions/s1/cancel", nil, nil)
	if status != http.StatusOK || json.Unmarshal(body, &c) != nil {
		t.Errorf("cancel with no body and no Content-Type: %d %s", status, body)
	}
}

// TestAMessageThatIsNotUTF8IsRefused: bytes that are not UTF-8, or an
// escape of half a surrogate pair, in a message are 400 invalid_message and
// nothing is stored (never the message mended with U+FFFD); elsewhere in a
// body, 400 invalid_request. What was sent is not logged.
func TestAMessageThatIsNotUTF8IsRefused(t *testing.T) {
	f := newFixture(t, options{})
	s, p := f.proposed("s1", "plan the launch")
	var before chat.Session
	f.must(http.StatusOK, "ana", "GET", "/sessions/s1", nil, &before)
	for _, c := range []struct {
		name, path, body, code string
	}{
		{"a byte that is not UTF-8", "/sessions/s1/messages", "{\"text\": \"caf\xe9 zebra\"}", "invalid_message"},
		{"a cut sequence", "/sessions/s1/messages", "{\"text\": \"zebra \xe2\x82\"}", "invalid_message"},
		{"a high surrogate alone", "/sessions/s1/messages", `{"text": "zebra \ud800"}`, "invalid_message"},
		{"a low surrogate alone", "/sessions/s1/messages", `{"text": "\udc00 zebra"}`, "invalid_message"},
		{"two high surrogates", "/sessions/s1/messages", `{"text": "\ud83d\ud83d zebra"}`, "invalid_message"},
		{"in a reason", "/sessions/s1/proposals/" + p.ID + "/reject", "{\"reason\": \"zebra \xff\"}", "invalid_request"},
		{"in a step", "/sessions/s1/proposals/" + p.ID + "/apply", `{"steps": ["s1\udfff"]}`, "invalid_request"},
		{"in a skill", "/sessions", "{\"id\": \"s2\", \"skill\": \"zebra \xc0\xaf\"}", "invalid_request"},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, body := f.do("ana", "POST", c.path, c.body)
			e := checkError(t, status, body, http.StatusBadRequest, c.code)
			if !strings.Contains(e.Message, "UTF-8") {
				t.Errorf("the message %q does not say what was wrong", e.Message)
			}
		})
	}
	var after chat.Session
	f.must(http.StatusOK, "ana", "GET", "/sessions/s1", nil, &after)
	if after.Seq != before.Seq || after.Turns != before.Turns {
		t.Errorf("the session went from seq %d, turn %d to seq %d, turn %d", before.Seq, before.Turns, after.Seq, after.Turns)
	}
	status, body := f.do("ana", "GET", "/sessions/s2", nil)
	checkError(t, status, body, http.StatusNotFound, "no_session")
	if strings.Contains(f.logs.String(), "zebra") {
		t.Errorf("what was sent reached the log:\n%s", f.logs)
	}

	// A pair is one character, and goes through as it is.
	var sent chat.Sent
	f.must(http.StatusAccepted, "ana", "POST", "/sessions/s1/messages", `{"text": "zebra \ud83e\udd93"}`, &sent)
	stored := ""
	for _, e := range s.until("done") {
		if o := e.output(t); o.Seq == sent.Seq {
			stored = o.Text
		}
	}
	if stored != "zebra 🦓" {
		t.Errorf("stored %q", stored)
	}
}
