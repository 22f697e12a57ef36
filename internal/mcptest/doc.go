// Package mcptest runs MCP processes for end-to-end tests: the real
// delegateos binary as `delegateos proxy -- UPSTREAM`, or an MCP server on
// its own, on pipes the test owns, with mark3labs/mcp-go's client or a raw
// connection that writes exact bytes.
//
// A proxy in front of the docserver (examples/docserver), with a policy
// and a session token, and a connected client:
//
//	e := mcptest.NewEnv(t)
//	tok := e.Mint(nil, "docs:read:/project/**", "mcp:echo:*")
//	s := e.StartProxy(mcptest.ProxyOptions{Policy: e.Policy(), Token: tok}).Connect(mcptest.SessionOptions{})
//	res := s.Call(t, "echo", map[string]any{"text": "hi"}).OK(t, "echo")
//
// The same proxy on raw newline-delimited JSON-RPC:
//
//	c := e.StartProxy(mcptest.ProxyOptions{Policy: e.Policy(), Token: tok}).Raw()
//	c.Initialize()
//	c.Send(mcptest.CallFrame("7", "echo", map[string]any{"text": "hi"}))
//	m := c.Response("7")
//
// # Binaries
//
// Delegateos and Docserver build ./cmd/delegateos and ./examples/docserver
// once per test binary (Build any other package); delegateos gets the race
// detector when the tests run with it (RaceEnabled). TestMain should be
// os.Exit(mcptest.Run(m)), which removes the binaries afterwards. CLI runs
// a delegateos command.
//
// # Keys, tokens and policies
//
// An Env is a test's directory, a trusted Root, the Agent it delegates to
// and a copy of the docserver's documents (Docs). Env.Mint issues tokens;
// Attenuate, Serialize and SignAttenuation build chains, honest or forged;
// Caps, NewKey and NewDelegationID help. A Policy is written as YAML:
// Env.Policy trusts the root and maps the document tools (DocRules); add
// Priced or other Rules, and set its fields.
//
// # Processes
//
// StartProxy (or Env.StartProxy) runs delegateos proxy as ProxyOptions say,
// logging to a file; Start runs any command line. The Process has the
// command, its stdin, its stdout (a FrameChecker) and its stderr, and
// reads the proxy's log: LogWith, WaitLog, UpstreamPID. When the test ends
// the process's stdin is closed and it must exit (it is killed after 20s)
// with the status wanted, having written only JSON-RPC frames to stdout
// and no race report; a proxy's upstream must be gone, and, unless another
// exit status was wanted, must have exited by itself when its input
// closed.
//
// # Clients
//
// Process.Connect performs the MCP handshake with mcp-go's client and
// returns a Session: Call, CallAs (a token in params._delegateos) and
// CallExtra return a Result with the JSON-RPC error a refused call got;
// SetExtraParams adds params to every later call; ToolPages lists the tools
// page by page; Notifications, Progress and Wire.IncomingMethods show what
// the server sent; Wire.SendRequest sends any other request. Sampler, Roots and
// Elicitor answer the server's requests. Process.Raw writes and reads
// frames as they are, with timeouts.
//
// Context bounds a request by CallTimeout; Eventually waits up to
// WaitTimeout for a condition.
package mcptest
