// The TypeScript SDK's Streamable HTTP client through delegateos serve, in
// front of the docserver example (--diagnostics):
//
//   node tsclient.mjs URL TOKEN_FILE
//
// Connects with the token in its Authorization header and checks, each as
// one line of JSON on stdout ({check, ok, detail}): the tool list is the
// token's view, a granted call succeeds and a refused one gets the gate's
// -32001 error, sampling, elicitation and roots requests reach the client
// and its answers go back, progress arrives, and an aborted call is
// cancelled (notifications/cancelled) without disturbing the session.
// Exits 1 if any check fails.

import { readFileSync } from 'node:fs';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ListRootsRequestSchema,
} from '@modelcontextprotocol/sdk/types.js';

const [url, tokenFile] = process.argv.slice(2);
const token = readFileSync(tokenFile, 'utf8').trim();
let failed = 0;

function check(name, ok, detail) {
  if (!ok) failed++;
  console.log(JSON.stringify({ check: name, ok: !!ok, detail }));
}

const client = new Client(
  { name: 'delegateos-tsclient', version: '1' },
  { capabilities: { sampling: {}, elicitation: {}, roots: {} } },
);
const seen = { sampling: 0, elicitation: 0, roots: 0 };
client.setRequestHandler(CreateMessageRequestSchema, async () => {
  seen.sampling++;
  return { role: 'assistant', content: { type: 'text', text: 'four' }, model: 'tsclient' };
});
client.setRequestHandler(ElicitRequestSchema, async () => {
  seen.elicitation++;
  return { action: 'accept', content: { answer: 'yes' } };
});
client.setRequestHandler(ListRootsRequestSchema, async () => {
  seen.roots++;
  return { roots: [{ uri: 'file:///tsclient', name: 'tsclient' }] };
});

const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
const text = (r) => (r?.content ?? []).map((c) => c.text ?? '').join(' ');

try {
  await client.connect(transport);
  check('session', !!transport.sessionId, { sessionId: transport.sessionId ? 'set' : 'none' });

  const tools = (await client.listTools()).tools.map((t) => t.name);
  check('tools/list is the token view', tools.includes('echo') && !tools.includes('write_file') && !tools.includes('crash'), { tools });

  const echo = await client.callTool({ name: 'echo', arguments: { text: 'from typescript' } });
  check('granted call', text(echo).includes('from typescript'), { text: text(echo).slice(0, 80) });

  try {
    await client.callTool({ name: 'write_file', arguments: { path: '/x.md', content: 'no' } });
    check('refused call', false, 'write_file was not refused');
  } catch (e) {
    check('refused call', e.code === -32001 && /DCT verification failed/.test(e.message), { code: e.code, message: e.message });
  }

  const sample = await client.callTool({ name: 'sample', arguments: { prompt: 'two plus two' } });
  check('sampling', seen.sampling === 1 && text(sample).includes('four'), { seen: seen.sampling, text: text(sample) });

  const elicit = await client.callTool({ name: 'elicit', arguments: { message: 'proceed?' } });
  check('elicitation', seen.elicitation === 1 && text(elicit).includes('yes'), { seen: seen.elicitation, text: text(elicit) });

  const roots = await client.callTool({ name: 'roots', arguments: {} });
  check('roots', seen.roots === 1 && text(roots).includes('file:///tsclient'), { seen: seen.roots, text: text(roots) });

  const progress = [];
  const slow = await client.callTool({ name: 'slow', arguments: { steps: 3, delay_ms: 20 } }, undefined, {
    onprogress: (p) => progress.push(p.progress),
  });
  // The docserver may send a call's last progress after its answer.
  check('progress', text(slow) === 'done 3' && progress.length >= 2 && progress[0] === 1 && progress[1] === 2, { progress });

  const abort = new AbortController();
  const firstProgress = new Promise((resolve) => {
    client
      .callTool({ name: 'slow', arguments: { steps: 200, delay_ms: 50 } }, undefined, {
        signal: abort.signal,
        onprogress: () => resolve(),
      })
      .then(
        () => check('cancellation', false, 'the aborted call completed'),
        (e) => check('cancellation', /abort|cancel/i.test(String(e)), { error: String(e) }),
      );
  });
  await firstProgress;
  abort.abort('tsclient cancels');
  await new Promise((r) => setTimeout(r, 200));
  const after = await client.callTool({ name: 'echo', arguments: { text: 'after cancel' } });
  check('session after cancellation', text(after).includes('after cancel'), { text: text(after).slice(0, 40) });

  await transport.terminateSession();
  check('DELETE', true, {});
  await client.close();
} catch (e) {
  check('no unexpected error', false, { error: String(e), stack: e?.stack });
}
process.exit(failed ? 1 : 0);
