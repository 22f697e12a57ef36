package mcptest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

// Raw is a connection to a Process that writes exact bytes and reads
// newline-delimited JSON-RPC frames, for what mcp-go's client cannot send.
type Raw struct {
	t     testing.TB
	p     *Process
	lines chan []byte
}

// RawMessage is a frame read from the process, decoded loosely.
type RawMessage struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Result json.RawMessage `json:"result"`
	Error  *RawError       `json:"error"`
}

// RawError is the error member of a RawMessage.
type RawError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
}

// Raw starts reading the process's stdout line by line.
func (p *Process) Raw() *Raw {
	c := &Raw{t: p.t, p: p, lines: make(chan []byte, 1024)}
	go func() {
		defer close(c.lines)
		r := bufio.NewReaderSize(p.Stdout, 1<<20)
		for {
			line, err := r.ReadBytes('\n')
			if len(line) > 0 {
				c.lines <- line
			}
			if err != nil {
				return
			}
		}
	}()
	return c
}

// Write writes b to the process's stdin as it is.
func (c *Raw) Write(b []byte) {
	c.t.Helper()
	if _, err := c.p.Stdin.Write(b); err != nil {
		c.t.Fatalf("writing to the process: %v", err)
	}
}

// Send writes line and a newline.
func (c *Raw) Send(line string) {
	c.t.Helper()
	c.Write([]byte(line + "\n"))
}

// NextWithin returns the next frame, or false if none came within d. The
// process closing its stdout, or a frame that is not JSON, fails the test.
func (c *Raw) NextWithin(d time.Duration) (RawMessage, bool) {
	c.t.Helper()
	select {
	case line, ok := <-c.lines:
		if !ok {
			c.t.Fatal("the process closed its stdout")
		}
		var m RawMessage
		if err := json.Unmarshal(line, &m); err != nil {
			c.t.Fatalf("frame from the process is not JSON: %q", Clip(line))
		}
		return m, true
	case <-time.After(d):
		return RawMessage{}, false
	}
}

// Next returns the next frame, failing the test if none comes within
// CallTimeout.
func (c *Raw) Next() RawMessage {
	c.t.Helper()
	m, ok := c.NextWithin(CallTimeout)
	if !ok {
		c.t.Fatalf("no frame from the process within %s", CallTimeout)
	}
	return m
}

// Response skips notifications and requests and returns the next
// response, which must have the given id (raw JSON: `"init"`, `5`, `null`).
func (c *Raw) Response(id string) RawMessage {
	c.t.Helper()
	for {
		m := c.Next()
		if m.Method != "" {
			continue
		}
		if string(m.ID) != id {
			c.t.Fatalf("response with id %s, want %s", m.ID, id)
		}
		return m
	}
}

// Initialize performs the 2025-11-25 handshake.
func (c *Raw) Initialize() {
	c.t.Helper()
	c.Send(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`)
	if m := c.Response(`"init"`); m.Error != nil {
		c.t.Fatalf("initialize: %+v", m.Error)
	}
	c.Send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
}

// CallFrame is a tools/call request line; id is raw JSON.
func CallFrame(id, tool string, args map[string]any) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, id, tool, MustJSON(args))
}

// ResultText is the first text item of a successful tools/call result,
// failing the test for an error or a failed tool.
func ResultText(t testing.TB, m RawMessage) string {
	t.Helper()
	if m.Error != nil {
		t.Fatalf("error %d %s", m.Error.Code, m.Error.Message)
	}
	var r struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		IsError bool `json:"isError"`
	}
	if err := json.Unmarshal(m.Result, &r); err != nil || len(r.Content) == 0 || r.IsError {
		t.Fatalf("unexpected result %s", Clip(m.Result))
	}
	return r.Content[0].Text
}
