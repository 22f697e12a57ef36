// The MCP TypeScript SDK's own OAuth client authorizing against delegateos
// serve --authorize: an OAuthClientProvider handed to the Streamable HTTP
// transport, which discovers the metadata, registers, and sends the user to
// the consent page. The "user" is headless Chromium (chromium.mjs): it signs in with the consent
// password, unticks the capabilities named in UNTICK, and approves. Then the
// client calls TOOL_OK and TOOL_REFUSED and writes what happened to OUT.
//
//   node oauth.mjs MCP_URL CHROMIUM PASSWORD_FILE UNTICK OUT
//
// UNTICK is a comma-separated list of capabilities (namespace:action:resource)
// to untick on the consent page, "" for none. With CLIENT_ID (and
// CALLBACK_PORT) in the environment the client is one registered
// beforehand (serve --oauth-client), and does not register itself.
import { randomUUID } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { approveInChromium } from "./chromium.mjs";

const [mcpURL, chromiumPath, passwordFile, untick, out] = process.argv.slice(2);
const password = readFileSync(passwordFile, "utf8").trim();
const report = { page: null, calls: {} };

// The redirect URI: a loopback server that takes the code.
let gotCode;
const codeArrived = new Promise((resolve) => (gotCode = resolve));
const callback = createServer((req, res) => {
  const u = new URL(req.url, "http://127.0.0.1");
  res.writeHead(200, { "Content-Type": "text/plain" });
  res.end("done\n");
  if (u.pathname === "/callback") gotCode(u.searchParams);
});
await new Promise((r) => callback.listen(Number(process.env.CALLBACK_PORT || 0), "127.0.0.1", r));
const redirectUrl = `http://127.0.0.1:${callback.address().port}/callback`;

class Provider {
  constructor() {
    this._state = randomUUID();
    if (process.env.CLIENT_ID) this._client = { client_id: process.env.CLIENT_ID };
  }
  get redirectUrl() {
    return redirectUrl;
  }
  get clientMetadata() {
    return {
      client_name: "TypeScript SDK e2e",
      redirect_uris: [redirectUrl],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
    };
  }
  state() {
    return this._state;
  }
  clientInformation() {
    return this._client;
  }
  saveClientInformation(c) {
    this._client = c;
  }
  tokens() {
    return this._tokens;
  }
  saveTokens(t) {
    this._tokens = t;
  }
  saveCodeVerifier(v) {
    this._verifier = v;
  }
  codeVerifier() {
    return this._verifier;
  }
  async redirectToAuthorization(url) {
    report.authorizationURL = url.toString();
    report.page = await approveInChromium(url.toString(), { chromiumPath, password, untick });
  }
}

const provider = new Provider();
const started = performance.now();
const first = new Client({ name: "ts-oauth", version: "1.0.0" }, { capabilities: {} });
try {
  await first.connect(new StreamableHTTPClientTransport(new URL(mcpURL), { authProvider: provider }));
  report.error = "connected without authorizing";
} catch (e) {
  if (!(e instanceof UnauthorizedError)) throw e;
}
const params = await codeArrived;
if (!params.get("code")) throw new Error("the consent page sent back " + params.toString());
const transport = new StreamableHTTPClientTransport(new URL(mcpURL), { authProvider: provider });
await transport.finishAuth(params.get("code"));
const client = new Client({ name: "ts-oauth", version: "1.0.0" }, { capabilities: {} });
await client.connect(transport);
report.calls.echo = await client.callTool({ name: "echo", arguments: { text: "via oauth" } });
report.firstCallMillis = performance.now() - started;
try {
  report.calls.write_file = await client.callTool({ name: "write_file", arguments: { path: "/project/x.md", content: "no" } });
} catch (e) {
  report.calls.write_file = { error: { code: e.code, message: e.message } };
}
report.tokenType = provider.tokens()?.token_type;
report.scope = provider.tokens()?.scope;
report.clientId = provider.clientInformation()?.client_id;
writeFileSync(out, JSON.stringify(report));
try {
  await transport.terminateSession();
  await client.close();
} catch {}
callback.close();
process.exit(0);
