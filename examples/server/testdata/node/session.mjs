// session.mjs drives a planner session of examples/server with the official
// OpenAI Node client and a person's API key, as a client written elsewhere
// would:
//
//	PLANEXEC_API_KEY=<key> node session.mjs http://127.0.0.1:8080
//
// The key goes where any OpenAI key goes: the client's apiKey, which the SDK
// sends as Authorization: Bearer <key>. A client with another key is refused
// first (the SDK's AuthenticationError, HTTP 401); then the session streams,
// with planner_mode in the body and the session id in a header, to its
// answer (the server approves the booking: -yes).
//
// It prints one JSON line of findings on stdout. On any error it prints a
// line with "ok": false, the stage and the error, and exits 1.
import { randomUUID } from 'node:crypto';
import OpenAI from 'openai';
import { VERSION } from 'openai/version';

const root = process.argv[2];
const apiKey = process.env.PLANEXEC_API_KEY;
if (!root || !apiKey) {
  console.error('usage: PLANEXEC_API_KEY=<key> node session.mjs <server URL>');
  process.exit(2);
}
const baseURL = root.replace(/\/+$/, '') + '/v1';
const session = `node-${randomUUID()}`;
const request = {
  model: 'planexec',
  messages: [{ role: 'user', content: 'Get me to New York on 14 December, three nights near the office.' }],
  stream: true,
  planner_mode: true,
};
const options = { headers: { 'x-session-id': session } };
const findings = { ok: false, sdk_version: VERSION, session, stage: '' };

async function main() {
  findings.stage = 'another key';
  const stranger = new OpenAI({ baseURL, apiKey: 'pex-not-anyones-key-000000', maxRetries: 0, timeout: 30_000 });
  try {
    await stranger.chat.completions.create(request, options);
    throw new Error('a request with a key that is no one\'s was served');
  } catch (err) {
    if (!(err instanceof OpenAI.AuthenticationError)) throw err;
    findings.refused = { status: err.status, code: err.code ?? null };
  }

  findings.stage = 'session';
  const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 60_000 });
  const stream = await client.chat.completions.create(request, options);
  let content = '';
  const planStatuses = new Set();
  for await (const chunk of stream) {
    for (const c of chunk.choices ?? []) content += c.delta?.content ?? '';
    if (chunk.metadata?.type === 'plan_state' && chunk.metadata.plan_status) planStatuses.add(chunk.metadata.plan_status);
  }
  findings.answer = content;
  findings.plan_statuses = [...planStatuses];
  findings.stage = 'done';
  findings.ok = true;
}

try {
  await main();
  process.stdout.write(JSON.stringify(findings) + '\n');
} catch (err) {
  findings.error = { name: err?.constructor?.name ?? typeof err, message: String(err?.message ?? err), status: err?.status ?? null };
  process.stdout.write(JSON.stringify(findings) + '\n');
  process.exit(1);
}
