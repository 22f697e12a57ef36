package serve

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/delegateos/delegateos/proxy"
)

// Bridge is the client side of an HTTP upstream for the relay: it reads
// newline-delimited frames from in (what the relay forwards), sends each to
// the MCP Streamable HTTP server at url as its own POST, and writes every
// message the server sends back (JSON bodies, SSE events, the standalone
// GET stream) to out, one a line. With it an HTTP MCP server is an upstream
// like a stdio one: the relay, and so the gate, sees the same frames.
//
// A stream that breaks before its response is resumed with Last-Event-ID
// when the server gave event ids. A request the server refuses at the HTTP
// level is answered with a JSON-RPC error under its id; a session the
// server no longer knows (404) ends the bridge with an error, which ends
// the relay's session. At EOF on in the session is ended with DELETE.
func Bridge(ctx context.Context, url string, header http.Header, client *http.Client, in io.Reader, out io.Writer) error {
	if client == nil {
		client = http.DefaultClient
	}
	b := &bridge{url: url, header: header, client: client, out: bufio.NewWriter(out)}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	b.fail = cancel
	br := bufio.NewReaderSize(in, 64<<10)
	var wg sync.WaitGroup
	for {
		line, err := br.ReadBytes('\n')
		if f := bytes.TrimRight(line, "\r\n"); len(f) > 0 {
			if err := context.Cause(ctx); err != nil && ctx.Err() != nil {
				return err
			}
			m, rerr := proxy.ReadRelayMessage(f)
			if rerr != nil {
				continue
			}
			if m.Kind == proxy.KindRequest && m.Method == "initialize" {
				// Everything else waits for the session id.
				b.send(ctx, f, m)
				b.listen(ctx, &wg)
			} else {
				wg.Add(1)
				go func() { defer wg.Done(); b.send(ctx, f, m) }()
			}
		}
		if err != nil {
			break
		}
	}
	b.end()
	cancel(nil)
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

type bridge struct {
	url    string
	header http.Header
	client *http.Client
	fail   context.CancelCauseFunc

	mu      sync.Mutex // guards session, version and out
	session string
	version string
	out     *bufio.Writer
}

func (b *bridge) write(frame []byte) {
	var c bytes.Buffer
	if json.Compact(&c, frame) != nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.out.Write(c.Bytes())
	b.out.WriteByte('\n')
	b.out.Flush()
}

func (b *bridge) request(ctx context.Context, method string, body []byte) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, b.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	for k, v := range b.header {
		req.Header[k] = v
	}
	b.mu.Lock()
	sid, ver := b.session, b.version
	b.mu.Unlock()
	if sid != "" {
		req.Header.Set(HeaderSessionID, sid)
	}
	if ver != "" {
		req.Header.Set(HeaderProtocolVersion, ver)
	}
	return req, nil
}

// send POSTs one frame and relays what comes back.
func (b *bridge) send(ctx context.Context, frame []byte, m proxy.Message) {
	req, err := b.request(ctx, http.MethodPost, frame)
	if err != nil {
		b.answerError(m, err.Error())
		return
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	res, err := b.client.Do(req)
	if err != nil {
		b.answerError(m, "the upstream MCP server cannot be reached: "+err.Error())
		return
	}
	defer res.Body.Close()
	if m.Method == "initialize" {
		if sid := res.Header.Get(HeaderSessionID); sid != "" {
			b.mu.Lock()
			b.session = sid
			b.mu.Unlock()
		}
	}
	switch {
	case res.StatusCode == http.StatusNotFound && m.Method != "initialize" && b.hasSession():
		b.answerError(m, "the upstream MCP server ended the session")
		b.fail(errors.New("the upstream MCP server ended the session (HTTP 404)"))
		return
	case res.StatusCode == http.StatusAccepted:
		return
	case res.StatusCode >= 300:
		body, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
		b.answerError(m, fmt.Sprintf("the upstream MCP server answered HTTP %d: %s", res.StatusCode, strings.TrimSpace(string(body))))
		return
	}
	if strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		b.readStream(ctx, res.Body, m)
		return
	}
	body, err := io.ReadAll(res.Body)
	if err != nil {
		b.answerError(m, "reading the upstream's answer failed: "+err.Error())
		return
	}
	b.noteVersion(m, body)
	b.write(body)
}

func (b *bridge) hasSession() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.session != ""
}

// noteVersion keeps the protocol version an initialize result names.
func (b *bridge) noteVersion(m proxy.Message, body []byte) {
	if m.Method != "initialize" {
		return
	}
	var r struct {
		Result struct {
			ProtocolVersion string `json:"protocolVersion"`
		} `json:"result"`
	}
	if json.Unmarshal(body, &r) == nil && r.Result.ProtocolVersion != "" {
		b.mu.Lock()
		b.version = r.Result.ProtocolVersion
		b.mu.Unlock()
	}
}

// readStream relays an SSE stream's messages until the response to m
// (when m is a request), resuming it with Last-Event-ID if it breaks.
func (b *bridge) readStream(ctx context.Context, body io.ReadCloser, m proxy.Message) {
	lastID := ""
	for attempt := 0; ; attempt++ {
		done, id := b.events(body, m)
		body.Close()
		if id != "" {
			lastID = id
		}
		if done || m.Kind != proxy.KindRequest || ctx.Err() != nil {
			return
		}
		if lastID == "" || attempt >= 5 {
			b.answerError(m, "the upstream MCP server's stream ended before its answer")
			return
		}
		time.Sleep(time.Duration(attempt) * 100 * time.Millisecond)
		req, err := b.request(ctx, http.MethodGet, nil)
		if err != nil {
			return
		}
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Last-Event-ID", lastID)
		res, err := b.client.Do(req)
		if err != nil || res.StatusCode != http.StatusOK {
			if res != nil {
				res.Body.Close()
			}
			b.answerError(m, "the upstream MCP server's stream ended before its answer and could not be resumed")
			return
		}
		body = res.Body
	}
}

// events reads one SSE stream: it reports whether the response to m came,
// and the last event id.
func (b *bridge) events(r io.Reader, m proxy.Message) (done bool, lastID string) {
	br := bufio.NewReaderSize(r, 64<<10)
	var data bytes.Buffer
	for {
		line, err := br.ReadBytes('\n')
		t := bytes.TrimRight(line, "\r\n")
		switch {
		case len(t) == 0 && len(line) > 0:
			if data.Len() > 0 {
				frame := bytes.Clone(data.Bytes())
				data.Reset()
				b.noteVersion(m, frame)
				b.write(frame)
				if m.Kind == proxy.KindRequest {
					if rm, err := proxy.ReadRelayMessage(frame); err == nil && rm.Kind == proxy.KindResponse && bytes.Equal(rm.ID, m.ID) {
						return true, lastID
					}
				}
			}
		case bytes.HasPrefix(t, []byte("data:")):
			if data.Len() > 0 {
				data.WriteByte('\n')
			}
			data.Write(bytes.TrimPrefix(bytes.TrimPrefix(t, []byte("data:")), []byte(" ")))
		case bytes.HasPrefix(t, []byte("id:")):
			lastID = strings.TrimSpace(string(t[3:]))
		}
		if err != nil {
			return false, lastID
		}
	}
}

// listen opens the standalone GET stream once the session exists, if the
// server offers one.
func (b *bridge) listen(ctx context.Context, wg *sync.WaitGroup) {
	if !b.hasSession() {
		return
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			req, err := b.request(ctx, http.MethodGet, nil)
			if err != nil {
				return
			}
			req.Header.Set("Accept", "text/event-stream")
			res, err := b.client.Do(req)
			if err != nil {
				return
			}
			if res.StatusCode != http.StatusOK {
				res.Body.Close()
				return // 405: the server offers no standalone stream
			}
			b.events(res.Body, proxy.Message{})
			res.Body.Close()
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}()
}

// end ends the upstream session.
func (b *bridge) end() {
	if !b.hasSession() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := b.request(ctx, http.MethodDelete, nil)
	if err != nil {
		return
	}
	if res, err := b.client.Do(req); err == nil {
		res.Body.Close()
	}
}

// answerError answers a request with a JSON-RPC error in the upstream's
// place; anything else gets nothing.
func (b *bridge) answerError(m proxy.Message, msg string) {
	if m.Kind != proxy.KindRequest {
		return
	}
	b.write(proxy.ErrorFrame(m.ID, proxy.CodeInternalError, msg))
}
