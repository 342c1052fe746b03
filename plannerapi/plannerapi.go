// Package plannerapi serves planner mode over HTTP: an OpenAI-compatible
// chat-completions endpoint on which a request with "planner_mode": true is
// a run of rounds over the service's tools (planexec.Run.Do), streamed as
// it goes, handing control back to the client (a tool call, a question, an
// approval) and resumed by the x-session-id header. Without planner_mode a
// request is an ordinary completion by the configured model.
//
//	srv, err := plannerapi.New(plannerapi.Config{
//		Executor: ex, // the service's tools, store and policy
//		Models:   map[string]llm.Model{"planexec": model},
//	})
//	http.ListenAndServe("127.0.0.1:8080", srv)
//
// Any OpenAI client talks to it: the SDKs send planner_mode and the session
// through their extra-body and extra-header options.
//
// # Sessions
//
// A session is one job: its rounds, the tools that failed in it, a plan
// paused partway. It is the planexec run whose id is the session id, of the
// tenant the caller is (Config.Authenticate), so it lives in the executor's
// store: any replica over the same database continues it, and one caller
// can neither resume nor read another's. It is not conversation memory: the
// conversation is the request's messages. A session whose run answered, or
// failed, starts over when the conversation takes a new turn (its last
// message a user's, after an assistant's), as a new run ("<session>~2",
// "~3", …), so nothing of the last one is replayed in it, except that a
// tool that failed twice in the session is not offered again in any later
// run of it. A request that repeats the last one (a retry) gets the same
// answer or pause. A session paused for longer than Config.SessionTTL
// starts over too, and says so (the response's X-Session-Status header is
// "restarted"). A session id is at most 256 bytes and holds no "~".
//
// A session runs one request at a time, and no round of it is planned
// twice. Within a server, a request on a session another request is
// running waits its turn (bounded by its own context; past 16 waiting, it
// is 409 session_busy) and then answers from where the session stands: a
// retry of a request gets its answer. A request on a session another
// replica is running is session_busy at once, with where the session
// stands in the error's metadata; nothing of the session changes.
//
// Sessions are resumed by their clients. A client that disconnects, or
// stops reading a stream, stops its run at the next step boundary, with
// everything finished on record; the same session id resumes it. A service
// serving planner mode must not resume its sessions with
// planexec.Executor.Recover, which would run them without the tools their
// clients pass, racing the clients that come back.
//
// # Handing control back
//
// A run pauses, stored, and the response says why:
//   - a tool the client passed in "tools": finish_reason "tool_calls" and
//     the calls in message.tool_calls; the client sends each result as a
//     "tool" message with that tool_call_id;
//   - a question for the person (plan_status clarification_requested): the
//     answer is the next user message;
//   - an approval a person has yet to give (card_interaction_requested, or
//     payment_requested when an autonomy class over an amount escalated it):
//     the requests are in the response's metadata ("approvals"), and the
//     client sends its decisions in the follow-up request's "decisions"
//     field: [{"request": id, "approved": true|false, "reason": "...",
//     "by": "..."}]; the approver on record is the authenticated caller
//     (with whom "by" names).
//
// A run may wait on calls and approvals at once; the response then holds
// both. Each resumes the same way: a follow-up request with the same
// session id. A request that brings nothing new for the pause (one resent
// because its response was lost) is answered with the same pause again, so
// a client always learns what its session waits for. Results and
// decisions are checked against what the session waits for before any is
// recorded: a request with a wrong entry (for a call or request the
// session does not wait for, or one named twice) records nothing and is
// 400 naming the entry, with what the session waits for in the error's
// metadata (session_status, tool_calls, approvals, question, in_doubt).
// Results or decisions for only some of what it waits for are recorded,
// and the answer says what still waits. One recorded before, sent again,
// stands as first given.
//
// # The rest of the request
//
// A planner run makes its own model calls: it passes "temperature" to each,
// and refuses "max_tokens", "max_completion_tokens" and "response_format"
// (400: an ordinary completion is the place for them). "agents" names tool
// groups of Config.Agents the run may use. "n" must be 1. Unknown members
// are refused, as OpenAI refuses them.
//
// # Images
//
// A user message may carry images as content parts {"type": "image_url",
// "image_url": {"url": ...}}, the url a base64 data URL
// ("data:image/png;base64,...": PNG, JPEG, GIF or WebP, at most
// llm.MaxImageBytes decoded) or an http or https URL the model's provider
// fetches. Any other url, or an image on another role's message, is 400
// naming the part. An ordinary completion sends them to the model with
// their message's text; a planner run shows every image of the request's
// user messages to its planner, with the task, in each round the request
// plans, and a stream with images says plan_status "analyzing_image" first.
// A session does not keep images: a follow-up request shows the planner
// those it carries.
//
// # Limits
//
// A body past Config.MaxBodyBytes is 413; more planner runs at once than
// Config.MaxRuns, 429. "tools" holds at most Config.MaxTools tools (128, as
// OpenAI allows), each with a name of 1 to 64 letters, digits, "_" or "-",
// a description of at most 4 KiB and parameters of at most 16 KiB; past
// any of them the request is 400 naming the tool. A run takes at most the
// executor's MaxRounds rounds (15 by default) and answers from the work
// done at the bound; each tool's reply is bounded by Config.ToolTimeout (60
// seconds by default). Each write of a response is bounded by
// Config.WriteTimeout (10 seconds by default): a client that does not read
// loses its response, and its run stops as on a disconnect, freeing its
// place among Config.MaxRuns.
//
// # Errors
//
// Errors are OpenAI's shape, {"error": {"message", "type", "param",
// "code"}}, with these codes: 400 with the param at fault; 401
// invalid_api_key; 404 model_not_found; 409 session_busy (another request
// or replica runs the session) and step_in_doubt (a step's effect awaits
// settling); 413 request_too_large; 422 plan_refused (the planner kept
// writing plans that were refused); 429 too_many_runs; 500 run_failed; 504
// timeout (the session resumes where it stopped). An error about where a
// session stands (400 for a wrong result or decision, 409) says so in
// error.metadata. A stream already under way ends with the same error as
// an event, data: {"error": {...}}, then [DONE].
package plannerapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/llm"
)

// Config builds a Server.
type Config struct {
	// Executor runs the plans: the service's tools, store and policy. Its
	// store must keep runs (every store of this module does): sessions are
	// its runs.
	Executor *planexec.Executor
	// Models are the models a request may name, by name: planner mode plans
	// with it, and an ordinary completion is its answer.
	Models map[string]llm.Model
	// Agent is the planner's name and instructions.
	Agent planexec.Agent
	// Agents names groups of the executor's tools that a request's
	// "agents" list may give a run; tools in no group are always given.
	// Nil: every tool is always given, and "agents" is refused.
	Agents map[string][]string
	// Authenticate names the caller of a request: its tenant, whose
	// sessions are its own. An error answers 401. Default: every caller is
	// "anonymous".
	Authenticate func(*http.Request) (string, error)
	// MaxBodyBytes bounds a request's body. Default: 1 MiB.
	MaxBodyBytes int64
	// MaxRuns bounds the planner runs served at once; past it a request is
	// 429. Default: 64.
	MaxRuns int
	// MaxTools bounds a request's "tools". Default: 128.
	MaxTools int
	// SessionTTL is how long a paused session waits for the client to
	// resume it. Default: 1 hour.
	SessionTTL time.Duration
	// MaxAgents bounds a request's "agents" list. Default: 16.
	MaxAgents int
	// ToolTimeout bounds each of a run's tool calls (a step past it fails,
	// and shows as timeout). Default: 60 seconds.
	ToolTimeout time.Duration
	// WriteTimeout bounds each write of a planner-mode response: a client
	// that has not taken a write by then loses the response, and its run
	// stops as on a disconnect. Default: 10 seconds.
	WriteTimeout time.Duration
	// Now is the clock. Default: time.Now.
	Now func() time.Time
}

// Server serves the API. It is an http.Handler, safe for concurrent use.
type Server struct {
	cfg      Config
	runs     chan struct{} // a token per planner run being served
	sessions sessionLocks  // one request at a time per session
	names    []string      // the models' names, sorted
	mux      *http.ServeMux
}

// New checks cfg and builds a server.
func New(cfg Config) (*Server, error) {
	if cfg.Executor == nil {
		return nil, &planexec.ConfigurationError{Why: "plannerapi needs an executor"}
	}
	if len(cfg.Models) == 0 {
		return nil, &planexec.ConfigurationError{Why: "plannerapi needs at least one model"}
	}
	for name, m := range cfg.Models {
		if m == nil {
			return nil, &planexec.ConfigurationError{Why: fmt.Sprintf("model %q is nil", name)}
		}
	}
	if cfg.Authenticate == nil {
		cfg.Authenticate = func(*http.Request) (string, error) { return "anonymous", nil }
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 1 << 20
	}
	if cfg.MaxRuns <= 0 {
		cfg.MaxRuns = 64
	}
	if cfg.MaxTools <= 0 {
		cfg.MaxTools = 128
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = time.Hour
	}
	if cfg.MaxAgents <= 0 {
		cfg.MaxAgents = 16
	}
	if cfg.ToolTimeout <= 0 {
		cfg.ToolTimeout = time.Minute
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 10 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Server{cfg: cfg, runs: make(chan struct{}, cfg.MaxRuns), mux: http.NewServeMux()}
	for name := range cfg.Models {
		s.names = append(s.names, name)
	}
	slices.Sort(s.names)
	s.mux.HandleFunc("POST /v1/chat/completions", s.completions)
	s.mux.HandleFunc("GET /v1/models", s.models)
	s.mux.HandleFunc("GET /v1/models/{model}", s.model)
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "invalid_request_error", "", "unknown_url", fmt.Sprintf("Unknown request URL: %s %s.", r.Method, r.URL.Path))
	})
	return s, nil
}

// ServeHTTP serves the API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// apiError is OpenAI's error body. Metadata, in planner mode, says where
// the session stands (see waits).
type apiError struct {
	Error apiErrorBody `json:"error"`
}

type apiErrorBody struct {
	Message  string         `json:"message"`
	Type     string         `json:"type"`
	Param    *string        `json:"param"`
	Code     *string        `json:"code"`
	Metadata map[string]any `json:"metadata,omitempty"`
}

func errorBody(typ, param, code, message string, meta map[string]any) apiError {
	e := apiError{Error: apiErrorBody{Message: message, Type: typ, Metadata: meta}}
	if param != "" {
		e.Error.Param = &param
	}
	if code != "" {
		e.Error.Code = &code
	}
	return e
}

// writeError answers status with an error in OpenAI's shape.
func writeError(w http.ResponseWriter, status int, typ, param, code, message string) {
	writeJSON(w, status, errorBody(typ, param, code, message, nil))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// caller authenticates r; false when it answered 401.
func (s *Server) caller(w http.ResponseWriter, r *http.Request) (string, bool) {
	who, err := s.cfg.Authenticate(r)
	if err != nil || who == "" {
		writeError(w, http.StatusUnauthorized, "invalid_request_error", "", "invalid_api_key", "The request is not authenticated.")
		return "", false
	}
	return who, true
}

type modelEntry struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	if _, ok := s.caller(w, r); !ok {
		return
	}
	list := struct {
		Object string       `json:"object"`
		Data   []modelEntry `json:"data"`
	}{Object: "list", Data: []modelEntry{}}
	for _, name := range s.names {
		list.Data = append(list.Data, modelEntry{ID: name, Object: "model", OwnedBy: "planexec"})
	}
	writeJSON(w, http.StatusOK, list)
}

func (s *Server) model(w http.ResponseWriter, r *http.Request) {
	if _, ok := s.caller(w, r); !ok {
		return
	}
	name := r.PathValue("model")
	if _, ok := s.cfg.Models[name]; !ok {
		s.unknownModel(w, name)
		return
	}
	writeJSON(w, http.StatusOK, modelEntry{ID: name, Object: "model", OwnedBy: "planexec"})
}

func (s *Server) unknownModel(w http.ResponseWriter, name string) {
	writeError(w, http.StatusNotFound, "invalid_request_error", "model", "model_not_found",
		fmt.Sprintf("The model %s does not exist or you do not have access to it.", quoteName(name)))
}

// quoteName quotes a name a client sent, cut short, for a message.
func quoteName(name string) string {
	if len(name) > 64 {
		name = name[:64] + "…"
	}
	return fmt.Sprintf("%q", strings.ToValidUTF8(name, "\uFFFD"))
}

// completions serves POST /v1/chat/completions.
func (s *Server) completions(w http.ResponseWriter, r *http.Request) {
	caller, ok := s.caller(w, r)
	if !ok {
		return
	}
	req, problem := decodeRequest(w, r, s.cfg.MaxBodyBytes)
	if problem != nil {
		problem.write(w)
		return
	}
	model, ok := s.cfg.Models[req.Model]
	if !ok {
		s.unknownModel(w, req.Model)
		return
	}
	if !req.PlannerMode {
		s.complete(w, r, req, model)
		return
	}
	session := r.Header.Get("X-Session-Id")
	switch {
	case session == "":
		writeError(w, http.StatusBadRequest, "invalid_request_error", "x-session-id", "missing_session",
			"Planner mode requires an x-session-id header: one value per job, the same on every request that continues it.")
		return
	case len(session) > maxSessionID || strings.Contains(session, generationMark):
		writeError(w, http.StatusBadRequest, "invalid_request_error", "x-session-id", "invalid_session",
			fmt.Sprintf("A session id is at most %d bytes and holds no %q.", maxSessionID, generationMark))
		return
	}
	job, p := s.prepare(caller, req)
	if p != nil {
		p.write(w)
		return
	}
	// One request at a time per session: the next waits its turn, then
	// answers from where the session stands.
	unlock, err := s.sessions.lock(r.Context(), sessionKey{caller, session})
	switch {
	case errors.Is(err, errQueueFull):
		s.busy(w, r, job, session)
		return
	case err != nil:
		return // the client went away while it waited
	}
	defer unlock()
	select {
	case s.runs <- struct{}{}:
		defer func() { <-s.runs }()
	default:
		writeError(w, http.StatusTooManyRequests, "rate_limit_error", "", "too_many_runs", "Too many planner runs at once; try again shortly.")
		return
	}
	s.plan(w, r, session, job, model)
}

// problem is a request refused before anything ran.
type problem struct {
	status        int
	param, reason string
	message       string
	meta          map[string]any // where the session stands, when it is about the session
}

func (p *problem) write(w http.ResponseWriter) {
	writeJSON(w, p.status, errorBody("invalid_request_error", p.param, p.reason, p.message, p.meta))
}

func badRequest(param, message string) *problem {
	return &problem{status: http.StatusBadRequest, param: param, message: message}
}

// maxSessionID bounds a session id; generationMark separates a session id
// from the generation of its run, so no session id holds it.
const (
	maxSessionID   = 256
	generationMark = "~"
)

// Bounds of a tool a client passes, beside its name.
const (
	maxToolDescription = 4 << 10
	maxToolParameters  = 16 << 10
)

// toolName is what OpenAI allows a function's name to be.
var toolName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// inFlight says a session is being continued by another request or
// replica.
const inFlight = "The session is being continued elsewhere (another request, or a replica resuming it); try again in a moment."

// refusal is how an error of a run is answered: an HTTP status, and
// OpenAI's error type and code.
type refusal struct {
	status        int
	typ, code     string
	message       string
	sessionStatus bool // the answer names where the session stands
}

// refusalOf says how err is answered; false for a client that went away,
// which is answered nothing.
func refusalOf(err error) (refusal, bool) {
	var perr *planexec.PlanValidationError
	switch {
	case errors.Is(err, errGone), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return refusal{}, false
	case errors.Is(err, errTimedOut):
		return refusal{http.StatusGatewayTimeout, "server_error", "timeout", "The run ran out of time; the session resumes where it stopped.", false}, true
	case errors.As(err, &perr):
		return refusal{http.StatusUnprocessableEntity, "invalid_request_error", "plan_refused", perr.Error(), false}, true
	case errors.Is(err, planexec.ErrInFlight), errors.Is(err, planexec.ErrRunBusy):
		return refusal{http.StatusConflict, "invalid_request_error", "session_busy", inFlight, true}, true
	case errors.Is(err, planexec.ErrInDoubt):
		return refusal{http.StatusConflict, "invalid_request_error", "step_in_doubt",
			"A step's effect cannot be vouched for; the session waits until it is settled.", true}, true
	}
	return refusal{http.StatusInternalServerError, "server_error", "run_failed", "The run failed.", false}, true
}
