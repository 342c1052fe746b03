// refused.mjs streams one planner request through plannerapi with the
// official OpenAI Node client, to a server whose run fails after the
// stream began, and reports what the client made of the failure:
//
//	node refused.mjs http://127.0.0.1:8080      (or PLANNERAPI_URL=...)
//
// It prints one JSON line on stdout: the SDK version, how many chunks came
// before the failure, and the error the SDK threw (its class, status,
// type, code and message), or "error": null if none was thrown.
// node_test.go runs it.
import { randomUUID } from 'node:crypto';
import OpenAI from 'openai';
import { VERSION } from 'openai/version';

const root = process.argv[2] || process.env.PLANNERAPI_URL;
if (!root) {
  console.error('usage: node refused.mjs <server URL>   (or set PLANNERAPI_URL)');
  process.exit(2);
}
const baseURL = root.replace(/\/+$/, '').replace(/(\/v1)?$/, '/v1');
const client = new OpenAI({ baseURL, apiKey: 'test', maxRetries: 0, timeout: 30_000 });

const findings = { sdk_version: VERSION, chunks: 0, error: null };
try {
  const stream = await client.chat.completions.create(
    {
      model: 'planexec',
      messages: [{ role: 'user', content: 'Find a flight.' }],
      stream: true,
      planner_mode: true,
    },
    { headers: { 'x-session-id': `node-${randomUUID()}` } },
  );
  for await (const chunk of stream) {
    findings.chunks++;
  }
} catch (err) {
  findings.error = {
    name: err?.constructor?.name ?? typeof err,
    status: err?.status ?? null,
    type: err?.type ?? null,
    code: err?.code ?? null,
    message: String(err?.message ?? err),
  };
}
process.stdout.write(JSON.stringify(findings) + '\n');
