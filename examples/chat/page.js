"use strict";
// Everything the server says is put on the page as text (textContent),
// never as markup: a model's words and a tool's outputs are data.
const $ = (sel, root = document) => root.querySelector(sel);
const log = $("#log");
let session = "";
let stream = null;
// A turn runs from its start (the send's answer, or its message on the
// stream) to its done (on the stream). Either may land first, so the page
// keeps the numbers of the last turn started and the last turn ended: it
// is running while the one is past the other, whatever the order.
let started = 0, ended = 0;
let sending = false; // a send is under way

function el(tag, props = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (k === "class") e.className = v;
    else if (k === "data") Object.assign(e.dataset, v);
    else e[k] = v;
  }
  for (const c of children) e.append(c);
  return e;
}

function pretty(raw) {
  return raw === undefined ? "" : JSON.stringify(raw, null, 2);
}

// signIn goes to the sign-in page: the browser's sign-in (its cookie) is
// missing or over.
function signIn() { location.assign("/signin"); }

// api calls the chat's HTTP API as the person signed in (the browser sends
// the cookie); an error answer is thrown with its fixed message.
async function api(method, path, body) {
  const res = await fetch("/api" + path, {
    method,
    headers: body === undefined ? {} : { "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (res.status === 401) signIn();
  const data = await res.json();
  if (!res.ok) throw Object.assign(new Error(data.error.message), { status: res.status, code: data.error.code });
  return { status: res.status, data };
}

function problem(text) { $("#problem").textContent = text || ""; }

function running() { return started > ended; }

// settle sets the buttons from where the turns stand.
function settle() {
  $("#send").disabled = sending || running() || !session;
  $("#cancel").disabled = !running();
}

function turnStarted(turn) { started = Math.max(started, turn); settle(); }
function turnEnded(turn) { ended = Math.max(ended, turn); settle(); }

async function refreshItems() {
  const res = await fetch("/items");
  if (res.status === 401) return signIn();
  if (!res.ok) return;
  const list = $("#items");
  list.replaceChildren(...(await res.json()).map(it => el("li", {},
    el("span", { class: "id", textContent: it.id + " " }), it.title,
    el("div", { class: "note", textContent: it.status + (it.assignee ? " · " + it.assignee : "") +
      (it.depends_on ? " · waits for " + it.depends_on.join(", ") : "") }))));
}

// The transcript, one handler per kind of output.

function message(o) {
  if (o.role === "user") {
    log.append(el("div", { class: "msg user" }, el("span", { class: "by", textContent: o.by }), o.text));
    turnStarted(o.turn);
    return;
  }
  // The text of an assistant message comes first as a text event with the
  // same seq; the message then completes it.
  let bubble = $(`.msg.assistant[data-seq="${o.seq}"]`);
  if (!bubble) {
    bubble = el("div", { class: "msg assistant", data: { seq: o.seq } }, el("span", { class: "by", textContent: "planner" }), o.text);
    log.append(bubble);
  }
  if (o.kind === "message" && o.model) $(".by", bubble).textContent = "planner · " + o.model;
}

// A tool call is a line that opens to its arguments and, once it came
// back, its result.
function callLine(id, tool) {
  const line = el("details", { class: "call", data: { call: id } },
    el("summary", {}, "→ " + tool + " ", el("span", { class: "status", textContent: "running…" })));
  log.append(line);
  return line;
}

function toolCall(o) {
  callLine(o.call.id, o.call.tool).append(el("pre", { textContent: "arguments: " + JSON.stringify(o.call.arguments) }));
}

function toolResult(o) {
  const r = o.result;
  const line = $(`.call[data-call="${r.call}"]`) || callLine(r.call, r.tool);
  const status = $(".status", line);
  status.textContent = r.status + (r.error ? ": " + r.error.message : "");
  status.className = "status " + r.status;
  line.append(el("pre", { textContent: r.error ? r.error.code + ": " + r.error.message : pretty(r.output) }));
}

function proposal(o) {
  const p = o.proposal;
  const steps = p.plan.steps.map(s => el("li", { class: "step", data: { step: s.id } },
    el("label", {}, el("input", { type: "checkbox", checked: true, value: s.id }), " ",
      el("code", { textContent: s.id + " " + s.tool }), " " + (s.intent || "")),
    el("span", { class: "status" }),
    el("pre", { textContent: JSON.stringify(s.arguments) })));
  const reason = el("input", { placeholder: "reason (optional)" });
  const card = el("div", { class: "proposal", data: { id: p.id } },
    el("h3", { textContent: "Proposal: " + p.plan.goal }),
    el("ol", {}, ...steps),
    el("div", { class: "actions" },
      // A proposal withheld from this person shows no steps: theirs to
      // reject, never to apply.
      ...(steps.length ? [el("button", { type: "button", class: "apply", textContent: "Apply", onclick: () => apply(card) })] : []),
      el("button", { type: "button", class: "reject", textContent: "Reject", onclick: () => reject(card, reason.value) }),
      reason),
    el("div", { class: "outcome note" }));
  log.append(card);
  buttons(card);
}

// card is the proposal's card on the page, if it is there.
function card(id) { return $(`.proposal[data-id="${CSS.escape(id)}"]`); }

// path is the API path of the session, and of more under it: every part a
// person or a model wrote is encoded, so none can steer the request.
function path(...parts) {
  return ["/sessions", session, ...parts].map((p, i) => i === 0 ? p : encodeURIComponent(p)).join("/");
}

// A proposal's buttons: Reject until anything was applied; Apply while some
// step is not applied yet, or the run has not finished (a person's approval,
// an interruption), and never while a request of this page is under way.
function buttons(c) {
  const busy = c.dataset.busy === "1";
  const open = [...c.querySelectorAll(".step")].some(li => !li.dataset.applied);
  const unfinished = c.dataset.run && c.dataset.run !== "completed";
  const applyButton = $(".apply", c);
  if (applyButton) applyButton.disabled = busy || c.classList.contains("rejected") || !(open || unfinished);
  $(".reject", c).disabled = busy || c.classList.contains("rejected") || c.classList.contains("applied");
  c.querySelectorAll(".step input").forEach(b => b.disabled = busy || !!b.closest(".step").dataset.applied || c.classList.contains("rejected"));
}

// applying marks the steps a person decided to apply, before they run.
function applying(o) {
  const c = card(o.decision.proposal);
  if (!c) return;
  c.classList.add("applied");
  // Until what this apply did is in, applying again goes on with it.
  c.dataset.run = "applying";
  for (const li of c.querySelectorAll(".step")) {
    if ((o.decision.steps || []).includes(li.dataset.step) && !li.dataset.status) {
      li.dataset.applied = "1";
      $(".status", li).textContent = "applying…";
    }
  }
  $(".outcome", c).textContent = "Being applied by " + o.by + "…";
  buttons(c);
}

// applied marks each step of an applied proposal with what it did (the
// latest apply says the most: it holds the steps of those before); a step
// the run did not reach is "not run".
function applied(o) {
  const c = card(o.decision.proposal);
  if (!c) return;
  const d = o.decision;
  c.classList.add("applied");
  c.dataset.run = d.status;
  const byStep = Object.fromEntries((d.results || []).map(r => [r.step, r]));
  for (const li of c.querySelectorAll(".step")) {
    if (!(d.steps || []).includes(li.dataset.step)) continue;
    const r = byStep[li.dataset.step];
    li.dataset.applied = "1";
    li.dataset.status = r ? r.status : "not run";
    $(".status", li).textContent = li.dataset.status;
    li.querySelectorAll(".output").forEach(e => e.remove());
    if (r && (r.output !== undefined || r.error)) {
      li.append(el("pre", { class: "output", textContent: r.error ? r.error : pretty(r.output) }));
    }
  }
  $(".outcome", c).textContent = "Applied by " + o.by + ": the run is " + d.status + ".";
  buttons(c);
  refreshItems();
}

function rejected(o) {
  const c = card(o.decision.proposal);
  if (!c) return;
  c.classList.add("rejected");
  $(".outcome", c).textContent = "Rejected by " + o.by + (o.decision.reason ? ": " + o.decision.reason : ".");
  buttons(c);
}

// decide sends a person's decision on a proposal, its buttons off until the
// answer; the stream's applying, applied or rejected event shows it.
async function decide(c, what, body) {
  c.dataset.busy = "1";
  buttons(c);
  try {
    await api("POST", path("proposals", c.dataset.id, what), body);
  } catch (e) {
    $(".outcome", c).textContent = e.message;
  } finally {
    delete c.dataset.busy;
    buttons(c);
  }
}

function apply(c) {
  const boxes = [...c.querySelectorAll(".step input")];
  const picked = boxes.filter(b => b.checked).map(b => b.value);
  if (picked.length === 0) { $(".outcome", c).textContent = "Pick at least one step."; return; }
  $(".outcome", c).textContent = "Applying…";
  // Every step picked: the whole proposal (no list sent).
  return decide(c, "apply", picked.length === boxes.length ? {} : { steps: picked });
}

function reject(c, reason) { return decide(c, "reject", { reason }); }

const handlers = {
  text: message,
  message: message,
  tool_call: toolCall,
  tool_result: toolResult,
  proposal: proposal,
  applying: applying,
  applied: applied,
  rejected: rejected,
  compacted: o => log.append(el("div", { class: "note", textContent: "(the conversation so far was summarised for the planner)" })),
  error: o => log.append(el("div", { class: "note error", textContent: o.text })),
  done: o => {
    log.append(el("div", { class: "note", textContent: "turn " + o.turn + " ended: " + o.done.reason }));
    turnEnded(o.turn);
  },
};

// follow opens the session's event stream; EventSource reconnects by itself
// after a drop, resuming from the last event id it saw.
function follow() {
  if (stream) stream.close();
  log.replaceChildren();
  stream = new EventSource(`/api${path("events")}?after=0`);
  for (const [kind, handle] of Object.entries(handlers)) {
    stream.addEventListener(kind, e => {
      if (e.data === undefined) return; // the connection's own error event
      handle(JSON.parse(e.data));
      window.scrollTo(0, document.body.scrollHeight);
    });
  }
  // EventSource does not try again after an answer that is no stream (the
  // person has too many open, say): the page says so.
  const mine = stream;
  mine.addEventListener("error", () => {
    if (mine.readyState === EventSource.CLOSED && stream === mine) {
      problem("The live transcript stopped. Reload the page to follow it again.");
    }
  });
}

async function open(id) {
  problem("");
  try {
    const s = id ? (await api("GET", "/sessions/" + encodeURIComponent(id))).data
                 : (await api("POST", "/sessions", {})).data;
    session = s.id;
    location.hash = session;
    $("#session").textContent = "session " + session;
    $("#session").dataset.id = session;
    started = s.turns;
    ended = s.running ? s.turns - 1 : s.turns;
    settle();
    follow();
  } catch (e) {
    if (id && e.status === 404) return open("");
    problem(e.message);
  }
}

$("#compose").addEventListener("submit", async ev => {
  ev.preventDefault();
  const text = $("#message").value;
  if (!text.trim() || sending || running()) return;
  problem("");
  const to = session;
  sending = true;
  settle();
  try {
    const sent = (await api("POST", path("messages"), { text })).data;
    if (session === to) {
      $("#message").value = "";
      turnStarted(sent.turn);
    }
  } catch (e) {
    problem(e.message);
  } finally {
    sending = false;
    settle();
  }
});
$("#message").addEventListener("keydown", ev => {
  if (ev.key === "Enter" && !ev.shiftKey) { ev.preventDefault(); $("#compose").requestSubmit(); }
});
$("#cancel").addEventListener("click", () => api("POST", path("cancel")).catch(e => problem(e.message)));
$("#new").addEventListener("click", () => open(""));

async function whoAmI() {
  const res = await fetch("/me");
  if (res.status === 401) return signIn();
  if (!res.ok) return;
  const me = await res.json();
  $("#who").textContent = me.person + (me.scope.includes("create_item") ? " (read and write)" : " (read only)");
}

// The session to open is the page's hash; one that does not decode opens a
// new session.
let start = "";
try { start = decodeURIComponent(location.hash.slice(1)); } catch { start = ""; }
open(start);
refreshItems();
whoAmI();
