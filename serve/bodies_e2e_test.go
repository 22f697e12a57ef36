package serve_test

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/serve"
)

// heldPost is a POST whose headers were sent, declaring a body of which
// nothing was sent yet.
type heldPost struct {
	t    *testing.T
	conn net.Conn
	br   *bufio.Reader
}

// postHeaders sends the headers of a POST to /mcp that declares a body of
// n bytes, and none of it.
func postHeaders(t *testing.T, addr string, hdr map[string]string, n int) *heldPost {
	t.Helper()
	conn := dial(t, addr)
	t.Cleanup(func() { conn.Close() })
	var b strings.Builder
	fmt.Fprintf(&b, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: %d\r\n", addr, n)
	for k, v := range hdr {
		fmt.Fprintf(&b, "%s: %s\r\n", k, v)
	}
	b.WriteString("\r\n")
	if _, err := io.WriteString(conn, b.String()); err != nil {
		t.Fatal(err)
	}
	return &heldPost{t: t, conn: conn, br: bufio.NewReader(conn)}
}

// answer reads the answer to the request, whatever of its body was sent.
func (p *heldPost) answer() (*http.Response, string, error) {
	_ = p.conn.SetReadDeadline(time.Now().Add(mcptest.CallTimeout))
	res, err := http.ReadResponse(p.br, nil)
	if err != nil {
		return nil, "", err
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, string(b), nil
}

// echoCall is a tools/call of echo whose body is exactly n bytes.
func echoCall(id string, n int) string {
	head, tail := `{"jsonrpc":"2.0","id":`+id+`,"method":"tools/call","params":{"name":"echo","arguments":{"text":"`, `"}}}`
	return head + strings.Repeat("a", n-len(head)-len(tail)) + tail
}

// A flood of large bodies from clients with no credential is refused from
// the request's headers, before a byte of any body is read: no token (when
// the server has none of its own), a token that does not verify, a
// session that does not exist, another client's session, and, on a server
// with a token of its own, a body over the 64 KiB a request without a
// credential may send. Each client sends only its headers and gets its
// answer; before, the server waited for every 16 MB body (and held it).
func TestServeRefusesUnauthenticatedBodiesUnread(t *testing.T) {
	e := mcptest.NewEnv(t)
	srv := e.StartServe(mcptest.ServeOptions{Policy: e.Policy()})
	alice := mcptest.Bearer(e.Mint(nil, "mcp:echo:*"))
	sid := srv.Initialize(alice)
	other := mcptest.NewEnv(t) // another root: its tokens are not trusted here
	const big = 16 << 20
	for _, tc := range []struct {
		name   string
		hdr    map[string]string
		status int
	}{
		{"no token", nil, 401},
		{"a token that does not verify", mcptest.Bearer(other.Mint(nil, "mcp:*:*")), 401},
		{"a session that does not exist", map[string]string{"Mcp-Session-Id": "00000000000000000000000000000000"}, 404},
		{"another client's session", map[string]string{"Mcp-Session-Id": sid, "Authorization": "Bearer x"}, 403},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A flood: every request is held, none of them is read.
			var held []*heldPost
			for range 16 {
				held = append(held, postHeaders(t, srv.Addr, tc.hdr, big))
			}
			for _, p := range held {
				res, body, err := p.answer()
				if err != nil {
					t.Fatalf("no answer before the body: %v", err)
				}
				if res.StatusCode != tc.status {
					t.Fatalf("HTTP %d (%s), want %d", res.StatusCode, body, tc.status)
				}
			}
		})
	}

	// With a token of its own the server serves clients that send none,
	// but a request with neither a session nor a token is small.
	open := e.StartServe(mcptest.ServeOptions{Policy: e.Policy(), Token: e.Mint(nil, "mcp:echo:*")})
	p := postHeaders(t, open.Addr, nil, big)
	res, body, err := p.answer()
	if err != nil {
		t.Fatalf("no answer before the body: %v", err)
	}
	if res.StatusCode != 413 || !strings.Contains(body, "65536") {
		t.Fatalf("a 16 MB body without a credential: HTTP %d (%s), want 413", res.StatusCode, body)
	}
	// What such a client legitimately sends is served: an initialize, and
	// then, in its session, a large call.
	sid = open.Initialize(nil)
	if r := open.Post(sid, nil, echoCall("1", 1<<20)); r.Status != 200 || !strings.Contains(string(r.Body), "aaaa") {
		t.Fatalf("a 1 MiB call in a session: HTTP %d", r.Status)
	}
}

// The bytes of bodies in flight are bounded across the server, for
// clients with a credential too: a request that gets no room for its body
// is refused 503 with Retry-After, unread, and one that got room is
// served once its body arrives.
func TestServeBoundsBodiesInFlight(t *testing.T) {
	e := mcptest.NewEnv(t)
	srv := e.StartServe(mcptest.ServeOptions{Policy: e.Policy(), Flags: []string{"--max-body-bytes", "1048576", "--max-body-bytes-in-flight", "1048576"}})
	alice := mcptest.Bearer(e.Mint(nil, "mcp:echo:*"))
	sid := srv.Initialize(alice)
	hdr := map[string]string{"Mcp-Session-Id": sid}
	for k, v := range alice {
		hdr[k] = v
	}
	// One credential's bodies hold at most a quarter of the 1 MiB: of two
	// bodies of 200 KiB, whichever comes second is refused at once without
	// its body being sent (the pool's own bound is budget_test's).
	const n = 200 << 10
	type answer struct {
		i      int
		res    *http.Response
		body   string
		err    error
		posted *heldPost
	}
	answers := make(chan answer, 2)
	held := []*heldPost{postHeaders(t, srv.Addr, hdr, n), postHeaders(t, srv.Addr, hdr, n)}
	for i, p := range held {
		go func() {
			res, body, err := p.answer()
			answers <- answer{i, res, body, err, p}
		}()
	}
	first := <-answers
	if first.err != nil {
		t.Fatalf("no answer before the bodies: %v", first.err)
	}
	if first.res.StatusCode != 503 || first.res.Header.Get("Retry-After") == "" {
		t.Fatalf("a body over the bytes in flight: HTTP %d (%s), Retry-After %q; want 503 with Retry-After", first.res.StatusCode, first.body, first.res.Header.Get("Retry-After"))
	}
	// The operator is told (once a second at most).
	srv.WaitLog("requests refused (503): the bytes of bodies in flight are at their bound (max body bytes in flight)", nil)
	// The other one has its room: its body is read and served.
	served := held[1-first.i]
	if _, err := io.WriteString(served.conn, echoCall("2", n)); err != nil {
		t.Fatal(err)
	}
	second := <-answers
	if second.err != nil || second.res.StatusCode != 200 || !strings.Contains(second.body, "aaaa") {
		t.Fatalf("the request that had room: %v %v", second.err, second.res)
	}
	// The room is given back: the refused request, sent again, is served.
	if r := srv.Post(sid, alice, echoCall("3", n)); r.Status != 200 {
		t.Fatalf("the refused request sent again: HTTP %d %s", r.Status, r.Body)
	}
	// A body over a credential's share (256 KiB) can never be served: it
	// is refused 413 unread.
	p := postHeaders(t, srv.Addr, hdr, 300<<10)
	if res, body, err := p.answer(); err != nil || res.StatusCode != 413 || !strings.Contains(body, "262144") {
		t.Fatalf("a 300 KiB body over a credential's share of 256 KiB: %v %v %s", err, res, body)
	}
	// A body over the limit is refused unread, whoever sends it.
	p = postHeaders(t, srv.Addr, hdr, 2<<20)
	if res, body, err := p.answer(); err != nil || res.StatusCode != 413 {
		t.Fatalf("a 2 MiB body over --max-body-bytes: %v %v %s", err, res, body)
	}
	// A bound below the largest body is a mistake said at start.
	_, stderr, code := mcptest.CLI(t, "serve", "--root", e.Root.ID(), "--max-body-bytes", "1048576", "--max-body-bytes-in-flight", "1000", "--", "true")
	if code == 0 || !strings.Contains(stderr, "--max-body-bytes-in-flight") {
		t.Fatalf("--max-body-bytes-in-flight below --max-body-bytes: exit %d: %s", code, stderr)
	}
}

// Over TLS, HTTP/2 carries at most serve.MaxConcurrentStreams requests at
// once on a connection: the server says so in its SETTINGS, and refuses a
// stream over it (RST_STREAM) instead of running its handler. Before, one
// connection could hold 250 requests, each with a body the server read.
func TestServeBoundsHTTP2Streams(t *testing.T) {
	e := mcptest.NewEnv(t)
	certFile, keyFile, pool := selfSigned(t, e.Dir)
	srv := e.StartServe(mcptest.ServeOptions{Policy: e.Policy(), Flags: []string{"--tls-cert", certFile, "--tls-key", keyFile}})
	tok := "Bearer " + e.Mint(nil, "mcp:echo:*").String()

	conn, err := tls.Dial("tcp", srv.Addr, &tls.Config{RootCAs: pool, NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if p := conn.ConnectionState().NegotiatedProtocol; p != "h2" {
		t.Fatalf("ALPN chose %q, want h2", p)
	}
	_ = conn.SetDeadline(time.Now().Add(mcptest.CallTimeout))
	br := bufio.NewReader(conn)
	if _, err := io.WriteString(conn, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	writeFrame(t, conn, 0x4, 0, 0, nil) // SETTINGS
	typ, flags, _, payload := readFrame(t, br)
	if typ != 0x4 || flags&0x1 != 0 {
		t.Fatalf("the server's first frame: type %d flags %d, want SETTINGS", typ, flags)
	}
	advertised := -1
	for i := 0; i+6 <= len(payload); i += 6 {
		if binary.BigEndian.Uint16(payload[i:]) == 0x3 { // SETTINGS_MAX_CONCURRENT_STREAMS
			advertised = int(binary.BigEndian.Uint32(payload[i+2:]))
		}
	}
	if advertised != serve.MaxConcurrentStreams {
		t.Fatalf("the server advertises SETTINGS_MAX_CONCURRENT_STREAMS %d, want %d", advertised, serve.MaxConcurrentStreams)
	}
	writeFrame(t, conn, 0x4, 0x1, 0, nil) // SETTINGS ACK

	// As many requests as it allows, each waiting for its body, and one
	// more: that one is refused.
	for i := range serve.MaxConcurrentStreams + 1 {
		block := hpackHeaders(
			":method", "POST", ":scheme", "https", ":path", "/mcp", ":authority", srv.Addr,
			"content-type", "application/json", "accept", "application/json, text/event-stream",
			"mcp-protocol-version", "2026-07-28", "authorization", tok, "content-length", "100")
		writeFrame(t, conn, 0x1, 0x4, uint32(2*i+1), block) // HEADERS, END_HEADERS
	}
	over := uint32(2*serve.MaxConcurrentStreams + 1)
	for {
		typ, _, stream, payload := readFrame(t, br)
		switch {
		case typ == 0x7: // GOAWAY
			t.Fatalf("the server went away: %x", payload)
		case typ == 0x3 && stream == over: // RST_STREAM
			if code := binary.BigEndian.Uint32(payload); code != 0x7 && code != 0x1 {
				t.Fatalf("stream %d over the limit reset with code %d, want REFUSED_STREAM or PROTOCOL_ERROR", stream, code)
			}
			return
		case typ == 0x3 || typ == 0x1:
			t.Fatalf("stream %d, within the limit, got frame type %d before the stream over it was refused", stream, typ)
		}
	}
}

// selfSigned writes a certificate for 127.0.0.1 and its key to dir, and
// returns their files and a pool that trusts it.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "h2.crt"), filepath.Join(dir, "h2.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AddCert(leaf)
	return certFile, keyFile, pool
}

func writeFrame(t *testing.T, w io.Writer, typ, flags byte, stream uint32, payload []byte) {
	t.Helper()
	h := make([]byte, 9, 9+len(payload))
	h[0], h[1], h[2] = byte(len(payload)>>16), byte(len(payload)>>8), byte(len(payload))
	h[3], h[4] = typ, flags
	binary.BigEndian.PutUint32(h[5:], stream)
	if _, err := w.Write(append(h, payload...)); err != nil {
		t.Fatal(err)
	}
}

func readFrame(t *testing.T, r io.Reader) (typ, flags byte, stream uint32, payload []byte) {
	t.Helper()
	var h [9]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		t.Fatalf("reading a frame: %v", err)
	}
	payload = make([]byte, int(h[0])<<16|int(h[1])<<8|int(h[2]))
	if _, err := io.ReadFull(r, payload); err != nil {
		t.Fatalf("reading a frame: %v", err)
	}
	return h[3], h[4], binary.BigEndian.Uint32(h[5:]) &^ (1 << 31), payload
}

// hpackHeaders encodes name, value pairs as HPACK literals without
// indexing (no Huffman coding): what a decoder must read, and no table.
func hpackHeaders(kv ...string) []byte {
	var b []byte
	for i := 0; i < len(kv); i += 2 {
		b = append(b, 0x00)
		b = hpackString(b, kv[i])
		b = hpackString(b, kv[i+1])
	}
	return b
}

func hpackString(b []byte, s string) []byte {
	// A length with a 7-bit prefix, then its continuation bytes.
	n := len(s)
	if n < 127 {
		b = append(b, byte(n))
	} else {
		b = append(b, 127)
		for n -= 127; n >= 128; n >>= 7 {
			b = append(b, byte(n&0x7f)|0x80)
		}
		b = append(b, byte(n))
	}
	return append(b, s...)
}

// Red team (issue 26 item 3, bullet 1): one credential holds the whole
// --max-body-bytes-in-flight budget and starves every other client. Alice
// (a valid token, her own session) sends the headers of POSTs whose bodies
// she never sends: one declaring --max-body-bytes, and one chunked with no
// Content-Length (charged the full limit before a byte arrives). Each holds
// its share for --read-timeout (10 s), and she can send them again for
// ever. Bob, another credential with a 200-byte call, must still be served;
// today he gets 503 (the budget has no per-credential share, only the
// anonymous one).
// (Was TestRedteamOneCredentialStarvesBodyBudget.)
func TestServeBodyBudgetNotStarvedByOneCredential(t *testing.T) {
	for _, chunked := range []bool{false, true} {
		t.Run(fmt.Sprintf("chunked=%v", chunked), func(t *testing.T) {
			e := mcptest.NewEnv(t)
			srv := e.StartServe(mcptest.ServeOptions{Policy: e.Policy(), Flags: []string{"--max-body-bytes", "1048576", "--max-body-bytes-in-flight", "1048576"}})
			alice := mcptest.Bearer(e.Mint(nil, "mcp:echo:*"))
			bob := mcptest.Bearer(e.Mint(nil, "mcp:*:*"))
			asid := srv.Initialize(alice)
			bsid := srv.Initialize(bob)
			hdr := map[string]string{"Mcp-Session-Id": asid}
			for k, v := range alice {
				hdr[k] = v
			}
			if chunked {
				held := dial(t, srv.Addr)
				t.Cleanup(func() { held.Close() })
				var b string
				b = fmt.Sprintf("POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nTransfer-Encoding: chunked\r\n", srv.Addr)
				for k, v := range hdr {
					b += k + ": " + v + "\r\n"
				}
				b += "\r\n"
				if _, err := io.WriteString(held, b); err != nil {
					t.Fatal(err)
				}
			} else {
				postHeaders(t, srv.Addr, hdr, 1<<20)
			}
			// Bob's small calls, while Alice holds her bodies' share.
			for i := 0; i < 3; i++ {
				if r := srv.Post(bsid, bob, echoCall(fmt.Sprint(i+10), 200)); r.Status != 200 {
					t.Fatalf("call %d of another credential while one token holds the budget with unsent bodies: HTTP %d %s", i, r.Status, r.Body)
				}
			}
		})
	}
}

// Red team (issue 26 item 3, bullet 1), held: requests without a
// credential are answered from their headers, their bodies unread, however
// the body is framed: Expect: 100-continue (no "100 Continue" is sent),
// chunked with no Content-Length, and a GET or DELETE with a body naming
// an unknown session.
// (Was TestRedteamPreBodyCheckFramings.)
func TestServeRefusesUnauthenticatedBodiesUnreadAnyFraming(t *testing.T) {
	e := mcptest.NewEnv(t)
	srv := e.StartServe(mcptest.ServeOptions{Policy: e.Policy()})
	cases := []struct {
		name, method, extra string
		want                int
	}{
		{"expect-100-continue", "POST", "Content-Length: 16000000\r\nExpect: 100-continue\r\n", 401},
		{"chunked", "POST", "Transfer-Encoding: chunked\r\n", 401},
		{"chunked-and-content-length", "POST", "Transfer-Encoding: chunked\r\nContent-Length: 10\r\n", 401},
		{"get-with-body", "GET", "Mcp-Session-Id: nosuchsession\r\nContent-Length: 16000000\r\n", 404},
		{"delete-with-body", "DELETE", "Mcp-Session-Id: nosuchsession\r\nTransfer-Encoding: chunked\r\n", 404},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			conn := dial(t, srv.Addr)
			t.Cleanup(func() { conn.Close() })
			head := fmt.Sprintf("%s /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n%s\r\n", c.method, srv.Addr, c.extra)
			if _, err := io.WriteString(conn, head); err != nil {
				t.Fatal(err)
			}
			_ = conn.SetReadDeadline(time.Now().Add(mcptest.CallTimeout))
			res, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatalf("no answer before the body: %v", err)
			}
			res.Body.Close()
			if res.StatusCode != c.want {
				t.Fatalf("HTTP %d, want %d", res.StatusCode, c.want)
			}
		})
	}
}

// A client that declares a body and stalls in it is cut off whatever its
// request: one the front refuses before reading the body (a wrong
// Content-Type or Accept, a foreign Host), a GET or a DELETE, which have
// no body to read, or a request for another path. net/http reads what the
// handler left of a small body before it answers, and nothing else bounds
// that read.
func TestServeSlowBodyOnAnyRequestIsCutOff(t *testing.T) {
	e := mcptest.NewEnv(t)
	srv := e.StartServe(mcptest.ServeOptions{Policy: e.Policy(), Flags: []string{"--read-timeout", "500ms"}})
	tok := mcptest.Bearer(e.Mint(nil, "mcp:echo:*"))
	sid := srv.Initialize(tok)
	for name, head := range map[string]string{
		"POST text/plain":         "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\nAccept: application/json, text/event-stream\r\nContent-Length: 100\r\n\r\n",
		"POST without Accept":     "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n",
		"POST foreign Host":       "POST /mcp HTTP/1.1\r\nHost: evil.example.com\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 100\r\n\r\n",
		"POST chunked text/plain": "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n10\r\n",
		"DELETE with a body":      "DELETE /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nMcp-Session-Id: 00000000000000000000000000000000\r\nContent-Length: 100\r\n\r\n",
		"GET with a body":         "GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\nMcp-Session-Id: " + sid + "\r\nAuthorization: " + tok["Authorization"] + "\r\nContent-Length: 100\r\n\r\n",
		"healthz with a body":     "POST /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n",
	} {
		t.Run(name, func(t *testing.T) {
			conn := dial(t, srv.Addr)
			defer conn.Close()
			if _, err := io.WriteString(conn, head+`{"jsonrpc"`); err != nil {
				t.Fatal(err)
			}
			_ = conn.SetReadDeadline(time.Now().Add(mcptest.WaitTimeout))
			if _, err := io.Copy(io.Discard, conn); err != nil {
				if ne, ok := err.(interface{ Timeout() bool }); ok && ne.Timeout() {
					t.Fatalf("the server held a connection whose body stalled for %s", mcptest.WaitTimeout)
				}
			}
		})
	}
	// The GET of a session that sent its whole (empty) body still streams
	// past the read timeout.
	conn := dial(t, srv.Addr)
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\nMcp-Session-Id: "+sid+"\r\nAuthorization: "+tok["Authorization"]+"\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	res, err := http.ReadResponse(br, nil)
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("GET: %v %v", res, err)
	}
	time.Sleep(time.Second) // twice the read timeout
	_ = conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if _, err := io.Copy(io.Discard, br); err == nil || !strings.Contains(err.Error(), "timeout") {
		t.Fatalf("the GET stream ended after the read timeout: %v", err)
	}
}

// A request over the relay's frame limit is answered, even when its id
// comes after the part of it the relay reads, and even with a body limit
// above the frame limit: it neither hangs nor keeps its slot.
func TestServeBodyOverTheFrameLimitIsAnswered(t *testing.T) {
	e := mcptest.NewEnv(t)
	pol := e.Policy()
	pol.MaxFrameBytes = 8 << 10
	srv := e.StartServe(mcptest.ServeOptions{Policy: pol, Flags: []string{"--max-body-bytes", "65536", "--max-session-calls", "1"}})
	tok := mcptest.Bearer(e.Mint(nil, "mcp:echo:*"))
	sid := srv.Initialize(tok)
	big := `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"echo","arguments":{"text":"` + strings.Repeat("a", 20<<10) + `"}},"id":"late"}`
	st := srv.PostStream(sid, tok, big)
	if st.Status == 200 {
		if m := st.Next(); m == nil || m["error"] == nil {
			t.Fatalf("the oversize request's answer: %v", m)
		}
	} else if st.Status != 413 {
		t.Fatalf("the oversize request: HTTP %d", st.Status)
	}
	if r := srv.Post(sid, tok, mcptest.CallBody("2", "echo", map[string]any{"text": "after"})); r.Status != 200 {
		t.Fatalf("a call after the oversize one: HTTP %d %s", r.Status, r.Body)
	}
}
