package trip

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
)

// OpenAIStandIn is an OpenAI-compatible chat-completions endpoint, in the
// API's own wire format, that plans the trip as Model does: Plan, then
// Booked once told what round 1 did. It takes only the bearer key given
// and counts its calls in calls; each answer reports 1,020 tokens.
func OpenAIStandIn(key string, calls *atomic.Int32) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if r.URL.Path != "/chat/completions" || r.Header.Get("Authorization") != "Bearer "+key {
			http.Error(w, `{"error":{"message":"not found","type":"invalid_request_error"}}`, http.StatusNotFound)
			return
		}
		body, _ := io.ReadAll(r.Body)
		content, _ := json.Marshal(Plan)
		if strings.Contains(string(body), "Round 1 ran") {
			content, _ = json.Marshal(Booked) // told what round 1 did, the model answers
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("x-request-id", "req_trip")
		fmt.Fprintf(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1764400000,"model":"trip-model",`+
			`"choices":[{"index":0,"message":{"role":"assistant","content":%s,"refusal":null},"finish_reason":"stop"}],`+
			`"usage":{"prompt_tokens":900,"completion_tokens":120,"total_tokens":1020}}`, content)
	})
}
