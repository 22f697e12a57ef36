//go:build unix

package proxy_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
)

// silentUpstreamEnv makes the test binary, started as an upstream, an MCP
// server that follows the specification's advice on cancellation to the
// letter: it answers initialize, ping and tools/list, and never answers a
// tools/call (every call is cancelled before it would finish).
const silentUpstreamEnv = "DELEGATEOS_TEST_SILENT_UPSTREAM"

// silentUpstream is the command line of the silent upstream.
func silentUpstream() []string {
	return []string{"env", silentUpstreamEnv + "=1", os.Args[0]}
}

// erringAtEOFUpstream is the silent upstream that, when its input ends,
// answers each call it was sent with a JSON-RPC error (as a server that
// cancels its work when its client goes away may).
func erringAtEOFUpstream() []string {
	return []string{"env", silentUpstreamEnv + "=err-at-eof", os.Args[0]}
}

func runSilentUpstream() int {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 16<<20)
	out := bufio.NewWriter(os.Stdout)
	var calls []json.RawMessage
	for in.Scan() {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(in.Bytes(), &m) != nil || m.ID == nil {
			continue
		}
		var result string
		switch m.Method {
		case "initialize":
			result = `{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"silent","version":"0"}}`
		case "ping":
			result = `{}`
		case "tools/list":
			result = `{"tools":[{"name":"slow","inputSchema":{"type":"object"}},{"name":"echo","inputSchema":{"type":"object"}}]}`
		case "tools/call":
			calls = append(calls, append(json.RawMessage(nil), m.ID...))
			continue
		default:
			continue
		}
		fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"result":%s}`+"\n", m.ID, result)
		out.Flush()
	}
	if os.Getenv(silentUpstreamEnv) == "err-at-eof" {
		for _, id := range calls {
			fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32000,"message":"the client went away"}}`+"\n", id)
		}
		out.Flush()
	}
	return 0
}
