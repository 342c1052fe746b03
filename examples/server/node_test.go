package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// The official OpenAI Node client (the openai npm package pinned in
// testdata/node) with a person's key as its apiKey: another key is its
// AuthenticationError, and with the person's the session streams to its
// answer.
func TestTheOfficialNodeClientWorksWithAPersonsKey(t *testing.T) {
	// Without Node or the client the test is skipped, unless
	// PLANEXEC_REQUIRE_NODE=1 (as in CI), when it fails.
	skip := t.Skip
	if os.Getenv("PLANEXEC_REQUIRE_NODE") == "1" {
		skip = t.Fatal
	}
	node, err := exec.LookPath("node")
	if err != nil {
		skip("node is not on PATH; install Node 20+ and run `npm ci --prefix examples/server/testdata/node`")
	}
	if _, err := os.Stat(filepath.Join("testdata", "node", "node_modules", "openai")); err != nil {
		skip("the Node client is not installed: run `npm ci --prefix examples/server/testdata/node`")
	}
	s := start(t, options{yes: true}, "")

	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join("testdata", "node", "session.mjs"), s.url)
	cmd.Env = append(os.Environ(), "PLANEXEC_API_KEY="+benKey)
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	var got struct {
		OK         bool   `json:"ok"`
		SDKVersion string `json:"sdk_version"`
		Session    string `json:"session"`
		Stage      string `json:"stage"`
		Refused    struct {
			Status int    `json:"status"`
			Code   string `json:"code"`
		} `json:"refused"`
		Answer       string          `json:"answer"`
		PlanStatuses []string        `json:"plan_statuses"`
		Error        json.RawMessage `json:"error"`
	}
	line := strings.TrimSpace(stdout.String())
	if err := json.Unmarshal([]byte(line), &got); err != nil {
		t.Fatalf("session.mjs printed no findings (%v, exit: %v)\nstdout: %s\nstderr: %s", err, runErr, stdout.String(), stderr.String())
	}
	if runErr != nil || !got.OK {
		t.Fatalf("the Node client (openai %s) failed at %s: %s\nexit: %v\nstderr: %s", got.SDKVersion, got.Stage, got.Error, runErr, stderr.String())
	}
	t.Logf("openai %s: %s", got.SDKVersion, line)
	if got.Refused.Status != 401 || got.Refused.Code != "invalid_api_key" {
		t.Errorf("another key: %+v, want 401 invalid_api_key", got.Refused)
	}
	if !strings.HasPrefix(got.Answer, "Booked BA117") || !slices.Contains(got.PlanStatuses, "completed") {
		t.Errorf("the answer %q, plan statuses %v", got.Answer, got.PlanStatuses)
	}
	if n := s.bookings.Load(); n != 1 {
		t.Errorf("booked %d times, want once", n)
	}
	if len(history(t, s.db, "ben", got.Session)) == 0 {
		t.Errorf("no session %s of ben's on record: the key did not name him", got.Session)
	}
}
