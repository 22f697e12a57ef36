package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
)

// serve is the built-in upstream: a minimal stdio MCP server with one tool,
// echo, answering every request as soon as it is read. Responses are
// flushed when no more input is waiting, as an efficient server would.
func serve(in io.Reader, out io.Writer) error {
	r := bufio.NewReaderSize(in, 64<<10)
	w := bufio.NewWriterSize(out, 64<<10)
	for {
		line, err := r.ReadSlice('\n')
		if errors.Is(err, io.EOF) {
			return w.Flush()
		}
		if err != nil {
			return err
		}
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				ProtocolVersion string `json:"protocolVersion"`
				Name            string `json:"name"`
				Arguments       struct {
					Text string `json:"text"`
				} `json:"arguments"`
			} `json:"params"`
		}
		if err := json.Unmarshal(line, &msg); err != nil {
			return err
		}
		if msg.ID == nil || msg.Method == "" {
			continue // a notification, or a response to a request we never send
		}
		var result any
		switch msg.Method {
		case "initialize":
			v := msg.Params.ProtocolVersion
			if v == "" {
				v = "2025-06-18"
			}
			result = map[string]any{
				"protocolVersion": v,
				"capabilities":    map[string]any{"tools": map[string]any{}},
				"serverInfo":      map[string]any{"name": "proxybench", "version": "1"},
			}
		case "tools/list":
			result = map[string]any{"tools": []any{map[string]any{
				"name":        "echo",
				"description": "returns its text",
				"inputSchema": map[string]any{"type": "object", "properties": map[string]any{"text": map[string]any{"type": "string"}}},
			}}}
		case "tools/call":
			result = toolResult{Content: []textContent{{Type: "text", Text: msg.Params.Arguments.Text}}}
		default:
			result = map[string]any{}
		}
		b, err := json.Marshal(response{JSONRPC: "2.0", ID: msg.ID, Result: result})
		if err != nil {
			return err
		}
		w.Write(b)
		w.WriteByte('\n')
		if r.Buffered() == 0 {
			if err := w.Flush(); err != nil {
				return err
			}
		}
	}
}

type response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result"`
}

type toolResult struct {
	Content []textContent `json:"content"`
	IsError bool          `json:"isError"`
}

type textContent struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// relay is the plain relay: it starts the command and copies bytes both
// ways, with no framing and no parsing, until the upstream's output ends.
func relay(args []string) int {
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) == 0 {
		os.Stderr.WriteString("usage: proxybench relay -- COMMAND [ARGS...]\n")
		return 2
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stderr = os.Stderr
	upIn, err := cmd.StdinPipe()
	if err != nil {
		return fail("relay", err)
	}
	upOut, err := cmd.StdoutPipe()
	if err != nil {
		return fail("relay", err)
	}
	if err := cmd.Start(); err != nil {
		return fail("relay", err)
	}
	go func() {
		copyBytes(upIn, os.Stdin)
		upIn.Close()
	}()
	copyBytes(os.Stdout, upOut)
	if err := cmd.Wait(); err != nil {
		return fail("relay: upstream", err)
	}
	return 0
}

// copyBytes copies with a plain buffer: read whatever is there, write it.
func copyBytes(dst io.Writer, src io.Reader) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func fail(what string, err error) int {
	os.Stderr.WriteString("proxybench " + what + ": " + err.Error() + "\n")
	return 1
}
