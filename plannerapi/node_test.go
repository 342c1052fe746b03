package plannerapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// nodeSession is the line testdata/node/session.mjs prints: what the
// official OpenAI Node client made of a planner session.
type nodeSession struct {
	OK         bool   `json:"ok"`
	SDKVersion string `json:"sdk_version"`
	Stage      string `json:"stage"`
	First      struct {
		FinishReason string `json:"finish_reason"`
		ToolCalls    []struct {
			ID        string `json:"id"`
			Type      string `json:"type"`
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"tool_calls"`
		IDs int `json:"ids"`
	} `json:"first"`
	Second struct {
		FinishReason string `json:"finish_reason"`
		IDs          int    `json:"ids"`
		Usage        *struct {
			TotalTokens int `json:"total_tokens"`
		} `json:"usage"`
	} `json:"second"`
	Answer    string `json:"answer"`
	PlanState struct {
		Count        int      `json:"count"`
		WithChoices  int      `json:"with_choices"`
		Statuses     []string `json:"statuses"`
		PlanStatuses []string `json:"plan_statuses"`
	} `json:"plan_state"`
	Error *struct {
		Name    string          `json:"name"`
		Message string          `json:"message"`
		Status  *int            `json:"status"`
		Body    json.RawMessage `json:"body"`
	} `json:"error"`
	Resent    json.RawMessage `json:"resent_assistant_message"`
	RawChunks json.RawMessage `json:"raw_chunks"`
}

// The project tests its server with clients nobody here wrote: this is the
// official Node SDK (the openai npm package pinned in testdata/node), with
// its accumulating stream helper, through a planner session that hands the
// client's tool back and resumes once given the result.
func TestTheOfficialNodeClientStreamsAPlannerSessionWithAToolHandedBack(t *testing.T) {
	node := nodeClient(t)
	tr := newTrip(t, confirmPlan)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join("testdata", "node", "session.mjs"), tr.srv.URL)
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("session.mjs did not finish in time: %v\nstdout: %s\nstderr: %s", runErr, stdout.String(), stderr.String())
	}

	var got nodeSession
	line := strings.TrimSpace(stdout.String())
	if err := json.Unmarshal([]byte(line), &got); err != nil {
		t.Fatalf("session.mjs printed no findings (%v, exit: %v)\nstdout: %s\nstderr: %s", err, runErr, stdout.String(), stderr.String())
	}
	if runErr != nil || !got.OK {
		t.Fatalf("the Node client (openai %s) failed at %s: %s\nexit: %v\nstderr: %s\nfindings: %s",
			got.SDKVersion, got.Stage, nodeFailure(got), runErr, stderr.String(), line)
	}
	t.Logf("openai %s: %s", got.SDKVersion, line)

	if got.First.FinishReason != "tool_calls" || len(got.First.ToolCalls) != 1 {
		t.Fatalf("request 1 ended %q with %d tool calls, want tool_calls with one", got.First.FinishReason, len(got.First.ToolCalls))
	}
	call := got.First.ToolCalls[0]
	if call.Name != "confirm_with_traveller" || call.Type != "function" || call.ID == "" {
		t.Errorf("the tool handed back: %+v, want a function call of confirm_with_traveller with an id", call)
	}
	if call.Arguments != `{"flight":"BA117"}` {
		t.Errorf("the call's arguments %q, want {\"flight\":\"BA117\"}", call.Arguments)
	}
	if got.PlanState.Count == 0 || len(got.PlanState.Statuses) == 0 {
		t.Errorf("no plan_state chunk with status values reached the client: %+v", got.PlanState)
	}
	if got.PlanState.WithChoices != 0 {
		t.Errorf("%d plan_state chunks carried choices", got.PlanState.WithChoices)
	}
	if !slices.Contains(got.PlanState.Statuses, "waiting_response") || !slices.Contains(got.PlanState.PlanStatuses, "completed") {
		t.Errorf("statuses %v, plan statuses %v: want the step handed back (waiting_response) and the plan completed",
			got.PlanState.Statuses, got.PlanState.PlanStatuses)
	}
	if got.Answer != "BA117 leaves at 09:00." || got.Second.FinishReason != "stop" {
		t.Errorf("the answer %q (finish %q), want %q with stop", got.Answer, got.Second.FinishReason, "BA117 leaves at 09:00.")
	}
	if got.First.IDs != 1 || got.Second.IDs != 1 {
		t.Errorf("each stream's chunks should share one id: %d and %d ids", got.First.IDs, got.Second.IDs)
	}
	if got.Second.Usage == nil || got.Second.Usage.TotalTokens == 0 {
		t.Error("no usage in the second stream")
	}
	if n := tr.searches.Load(); n != 1 {
		t.Errorf("the search ran %d times, want once: the session resumed where it stopped", n)
	}
}

// nodeFailure says what the SDK threw and, when the server refused a
// field of the assistant message the client sent back, why that is the
// server's incompatibility.
func nodeFailure(s nodeSession) string {
	if s.Error == nil {
		return "no error reported"
	}
	msg := s.Error.Name + ": " + s.Error.Message
	if s.Error.Status != nil {
		msg += fmt.Sprintf(" (HTTP %d)", *s.Error.Status)
	}
	if len(s.Error.Body) > 0 && string(s.Error.Body) != "null" {
		msg += ", body " + string(s.Error.Body)
	}
	var body struct {
		Param *string `json:"param"`
	}
	var resent map[string]json.RawMessage
	_ = json.Unmarshal(s.Error.Body, &body)
	_ = json.Unmarshal(s.Resent, &resent)
	if body.Param == nil || s.Stage != "request 2" {
		return msg
	}
	field := (*body.Param)[strings.LastIndex(*body.Param, ".")+1:]
	if _, sent := resent[field]; sent && field != "" {
		msg += "\nThe server refused a field of the assistant message the SDK accumulated, sent back verbatim (" + *body.Param + "). " +
			"openai-node's finalChatCompletion() adds \"parsed\": null to the message, and the SDK's own tool loop (runTools) " +
			"replays that message as it is (openai-node issue #1161): a compatible server has to take it.\nthe message sent back: " + string(s.Resent)
	}
	return msg
}

// The official Node client reads an error that ends a stream as the API
// error it is: its type and code, as the same error answered over HTTP.
func TestTheOfficialNodeClientReadsAnErrorThatEndsAStream(t *testing.T) {
	node := nodeClient(t)
	hs := refusingServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join("testdata", "node", "refused.mjs"), hs.URL)
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("refused.mjs: %v\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
	}
	var got struct {
		SDKVersion string `json:"sdk_version"`
		Chunks     int    `json:"chunks"`
		Error      *struct {
			Name, Type, Code, Message string
		} `json:"error"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &got); err != nil {
		t.Fatalf("refused.mjs printed %q: %v\nstderr: %s", stdout.String(), err, stderr.String())
	}
	t.Logf("openai %s: %s", got.SDKVersion, strings.TrimSpace(stdout.String()))
	if got.Chunks == 0 {
		t.Error("the stream failed before it began: nothing tells an error event apart from an error answer")
	}
	if got.Error == nil || got.Error.Name != "APIError" || got.Error.Code != "plan_refused" || got.Error.Type != "invalid_request_error" {
		t.Errorf("the SDK threw %+v, want an APIError of type invalid_request_error, code plan_refused", got.Error)
	}
}

// nodeClient is the path of node, with the pinned client installed; without
// them the test is skipped, unless PLANEXEC_REQUIRE_NODE=1 (as in CI), when
// it fails.
func nodeClient(t *testing.T) string {
	t.Helper()
	skip := t.Skip
	if os.Getenv("PLANEXEC_REQUIRE_NODE") == "1" {
		skip = t.Fatal
	}
	node, err := exec.LookPath("node")
	if err != nil {
		skip("node is not on PATH; install Node 20+ and run `npm ci --prefix plannerapi/testdata/node`")
	}
	if _, err := os.Stat(filepath.Join("testdata", "node", "node_modules", "openai")); err != nil {
		skip("the Node client is not installed: run `npm ci --prefix plannerapi/testdata/node`")
	}
	return node
}
