//go:build unix

package proxy_test

import (
	"bufio"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/delegateos/delegateos/internal/mcptest"
)

// Attacks on the relay through the real binary. Each test here states
// the behaviour the README and docs/ARCHITECTURE.md promise and fails
// while the relay does otherwise.

// modernMeta is the _meta a 2026-07-28 request carries, which makes
// mcp-go's server serve it in the modern era (where subscriptions/listen
// exists).
const modernMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`

// lineClient talks to a process in exact bytes and hands back the exact
// lines it writes, for frames whose members Raw's decoding would hide.
type lineClient struct {
	t     *testing.T
	p     *mcptest.Process
	lines chan string
}

func newLineClient(t *testing.T, p *mcptest.Process) *lineClient {
	c := &lineClient{t: t, p: p, lines: make(chan string, 1024)}
	go func() {
		defer close(c.lines)
		r := bufio.NewReaderSize(p.Stdout, 1<<20)
		for {
			line, err := r.ReadString('\n')
			if len(line) > 0 {
				c.lines <- strings.TrimSuffix(line, "\n")
			}
			if err != nil {
				return
			}
		}
	}()
	return c
}

func (c *lineClient) send(frame string) {
	c.t.Helper()
	if _, err := c.p.Stdin.Write([]byte(frame + "\n")); err != nil {
		c.t.Fatal(err)
	}
}

// next returns the next line within d, or false.
func (c *lineClient) next(d time.Duration) (string, bool) {
	select {
	case l, ok := <-c.lines:
		return l, ok
	case <-time.After(d):
		return "", false
	}
}

// until returns the first line within d for which match holds.
func (c *lineClient) until(d time.Duration, match func(string) bool) (string, bool) {
	deadline := time.Now().Add(d)
	for {
		l, ok := c.next(time.Until(deadline))
		if !ok {
			return "", false
		}
		if match(l) {
			return l, true
		}
	}
}

// initialize performs the 2025-11-25 handshake.
func (c *lineClient) initialize() {
	c.t.Helper()
	c.send(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`)
	if _, ok := c.until(mcptest.CallTimeout, func(l string) bool { return strings.Contains(l, `"id":"init"`) }); !ok {
		c.t.Fatal("no answer to initialize")
	}
	c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
}

// response returns the next response line (no method) within CallTimeout.
func (c *lineClient) response() string {
	c.t.Helper()
	l, ok := c.until(mcptest.CallTimeout, func(l string) bool {
		var m struct{ Method string }
		_ = json.Unmarshal([]byte(l), &m)
		return m.Method == ""
	})
	if !ok {
		c.t.Fatal("no response within the timeout")
	}
	return l
}

// subscriptions/listen gates every URI in
// params.notifications.resourceSubscriptions. The relay reads those names
// exactly, and treats a listen without them as list-change opt-ins that
// need no token; the upstream (mcp-go, encoding/json) reads the same
// members in any letter case. A re-cased "Notifications" or
// "ResourceSubscriptions" therefore subscribes to any resource with no
// token at all.
func TestRedteamListenCaseVariantSubscribesUngated(t *testing.T) {
	t.Parallel()
	const secret = "file:///project/secret.md"
	for _, notifications := range []string{
		`"Notifications":{"resourceSubscriptions":["` + secret + `"]}`,
		`"notifications":{"ResourceSubscriptions":["` + secret + `"]}`,
		`"NOTIFICATIONS":{"RESOURCESUBSCRIPTIONS":["` + secret + `"]}`,
	} {
		t.Run(notifications[:16], func(t *testing.T) {
			t.Parallel()
			e := mcptest.NewEnv(t)
			wrap, record := recordUpstream(t, e)
			// No token at all: nothing may be subscribed to.
			p := e.StartProxy(mcptest.ProxyOptions{Policy: e.Policy(), Wrap: wrap})
			c := newLineClient(t, p)
			c.initialize()
			frame := `{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{` + modernMeta + `,` + notifications + `}}`
			c.send(frame)
			ack, _ := c.until(3*time.Second, func(l string) bool {
				return strings.Contains(l, "notifications/subscriptions/acknowledged") || strings.Contains(l, `"id":1`)
			})
			if strings.Contains(ack, "acknowledged") && strings.Contains(ack, secret) {
				t.Errorf("sent %s with no token; the upstream subscribed the client to %s: %s", frame, secret, ack)
			}
			c.send(`{"jsonrpc":"2.0","id":2,"method":"ping"}`)
			c.until(mcptest.CallTimeout, func(l string) bool { return strings.Contains(l, `"id":2`) })
			for _, line := range upstreamInput(t, record) {
				if strings.Contains(line, "subscriptions/listen") {
					t.Errorf("the upstream received an ungated subscriptions/listen: %s", line)
				}
			}
		})
	}
}

// The upstream tags every message of a subscriptions/listen stream with
// the stream's subscriptionId, the id of the request that opened it (MCP
// 2026-07-28). The relay renumbers requests but does not map that id
// back, so the client gets an id it never sent and cannot tell its
// streams apart.
func TestRedteamListenSubscriptionIDIsTheClients(t *testing.T) {
	t.Parallel()
	e := mcptest.NewEnv(t)
	p := e.StartProxy(mcptest.ProxyOptions{Policy: e.Policy()})
	c := newLineClient(t, p)
	c.initialize()
	// Only list-change opt-ins: needs no token, and is forwarded.
	c.send(`{"jsonrpc":"2.0","id":"stream-a","method":"subscriptions/listen","params":{` + modernMeta + `,"notifications":{"toolsListChanged":true}}}`)
	ack, ok := c.until(mcptest.CallTimeout, func(l string) bool { return strings.Contains(l, "notifications/subscriptions/acknowledged") })
	if !ok {
		t.Fatal("no notifications/subscriptions/acknowledged")
	}
	var m struct {
		Params struct {
			Meta map[string]json.RawMessage `json:"_meta"`
		} `json:"params"`
	}
	if err := json.Unmarshal([]byte(ack), &m); err != nil {
		t.Fatal(err)
	}
	if got := string(m.Params.Meta["io.modelcontextprotocol/subscriptionId"]); got != `"stream-a"` {
		t.Errorf("the stream opened by request \"stream-a\" is acknowledged as subscriptionId %s: %s", got, ack)
	}
}
