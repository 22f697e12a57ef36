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

	"github.com/delegateos/delegateos/gate"
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
//
// Requests are sent at once, each its own POST; notifications and answers
// to the server's requests are sent one at a time, in order, from a queue
// of at most 256 messages and 4 MiB (one larger message goes when it is
// empty): a notification that finds it full is dropped (and counted, see
// UpstreamNotificationsDropped), so that a client flooding a slow server
// holds a bounded queue, not a connection per message. An answer to one of
// the server's requests is never dropped: it is queued beside those
// bounds, which the server's unanswered requests (at most maxAsked) bound.
//
// No message the server sends is held beyond maxFrame bytes (zero means
// proxy.DefaultMaxFrameBytes), the relay's own limit: a larger one answers
// its request with an error instead.
func Bridge(ctx context.Context, url string, header http.Header, client *http.Client, maxFrame int, in io.Reader, out io.Writer) error {
	if client == nil {
		client = http.DefaultClient
	}
	if maxFrame <= 0 {
		maxFrame = proxy.DefaultMaxFrameBytes
	}
	b := &bridge{url: url, header: header, client: client, max: maxFrame, out: bufio.NewWriter(out)}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	b.fail = cancel
	br := bufio.NewReaderSize(in, 64<<10)
	var wg sync.WaitGroup
	// Requests each get their own POST (the server bounds them per
	// session); everything else waits its turn in a bounded queue.
	q := newSendQueue()
	defer q.close()
	wg.Add(1)
	go func() { defer wg.Done(); q.run(ctx, b) }()
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
			} else if m.Kind == proxy.KindRequest {
				rctx, done := b.track(ctx, m.ID)
				wg.Add(1)
				go func() { defer wg.Done(); defer done(); b.send(rctx, f, m) }()
			} else {
				if m.Method == "notifications/cancelled" {
					// The relay has settled it: its POST is given up, not
					// left open on a server that may never answer.
					if id, ok := proxy.CancelledRequestID(f); ok {
						b.untrack(id)
					}
				}
				if m.Kind == proxy.KindResponse && b.answers(m.ID) {
					// An answer to the upstream's request is never dropped:
					// the upstream waits for it. Those are bounded by the
					// requests the upstream has outstanding (maxAsked).
					q.pushAnswer(f, m)
				} else {
					q.push(f, m)
				}
			}
		}
		if err != nil {
			break
		}
	}
	q.close()
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
	max    int // the largest message taken from the server

	// calls cancels the POST of each request in flight, by request key.
	calls map[string]*call
	// asked holds the keys of the upstream's requests to the client not
	// yet answered (at most maxAsked): their answers bypass the queue's
	// bounds.
	asked map[string]struct{}

	mu            sync.Mutex // guards the session, its headers, calls and out
	session       string
	sessionHeader []string // the session's header values, once known
	versionHeader []string
	out           *bufio.Writer
}

// call is a request's POST in flight.
type call struct{ cancel context.CancelFunc }

// track gives a request's POST a context of its own, which untrack (the
// client cancelled it) or done (it was answered) cancels. A request whose
// id is already in flight takes its place (the relay settled the other).
func (b *bridge) track(ctx context.Context, id []byte) (context.Context, func()) {
	key, ok := proxy.RequestKey(id)
	if !ok {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	c := &call{cancel: cancel}
	b.mu.Lock()
	if b.calls == nil {
		b.calls = map[string]*call{}
	}
	if old := b.calls[key]; old != nil {
		old.cancel()
	}
	b.calls[key] = c
	b.mu.Unlock()
	return ctx, func() {
		cancel()
		b.mu.Lock()
		if b.calls[key] == c {
			delete(b.calls, key)
		}
		b.mu.Unlock()
	}
}

// untrack gives up the POST of the request id.
func (b *bridge) untrack(id []byte) {
	key, ok := proxy.RequestKey(id)
	if !ok {
		return
	}
	b.mu.Lock()
	c := b.calls[key]
	delete(b.calls, key)
	b.mu.Unlock()
	if c != nil {
		c.cancel()
	}
}

// The header values of every POST.
var (
	postContentType = []string{"application/json"}
	postAccept      = []string{"application/json, text/event-stream"}
)

// maxAsked bounds the upstream's requests to the client whose answers a
// bridge holds room for beside its queue's bounds.
const maxAsked = 1024

// answers reports whether id answers a request the upstream sent the
// client and has not had answered yet, and marks it answered.
func (b *bridge) answers(id []byte) bool {
	key, ok := proxy.RequestKey(id)
	if !ok {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.asked[key]; !ok {
		return false
	}
	delete(b.asked, key)
	return true
}

func (b *bridge) write(frame []byte) {
	var c bytes.Buffer
	if json.Compact(&c, frame) != nil {
		return
	}
	var key string
	if rm, err := proxy.ReadRelayMessage(c.Bytes()); err == nil && rm.Kind == proxy.KindRequest {
		key, _ = proxy.RequestKey(rm.ID)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if key != "" && len(b.asked) < maxAsked {
		if b.asked == nil {
			b.asked = map[string]struct{}{}
		}
		b.asked[key] = struct{}{}
	}
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
	sid, ver := b.sessionHeader, b.versionHeader
	b.mu.Unlock()
	// Shared, read-only values: the headers are canonical keys, set
	// without Header.Set's allocation per request.
	if sid != nil {
		req.Header[HeaderSessionID] = sid
	}
	if ver != nil {
		req.Header[HeaderProtocolVersion] = ver
	}
	return req, nil
}

// send POSTs one frame and relays what comes back.
func (b *bridge) send(ctx context.Context, frame []byte, m proxy.Message) {
	req, err := b.request(ctx, http.MethodPost, frame)
	if err != nil {
		b.answerError(ctx, m, err.Error())
		return
	}
	req.Header["Content-Type"] = postContentType
	req.Header["Accept"] = postAccept
	res, err := b.client.Do(req)
	if err != nil {
		b.answerError(ctx, m, "the upstream MCP server cannot be reached: "+err.Error())
		return
	}
	defer res.Body.Close()
	if m.Method == "initialize" {
		if sid := res.Header.Get(HeaderSessionID); sid != "" {
			b.mu.Lock()
			b.session, b.sessionHeader = sid, []string{sid}
			b.mu.Unlock()
		}
	}
	switch {
	case res.StatusCode == http.StatusNotFound && m.Method != "initialize" && b.hasSession():
		b.answerError(ctx, m, "the upstream MCP server ended the session")
		b.fail(errors.New("the upstream MCP server ended the session (HTTP 404)"))
		return
	case res.StatusCode == http.StatusAccepted:
		return
	case res.StatusCode >= 300:
		body, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
		b.answerError(ctx, m, fmt.Sprintf("the upstream MCP server answered HTTP %d: %s", res.StatusCode, strings.TrimSpace(string(body))))
		return
	}
	if strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		b.readStream(ctx, res.Body, m)
		return
	}
	body, err := io.ReadAll(io.LimitReader(res.Body, int64(b.max)+1))
	if err != nil {
		b.answerError(ctx, m, "reading the upstream's answer failed: "+err.Error())
		return
	}
	if len(body) > b.max {
		b.answerError(ctx, m, b.tooLarge())
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
		b.versionHeader = []string{r.Result.ProtocolVersion}
		b.mu.Unlock()
	}
}

// readStream relays an SSE stream's messages until the response to m
// (when m is a request), resuming it with Last-Event-ID if it breaks.
func (b *bridge) readStream(ctx context.Context, body io.ReadCloser, m proxy.Message) {
	lastID := ""
	for attempt := 0; ; attempt++ {
		done, id, err := b.events(body, m)
		body.Close()
		if id != "" {
			lastID = id
		}
		if errors.Is(err, errTooLarge) {
			b.answerError(ctx, m, b.tooLarge())
			return
		}
		if done || m.Kind != proxy.KindRequest || ctx.Err() != nil {
			return
		}
		if lastID == "" || attempt >= 5 {
			b.answerError(ctx, m, "the upstream MCP server's stream ended before its answer")
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
			b.answerError(ctx, m, "the upstream MCP server's stream ended before its answer and could not be resumed")
			return
		}
		body = res.Body
	}
}

// errTooLarge is a message from the server over the bridge's limit.
var errTooLarge = errors.New("a message over the frame limit")

func (b *bridge) tooLarge() string {
	return fmt.Sprintf("the upstream MCP server sent a message over the frame limit of %d bytes", b.max)
}

// events reads one SSE stream: it reports whether the response to m came,
// and the last event id; errTooLarge when an event (or a line) is over the
// limit, and the stream is not read further.
func (b *bridge) events(r io.Reader, m proxy.Message) (done bool, lastID string, err error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var data bytes.Buffer
	var long []byte // a line longer than the reader's buffer, so far
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			if len(long)+len(line) > b.max+len("data: \r\n") {
				return false, lastID, errTooLarge
			}
			long = append(long, line...)
			continue
		}
		if len(long) > 0 {
			line = append(long, line...)
			long = long[:0]
		}
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
						return true, lastID, nil
					}
				}
			}
		case bytes.HasPrefix(t, []byte("data:")):
			if data.Len() > 0 {
				data.WriteByte('\n')
			}
			data.Write(bytes.TrimPrefix(bytes.TrimPrefix(t, []byte("data:")), []byte(" ")))
			if data.Len() > b.max {
				return false, lastID, errTooLarge
			}
		case bytes.HasPrefix(t, []byte("id:")):
			lastID = strings.TrimSpace(string(t[3:]))
		}
		if err != nil {
			return false, lastID, nil
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
			_, _, err = b.events(res.Body, proxy.Message{})
			res.Body.Close()
			if err != nil {
				return // a server that floods its standalone stream loses it
			}
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
func (b *bridge) answerError(ctx context.Context, m proxy.Message, msg string) {
	if m.Kind != proxy.KindRequest {
		return
	}
	if ctx.Err() != nil {
		// Cancelled (the relay settled it, or the bridge is ending): an
		// answer now could be taken for a later request with its id.
		return
	}
	b.write(proxy.ErrorFrame(m.ID, gate.CodeInternalError, msg))
}

// errUpstreamEnded is what the relay's writes meet once the bridge has
// returned.
var errUpstreamEnded = errors.New("the upstream MCP server's session has ended")

// Upstream is the relay's upstream for the MCP Streamable HTTP server at
// url (proxy.Config.UpstreamConn): Bridge, run in this process, between
// the relay and the server. The connection ends when the relay closes its
// input (the server's session is then ended with DELETE), when its context
// is cancelled, or when the bridge fails (the server ended the session);
// wait returns Bridge's error. maxFrame bounds each message from the
// server, as Bridge's does.
func Upstream(url string, header http.Header, client *http.Client, maxFrame int) proxy.UpstreamConn {
	return func(ctx context.Context) (io.ReadCloser, io.WriteCloser, func() error, error) {
		in, out := newInbox(maxQueued), newInbox(maxQueued)
		done := make(chan struct{})
		var err error
		// Bridge reads its input without watching ctx: cancelling ends the
		// read.
		stop := context.AfterFunc(ctx, func() { in.closeRead(context.Cause(ctx)) })
		go func() {
			defer close(done)
			err = Bridge(ctx, url, header, client, maxFrame, in, out)
			stop()
			in.closeRead(errUpstreamEnded)
			out.Close()
		}()
		wait := func() error {
			<-done
			return err
		}
		return inboxReader{out}, in, wait, nil
	}
}
