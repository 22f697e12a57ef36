// The MCP TypeScript SDK's Streamable HTTP client as most applications use
// it: connect through delegateos serve, call one tool, then client.close(),
// which ends no session (it sends no DELETE). Prints the session id.
//
//   node forget.mjs URL TOKEN TOOL ARGS_JSON
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, token, tool, argsJSON] = process.argv.slice(2);
const client = new Client({ name: "ts-forget", version: "1.0.0" }, { capabilities: {} });
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
await client.connect(transport);
await client.callTool({ name: tool, arguments: JSON.parse(argsJSON) });
console.log(transport.sessionId);
await client.close();
process.exit(0);
