package chathttp

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/chat"
	"github.com/planexec/planexec/internal/strictjson"
	"github.com/planexec/planexec/store"
)

// Defaults of Config.
const (
	DefaultMaxBodyBytes = 1 << 20
	DefaultHeartbeat    = 15 * time.Second
	// DefaultTranscriptLimit is how many outputs a transcript request
	// without a limit gets; MaxTranscriptLimit is the most one may ask for.
	DefaultTranscriptLimit = 100
	MaxTranscriptLimit     = 1000
	DefaultMaxStreams      = 1000
	// DefaultMaxStreamsPerPerson is a few browser tabs each.
	DefaultMaxStreamsPerPerson = 16
)

// Config shapes the handler. Authenticate is required.
type Config struct {
	// Authenticate names the person behind a request: the delegation's
	// Tenant scopes every session, User is the person who sends, applies
	// and rejects, and Scope lists the tools they may have read for them
	// or applied. An error, or a delegation with no tenant or no user, is
	// 401 with a fixed body; the error goes to Logger at debug level.
	Authenticate func(*http.Request) (planexec.Delegation, error)
	// MaxBodyBytes bounds a request's body; past it the request is 413.
	// Default: DefaultMaxBodyBytes (1 MiB).
	MaxBodyBytes int64
	// Heartbeat is how often an idle event stream gets a comment line, so
	// that proxies and load balancers keep it open. Default:
	// DefaultHeartbeat (15s).
	Heartbeat time.Duration
	// CrossOrigin refuses what a browser sends from a page of another
	// origin to change something (any method but GET, HEAD and OPTIONS):
	// 403 cross_origin, before Authenticate is asked. A service whose page
	// is on another origin trusts it with AddTrustedOrigin. Clients that are
	// not browsers send neither Origin nor Sec-Fetch-Site and are not
	// affected. Default: http.NewCrossOriginProtection(), trusting no other
	// origin.
	CrossOrigin *http.CrossOriginProtection
	// MaxStreams bounds the event streams open at once; past it, a request
	// for one is 503 server_busy. Default: DefaultMaxStreams (1,000).
	MaxStreams int
	// MaxStreamsPerPerson bounds those of one person (tenant and user,
	// whatever agent acts for them); past it, 429 too_many_streams. Default:
	// DefaultMaxStreamsPerPerson (16).
	MaxStreamsPerPerson int
	// Logger gets what must not reach a client: a store's failure, an
	// unexpected error. Default: slog.Default().
	Logger *slog.Logger
}

// handler serves one Chat.
type handler struct {
	chat    *chat.Chat
	cfg     Config
	mux     *http.ServeMux
	streams streams
}

// New returns the HTTP API over c (see the package documentation for its
// routes). It is safe for concurrent use, and c may serve other callers
// besides. A nil c or Config.Authenticate panics: there is no safe default
// for who a request is.
func New(c *chat.Chat, cfg Config) http.Handler {
	if c == nil {
		panic("chathttp: New needs a *chat.Chat")
	}
	if cfg.Authenticate == nil {
		panic("chathttp: Config.Authenticate is required: it names the person and tenant of each request")
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = DefaultHeartbeat
	}
	if cfg.CrossOrigin == nil {
		cfg.CrossOrigin = http.NewCrossOriginProtection()
	}
	if cfg.MaxStreams <= 0 {
		cfg.MaxStreams = DefaultMaxStreams
	}
	if cfg.MaxStreamsPerPerson <= 0 {
		cfg.MaxStreamsPerPerson = DefaultMaxStreamsPerPerson
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	h := &handler{chat: c, cfg: cfg, mux: http.NewServeMux(), streams: streams{of: map[personKey]int{}}}
	h.mux.HandleFunc("POST /sessions", h.authed(h.create))
	h.mux.HandleFunc("GET /sessions/{id}", h.authed(h.session))
	h.mux.HandleFunc("POST /sessions/{id}/messages", h.authed(h.send))
	h.mux.HandleFunc("POST /sessions/{id}/cancel", h.authed(h.cancel))
	h.mux.HandleFunc("GET /sessions/{id}/transcript", h.authed(h.transcript))
	h.mux.HandleFunc("GET /sessions/{id}/events", h.authed(h.events))
	h.mux.HandleFunc("POST /sessions/{id}/proposals/{proposal}/apply", h.authed(h.apply))
	h.mux.HandleFunc("POST /sessions/{id}/proposals/{proposal}/reject", h.authed(h.reject))
	h.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, problemNotFound)
	})
	return h.mux
}

// authed refuses a cross-origin request that would change something, and
// authenticates the rest before serving them.
func (h *handler) authed(serve func(http.ResponseWriter, *http.Request, planexec.Delegation)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if h.cfg.CrossOrigin.Check(r) != nil {
			writeProblem(w, problemCrossOrigin)
			return
		}
		person, err := h.cfg.Authenticate(r)
		if err != nil || person.Tenant == "" || person.User == "" {
			if err != nil {
				h.cfg.Logger.LogAttrs(r.Context(), slog.LevelDebug, "chathttp: request not authenticated", slog.Any("error", err))
			}
			writeProblem(w, problemUnauthenticated)
			return
		}
		serve(w, r, person)
	}
}

func (h *handler) create(w http.ResponseWriter, r *http.Request, person planexec.Delegation) {
	var body struct {
		ID      string `json:"id,omitempty"`
		Skill   string `json:"skill,omitempty"`
		Project string `json:"project,omitempty"`
	}
	if !h.decode(w, r, &body, problemNotUTF8) {
		return
	}
	s, err := h.chat.Create(r.Context(), person, chat.SessionOptions{ID: body.ID, Skill: body.Skill, Project: body.Project})
	if ce, ok := errors.AsType[*planexec.ConfigurationError](err); ok && strings.HasPrefix(ce.Why, "the session's project") {
		writeProblem(w, problem{http.StatusBadRequest, "invalid_project", "A project is at most " + strconv.Itoa(chat.MaxProjectRunes) + " characters of text, with no control characters."})
		return
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, s)
}

func (h *handler) session(w http.ResponseWriter, r *http.Request, person planexec.Delegation) {
	s, err := h.chat.SessionFor(r.Context(), person, r.PathValue("id"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, s)
}

func (h *handler) send(w http.ResponseWriter, r *http.Request, person planexec.Delegation) {
	var body struct {
		Text string `json:"text"`
	}
	// A message that is not UTF-8 is refused as the chat refuses it, not
	// mended: JSON decoding would put U+FFFD in its place.
	notUTF8 := problem{http.StatusBadRequest, "invalid_message", "The message cannot be sent: it is not valid UTF-8."}
	if !h.decode(w, r, &body, notUTF8) {
		return
	}
	sent, err := h.chat.Send(r.Context(), person, r.PathValue("id"), body.Text)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, sent)
}

func (h *handler) cancel(w http.ResponseWriter, r *http.Request, person planexec.Delegation) {
	var body struct{}
	if !h.decode(w, r, &body, problemNotUTF8) {
		return
	}
	running, err := h.chat.Cancel(r.Context(), person, r.PathValue("id"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"cancelled": running})
}

func (h *handler) transcript(w http.ResponseWriter, r *http.Request, person planexec.Delegation) {
	q := r.URL.Query()
	after, ok := number(q.Get("after"), 0)
	if !ok {
		writeProblem(w, problem{http.StatusBadRequest, "invalid_request", "after must be a whole number, 0 or more."})
		return
	}
	limit, ok := number(q.Get("limit"), DefaultTranscriptLimit)
	if !ok || limit < 1 || limit > MaxTranscriptLimit {
		writeProblem(w, problem{http.StatusBadRequest, "invalid_request", "limit must be a whole number from 1 to " + strconv.Itoa(MaxTranscriptLimit) + "."})
		return
	}
	out, err := h.chat.TranscriptFor(r.Context(), person, r.PathValue("id"), after, int(limit))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if out == nil {
		out = []chat.Output{}
	}
	writeJSON(w, http.StatusOK, out)
}

// applied is the answer to an apply.
type applied struct {
	Run       string                 `json:"run"`
	Status    planexec.RunStatus     `json:"status"`
	Steps     map[string]stepOutcome `json:"steps"`
	Approvals []approval             `json:"approvals,omitempty"`
	// Error says, in fixed words, why a run that ran did not finish.
	Error string `json:"error,omitempty"`
}

// stepOutcome is what one applied step did.
type stepOutcome struct {
	Tool   string          `json:"tool"`
	Status string          `json:"status"`
	Output json.RawMessage `json:"output,omitempty"`
	Error  string          `json:"error,omitempty"`
}

// approval is a step waiting for a person to clear it.
type approval struct {
	ID     string `json:"id"`
	Step   string `json:"step"`
	Tool   string `json:"tool"`
	Intent string `json:"intent,omitempty"`
	Why    string `json:"why,omitempty"`
}

func (h *handler) apply(w http.ResponseWriter, r *http.Request, person planexec.Delegation) {
	var body struct {
		Steps []string `json:"steps,omitempty"`
	}
	if !h.decode(w, r, &body, problemNotUTF8) {
		return
	}
	res, err := h.chat.Apply(r.Context(), person, r.PathValue("id"), r.PathValue("proposal"), body.Steps)
	if _, ok := errors.AsType[*store.Error](err); ok {
		// What the run did is the answer; a store that failed to record
		// some of it is the service's to know, not the client's.
		h.cfg.Logger.LogAttrs(r.Context(), slog.LevelError, "chathttp: applying a proposal: a store failed",
			slog.String("tenant", person.Tenant), slog.String("session", r.PathValue("id")), slog.Any("error", err))
	}
	pending, waits := errors.AsType[*planexec.ApprovalPendingError](err)
	switch {
	case waits:
		out := applied{Run: pending.RunID, Status: planexec.StatusOf(err), Steps: outcomes(res)}
		for _, q := range pending.Requests {
			out.Approvals = append(out.Approvals, approval{ID: q.ID, Step: q.StepID, Tool: q.Tool, Intent: q.Intent, Why: q.Why})
		}
		writeJSON(w, http.StatusAccepted, out)
	case err != nil && res != nil:
		// The run ran, and some of it failed: what it did is the answer,
		// not a refusal, as the steps that finished had their effect.
		out := applied{Run: res.RunID, Status: planexec.StatusOf(err), Steps: outcomes(res)}
		if out.Error = applyRefusal(err); out.Error == "" {
			h.cfg.Logger.LogAttrs(r.Context(), slog.LevelError, "chathttp: applying a proposal failed",
				slog.String("tenant", person.Tenant), slog.String("session", r.PathValue("id")), slog.Any("error", err))
			out.Error = "The run stopped before it finished; applying the proposal again goes on from where it stopped."
		}
		writeJSON(w, http.StatusOK, out)
	case err != nil:
		h.fail(w, r, err)
	default:
		writeJSON(w, http.StatusOK, applied{Run: res.RunID, Status: planexec.StatusOf(nil), Steps: outcomes(res)})
	}
}

// outcomes says what each step of res did, in the words a client may see:
// a tool's own *chat.ToolError, or "the tool failed".
func outcomes(res *planexec.Result) map[string]stepOutcome {
	out := map[string]stepOutcome{}
	if res == nil {
		return out
	}
	for id, s := range res.Steps {
		o := stepOutcome{Tool: s.Tool, Status: string(s.Status), Output: s.Outcome}
		if s.Err != nil {
			o.Error = "The tool failed."
			if te, ok := errors.AsType[*chat.ToolError](s.Err); ok {
				o.Error = te.Message
			}
		}
		out[id] = o
	}
	return out
}

func (h *handler) reject(w http.ResponseWriter, r *http.Request, person planexec.Delegation) {
	var body struct {
		Reason string `json:"reason,omitempty"`
	}
	if !h.decode(w, r, &body, problemNotUTF8) {
		return
	}
	if err := h.chat.Reject(r.Context(), person, r.PathValue("id"), r.PathValue("proposal"), body.Reason); err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"rejected": true})
}

// decode reads r's body into v, a pointer to a struct: one JSON object of
// type application/json, with no member v does not have and every member
// its tags do not say is optional, strings of valid UTF-8 (a string that is
// not is answered notUTF8), and nothing after it. An empty body is {}. It
// reports whether it did; if not, it answered.
func (h *handler) decode(w http.ResponseWriter, r *http.Request, v any, notUTF8 problem) bool {
	if r.ContentLength > 0 && !isJSON(r.Header.Get("Content-Type")) {
		writeProblem(w, problemMediaType)
		return false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.cfg.MaxBodyBytes))
	if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
		writeProblem(w, problem{http.StatusRequestEntityTooLarge, "too_large", "The request body is larger than " + strconv.FormatInt(h.cfg.MaxBodyBytes, 10) + " bytes."})
		return false
	}
	if err != nil {
		writeProblem(w, problem{http.StatusBadRequest, "invalid_request", "The request body could not be read."})
		return false
	}
	if len(body) > 0 && !isJSON(r.Header.Get("Content-Type")) {
		writeProblem(w, problemMediaType) // a body of unknown length
		return false
	}
	if len(bytes.TrimSpace(body)) == 0 {
		body = []byte("{}")
	}
	dec, err := strictjson.For(reflect.TypeOf(v).Elem())
	if err != nil {
		panic("chathttp: a body type cannot be decoded strictly: " + err.Error())
	}
	violations := dec.Decode(body, v, strictjson.Limits{MaxBytes: len(body)})
	for _, vi := range violations {
		if vi.Problem == "invalid UTF-8" {
			writeProblem(w, notUTF8)
			return false
		}
	}
	if len(violations) > 0 {
		// A violation names a member and what is wrong with it, never a
		// value: the client's own key, cut and cleaned, at most.
		writeProblem(w, problem{http.StatusBadRequest, "invalid_request",
			"The request body must be one JSON object with only the members this route takes, of their types: " + violations[0].String() + "."})
		return false
	}
	return true
}

// isJSON reports whether a Content-Type is JSON in UTF-8, the only
// encoding JSON has (RFC 8259).
func isJSON(contentType string) bool {
	t, params, err := mime.ParseMediaType(contentType)
	if err != nil || t != "application/json" {
		return false
	}
	charset, ok := params["charset"]
	return !ok || strings.EqualFold(charset, "utf-8")
}

// number parses a query parameter that is a count or a seq; def when it is
// absent.
func number(s string, def int64) (int64, bool) {
	if s == "" {
		return def, true
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil && n >= 0
}

// problem is an error answer, in fixed words.
type problem struct {
	status        int
	code, message string
}

var (
	problemUnauthenticated = problem{http.StatusUnauthorized, "unauthenticated", "The request is not authenticated."}
	problemNotFound        = problem{http.StatusNotFound, "not_found", "There is nothing at this method and path."}
	problemInternal        = problem{http.StatusInternalServerError, "internal", "The request could not be served. Try again later."}
	problemCrossOrigin     = problem{http.StatusForbidden, "cross_origin", "A request from a page of another origin may not change anything here."}
	problemMediaType       = problem{http.StatusUnsupportedMediaType, "unsupported_media_type", "A request body must be JSON, sent as Content-Type: application/json."}
	problemNotUTF8         = problem{http.StatusBadRequest, "invalid_request", "The request body is not valid UTF-8."}
)

// fail answers err. What the chat says in its own fixed words a client may
// see; anything else is logged and answered as internal.
func (h *handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	p, known := problemOf(err)
	if !known {
		h.cfg.Logger.LogAttrs(r.Context(), slog.LevelError, "chathttp: request failed",
			slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.Any("error", err))
	}
	writeProblem(w, p)
}

// problemOf says how err is answered, and whether it is one a client may be
// told of.
func problemOf(err error) (problem, bool) {
	if me, ok := errors.AsType[*chat.MessageError](err); ok {
		return problem{http.StatusBadRequest, "invalid_message", "The message cannot be sent: " + me.Why + "."}, true
	}
	switch {
	case errors.Is(err, chat.ErrNoSession):
		return problem{http.StatusNotFound, "no_session", "There is no such session."}, true
	case errors.Is(err, chat.ErrNoStep):
		return problem{http.StatusBadRequest, "no_step", "The proposal has no step of one of these ids."}, true
	case errors.Is(err, chat.ErrNoProposal):
		return problem{http.StatusNotFound, "no_proposal", "The session holds no such proposal."}, true
	case errors.Is(err, chat.ErrTurnBusy):
		return problem{http.StatusConflict, "turn_busy", "A turn of this session is running. Send again when it is done, or cancel it."}, true
	case errors.Is(err, chat.ErrWithheld):
		return problem{http.StatusForbidden, "withheld", "The proposal was made from what you may not read: you may not apply it."}, true
	case errors.Is(err, chat.ErrDecided):
		return problem{http.StatusConflict, "decided", "The proposal was already applied or rejected."}, true
	case errors.Is(err, store.ErrExists):
		return problem{http.StatusConflict, "session_exists", "A session with this id exists."}, true
	case errors.Is(err, chat.ErrNotPerson):
		return problem{http.StatusForbidden, "not_a_person", "Only a person may do this, not an agent."}, true
	case errors.Is(err, chat.ErrClosed):
		return problem{http.StatusServiceUnavailable, "closed", "The service is stopping. Try again later."}, true
	}
	if _, ok := errors.AsType[*planexec.ConfigurationError](err); ok {
		// Create's only: the session id is unfit.
		return problem{http.StatusBadRequest, "invalid_session_id", "A session id is at most " + strconv.Itoa(chat.MaxSessionID) + " letters, digits, '.', '_' and '-', and starts with a letter or a digit."}, true
	}
	if de, ok := errors.AsType[*planexec.DelegationError](err); ok {
		// Why is the engine's own words; an authorizer's error, which may
		// hold anything, is only wrapped.
		return problem{http.StatusForbidden, "forbidden", "The person's delegation does not allow this: " + de.Why + "."}, true
	}
	if errors.Is(err, planexec.ErrRunBusy) || errors.Is(err, planexec.ErrInFlight) {
		return problem{http.StatusConflict, "applying", "The proposal is being applied by another request; what it does will be on the session's stream."}, true
	}
	if pve, ok := errors.AsType[*planexec.PlanValidationError](err); ok && pve.Reason == planexec.ReasonNotAllowed {
		// The person's scope does not cover a step: theirs to know, as a
		// refusal of who they are, not of the plan.
		return problem{http.StatusForbidden, "forbidden", "The person may not use " + strconv.Quote(pve.Tool) + ", which step " + strconv.Quote(pve.Step) + " calls; nothing ran."}, true
	}
	if refused := applyRefusal(err); refused != "" {
		return problem{http.StatusUnprocessableEntity, "apply_refused", refused}, true
	}
	return problemInternal, false
}

// applyRefusal is the message of an engine's refusal to apply a proposal,
// or "". It is made of the typed error's own fields (the reason, the step
// and the tool, which the engine bounds and cleans), in fixed words: an
// error's text may hold more, as the engine joins to a refusal what a store
// said as it recorded it, and a gate's approver and reason are the
// service's own.
func applyRefusal(err error) string {
	at := func(step, tool string) string {
		return "Step " + strconv.Quote(step) + " (" + strconv.Quote(tool) + ")"
	}
	if ie, ok := errors.AsType[*planexec.IndeterminateOutcomeError](err); ok {
		if ie.InDoubt {
			return at(ie.Step, ie.Tool) + " failed and its effect may have landed; it will not run again until its outcome is settled."
		}
		return at(ie.Step, ie.Tool) + " is running elsewhere; it is not run twice."
	}
	if se, ok := errors.AsType[*planexec.StepError](err); ok {
		if te, ok := errors.AsType[*chat.ToolError](se); ok {
			return at(se.Step, se.Tool) + " failed: " + te.Message
		}
		return at(se.Step, se.Tool) + " failed."
	}
	if pve, ok := errors.AsType[*planexec.PlanValidationError](err); ok {
		msg := "The proposal cannot run as things stand (" + string(pve.Reason) + ")"
		if pve.Step != "" {
			msg += ": step " + strconv.Quote(pve.Step) + " (" + strconv.Quote(pve.Tool) + ")"
		}
		if pve.Reason == planexec.ReasonPrecondition && len(pve.Violations) > 0 {
			msg += ": " + pve.Violations[0].Why // the tool's own words
		}
		return msg + ". Nothing ran."
	}
	if are, ok := errors.AsType[*planexec.AutonomyRefusedError](err); ok {
		return at(are.Step, are.Tool) + " is refused by the autonomy policy (class " + strconv.Quote(are.Class) + ")."
	}
	if ade, ok := errors.AsType[*planexec.ApprovalDeniedError](err); ok {
		return at(ade.Step, ade.Tool) + " was not approved."
	}
	return ""
}

// errorBody is the JSON of an error answer.
type errorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func writeProblem(w http.ResponseWriter, p problem) {
	var b errorBody
	b.Error.Code, b.Error.Message = p.code, p.message
	writeJSON(w, p.status, b)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
