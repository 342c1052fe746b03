// session.mjs drives a streaming planner session through plannerapi with
// the official OpenAI Node client, as a client written elsewhere would:
//
//	node session.mjs http://127.0.0.1:8080      (or PLANNERAPI_URL=...)
//
// Request 1 streams with planner_mode and one function tool of the client's;
// the run hands that tool back (finish_reason "tool_calls"). Request 2, same
// session, sends the assistant message as the SDK accumulated it and the
// tool's result, and streams the answer. Both use the SDK's accumulating
// streaming helper, client.chat.completions.stream(), and read every raw
// chunk from its "chunk" event, plan_state chunks (no choices, a metadata
// object) among them.
//
// It prints one JSON line of findings on stdout. On any error it prints a
// line with "ok": false, the stage, the error and the raw chunks read so
// far, and exits 1. node_test.go runs it.
import { randomUUID } from 'node:crypto';
import OpenAI from 'openai';
import { VERSION } from 'openai/version';

const root = process.argv[2] || process.env.PLANNERAPI_URL;
if (!root) {
  console.error('usage: node session.mjs <server URL>   (or set PLANNERAPI_URL)');
  process.exit(2);
}
const baseURL = root.replace(/\/+$/, '').replace(/(\/v1)?$/, '/v1');

const client = new OpenAI({ baseURL, apiKey: 'test', maxRetries: 0, timeout: 30_000 });
const session = `node-${randomUUID()}`;
const model = 'planexec';

const tools = [
  {
    type: 'function',
    function: {
      name: 'confirm_with_traveller',
      description: 'Ask the traveller to confirm.',
      parameters: {
        type: 'object',
        properties: { flight: { type: 'string' } },
        required: ['flight'],
        additionalProperties: false,
      },
    },
  },
];

const findings = { ok: false, sdk_version: VERSION, session, stage: '' };
let raw = []; // the chunks of the request under way, as the SDK parsed them

// stream runs one streaming request with the SDK's helper and returns the
// completion it accumulated, the raw chunks and the SDK events seen.
async function stream(params) {
  raw = [];
  const events = [];
  const runner = client.chat.completions.stream(
    { model, ...params, planner_mode: true, stream_options: { include_usage: true } },
    { headers: { 'x-session-id': session } },
  );
  runner.on('chunk', (chunk) => raw.push(chunk));
  runner.on('content.done', () => events.push('content.done'));
  runner.on('tool_calls.function.arguments.done', (e) => events.push(`tool_calls.function.arguments.done:${e.name}`));
  const completion = await runner.finalChatCompletion();
  return { completion, chunks: raw, events };
}

// planState reads the plan_state chunks of a stream: how many, how many
// broke the rule (choices in them), and every status value they carry.
function planState(chunks, into) {
  for (const c of chunks) {
    if (!c.metadata || typeof c.metadata !== 'object' || c.metadata.type !== 'plan_state') continue;
    into.count++;
    if (Array.isArray(c.choices) && c.choices.length > 0) into.with_choices++;
    collectStatuses(c.metadata, into.statuses);
    if (c.metadata.plan_status) into.plan_statuses.add(c.metadata.plan_status);
  }
}

function collectStatuses(v, into) {
  if (!v || typeof v !== 'object') return;
  for (const [k, x] of Object.entries(v)) {
    if ((k === 'status' || k === 'plan_status') && typeof x === 'string') into.add(x);
    else collectStatuses(x, into);
  }
}

async function main() {
  const plan = { count: 0, with_choices: 0, statuses: new Set(), plan_statuses: new Set() };
  const messages = [{ role: 'user', content: 'Book the morning flight once the traveller confirms.' }];

  findings.stage = 'request 1';
  const first = await stream({ messages, tools });
  planState(first.chunks, plan);
  const choice = first.completion.choices[0];
  const calls = choice?.message?.tool_calls ?? [];
  findings.first = {
    finish_reason: choice?.finish_reason ?? null,
    content: choice?.message?.content ?? null,
    tool_calls: calls.map((c) => ({ id: c.id, type: c.type, name: c.function?.name, arguments: c.function?.arguments })),
    chunks: first.chunks.length,
    ids: [...new Set(first.chunks.map((c) => c.id))].length,
    events: first.events,
  };
  if (choice?.finish_reason !== 'tool_calls' || calls.length !== 1) {
    throw new Error(`request 1 ended with finish_reason ${JSON.stringify(choice?.finish_reason)} and ${calls.length} tool calls, want "tool_calls" and 1`);
  }

  // The assistant message goes back as the SDK accumulated it, as the SDK's
  // own tool loop (runTools) sends it, and the tool's result after it.
  findings.stage = 'request 2';
  const call = calls[0];
  findings.resent_assistant_message = choice.message;
  messages.push(choice.message, { role: 'tool', tool_call_id: call.id, content: JSON.stringify({ confirmed: true }) });
  const second = await stream({ messages, tools });
  planState(second.chunks, plan);
  const answer = second.completion.choices[0];
  findings.second = {
    finish_reason: answer?.finish_reason ?? null,
    chunks: second.chunks.length,
    ids: [...new Set(second.chunks.map((c) => c.id))].length,
    events: second.events,
    usage: second.completion.usage ?? null,
  };
  findings.answer = answer?.message?.content ?? null;
  findings.plan_state = { ...plan, statuses: [...plan.statuses], plan_statuses: [...plan.plan_statuses] };
  findings.stage = 'done';
  findings.ok = true;
}

try {
  await main();
  process.stdout.write(JSON.stringify(findings) + '\n');
} catch (err) {
  findings.error = {
    name: err?.constructor?.name ?? typeof err,
    message: String(err?.message ?? err),
    status: err?.status ?? null,
    body: err?.error ?? null,
  };
  findings.raw_chunks = raw;
  process.stdout.write(JSON.stringify(findings) + '\n');
  process.exit(1);
}
