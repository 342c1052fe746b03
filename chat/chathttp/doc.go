// Package chathttp serves a chat.Chat over HTTP: sessions, messages, a live
// stream of each session's transcript, and the applying or rejecting of the
// plans the planner proposes.
//
//	h := chathttp.New(c, chathttp.Config{
//		Authenticate: func(r *http.Request) (planexec.Delegation, error) {
//			return sessions.Person(r) // the service's own: tenant, user, scope
//		},
//	})
//	http.ListenAndServe("127.0.0.1:8081", h)
//
// # Routes
//
//	POST /sessions                          {"id"?, "skill"?, "project"?}    201 the session
//	GET  /sessions/{id}                                                      200 the session
//	POST /sessions/{id}/messages                      {"text"}               202 {"turn", "seq"}
//	POST /sessions/{id}/cancel                                               200 {"cancelled"}
//	GET  /sessions/{id}/transcript?after=N&limit=M                           200 [output, ...]
//	GET  /sessions/{id}/events?after=N                                       200 text/event-stream
//	POST /sessions/{id}/proposals/{proposal}/apply    {"steps"?: [...]}      200 {"run", "status", "steps"}, 202 pending
//	POST /sessions/{id}/proposals/{proposal}/reject   {"reason"?}            200 {"rejected": true}
//
// Every request is authenticated by Config.Authenticate, which names the
// person and the tenant; a tenant sees only its own sessions, and a person
// what they may read of one (chat.SessionFor: a summary only if they could
// read all it was made from; the transcript and the event stream as below).
// A message
// starts a turn that runs on after the 202: follow it on the event stream.
// A message sent while a turn runs is 409; cancel the turn or wait for its
// done. Request bodies are one JSON object sent as application/json,
// decoded strictly: another Content-Type is 415, an unknown member or a
// string that is not valid UTF-8 is 400 (never mended into U+FFFD), a body
// past Config.MaxBodyBytes is 413.
//
// # Browsers
//
// A page of another origin cannot change anything through the API, whatever
// cookie its browser holds: a POST a browser marks as cross-origin
// (Sec-Fetch-Site, or an Origin of another host) is 403 (Config.CrossOrigin
// says which other origins to trust), and the forms and text/plain
// requests a page may send without asking are 415. Reads are answered; a
// browser keeps their answers from a page of another origin. A service
// that logs browsers in with a cookie makes it HttpOnly and SameSite.
//
// At most Config.MaxStreams event streams are open at once (past it, 503),
// and at most Config.MaxStreamsPerPerson of one person (past it, 429).
//
// Errors are JSON, {"error": {"code": "...", "message": "..."}}, in fixed
// words: what a store, a model or a tool said goes to Config.Logger, never
// to the client. The codes: unauthenticated (401), invalid_request,
// invalid_message, invalid_session_id, invalid_project, no_step (400), not_a_person,
// forbidden, withheld, cross_origin (403), no_session, no_proposal, not_found (404),
// turn_busy, session_exists, decided, applying (409), too_large (413),
// unsupported_media_type (415), apply_refused (422, with the engine's
// reason), too_many_streams (429), closed, server_busy (503), internal
// (500).
//
// # Applying a proposal
//
// An apply runs the proposal's steps (all of them, or those listed and what
// they depend on) on the chat's engine as the person. The answer says what
// the run did: its id, its status ("completed", "failed", "in_doubt", ...)
// and each step that ran, {"tool", "status", "output", "error"}. A run that
// ran but did not finish is still 200, with its status and an "error" in
// fixed words, as the steps that finished had their effect; applying again
// goes on from where it stopped and never repeats an effect. A step that
// waits for a person's approval is 202, status "awaiting_approval", with
// the approvals asked for (id, step, tool, why). A step the person's scope
// does not cover is 403 forbidden; an engine that refuses the plan as it
// stands now otherwise (a tool no longer registered, a tool's
// precondition unmet by the world as it stands, whose words the message
// carries) is 422 apply_refused. Either way nothing ran.
//
// # The event stream
//
// GET /sessions/{id}/events is a stream of Server-Sent Events, one per
// output of the session as the person may see it (chat.WatchFor: what
// another person read that they could not, and what the planner made of it
// for that person, answers, calls and plans, is withheld, as the transcript
// route withholds it), the stored ones first and then the live ones:
//
//	id: 7
//	event: tool_call
//	data: {"seq":7,"kind":"tool_call","turn":1,"call":{...}}
//
// The event's name is the output's kind (text, message, tool_call,
// tool_result, proposal, applying, applied, rejected, compacted, error,
// done) and its
// id is the output's seq, the number of the transcript entry. A text event
// carries no id: it is the text of the message that follows it with the
// same seq, and a client that resumed from it would miss that message. A
// comment line is sent every Config.Heartbeat, so proxies keep an idle
// stream open. A client too slow for the session is dropped: it gets an
// event named dropped and the stream ends, and reconnecting goes on from
// the last id it saw. A stream outlives the server's WriteTimeout: each
// event instead has 30 seconds to be written, and a client that stops
// reading for that long is let go.
//
// Why Server-Sent Events and not a WebSocket: the stream goes one way,
// server to client, and everything a client says (a message, a cancel, an
// apply) is an ordinary POST that gets an ordinary status. Resuming is
// built in: the last event id the client saw is the transcript's seq, and
// the browser's EventSource reconnects by itself with a Last-Event-ID
// header, from which the stream goes on with no gap and no duplicate (the
// after parameter does the same for a client that keeps the seq itself).
// And it is plain HTTP, which proxies, load balancers and curl already
// carry and authenticate like any other request.
package chathttp
