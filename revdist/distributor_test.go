package revdist

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/delegateos/delegateos/revocation"
)

func TestListETagAndConditionalGET(t *testing.T) {
	root := testKey(t, 1)
	n := newNode(t, principals(t, root))
	get := func(inm string) *http.Response {
		req, _ := http.NewRequest("GET", n.srv.URL+Path, nil)
		if inm != "" {
			req.Header.Set("If-None-Match", inm)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	r1 := get("")
	etag := r1.Header.Get("ETag")
	if r1.StatusCode != 200 || etag == "" || r1.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("first GET: %s, ETag %q", r1.Status, etag)
	}
	if r := get(etag); r.StatusCode != http.StatusNotModified {
		t.Fatalf("GET with the current ETag: %s", r.Status)
	}
	if r := get(`"other", W/` + etag); r.StatusCode != http.StatusNotModified {
		t.Fatalf("GET with a list of ETags: %s", r.Status)
	}
	if _, err := n.Add(testEntry(t, root, "b1")); err != nil {
		t.Fatal(err)
	}
	r2 := get(etag)
	if r2.StatusCode != 200 || r2.Header.Get("ETag") == etag {
		t.Fatalf("GET after a change: %s, ETag %q (was %q)", r2.Status, r2.Header.Get("ETag"), etag)
	}
	resp, err := http.Get(n.srv.URL + Path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var entries []revocation.Entry
	if err := json.NewDecoder(resp.Body).Decode(&entries); err != nil || len(entries) != 1 || entries[0] != testEntry(t, root, "b1") {
		t.Fatalf("published %v, %v", entries, err)
	}
}

func TestPushAcceptedAndRejected(t *testing.T) {
	root, stranger := testKey(t, 1), testKey(t, 2)
	n := newNode(t, principals(t, root))
	url := n.srv.URL + Path
	good := testEntry(t, root, "b1")

	forged := testEntry(t, root, "b2")
	forged.RevocationID = testID("b3") // signed for b2
	unsigned := testEntry(t, root, "b4")
	unsigned.Signature = ""
	oversized := strings.Replace(pushBody(t, nil, good), `"scope":"chain"`, `"scope":"chain","pad":"`+strings.Repeat("x", MaxPushBytes)+`"`, 1)

	cases := []struct {
		name, contentType, body string
		status                  int
	}{
		{"forged", "application/json", pushBody(t, nil, forged), 400},
		{"unsigned", "application/json", pushBody(t, nil, unsigned), 400},
		{"stranger", "application/json", pushBody(t, nil, testEntry(t, stranger, "b5")), 403},
		{"oversized", "application/json", oversized, 413},
		{"unknown member", "application/json", strings.Replace(pushBody(t, nil, good), `"scope"`, `"extra":1,"scope"`, 1), 400},
		{"case-variant member", "application/json", strings.Replace(pushBody(t, nil, good), `"revokedBy"`, `"RevokedBy"`, 1), 400},
		{"duplicate member", "application/json", strings.Replace(pushBody(t, nil, good), `"scope":"chain"`, `"scope":"chain","scope":"block"`, 1), 400},
		{"other method", "application/json", strings.Replace(pushBody(t, nil, good), MethodRevoke, "tools/call", 1), 400},
		{"form post", "application/x-www-form-urlencoded", pushBody(t, nil, good), 415},
		{"trailing data", "application/json", pushBody(t, nil, good) + "{}", 400},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, msg := post(t, url, c.contentType, c.body)
			if resp.StatusCode != c.status {
				t.Fatalf("%s (%s), want %d", resp.Status, msg, c.status)
			}
			if n.store.List.Len() != 0 {
				t.Fatalf("a refused push stored %v", n.store.List.Entries())
			}
		})
	}
	if got := n.Stats().Rejected; got != uint64(len(cases)-1) { // the form post is refused before it is read
		t.Errorf("%d rejections counted, want %d", got, len(cases)-1)
	}

	if resp, msg := post(t, url, "application/json", pushBody(t, nil, good)); resp.StatusCode != http.StatusAccepted || msg != "" {
		t.Fatalf("good notification: %s %q", resp.Status, msg)
	}
	if !n.has(good) {
		t.Fatal("the good entry was not stored")
	}
	// As a request it gets a JSON-RPC answer; a repeat adds nothing.
	_, msg := post(t, url, "application/json", pushBody(t, 7, good))
	var res struct {
		ID     int
		Result struct {
			RevocationID string
			Added        bool
		}
	}
	if err := json.Unmarshal([]byte(msg), &res); err != nil || res.ID != 7 || res.Result.RevocationID != good.RevocationID || res.Result.Added {
		t.Fatalf("request: %s (%v)", msg, err)
	}
	_, msg = post(t, url, "application/json", pushBody(t, 8, testEntry(t, stranger, "b6")))
	if !strings.Contains(msg, `"error":{"code":-32602`) || !strings.Contains(msg, "not among") {
		t.Fatalf("refused request: %s", msg)
	}
	if n.store.List.Len() != 1 {
		t.Fatalf("%d entries stored, want 1", n.store.List.Len())
	}
}

func TestRevokeReachesPollingPeer(t *testing.T) {
	root := testKey(t, 1)
	a := newNode(t, principals(t, root))
	b := newNode(t, principals(t, root), a.srv.URL) // a URL with no path means Path
	b.Interval = 20 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error)
	go func() { done <- b.Run(ctx) }()

	e := testEntry(t, root, "b1")
	if added, err := a.Add(e); err != nil || !added {
		t.Fatalf("Add: %v, %v", added, err)
	}
	waitFor(t, "the peer to poll the entry", func() bool { return b.has(e) })
	// Polls after that get 304 and change nothing.
	before := b.Stats().LastPoll
	waitFor(t, "another poll", func() bool { return b.Stats().LastPoll.After(before) })
	if b.store.List.Len() != 1 || b.Stats().PollErrors != 0 {
		t.Fatalf("%d entries, %d poll errors", b.store.List.Len(), b.Stats().PollErrors)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestRevokePushedAtOnce(t *testing.T) {
	root := testKey(t, 1)
	b := newNode(t, principals(t, root)) // not running: it never polls
	a := newNode(t, principals(t, root), b.srv.URL+Path)
	e := testEntry(t, root, "b1")
	if _, err := a.Add(e); err != nil {
		t.Fatal(err)
	}
	a.pushes.Wait() // the push has been answered
	if !b.has(e) {
		t.Fatal("the pushed entry did not reach the peer")
	}
	if s := a.Stats(); s.Pushed != 1 || s.PushErrors != 0 {
		t.Fatalf("stats %+v", s)
	}
}

func TestPushesBetweenPeersStop(t *testing.T) {
	root := testKey(t, 1)
	a := newNode(t, principals(t, root))
	b := newNode(t, principals(t, root), a.srv.URL+Path)
	a.Peers = []string{b.srv.URL + Path}
	e := testEntry(t, root, "b1")
	if _, err := a.Add(e); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the push to arrive", func() bool { return b.has(e) })
	a.pushes.Wait()
	b.pushes.Wait()
	a.pushes.Wait()
	if a.Stats().Pushed != 1 || b.Stats().Pushed != 1 || a.store.List.Len() != 1 || b.store.List.Len() != 1 {
		t.Fatalf("a %+v, b %+v", a.Stats(), b.Stats())
	}
}

func TestPeerWithoutPushesIsOnlyPolled(t *testing.T) {
	root := testKey(t, 1)
	var posts int
	peer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "POST" {
			posts++
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		w.Write([]byte("[]"))
	}))
	defer peer.Close()
	a := newNode(t, principals(t, root), peer.URL)
	for _, b := range []string{"b1", "b2"} {
		if _, err := a.Add(testEntry(t, root, b)); err != nil {
			t.Fatal(err)
		}
		a.pushes.Wait()
	}
	if posts != 1 {
		t.Fatalf("%d pushes to a peer that refused the first, want 1", posts)
	}
	a.PollPeers(context.Background())
	if s := a.Stats(); s.PollErrors != 0 || s.LastPoll.IsZero() {
		t.Fatalf("stats %+v", s)
	}
}

func TestPollMergesOnlyVerifiedEntries(t *testing.T) {
	root, stranger := testKey(t, 1), testKey(t, 2)
	good := testEntry(t, root, "b1")
	forged := testEntry(t, root, "b2")
	forged.RevokedAt = "2020-01-01T00:00:00Z"
	unsigned := testEntry(t, root, "b3")
	unsigned.Signature = ""
	list := []revocation.Entry{forged, unsigned, testEntry(t, stranger, "b4"), good}
	peer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(list)
	}))
	defer peer.Close()
	a := newNode(t, principals(t, root), peer.URL)
	a.PollPeers(context.Background())
	if got := a.store.List.Entries(); len(got) != 1 || got[0] != good {
		t.Fatalf("merged %v", got)
	}
	if s := a.Stats(); s.Rejected != 3 || s.PollErrors != 0 {
		t.Fatalf("stats %+v", s)
	}
}

func TestPollRefusesBadLists(t *testing.T) {
	root := testKey(t, 1)
	good, _ := json.Marshal([]revocation.Entry{testEntry(t, root, "b1")})
	for name, body := range map[string]string{
		"oversized":      "[" + strings.Repeat(" ", 2048) + "]",
		"not an array":   `{"entries":[]}`,
		"unknown member": strings.Replace(string(good), `"scope"`, `"x":1,"scope"`, 1),
		"trailing data":  string(good) + "[]",
	} {
		t.Run(name, func(t *testing.T) {
			peer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(body)) }))
			defer peer.Close()
			a := newNode(t, principals(t, root), peer.URL)
			a.MaxListBytes = 1024
			a.PollPeers(context.Background())
			if s := a.Stats(); s.PollErrors != 1 || a.store.List.Len() != 0 || !s.LastPoll.IsZero() {
				t.Fatalf("stats %+v, %d entries", s, a.store.List.Len())
			}
		})
	}
}

func TestEntriesAppendedToTheFileArePushed(t *testing.T) {
	root := testKey(t, 1)
	path := filepath.Join(t.TempDir(), "revocations.json")
	if err := os.WriteFile(path, []byte("[]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := revocation.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := newNode(t, principals(t, root))
	a := &Distributor{Store: &FileStore{Path: path, File: f}, Authority: principals(t, root),
		Peers: []string{b.srv.URL}, LocalCheck: 10 * time.Millisecond, Interval: time.Hour, Logf: t.Logf}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- a.Run(ctx) }()
	defer func() { cancel(); <-done }()

	waitFor(t, "Run to read the list", func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.primed
	})
	// Another process (delegateos revoke) appends to the file.
	e := testEntry(t, root, "b1")
	if err := revocation.Append(path, e); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the appended entry to be pushed", func() bool { return b.has(e) })

	// An entry the Distributor takes is in the file and in force at once.
	e2 := testEntry(t, root, "b2")
	if added, err := a.Add(e2); err != nil || !added {
		t.Fatalf("Add: %v, %v", added, err)
	}
	if l, err := revocation.Load(path); err != nil || l.Len() != 2 {
		t.Fatalf("the file holds %v, %v", l, err)
	}
	if !f.List().IsRevoked(e2.RevocationID) {
		t.Fatal("the File has not re-read the list")
	}
	if added, err := a.Add(e2); err != nil || added {
		t.Fatalf("Add again: %v, %v", added, err)
	}
}

func TestUnreadableListIsNotPublishedEmpty(t *testing.T) {
	path := filepath.Join(t.TempDir(), "revocations.json")
	os.WriteFile(path, []byte("[]"), 0o644)
	f, err := revocation.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	os.WriteFile(path, []byte("[garbage"), 0o644)
	d := &Distributor{Store: &FileStore{Path: path, File: f}}
	rec := httptest.NewRecorder()
	d.ServeHTTP(rec, httptest.NewRequest("GET", Path, nil))
	if rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
}

func TestRunWaitsForAnUnreadableList(t *testing.T) {
	root := testKey(t, 1)
	path := filepath.Join(t.TempDir(), "revocations.json")
	old := testEntry(t, root, "old")
	if err := revocation.Append(path, old); err != nil {
		t.Fatal(err)
	}
	f, err := revocation.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	good, _ := os.ReadFile(path)
	os.WriteFile(path, []byte("[garbage"), 0o644) // unreadable when Run starts
	b := newNode(t, principals(t, root))
	var refused atomic.Bool
	a := &Distributor{Store: &FileStore{Path: path, File: f}, Authority: principals(t, root),
		Peers: []string{b.srv.URL}, LocalCheck: 10 * time.Millisecond, Interval: time.Hour,
		Logf: func(format string, args ...any) {
			if strings.HasPrefix(format, "revocation list:") {
				refused.Store(true)
			}
		}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- a.Run(ctx) }()
	defer func() { cancel(); <-done }()
	waitFor(t, "Run to find the list unreadable", refused.Load)
	os.WriteFile(path, good, 0o644) // readable again, with the entry it had
	waitFor(t, "the list to be primed", func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.primed
	})
	e := testEntry(t, root, "new")
	if err := revocation.Append(path, e); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the new entry to be pushed", func() bool { return b.has(e) })
	if b.has(old) {
		t.Fatal("an entry held before the list was primed was pushed")
	}
}

func TestPublishedListFollowsTheFile(t *testing.T) {
	root := testKey(t, 1)
	path := filepath.Join(t.TempDir(), "revocations.json")
	os.WriteFile(path, []byte("[]"), 0o644)
	f, err := revocation.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d := &Distributor{Store: &FileStore{Path: path, File: f}}
	_, etag1, err := d.ListBytes()
	if err != nil {
		t.Fatal(err)
	}
	// Appended by another process: the next GET shows it.
	e := testEntry(t, root, "b1")
	if err := revocation.Append(path, e); err != nil {
		t.Fatal(err)
	}
	data, etag2, err := d.ListBytes()
	if err != nil || etag2 == etag1 || !strings.Contains(string(data), e.Signature) {
		t.Fatalf("after an append: %s %q %v", data, etag2, err)
	}
}

// lateAuthority refuses every entry until it is told to accept them, as
// Tokens refuses an entry for a token the verifier has not yet seen.
type lateAuthority struct{ ok atomic.Bool }

func (a *lateAuthority) Authorize(e revocation.Entry) error {
	if !a.ok.Load() {
		return fmt.Errorf("%w: not yet", ErrNotAuthorized)
	}
	return nil
}

// An entry a poll refused because its revoker was not (yet) accepted is
// read again by the next poll, even when the peer's list has not changed:
// a verifier that sees the revoked token only after its first poll must
// not keep allowing it because the peer answers 304.
func TestRefusedEntryIsPolledAgain(t *testing.T) {
	k := testKey(t, 1)
	peer := newNode(t, principals(t, k))
	e := testEntry(t, k, "block")
	if _, err := peer.Add(e); err != nil {
		t.Fatal(err)
	}
	auth := &lateAuthority{}
	a := newNode(t, auth, peer.srv.URL)
	a.PollPeers(context.Background())
	if a.has(e) {
		t.Fatal("an entry the authority refused was merged")
	}
	auth.ok.Store(true) // the verifier has now seen the token
	a.PollPeers(context.Background())
	a.pushes.Wait() // the merged entry is pushed back to the peer
	if !a.has(e) {
		t.Fatal("the peer's unchanged list was not read again: the entry refused before is still missing")
	}
}

// TestAddedOnlyForNewEntries: serve ends the sessions a revocation
// revokes when its Distributor says an entry was added. A push refused (as
// a request it is still answered 200 with a JSON-RPC error) or a re-push
// of an entry already held — which anyone can copy from the published
// list — must not say so: each would make the server re-verify every
// session's token. Found by the issue 24 review: serve took any 2xx answer
// to a push as an entry taken.
func TestAddedOnlyForNewEntries(t *testing.T) {
	root, stranger := testKey(t, 1), testKey(t, 2)
	n := newNode(t, principals(t, root))
	var added atomic.Int64
	n.Added = func() { added.Add(1) }
	url := n.srv.URL + Path
	good := testEntry(t, root, "b1")

	if resp, msg := post(t, url, "application/json", pushBody(t, 1, testEntry(t, stranger, "b2"))); resp.StatusCode != http.StatusOK || !strings.Contains(msg, `"error"`) {
		t.Fatalf("refused request: %s %s", resp.Status, msg)
	}
	if got := added.Load(); got != 0 {
		t.Fatalf("a refused push told Added %d times", got)
	}
	if resp, _ := post(t, url, "application/json", pushBody(t, nil, good)); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("good push: %s", resp.Status)
	}
	if got := added.Load(); got != 1 {
		t.Fatalf("a new entry told Added %d times, want 1", got)
	}
	for i := range 5 {
		if resp, _ := post(t, url, "application/json", pushBody(t, i+2, good)); resp.StatusCode != http.StatusOK {
			t.Fatalf("repeat push: %s", resp.Status)
		}
		if resp, _ := post(t, url, "application/json", pushBody(t, nil, good)); resp.StatusCode != http.StatusAccepted {
			t.Fatalf("repeat notification: %s", resp.Status)
		}
	}
	if got := added.Load(); got != 1 {
		t.Fatalf("re-pushes of a held entry told Added: %d calls, want 1", got)
	}

	// A poll tells it of what it adds, and only then.
	peer := newNode(t, principals(t, root))
	if _, err := peer.Add(testEntry(t, root, "b3")); err != nil {
		t.Fatal(err)
	}
	var polled atomic.Int64
	p := newNode(t, principals(t, root), peer.srv.URL)
	p.Added = func() { polled.Add(1) }
	p.PollPeers(context.Background())
	if got := polled.Load(); got != 1 {
		t.Fatalf("after a poll that added an entry: %d calls, want 1", got)
	}
	p.PollPeers(context.Background())
	if got := polled.Load(); got != 1 {
		t.Fatalf("a poll that added nothing told Added: %d calls, want 1", got)
	}
	// The entries it took are pushed back to the peer in the background:
	// wait for them before the test (and its log) ends.
	p.pushes.Wait()
	n.pushes.Wait()
}
