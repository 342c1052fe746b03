// Package chat is the conversational planner: a chat loop in which a
// planner, acting with exactly a person's authority, reads the state of
// their world through tools and changes it only by proposing plans that a
// person applies. Conversations are stored, compacted when they grow long,
// bounded, cancellable, watched live, and survive a restart.
//
// A service wires its read tools, an engine for what gets applied, a model
// and a store:
//
//	engine, _ := planexec.NewExecutor(planexec.Config{Tools: writes, Store: st})
//	c, err := chat.New(chat.Config{Model: model, Store: st, Reads: reads, Engine: engine})
//	...
//	defer c.Close(ctx)
//	c.Create(ctx, person, chat.SessionOptions{ID: "s1"})
//	sent, err := c.Send(ctx, person, "s1", "Plan the release")
//	for out, err := range c.Watch(ctx, person.Tenant, "s1", sent.Seq-1) { ... }
//
// # Turns
//
// A person's message starts a turn (Chat.Send): the model is asked, the read
// calls it makes run one after another, their results go back to it, and it
// is asked again, until it answers without a call (EndTurn), has run
// Config.MaxRounds rounds of calls (MaxRounds: the calls it asked for past
// the bound are answered as not run, and a message continues), or a person
// cancels it (Chat.Cancel: no call starts after that). One turn at a time
// runs per session, on any replica: the turn holds a lease in the store,
// and a second message meanwhile is ErrTurnBusy, with nothing stored. A turn
// outlives the request that started it; Chat.Close stops the turns of its
// process.
//
// The model writes one JSON document each call, {"text": ..., "calls":
// [{"tool": ..., "arguments": ...}]}, held to a schema that offers each
// read tool's arguments and propose_plan, so any llm.Model serves: tool
// calling is not needed, and the conversation is sent as plain text, always
// beginning with a person's message (an answer of the model's stored first
// is told in it). An answer out of that form is told back to the model,
// where and what was wrong, and it answers again (twice at most before the
// turn fails in fixed words). So is an answer cut off at the model's length
// limit (finish reason "length" or "max_tokens", or llm.ErrTruncated): none
// of its calls runs and nothing of it is proposed.
//
// The model's instructions are the built-in ones, the tenant and the
// session's project (SessionOptions.Project), the tools, the service's
// Config.Instructions and the turn's skill: what Config.Skills gives, asked
// at the start of every turn for the person and the session, or the
// session's stored skill without a provider or when it fails (the failure
// logged).
//
// # Authority
//
// Only a person may create, send, apply, reject or cancel (a delegation
// naming an agent is ErrNotPerson), and never from inside a tool: a call
// made under the context of a read the planner makes, of a step of an
// applied proposal or of any executor's step is ErrInTool, so the planner
// acting for a person cannot make the person act. Each read runs on an
// engine of the read tools under the person's delegation narrowed to the
// agent "planner:<session>": the person's scope, the service's Authorizer
// and the tools' contracts decide, exactly as for the person. A call the
// person may not make gets the fixed forbidden result and does nothing; a
// call with bad arguments gets the validation's own words (paths and rules,
// never values); a tool's *ToolError is shown as written, its message
// bounded as outputs are (Config.MaxResultBytes); any other failure is "the
// tool failed", its error logged, never shown. The conversation goes on.
//
// A session is its tenant's: any person of the tenant may send into it,
// each with their own authority, and cancel its turn. A service whose
// sessions are a person's own checks that before it calls (chathttp's
// Authenticate is the place).
//
// What the planner is shown holds to the same authority. Each tool result
// and applied outcome records its Source: the person under whose authority
// it ran and the calls it made. Working for another person, the planner is
// shown an entry only if that person could make the same calls (their
// scope, the authorizer and the tools' contracts decide, as for a call);
// otherwise it sees fixed words saying it was withheld, and so it does for
// every answer it wrote for someone else after such an entry, which may
// repeat it, and for all that answer led to: the arguments of its calls and
// their results, its proposals and what applying them did. So it does for a
// proposal made in another person's turn after such an entry. A withheld
// proposal keeps its id, so a person knows it is there and may reject it;
// its plan, and the steps a decision on it names, do not show. A summary
// says whom it was made for and what it was made from (Summary.For,
// Sources); for another person it is used only if they could read all of
// it, and otherwise their turn is sent the conversation from its start,
// withheld as above, and compacted for them. A person reading the session
// is shown it the same way (Chat.TranscriptFor, Chat.WatchFor, and
// Chat.SessionFor, whose summary is there only if it would be used for
// them; chathttp serves them); Chat.Transcript, Chat.Watch and
// Chat.Session give the whole record, for the service.
//
// # Proposals
//
// The planner changes things only by calling propose_plan with a plan over
// the engine's tools. The plan is validated and authorized by the engine
// when proposed, as if it were to run then under the person's delegation;
// a refusal goes back to the model to fix. A person applies it
// (Chat.Apply), whole or a subset of steps with what they depend on, or
// rejects it (Chat.Reject); deciding either way takes the authority to
// apply it. Applying validates it again against what stands now and runs it
// on the engine under the person's delegation, as the run
// "chat:<session>:<proposal>": approvals, the autonomy ladder and
// idempotency apply. Applying more of it later runs only the steps not
// applied yet, and applying again what was applied goes on with that run:
// nothing is done twice. Applying again steps whose run completed returns
// the outcome on record and records nothing. Applies of one proposal run
// one at a time: on one process a second waits for the first; on another,
// while the first runs, it is ErrApplying and runs nothing (a decision to
// apply steps not applied before stays on record, for the next apply to
// run). The first decision on a proposal stands on every replica: the
// decision to apply is stored (KindApplying) before any step runs, and a
// decision is stored only after every entry before it was read.
// The planner has no way to set grants, approvals or scopes: a plan holds
// none.
//
// # Compaction
//
// Before each model call the context is estimated: the usage the provider
// reported for the last answer plus a token for every four characters added
// since (rounded down). Strictly above Config.CompactAtTokens, everything before
// the latest person's message (an earlier summary included) is summarised
// by the model, the summary stored with the seq it covers, and from then on
// the model is sent the summary and what came after (see Authority for a
// summary made for another person). The current turn is
// never summarised, so calls stay beside their results. A failed compaction
// is logged and the call goes on uncompacted. Each compaction is a
// KindCompacted output (UpTo, EstimatedTokens), counted per session and in
// Stats. The transcript itself stays complete.
//
// # Transcripts and restarts
//
// Every message, call, result, proposal, decision, compaction, error and
// end of turn is an entry of the session's transcript, numbered by Seq, in
// the store (store/memory, store/sqlite, store/postgres implement
// store.TranscriptStore). A turn writes before it goes on, even when its
// context is cancelled. When a process stops mid-turn its lease runs out;
// the next Send, Session or Watch repairs the transcript: each call with no
// result is answered "interrupted", and the turn ends with an error, so
// nothing looks running forever and a call is never split from its result.
//
// # Watching
//
// Chat.Watch yields a session's outputs from any Seq, stored ones first and
// then live ones from any replica, ending with ctx. The turn never waits for
// a watcher; one that falls Config.WatchLag outputs behind is dropped with
// ErrWatcherDropped and resumes from its last Seq without a gap.
// Chat.WatchFor is the same, as one person may see it. Package chathttp
// serves that over HTTP as Server-Sent Events.
//
// # Metering
//
// Every model call, summaries included, is counted on the session by model
// (Session.Usage) from the usage the llm adapter reports.
package chat
