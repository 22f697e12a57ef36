package revdist

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/delegateos/delegateos/internal/strictjson"
	"github.com/delegateos/delegateos/revocation"
)

// Distributor publishes a Store's list, takes pushed entries, pushes new
// entries to its peers and polls theirs. It is an http.Handler for Path.
// Its exported fields are read by ServeHTTP and Run and must not change
// once either is in use.
type Distributor struct {
	// Store is the list. Required.
	Store Store
	// Authority decides whose entries are taken, pushed or polled; nil
	// refuses every entry.
	Authority Authority
	// Peers are the revocation URLs of peer verifiers (a URL with no path
	// means Path on that host).
	Peers []string
	// Interval is the poll interval; zero means DefaultInterval.
	Interval time.Duration
	// LocalCheck is how often the Store is looked at for entries added by
	// another process; zero means DefaultLocalCheck.
	LocalCheck time.Duration
	// Client makes polls and pushes; nil means a client with a 10 s
	// timeout.
	Client *http.Client
	// MaxListBytes bounds a peer's list; zero means
	// DefaultMaxPeerListBytes.
	MaxListBytes int64
	// Logf, when set, is told of failed polls and pushes and refused
	// entries.
	Logf func(format string, args ...any)
	// Added, when set, is called after entries new to the Store were
	// stored: pushed, polled from a peer or found by the local check. It is
	// not called for a push refused, nor for one of an entry the Store
	// already held, so that a stranger re-posting a published entry costs
	// the verifier nothing but the entry's signature check.
	Added func()

	mu sync.Mutex
	// announced are the entries pushed to peers or known before Run.
	announced map[revocation.Entry]bool
	localLen  int
	primed    bool // announced holds what the Store held when Run began
	// etags are the last ETag of each peer's list; noPush the peers that
	// do not take pushes.
	etags  map[string]string
	noPush map[string]bool

	// published caches what GET serves while the list's length stays the
	// same, for up to listCacheFor, so that a flood of GETs does not encode
	// the list again and again; Add and merge drop it.
	published atomic.Pointer[publishedList]

	lastChange, lastPoll  atomic.Int64 // Unix nanoseconds; 0 is never
	rejected, pushed      atomic.Uint64
	pollErrors, pushError atomic.Uint64
	pushes                sync.WaitGroup
}

// Stats are a Distributor's counters, for metrics.
type Stats struct {
	// LastChange is when this Distributor last saw the list grow (zero if
	// it has not); LastPoll when every peer last answered a poll.
	LastChange, LastPoll time.Time
	// Rejected counts entries refused (pushed or polled); Pushed the
	// pushes peers accepted; PollErrors and PushErrors the failures.
	Rejected, Pushed, PollErrors, PushErrors uint64
}

// Stats returns the counters.
func (d *Distributor) Stats() Stats {
	t := func(n int64) time.Time {
		if n == 0 {
			return time.Time{}
		}
		return time.Unix(0, n)
	}
	return Stats{
		LastChange: t(d.lastChange.Load()), LastPoll: t(d.lastPoll.Load()),
		Rejected: d.rejected.Load(), Pushed: d.pushed.Load(),
		PollErrors: d.pollErrors.Load(), PushErrors: d.pushError.Load(),
	}
}

func (d *Distributor) logf(format string, args ...any) {
	if d.Logf != nil {
		d.Logf(format, args...)
	}
}

// Add verifies e, checks its revoker with the Authority and stores it;
// an entry new to the store is pushed to the peers at once. It reports
// whether the entry was new.
func (d *Distributor) Add(e revocation.Entry) (bool, error) {
	if err := d.admit(e); err != nil {
		d.rejected.Add(1)
		return false, err
	}
	added, err := d.Store.Add(e)
	if err != nil || !added {
		return false, err
	}
	d.published.Store(nil)
	d.lastChange.Store(time.Now().UnixNano())
	d.announce([]revocation.Entry{e})
	d.added()
	return true, nil
}

// added tells Added, when set, that the Store grew.
func (d *Distributor) added() {
	if d.Added != nil {
		d.Added()
	}
}

// admit checks an entry before anything stores it.
func (d *Distributor) admit(e revocation.Entry) error {
	if err := e.Verify(); err != nil {
		return err
	}
	if d.Authority == nil {
		return fmt.Errorf("%w: this verifier takes revocations from no one", ErrNotAuthorized)
	}
	return d.Authority.Authorize(e)
}

// announce pushes the entries not yet announced to every peer that takes
// pushes, in the background.
func (d *Distributor) announce(entries []revocation.Entry) {
	d.mu.Lock()
	if d.announced == nil {
		d.announced = map[revocation.Entry]bool{}
	}
	var fresh []revocation.Entry
	for _, e := range entries {
		if !d.announced[e] {
			d.announced[e] = true
			fresh = append(fresh, e)
		}
	}
	var peers []string
	for _, p := range d.Peers {
		if !d.noPush[p] {
			peers = append(peers, p)
		}
	}
	d.mu.Unlock()
	for _, p := range peers {
		d.pushes.Add(1)
		go func() {
			defer d.pushes.Done()
			for _, e := range fresh {
				if !d.push(p, e) {
					return
				}
			}
		}()
	}
}

// push sends one entry to a peer as a delegateos/revoke notification and
// reports whether to go on pushing to it.
func (d *Distributor) push(peer string, e revocation.Entry) bool {
	body, err := json.Marshal(map[string]any{
		"jsonrpc": "2.0", "method": MethodRevoke,
		"params": map[string]any{"revocation": e},
	})
	if err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, peerURL(peer), bytes.NewReader(body))
	if err != nil {
		d.pushError.Add(1)
		d.logf("revocation push to %s: %v", peer, err)
		return false
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := d.client().Do(req)
	if err != nil {
		d.pushError.Add(1)
		d.logf("revocation push to %s: %v", peer, err)
		return false
	}
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK, http.StatusAccepted, http.StatusNoContent:
		d.pushed.Add(1)
		return true
	case http.StatusNotFound, http.StatusMethodNotAllowed, http.StatusNotImplemented:
		d.mu.Lock()
		if d.noPush == nil {
			d.noPush = map[string]bool{}
		}
		d.noPush[peer] = true
		d.mu.Unlock()
		d.logf("revocation peer %s does not take pushes (%s); it is only polled", peer, resp.Status)
		return false
	default:
		d.pushError.Add(1)
		d.logf("revocation push to %s: %s: %s", peer, resp.Status, strings.TrimSpace(string(msg)))
		return true
	}
}

func (d *Distributor) client() *http.Client {
	if d.Client != nil {
		return d.Client
	}
	return &http.Client{Timeout: requestTimeout}
}

// peerURL is the revocation URL of a peer given as a URL, which gets Path
// when it has no path.
func peerURL(peer string) string {
	u, err := url.Parse(peer)
	if err != nil || (u.Path != "" && u.Path != "/") {
		return peer
	}
	u.Path = Path
	return u.String()
}

// Run polls the peers every Interval and looks at the Store for entries
// added by other processes every LocalCheck, pushing those, until ctx is
// done. The entries the Store holds when Run starts are not pushed. It
// polls every peer once at the start. An unreadable Store is logged and
// looked at again, never taken for an empty one. It returns nil.
func (d *Distributor) Run(ctx context.Context) error {
	d.prime()
	interval, local := d.Interval, d.LocalCheck
	if interval <= 0 {
		interval = DefaultInterval
	}
	if local <= 0 {
		local = DefaultLocalCheck
	}
	poll := time.NewTicker(interval)
	defer poll.Stop()
	look := time.NewTicker(local)
	defer look.Stop()
	d.PollPeers(ctx)
	for {
		select {
		case <-ctx.Done():
			d.pushes.Wait()
			return nil
		case <-poll.C:
			d.PollPeers(ctx)
		case <-look.C:
			d.checkLocal()
		}
	}
}

// prime marks the entries the Store holds as announced, so that Run does
// not push them; while the Store cannot be read it is tried again at each
// local check.
func (d *Distributor) prime() {
	entries, err := d.Store.Entries()
	if err != nil {
		d.logf("revocation list: %v", err)
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.announced == nil {
		d.announced = map[revocation.Entry]bool{}
	}
	for _, e := range entries {
		d.announced[e] = true
	}
	d.localLen = len(entries)
	d.primed = true
}

// checkLocal pushes entries that appeared in the Store since it last
// looked.
func (d *Distributor) checkLocal() {
	d.mu.Lock()
	primed := d.primed
	d.mu.Unlock()
	if !primed {
		d.prime()
		return
	}
	entries, err := d.Store.Entries()
	if err != nil {
		d.logf("revocation list: %v", err)
		return
	}
	d.mu.Lock()
	grew := len(entries) != d.localLen
	d.localLen = len(entries)
	d.mu.Unlock()
	if grew {
		d.published.Store(nil)
		d.lastChange.Store(time.Now().UnixNano())
		d.announce(entries)
		d.added()
	}
}

// PollPeers polls every peer once and merges what they publish.
func (d *Distributor) PollPeers(ctx context.Context) {
	ok := true
	for _, p := range d.Peers {
		if err := d.poll(ctx, p); err != nil {
			ok = false
			d.pollErrors.Add(1)
			d.logf("revocation poll of %s: %v", p, err)
		}
	}
	if ok {
		d.lastPoll.Store(time.Now().UnixNano())
	}
}

func (d *Distributor) poll(ctx context.Context, peer string) error {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, peerURL(peer), nil)
	if err != nil {
		return err
	}
	d.mu.Lock()
	etag := d.etags[peer]
	d.mu.Unlock()
	if etag != "" {
		req.Header.Set("If-None-Match", etag)
	}
	resp, err := d.client().Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusNotModified:
		return nil
	case http.StatusOK:
	default:
		return fmt.Errorf("%s", resp.Status)
	}
	max := d.MaxListBytes
	if max <= 0 {
		max = DefaultMaxPeerListBytes
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
	if err != nil {
		return err
	}
	if int64(len(data)) > max {
		return fmt.Errorf("the list is over %d bytes; not read", max)
	}
	var entries []revocation.Entry
	if err := strictjson.Unmarshal(data, &entries); err != nil {
		return fmt.Errorf("%w: %v", revocation.ErrMalformedList, err)
	}
	refused, err := d.merge(entries)
	if err != nil {
		return err
	}
	// Only a list merged in full is remembered as seen: after a failure to
	// store, or an entry refused (its revoker may be accepted later, once
	// the verifier has seen the token), the next poll reads it again.
	d.mu.Lock()
	if d.etags == nil {
		d.etags = map[string]string{}
	}
	if refused {
		delete(d.etags, peer)
	} else {
		d.etags[peer] = resp.Header.Get("ETag")
	}
	d.mu.Unlock()
	return nil
}

// merge adds the entries the store lacks that verify and are accepted,
// and reports whether it refused any for its revoker.
func (d *Distributor) merge(entries []revocation.Entry) (refused bool, err error) {
	local, err := d.Store.Entries()
	if err != nil {
		return false, err
	}
	have := make(map[[2]string]bool, len(local))
	for _, e := range local {
		have[[2]string{e.RevocationID, e.RevokedBy}] = true
	}
	var added []revocation.Entry
	for _, e := range entries {
		k := [2]string{e.RevocationID, e.RevokedBy}
		if have[k] {
			continue
		}
		if err := d.admit(e); err != nil {
			d.rejected.Add(1)
			d.logf("revocation entry from a peer refused: %v", err)
			// An entry that does not verify never will; one whose revoker
			// is not accepted may be once the verifier sees its token.
			refused = refused || errors.Is(err, ErrNotAuthorized)
			continue
		}
		ok, err := d.Store.Add(e)
		if err != nil {
			return refused, err
		}
		have[k] = true
		if ok {
			added = append(added, e)
		}
	}
	if len(added) > 0 {
		d.published.Store(nil)
		d.lastChange.Store(time.Now().UnixNano())
		d.announce(added)
		d.added()
	}
	return refused, nil
}

// rpcMessage is a delegateos/revoke message.
type rpcMessage struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
}

type revokeParams struct {
	Revocation revocation.Entry `json:"revocation"`
}

// ServeHTTP serves GET and HEAD (the list) and POST (a pushed entry).
func (d *Distributor) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		d.serveList(w, r)
	case http.MethodPost:
		d.servePush(w, r)
	default:
		w.Header().Set("Allow", "GET, HEAD, POST")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

type publishedList struct {
	data []byte
	etag string
	n    int // the list's length when it was encoded
	at   time.Time
}

// ListBytes returns the list as published and its ETag. An entry added by
// another process shows at once (the list grows); a rewrite of the file
// that keeps its length, within listCacheFor.
func (d *Distributor) ListBytes() ([]byte, string, error) {
	n := d.Store.Len()
	if p := d.published.Load(); p != nil && p.n == n && time.Since(p.at) < listCacheFor {
		return p.data, p.etag, nil
	}
	data, etag, err := d.encodeList()
	if err != nil {
		return nil, "", err
	}
	d.published.Store(&publishedList{data: data, etag: etag, n: n, at: time.Now()})
	return data, etag, nil
}

func (d *Distributor) encodeList() ([]byte, string, error) {
	entries, err := d.Store.Entries()
	if err != nil {
		return nil, "", err
	}
	if entries == nil {
		entries = []revocation.Entry{}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(entries); err != nil {
		return nil, "", err
	}
	data := buf.Bytes()
	sum := sha256.Sum256(data)
	return data, `"` + hex.EncodeToString(sum[:]) + `"`, nil
}

func (d *Distributor) serveList(w http.ResponseWriter, r *http.Request) {
	data, etag, err := d.ListBytes()
	if err != nil {
		// Never an empty list in place of one that cannot be read.
		d.logf("revocation list: %v", err)
		http.Error(w, "the revocation list cannot be read", http.StatusServiceUnavailable)
		return
	}
	h := w.Header()
	h.Set("ETag", etag)
	h.Set("Cache-Control", "no-cache")
	if etagMatch(r.Header.Values("If-None-Match"), etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", fmt.Sprint(len(data)))
	if r.Method == http.MethodHead {
		return
	}
	w.Write(data)
}

// etagMatch applies If-None-Match's weak comparison (RFC 9110 §13.1.2).
func etagMatch(values []string, etag string) bool {
	for _, v := range values {
		for t := range strings.SplitSeq(v, ",") {
			t = strings.TrimSpace(t)
			if t == "*" || strings.TrimPrefix(t, "W/") == etag {
				return true
			}
		}
	}
	return false
}

func (d *Distributor) servePush(w http.ResponseWriter, r *http.Request) {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		// Also keeps out cross-site form posts: a browser sends
		// application/json only after a CORS preflight.
		http.Error(w, "Content-Type must be application/json", http.StatusUnsupportedMediaType)
		return
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxPushBytes))
	if err != nil {
		d.rejected.Add(1)
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			http.Error(w, fmt.Sprintf("body over %d bytes", MaxPushBytes), http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "cannot read the body", http.StatusBadRequest)
		return
	}
	var m rpcMessage
	if err := strictjson.Unmarshal(data, &m); err != nil || m.JSONRPC != "2.0" || m.Method != MethodRevoke {
		d.rejected.Add(1)
		http.Error(w, fmt.Sprintf("not a JSON-RPC 2.0 %s message", MethodRevoke), http.StatusBadRequest)
		return
	}
	notification := len(m.ID) == 0
	var p revokeParams
	if err := strictjson.Unmarshal(m.Params, &p); err != nil {
		d.rejected.Add(1)
		d.reply(w, notification, m.ID, nil, http.StatusBadRequest, -32602, "invalid params: "+err.Error())
		return
	}
	added, err := d.Add(p.Revocation)
	switch {
	case errors.Is(err, ErrNotAuthorized):
		d.reply(w, notification, m.ID, nil, http.StatusForbidden, -32602, err.Error())
	case errors.Is(err, revocation.ErrMalformedEntry), errors.Is(err, revocation.ErrInvalidSignature):
		d.reply(w, notification, m.ID, nil, http.StatusBadRequest, -32602, err.Error())
	case err != nil:
		d.logf("revocation: %v", err)
		d.reply(w, notification, m.ID, nil, http.StatusInternalServerError, -32603, "the revocation cannot be recorded")
	default:
		d.reply(w, notification, m.ID, map[string]any{"revocationId": p.Revocation.RevocationID, "added": added}, http.StatusAccepted, 0, "")
	}
}

// reply answers a notification with an HTTP status (and the error as
// text) and a request with a JSON-RPC response.
func (d *Distributor) reply(w http.ResponseWriter, notification bool, id json.RawMessage, result any, status, code int, msg string) {
	if notification {
		if code == 0 {
			w.WriteHeader(status)
			return
		}
		http.Error(w, msg, status)
		return
	}
	resp := map[string]any{"jsonrpc": "2.0", "id": id}
	if code == 0 {
		resp["result"] = result
	} else {
		resp["error"] = map[string]any{"code": code, "message": msg}
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(resp)
}
