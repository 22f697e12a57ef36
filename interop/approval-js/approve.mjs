// The MCP TypeScript SDK's client, speaking MCP on this process's stdin and
// stdout to a delegateos proxy: it declares form elicitation (unless the
// mode is "none"), answers every elicitation/create as the mode says, makes
// one tools/call, and writes what happened as JSON to a file.
//
//   node approve.mjs MODE OUT TOOL ARGS_JSON
//
// MODE is accept (approve ticked), decline, cancel or none (no elicitation
// capability). OUT receives {result | error, asked: [params...]}.
import { writeFileSync } from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const [mode, out, tool, argsJSON] = process.argv.slice(2);
const capabilities = mode === "none" ? {} : { elicitation: { form: {} } };
const client = new Client({ name: "ts-approver", version: "1.0.0" }, { capabilities });
const asked = [];
if (mode !== "none") {
  client.setRequestHandler(ElicitRequestSchema, async (request) => {
    asked.push(request.params);
    if (mode === "accept") {
      return { action: "accept", content: { approve: true } };
    }
    return { action: mode };
  });
}

// The SDK's stdio transport reads and writes this process's stdio; the
// test wires them to the proxy.
await client.connect(new StdioServerTransport());
let report;
try {
  const result = await client.callTool({ name: tool, arguments: JSON.parse(argsJSON) });
  report = { result, asked };
} catch (err) {
  report = { error: { code: err.code, message: err.message, data: err.data }, asked };
}
writeFileSync(out, JSON.stringify(report));
await client.close();
process.exit(0);
