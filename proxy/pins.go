package proxy

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/internal/fsutil"
	"github.com/delegateos/delegateos/internal/mcpdef"
	"github.com/delegateos/delegateos/internal/render"
	"github.com/delegateos/delegateos/policy"
)

// pinListTimeout bounds the proxy's own listing of a kind, every page of
// it, while the client's requests wait.
const pinListTimeout = 10 * time.Second

// maxPinPages bounds the pages of the proxy's own listing.
const maxPinPages = 1000

// pinIDPrefix starts the ids of the proxy's own list requests. They are
// strings; the relay forwards the client's requests under integers only,
// so no answer to one can be taken for an answer to the other.
const pinIDPrefix = "delegateos-pins-"

// howToRepin tells an operator what to do about a definition that does
// not match its pin.
const howToRepin = "review it with 'delegateos pin --diff --policy POLICY -- UPSTREAM...', then approve it with 'delegateos pin --policy POLICY -- UPSTREAM...'"

// pinner holds a session's pins and what the upstream last listed.
//
// What the upstream lists is learnt in two ways. Every list result the
// relay passes to the client is filtered against the pins: an entry whose
// definition differs from its pin, or that has none, is hidden. And before
// a tools/call, prompts/get or completion/complete on a prompt is decided,
// the proxy makes sure it knows the target's current definition: unless
// it has listed that kind since the upstream last said the list changed
// (notifications/tools/list_changed, notifications/prompts/list_changed)
// or since a list the client got disagreed with what it knew, it lists
// every page itself first, while the client's requests wait. A call is
// refused when the definition it last listed is not the pinned one.
type pinner struct {
	path string
	pins atomic.Pointer[policy.Pins]
	// stamp is the lock file as it was when pins were read: a refusal
	// looks for a new one (a re-pin) before it is given.
	reloadMu sync.Mutex
	stat     *fsutil.StatPath
	stamp    fsutil.Stamp

	// state of the kinds whose requests are gated: tools and prompts.
	state [mcpdef.Prompt + 1]pinState

	// The listing in flight, answered by the server's pump.
	waitMu sync.Mutex
	waitID string
	waitCh chan []byte

	seq int64 // the client's pump's
}

// pinState is what the proxy knows of one kind's current definitions.
type pinState struct {
	// stale is set by the server's pump when the list may have changed.
	stale atomic.Bool
	// known is the last listing, written by the client's pump only.
	known atomic.Pointer[pinListing]
}

// pinListing is one listing of a kind: each entry's verdict, by name.
type pinListing struct {
	entries map[string]pinEntry
	// failed says why the listing could not be made, if it could not.
	failed string
}

type pinEntry struct {
	digest string
	// verdict is "" when the definition is the pinned one, else why not.
	verdict string
}

// newPinner reads the lock file the policy names; nil when it names none.
func newPinner(p *policy.Policy) (*pinner, error) {
	if p == nil || p.ToolPins == "" {
		return nil, nil
	}
	pn := &pinner{path: p.ToolPins}
	var err error
	if pn.stat, err = fsutil.NewStatPath(pn.path); err != nil {
		return nil, fmt.Errorf("tool_pins: %w", err)
	}
	// Stamped before it is read: a change in between is read again.
	if err := pn.stat.Stat(&pn.stamp); err != nil {
		return nil, fmt.Errorf("tool_pins: %w", err)
	}
	pins, err := policy.LoadPins(pn.path)
	if err != nil {
		return nil, fmt.Errorf("tool_pins: %w", err)
	}
	pn.pins.Store(pins)
	return pn, nil
}

// lockName is the lock file's name for messages (not its whole path).
func (pn *pinner) lockName() string { return filepath.Base(pn.path) }

// reload reads the lock file again if it has changed since it was read,
// and reports whether it did. A lock file that cannot be read now leaves
// the pins as they were (the last approval stands), with a warning.
func (pn *pinner) reload(log *zap.Logger) bool {
	pn.reloadMu.Lock()
	defer pn.reloadMu.Unlock()
	var now fsutil.Stamp
	if err := pn.stat.Stat(&now); err != nil {
		log.Warn("the lock file cannot be read again; its pins as last read still apply", zap.String("file", pn.path), zap.Error(err))
		return false
	}
	if now.Same(pn.stamp) {
		return false
	}
	pn.stamp = now
	pins, err := policy.LoadPins(pn.path)
	if err != nil {
		log.Warn("the lock file changed but is not valid; its pins as last read still apply", zap.String("file", pn.path), zap.Error(err))
		return false
	}
	pn.pins.Store(pins)
	for i := range pn.state {
		pn.state[i].stale.Store(true)
	}
	log.Info("the lock file changed; its pins apply from now", zap.String("file", pn.path))
	return true
}

// verdict is "" when def is pinned as it is, else why it is not.
func (pn *pinner) verdict(def *mcpdef.Definition) string {
	pin := pn.pins.Load().Lookup(def.Kind, def.Name)
	switch {
	case pin == nil:
		return pn.unpinned(def.Kind, def.Name)
	case pin.SHA256 == def.Digest():
		return ""
	}
	what := "its definition differs from its pin in " + pn.lockName()
	if pin.Definition != nil {
		what = fmt.Sprintf("its %s differs from its pin in %s", fieldsPhrase(mcpdef.ChangedFields(def.Kind, pin.Definition, def.Canonical)), pn.lockName())
	}
	return fmt.Sprintf("%s %s changed after it was approved: %s; %s", def.Kind, render.Name(def.Name), what, howToRepin)
}

// unpinned is why a name without a pin is refused.
func (pn *pinner) unpinned(k mcpdef.Kind, name string) string {
	return fmt.Sprintf("%s %s has no pin in %s: it is new, or renamed, since the definitions were approved; %s",
		k, render.Name(name), pn.lockName(), howToRepin)
}

func fieldsPhrase(fields string) string {
	if fields == "" {
		return "definition"
	}
	return fields
}

// pinTarget is the kind and name a gated request's pin is looked up by;
// false for a request pins do not gate (resources: see README).
func pinTarget(req *gate.CallRequest) (mcpdef.Kind, string, bool) {
	switch {
	case req.Method == "" || req.Method == gate.MethodToolsCall:
		return mcpdef.Tool, req.Tool, true
	case req.Method == gate.MethodPromptsGet, req.Method == gate.MethodCompletionComplete && req.Prompt != "":
		return mcpdef.Prompt, req.Prompt, true
	}
	return 0, "", false
}

// pinCheck is why the request's target is not as pinned, or "". It may
// list the upstream's tools or prompts first (see pinner).
func (s *session) pinCheck(req *gate.CallRequest) string {
	k, name, gated := pinTarget(req)
	if !gated {
		return ""
	}
	why := s.pinVerdict(k, name)
	if why != "" && s.pins.reload(s.log) {
		why = s.pinVerdict(k, name)
	}
	return why
}

func (s *session) pinVerdict(k mcpdef.Kind, name string) string {
	pn := s.pins
	if pn.pins.Load().Lookup(k, name) == nil {
		return pn.unpinned(k, name)
	}
	l := s.pinListing(k)
	if l.failed != "" {
		return fmt.Sprintf("the upstream's %s could not be listed to check %s %s against its pin in %s: %s",
			k.Plural(), k, render.Name(name), pn.lockName(), l.failed)
	}
	e, listed := l.entries[name]
	if !listed {
		return fmt.Sprintf("%s %s is pinned in %s, but the upstream does not list it, so its definition cannot be checked; %s",
			k, render.Name(name), pn.lockName(), howToRepin)
	}
	return e.verdict
}

// pinListing returns a listing of kind k made since the upstream last said
// it changed, listing it now if there is none.
func (s *session) pinListing(k mcpdef.Kind) *pinListing {
	st := &s.pins.state[k]
	if l := st.known.Load(); l != nil && l.failed == "" && !st.stale.Load() {
		return l
	}
	deadline := time.Now().Add(pinListTimeout)
	for range 3 {
		// Cleared before the list is asked for: a change announced while
		// it is read makes it stale again.
		st.stale.Store(false)
		l := s.listForPins(k, deadline)
		st.known.Store(l)
		if l.failed != "" || !st.stale.Load() {
			return l
		}
	}
	return &pinListing{failed: "the list kept changing while the proxy read it"}
}

// listForPins lists every page of kind k from the upstream and judges
// each entry against its pin.
func (s *session) listForPins(k mcpdef.Kind, deadline time.Time) *pinListing {
	l := &pinListing{entries: map[string]pinEntry{}}
	cursor := ""
	seen := map[string]bool{}
	for range maxPinPages {
		frame, err := s.pinRequest(k, cursor, deadline)
		if err != nil {
			return &pinListing{failed: err.Error()}
		}
		entries, next, err := readListPage(k, frame)
		if err != nil {
			return &pinListing{failed: err.Error()}
		}
		for _, e := range entries {
			s.judgeListed(l, k, e)
		}
		if next == "" {
			s.log.Info("listed the upstream's definitions to check them against their pins", zap.String("method", k.ListMethod()), zap.Int("entries", len(l.entries)))
			return l
		}
		if seen[next] {
			return &pinListing{failed: "the upstream gave the same nextCursor twice"}
		}
		seen[next] = true
		cursor = next
	}
	return &pinListing{failed: fmt.Sprintf("more than %d pages", maxPinPages)}
}

// judgeListed adds one listed entry's verdict to l.
func (s *session) judgeListed(l *pinListing, k mcpdef.Kind, entry []byte) {
	def, err := mcpdef.Read(k, entry)
	if err != nil {
		// Named for the refusal only: whatever its name, it is refused.
		var named map[string]json.RawMessage
		var name string
		if json.Unmarshal(entry, &named) != nil || json.Unmarshal(named[k.Key()], &name) != nil || name == "" {
			return // nothing names it, so nothing can call it
		}
		l.entries[name] = pinEntry{verdict: fmt.Sprintf("%s %s is listed with a definition that cannot be read one way only (%v)", k, render.Name(name), err)}
		return
	}
	e := pinEntry{digest: def.Digest(), verdict: s.pins.verdict(def)}
	if old, dup := l.entries[def.Name]; dup && old.digest != e.digest {
		e = pinEntry{verdict: fmt.Sprintf("%s %s is listed twice, with different definitions", k, render.Name(def.Name))}
	}
	l.entries[def.Name] = e
}

// readListPage reads a list result as strictly as the client's are read:
// its entries and its nextCursor.
func readListPage(k mcpdef.Kind, frame []byte) ([]json.RawMessage, string, error) {
	msg, err := strictMembers(frame, "")
	if err != nil {
		return nil, "", fmt.Errorf("its %s answer cannot be read one way only", k.ListMethod())
	}
	if e, isErr := msg["error"]; isErr {
		var body struct {
			Message string `json:"message"`
		}
		_ = json.Unmarshal(e, &body)
		return nil, "", fmt.Errorf("it answered %s with an error: %s", k.ListMethod(), render.Name(body.Message))
	}
	result, err := strictMembers(msg["result"], k.ResultMember())
	if err != nil {
		return nil, "", fmt.Errorf("its %s result cannot be read one way only", k.ListMethod())
	}
	var entries []json.RawMessage
	if raw, ok := result[k.ResultMember()]; ok && json.Unmarshal(raw, &entries) != nil {
		return nil, "", fmt.Errorf("its %s result's %s is not a list", k.ListMethod(), k.ResultMember())
	}
	var next string
	if raw, ok := result["nextCursor"]; ok && string(raw) != "null" && json.Unmarshal(raw, &next) != nil {
		return nil, "", fmt.Errorf("its %s result's nextCursor is not a string", k.ListMethod())
	}
	return entries, next, nil
}

// pinRequest sends one list request of the proxy's own and waits for its
// answer until the deadline.
func (s *session) pinRequest(k mcpdef.Kind, cursor string, deadline time.Time) ([]byte, error) {
	pn := s.pins
	pn.seq++
	id := pinIDPrefix + strconv.FormatInt(pn.seq, 10)
	req := struct {
		JSONRPC string            `json:"jsonrpc"`
		ID      string            `json:"id"`
		Method  string            `json:"method"`
		Params  map[string]string `json:"params,omitempty"`
	}{JSONRPC: "2.0", ID: id, Method: k.ListMethod()}
	if cursor != "" {
		req.Params = map[string]string{"cursor": cursor}
	}
	frame, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	ch := make(chan []byte, 1)
	pn.waitMu.Lock()
	pn.waitID, pn.waitCh = id, ch
	pn.waitMu.Unlock()
	defer func() {
		pn.waitMu.Lock()
		pn.waitID, pn.waitCh = "", nil
		pn.waitMu.Unlock()
	}()
	if err := s.toServer.write(frame); err != nil {
		return nil, errors.New("the upstream is not accepting input")
	}
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case answer := <-ch:
		if answer == nil {
			return nil, fmt.Errorf("its %s answer was too large or could be read two ways", k.ListMethod())
		}
		return answer, nil
	case <-timer.C:
		return nil, fmt.Errorf("it did not answer %s within %s", k.ListMethod(), pinListTimeout)
	case <-s.ctx.Done():
		return nil, errors.New("the session is ending")
	}
}

// pinAnswer hands an upstream answer to the proxy's own list request
// waiting for it (a nil frame: one that cannot be relayed), and reports
// whether id was that request's. Only the server's pump calls it.
func (s *session) pinAnswer(id, frame []byte) bool {
	if s.pins == nil || len(id) < 2 || id[0] != '"' {
		return false
	}
	v, ok := unquote(id)
	pn := s.pins
	pn.waitMu.Lock()
	defer pn.waitMu.Unlock()
	if !ok || pn.waitCh == nil || v != pn.waitID {
		return false
	}
	pn.waitCh <- clone(frame)
	pn.waitCh = nil
	return true
}

// pinNotified marks a kind's listing stale when the upstream says its
// list changed.
func (s *session) pinNotified(method string) {
	if s.pins == nil {
		return
	}
	var k mcpdef.Kind
	switch method {
	case "notifications/tools/list_changed":
		k = mcpdef.Tool
	case "notifications/prompts/list_changed":
		k = mcpdef.Prompt
	default:
		return
	}
	s.pins.state[k].stale.Store(true)
	s.log.Info("the upstream's list changed; the proxy lists it again before the next request that uses it", zap.String("method", method))
}

// pinListKind is the kind a list method's entries are pinned as; false
// for a list that is not pinned (resources/list) or a session without
// pins.
func (s *session) pinListKind(method string) (mcpdef.Kind, bool) {
	if s.pins == nil {
		return 0, false
	}
	return mcpdef.KindOfList(method)
}

// pinShown reports whether a list entry the client asked for may be
// shown: only when its definition is the pinned one. An entry that differs
// from what the proxy last listed makes that listing stale. Only the
// server's pump calls it.
func (s *session) pinShown(k mcpdef.Kind, entry []byte) bool {
	def, err := mcpdef.Read(k, entry)
	if err != nil {
		s.log.Warn("list entry hidden: its definition cannot be read one way only", zap.String("method", k.ListMethod()), zap.Error(err))
		return false
	}
	digest := def.Digest()
	if int(k) < len(s.pins.state) {
		st := &s.pins.state[k]
		if l := st.known.Load(); l != nil && l.entries[def.Name].digest != digest {
			st.stale.Store(true)
		}
	}
	why := s.pins.verdict(def)
	if why != "" && s.pins.reload(s.log) {
		why = s.pins.verdict(def)
	}
	if why != "" {
		s.log.Warn("list entry hidden: "+k.String()+" not pinned", zap.String("method", k.ListMethod()), zap.String("name", def.Name), zap.String("detail", why))
		return false
	}
	return true
}
