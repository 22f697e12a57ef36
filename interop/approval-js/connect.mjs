// The MCP TypeScript SDK's stdio client starting a server command itself,
// as Claude Desktop or Cursor do, and writing what connecting showed as
// JSON to a file: {connected: true} or {error: {code, message}}, the error
// being what the SDK gives the application to show.
//
//   node connect.mjs OUT COMMAND [ARGS...]
//
// The command's standard error is not shown to the application: it goes
// to this process's standard error.
import { writeFileSync } from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [out, command, ...args] = process.argv.slice(2);
const client = new Client({ name: "ts-connect", version: "1.0.0" }, { capabilities: {} });
const transport = new StdioClientTransport({ command, args, stderr: "inherit" });
let report;
try {
  await client.connect(transport);
  report = { connected: true };
} catch (err) {
  report = { error: { code: err.code, message: err.message } };
}
writeFileSync(out, JSON.stringify(report));
try {
  await client.close();
} catch {}
process.exit(0);
