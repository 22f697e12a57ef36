// The MCP TypeScript SDK's Streamable HTTP client calling one tool through
// delegateos serve, and writing what happened as JSON to a file.
//
//   node httpcall.mjs URL TOKEN OUT TOOL ARGS_JSON
//
// TOKEN goes in an Authorization: Bearer header. OUT receives
// {result | error} as approve.mjs writes it.
import { writeFileSync } from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, token, out, tool, argsJSON] = process.argv.slice(2);
const client = new Client({ name: "ts-httpcall", version: "1.0.0" }, { capabilities: {} });
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
let report;
try {
  await client.connect(transport);
  const result = await client.callTool({ name: tool, arguments: JSON.parse(argsJSON) });
  report = { result, asked: [] };
} catch (err) {
  report = { error: { code: err.code, message: err.message, data: err.data }, asked: [] };
}
writeFileSync(out, JSON.stringify(report));
try {
  await transport.terminateSession();
  await client.close();
} catch {}
process.exit(0);
