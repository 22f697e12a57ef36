package gate

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/delegateos/delegateos/budget"
	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/internal/render"
	"github.com/delegateos/delegateos/policy"
	"github.com/delegateos/delegateos/ratelimit"
)

// Gate makes every allow/deny decision for a request that does something:
// tools/call, resources/read, resources/subscribe, prompts/get and
// completion/complete. Logging, spend recording and, later, signed decision
// receipts hang off its Decision.
type Gate struct {
	Policy   *policy.Policy
	Verifier *dct.Verifier
	Budget   budget.Store
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Ended, when set, reports whether a delegation has ended (completed,
	// failed or revoked) and how. A call under a token whose chain passes
	// through an ended delegation is refused: the work it was for is over.
	// It is given each link of the verified chain, and decides by the
	// link's Key: anyone may give a delegation of her own another's ID,
	// but not its key (Delegations.Ended).
	Ended func(link dct.ChainLink) (status string, ended bool)
	// Pending, when set, says why calls under a verified chain must wait
	// ("" when they need not): a sub-task of a decomposition plan waits
	// for the sub-tasks it depends on to complete (Delegations.Pending).
	Pending func(scope *dct.AuthorizedScope) string
	// Hold, when set, may lower the limits of a call's budget levels by
	// what is set aside for others (Delegations.Hold: the unspent
	// allotments of a plan's sub-tasks); it returns a new slice when it
	// changes any.
	Hold func(scope *dct.AuthorizedScope, levels []budget.Level, spent func(key string) int64) []budget.Level
	// Accept, when set, is asked about every token the gate verifies (a
	// call's, a list's, a held call's once approved), wherever the token
	// came from, after its chain verified: an error refuses it. proven
	// says the token is the one the session was opened with (its holder
	// presented it to the transport, which may have checked more, e.g. a
	// DPoP proof); a token carried in params._delegateos or bound by a
	// delegation message is not. The authorization server of serve
	// --authorize sets it, so that a token it issued is accepted on the
	// same terms in a call as in the Authorization header.
	Accept func(token string, scope *dct.AuthorizedScope, proven bool) error
	// HonourUpstreamCost reserves each call's MaxCost rather than its Cost,
	// because the upstream may report what the call cost (up to that).
	HonourUpstreamCost bool
	// Rates enforces the policy's rate limits, under the names RateLimits
	// gives them: a *ratelimit.Limiter, or a *ratelimit.Redis shared by a
	// fleet; nil means a limiter in memory, made at the first decision.
	Rates ratelimit.Store
	// Observer, when set, is told of every decision and settled call.
	Observer Observer

	levels levelsMemo
	limits rateState
}

// The request methods the gate decides.
const (
	MethodToolsCall          = "tools/call"
	MethodResourcesRead      = "resources/read"
	MethodResourcesSubscribe = "resources/subscribe"
	MethodPromptsGet         = "prompts/get"
	MethodCompletionComplete = "completion/complete"
	// MethodSubscriptionsListen (MCP 2026-07-28) replaces resources/subscribe:
	// every URI it subscribes to must be readable.
	MethodSubscriptionsListen = "subscriptions/listen"
)

// CallRequest is a gated request as the gate sees it.
type CallRequest struct {
	// Method is the request's method; "" means tools/call.
	Method string
	// Tool names a tools/call's tool, Prompt a prompts/get's prompt, URI
	// the resource of resources/read and resources/subscribe. A
	// completion/complete sets the Prompt or the URI its ref names.
	Tool, Prompt, URI string
	// URIs are the resources a subscriptions/listen subscribes to.
	URIs []string
	// Arguments are a tools/call's or a prompts/get's arguments, or the
	// params of a completion/complete or a vendor method as forwarded
	// (for their receipts).
	Arguments json.RawMessage
	// Token is the DCT presented with the request (params._delegateos.dct)
	// or, failing that, the session's; empty if there is none.
	Token string
	// Proven says Token is the token the session was opened with (see
	// Gate.Accept).
	Proven bool
	// ContractID and DelegationID, when the request names them in
	// _delegateos, must match the token.
	ContractID, DelegationID string
	// MaxCost, when the request sets it (_delegateos.maxCostMicrocents),
	// bounds what the call may reserve: a call whose reservation is over
	// it is refused budget_exceeded, whatever the token's budget (an LDP
	// task's contract budget, held at the decision itself).
	MaxCost *int64
	// Extension marks a vendor extension method that the policy's methods
	// list names (Method): it needs the capability its rule gives.
	Extension bool
	// Unpinned, when set, says why the tool or prompt is not as the
	// policy's pins approved it: the request is refused as ToolNotPinned
	// once everything else about it would allow it.
	Unpinned string
}

// Target is what the request names, for logs: the tool, prompt or URI.
func (r *CallRequest) Target() string {
	switch {
	case r.Extension:
		return r.Method
	case r.Method == "" || r.Method == MethodToolsCall:
		return r.Tool
	case r.Prompt != "":
		return r.Prompt
	case len(r.URIs) > 0:
		return strings.Join(r.URIs, " ")
	}
	return r.URI
}

// what names the request's target for people, e.g. tool "get-env".
func (r *CallRequest) what() string {
	switch {
	case r.Extension:
		return "method " + render.Name(r.Method)
	case r.Method == "" || r.Method == MethodToolsCall:
		return "tool " + render.Name(r.Tool)
	case r.Prompt != "":
		return "prompt " + render.Name(r.Prompt)
	}
	return "resource " + render.Name(r.URI)
}

// Decision is the gate's answer. When Allowed, Reservation holds the
// call's cost until Settle. Scope is shared with every decision on the same
// token (dct.Verifier.VerifyChain): read it, do not change it.
type Decision struct {
	Allowed     bool
	Denial      *Denial
	Call        policy.Call
	Scope       *dct.AuthorizedScope
	Reservation *budget.Reservation
	// Unauthenticated is set when the policy let a call without a token through.
	Unauthenticated bool
	Latency         time.Duration
	observed        observed // for the Observer's Settled
	// rate is the allowed call's rate-limit slots, given back when it is
	// not forwarded (ReleaseUnforwarded).
	rate ratelimit.Admission
}

func (g *Gate) now() time.Time {
	if g.Now != nil {
		return g.Now()
	}
	return time.Now()
}

// mapRequest maps a request to the capability it needs and what it costs.
// Subscribing and completing cost nothing: they are gated by what reading
// the resource or getting the prompt needs, and charged when that is done.
func (g *Gate) mapRequest(req *CallRequest) (policy.Call, error) {
	if req.Extension {
		call, ok := g.Policy.MapMethod(req.Method)
		if !ok {
			return call, fmt.Errorf("%w: the method %s is not in the policy's methods", policy.ErrUnmappable, render.Name(req.Method))
		}
		return call, nil
	}
	switch req.Method {
	case "", MethodToolsCall:
		return g.Policy.Map(req.Tool, req.Arguments)
	case MethodResourcesRead:
		return g.Policy.MapResource(req.URI)
	case MethodPromptsGet:
		return g.Policy.MapPrompt(req.Prompt, req.Arguments)
	}
	var call policy.Call
	var err error
	if req.Prompt != "" {
		call, err = g.Policy.MapPrompt(req.Prompt, nil)
	} else {
		call, err = g.Policy.MapResource(req.URI)
	}
	call.Cost, call.MaxCost = 0, 0
	return call, err
}

// visible reports whether a token granting caps could ever make the
// request: the same view the lists show.
func (g *Gate) visible(req *CallRequest, caps []dct.Capability) bool {
	switch {
	case req.Extension:
		call, ok := g.Policy.MapMethod(req.Method)
		return ok && covered(caps, call)
	case req.Method == "" || req.Method == MethodToolsCall:
		return g.Policy.Visible(req.Tool, caps)
	case req.Method == MethodPromptsGet || req.Prompt != "":
		return g.Policy.PromptVisible(req.Prompt, caps)
	}
	return g.Policy.ResourceVisible(req.URI, caps)
}

// Decide runs the checks in order: the target must be visible to the
// token, the request must map to a capability, the token must verify for
// it (DelegateOS §10.1, including revocation), the contract named in the
// request must be the token's, the policy's rate limits must admit it at
// every level of the delegation chain, and the cost must fit the budget at
// every level, where it is reserved before the request is forwarded. A
// request the budget refuses gives its rate-limit slots back.
func (g *Gate) Decide(req CallRequest) Decision { return g.DecideAt(&req, time.Now()) }

// observe tells the Observer of a decision. It takes copies (an
// Observer may neither keep nor change them): were req and d handed to the
// interface as they are, the compiler would have to put every request and
// every decision on the heap, Observer or not.
func (g *Gate) observe(req CallRequest, d Decision) { g.Observer.Decided(&req, &d) }

// DecideAt is Decide for a request that arrived at start, for a front
// that has read the clock already (its Latency counts from start); req is
// read, not kept.
func (g *Gate) DecideAt(req *CallRequest, start time.Time) (d Decision) {
	defer func() {
		d.Latency = time.Since(start)
		if g.Observer != nil {
			d.observed = observed{method: req.Method, at: start.Add(d.Latency)}
			g.observe(*req, d)
		}
	}()
	now := start
	if g.Now != nil {
		now = g.Now()
	}
	call, mapErr := g.mapRequest(req)
	d.Call = call
	deny := func(t dct.DenialType, granted []dct.Capability, format string, args ...any) Decision {
		d.Denial = &Denial{Type: t, Detail: fmt.Sprintf(format, args...), Requested: Requested(call), Granted: granted}
		return d
	}
	if req.Token == "" {
		if g.Policy.AllowUnauthenticated {
			if req.Unpinned != "" {
				return deny(ToolNotPinned, nil, "%s", req.Unpinned)
			}
			admitted, den := g.reserveRate(req, call, nil, nil, now)
			if den != nil {
				d.Denial = den
				return d
			}
			d.Allowed, d.Unauthenticated, d.rate = true, true, admitted
			return d
		}
		return deny(dct.Malformed, nil, "no DCT: %s needs a token; start the proxy with --token @FILE or pass one in params._delegateos.dct", req.what())
	}
	if g.Verifier == nil {
		return deny(dct.InvalidSignature, nil, "this proxy trusts no root, so no token can be accepted; list roots in the policy or give --root")
	}
	scope, err := g.Verifier.VerifyChain(req.Token, now)
	if err != nil {
		return denyFrom(d, err, Requested(call))
	}
	d.Scope = scope
	if g.Accept != nil {
		if err := g.Accept(req.Token, scope, req.Proven); err != nil {
			return deny(dct.InvalidSignature, nil, "%s", err.Error())
		}
	}
	if g.Ended != nil {
		for _, l := range scope.Chain {
			if status, ended := g.Ended(l); ended {
				t, detail := endedDenial(l.DelegationID, status)
				return deny(t, scope.Capabilities, "%s", detail)
			}
		}
	}
	if g.Pending != nil {
		if why := g.Pending(scope); why != "" {
			return deny(DependencyPending, scope.Capabilities, "%s", why)
		}
	}
	if den := g.eachTarget(req, call, mapErr, scope, false); den != nil {
		d.Denial = den
		return d
	}
	if req.ContractID != "" && req.ContractID != scope.ContractID {
		return deny(dct.CapabilityNotGranted, scope.Capabilities, "the request names contract %s but the token is bound to %s", render.Name(req.ContractID), render.Name(scope.ContractID))
	}
	if req.DelegationID != "" && req.DelegationID != scope.DelegationID {
		return deny(dct.CapabilityNotGranted, scope.Capabilities, "the request names delegation %s but the token is for %s", render.Name(req.DelegationID), render.Name(scope.DelegationID))
	}
	// §10.1 steps 6 and 7 on the verified chain: the leaf's spend, then the
	// capability. Reserve below then checks the cost at every level.
	levels := g.levels.of(scope)
	// spentOut is step 6. With a shared store (Redis) reading the spend is
	// a round trip, so it is read only where its answer decides: before a
	// later check's denial, which a spent leaf takes precedence over.
	// Otherwise Reserve itself refuses a spent level, whatever the cost
	// (every store's admit), and the call costs one round trip.
	spentOut := func() (Decision, bool) {
		if spent, limit := g.Budget.Spent(levels[len(levels)-1].Key), scope.RemainingBudgetMicrocents; spent >= limit {
			return deny(dct.BudgetExceeded, scope.Capabilities, "spent %d of a budget of %d microcents", spent, limit), true
		}
		return d, false
	}
	if den := g.eachTarget(req, call, mapErr, scope, true); den != nil {
		if out, ok := spentOut(); ok {
			return out
		}
		d.Denial = den
		return d
	}
	if req.Unpinned != "" {
		if out, ok := spentOut(); ok {
			return out
		}
		return deny(ToolNotPinned, scope.Capabilities, "%s", req.Unpinned)
	}
	reserve := call.Cost
	if g.HonourUpstreamCost {
		reserve = max(call.MaxCost, call.Cost)
	}
	if req.MaxCost != nil && reserve > *req.MaxCost {
		return deny(dct.BudgetExceeded, scope.Capabilities, "this call costs %d microcents; the request allows at most %d", reserve, *req.MaxCost)
	}
	admitted, den := g.reserveRate(req, call, scope, levels, now)
	if den != nil {
		if out, ok := spentOut(); ok {
			return out
		}
		d.Denial = den
		return d
	}
	if g.Hold != nil {
		levels = g.Hold(scope, levels, g.Budget.Spent)
	}
	r, err := g.Budget.Reserve(levels, reserve)
	if err != nil {
		g.releaseRate(admitted)
		var ex *budget.ExceededError
		if errors.As(err, &ex) {
			if ex.Key == levels[len(levels)-1].Key && ex.Spent >= ex.Limit {
				// Step 6, decided by the reservation (see spentOut).
				return deny(dct.BudgetExceeded, scope.Capabilities, "spent %d of a budget of %d microcents", ex.Spent, ex.Limit)
			}
			return deny(dct.BudgetExceeded, scope.Capabilities, "this call costs %d microcents; delegation %s has spent %d of %d", ex.Cost, displayKey(scope, levels, ex.Key), ex.Spent, ex.Limit)
		}
		// The spend could not be recorded: refuse rather than run unmetered,
		// and say it is the store (retryable), never that the budget is
		// spent.
		d.Denial = storeFailure(err, Requested(call), scope.Capabilities)
		return d
	}
	d.Allowed, d.Reservation, d.rate = true, r, admitted
	return d
}

// eachTarget runs checkTarget (or, with cover, checkCovered) on what the
// request names, or, for a subscriptions/listen, on each URI it
// subscribes to (as a subscribe to it would be checked), and returns the
// first denial.
func (g *Gate) eachTarget(req *CallRequest, call policy.Call, mapErr error, scope *dct.AuthorizedScope, cover bool) *Denial {
	check := func(req *CallRequest, call policy.Call, mapErr error) *Denial {
		if cover {
			return checkCovered(req, call, scope)
		}
		return g.checkTarget(req, call, mapErr, scope)
	}
	if len(req.URIs) == 0 {
		return check(req, call, mapErr)
	}
	sub := *req
	for _, uri := range req.URIs {
		sub.URI = uri
		c, err := g.mapRequest(&sub)
		if den := check(&sub, c, err); den != nil {
			return den
		}
	}
	return nil
}

func targetDenial(call policy.Call, scope *dct.AuthorizedScope, format string, args ...any) *Denial {
	return &Denial{Type: dct.CapabilityNotGranted, Detail: fmt.Sprintf(format, args...), Requested: Requested(call), Granted: scope.Capabilities}
}

// checkTarget: the target must be visible to the token, map to a
// capability, and hold nothing a server may decode differently.
func (g *Gate) checkTarget(req *CallRequest, call policy.Call, mapErr error, scope *dct.AuthorizedScope) *Denial {
	if mapErr != nil && call.Namespace == "" {
		// Nothing to show: the target maps to no capability at all (a
		// URI with a dot segment, say), whatever the token grants.
		return targetDenial(call, scope, "%v", mapErr)
	}
	if !g.visible(req, scope.Capabilities) {
		return targetDenial(call, scope, "%s needs %s: not granted by this token", req.what(), needs(call))
	}
	if mapErr != nil {
		return targetDenial(call, scope, "%v", mapErr)
	}
	if what := suspectResource(call.Resource); what != "" {
		return targetDenial(call, scope, "resource %s contains %s, which a server may read differently from the gate", render.Name(call.Resource), what)
	}
	return nil
}

// checkCovered: a capability of the token must cover the call's (§10.1
// step 7).
func checkCovered(req *CallRequest, call policy.Call, scope *dct.AuthorizedScope) *Denial {
	if !covered(scope.Capabilities, call) {
		return targetDenial(call, scope, "%s needs %s: not granted by this token", req.what(), needs(call))
	}
	return nil
}

// needs writes the capability a call needs for a message.
func needs(call policy.Call) string {
	return render.Name(call.Namespace + ":" + call.Action + ":" + call.Resource)
}

// Refuse is the decision for a call the relay cannot hand to Decide (its
// params._delegateos is unreadable): a denial of type t that still names
// the capability the call requested.
func (g *Gate) Refuse(req CallRequest, t dct.DenialType, detail string) Decision {
	call, _ := g.mapRequest(&req)
	return Decision{Call: call, Denial: &Denial{Type: t, Detail: detail, Requested: Requested(call)}}
}

// requested is the capability a call needs, as a denial names it; nil
// when it maps to none.
func Requested(call policy.Call) *dct.Capability {
	if call.Namespace == "" {
		return nil
	}
	return &dct.Capability{Namespace: call.Namespace, Action: call.Action, Resource: call.Resource}
}

// denyFrom turns a verifier error into a denial.
func denyFrom(d Decision, err error, requested *dct.Capability) Decision {
	if den := storeDenial(err, requested, nil); den != nil {
		d.Denial = den
		return d
	}
	var dd *dct.Denial
	if errors.As(err, &dd) {
		d.Denial = &Denial{Type: dd.Type, Detail: dd.Detail, Requested: requested, Granted: dd.Granted}
		return d
	}
	d.Denial = &Denial{Type: dct.Malformed, Detail: err.Error(), Requested: requested}
	return d
}

// displayKey names the delegation a budget key belongs to.
func displayKey(scope *dct.AuthorizedScope, levels []budget.Level, key string) string {
	for i, l := range levels {
		if l.Key == key {
			return scope.Chain[i].DelegationID
		}
	}
	return key
}

// suspectResource names what in a mapped resource a server might decode
// into a path separator or a dot segment after the gate has matched it
// literally: a backslash, a percent-encoded '.', '/' or '\', or a control
// character.
func suspectResource(r string) string {
	for i := 0; i < len(r); i++ {
		switch c := r[i]; {
		case c == '\\':
			return "a backslash"
		case c < 0x20 || c == 0x7f:
			return "a control character"
		case c == '%' && i+2 < len(r):
			switch strings.ToLower(r[i+1 : i+3]) {
			case "2e", "2f", "5c":
				return "a percent-encoded '.', '/' or '\\'"
			}
		}
	}
	return ""
}

// Settle records what an allowed call cost once its response is known:
// actual is the policy's cost unless the upstream reported one the policy
// trusts. It is capped at what was reserved, so that no response, however
// many arrive together, takes spend past a budget. release drops the
// reservation instead (the upstream refused the call with a JSON-RPC error
// before running it). It returns what the call was charged.
func (g *Gate) Settle(d *Decision, actual int64, release bool) (int64, error) {
	if d.Reservation == nil {
		return 0, nil
	}
	r := d.Reservation
	d.Reservation = nil
	if release {
		err := g.Budget.Release(r)
		g.settled(d, 0, true, err)
		return 0, err
	}
	charged := min(max(actual, 0), r.Cost())
	err := g.Budget.Commit(r, charged)
	g.settled(d, charged, false, err)
	return charged, err
}

// The list methods whose results the relay filters.
const (
	MethodToolsList             = "tools/list"
	MethodResourcesList         = "resources/list"
	MethodResourceTemplatesList = "resources/templates/list"
	MethodPromptsList           = "prompts/list"
)

// ListView reports which entries of a list result a token may see: tools
// and prompts by name, resources by URI, resource templates by URI
// template — the same view the gate applies to the requests that use
// them. An empty token sees everything only when the policy allows
// unauthenticated calls; a token that does not verify, or whose delegation
// has ended, sees nothing.
//
// ListView does not ask Accept: it also checks tokens that are not
// presented for a call (serve's check of a session's token, the
// authorization server's of the delegations it issued under).
func (g *Gate) ListView(method, token string) (func(name string) bool, error) {
	return g.ListViewAccepting(method, token, nil)
}

// ListViewAccepting is ListView that asks accept, when set, about the
// token: a front passes the Gate's Accept with what it knows of how the
// token was presented.
func (g *Gate) ListViewAccepting(method, token string, accept func(token string, scope *dct.AuthorizedScope) error) (func(name string) bool, error) {
	none := func(string) bool { return false }
	if token == "" {
		if g.Policy.AllowUnauthenticated {
			return func(string) bool { return true }, nil
		}
		return none, nil
	}
	if g.Verifier == nil {
		return none, errors.New("no trusted roots")
	}
	scope, err := g.Verifier.VerifyChain(token, g.now())
	if err != nil {
		return none, err
	}
	if accept != nil {
		if err := accept(token, scope); err != nil {
			return none, err
		}
	}
	if g.Ended != nil {
		for _, l := range scope.Chain {
			if status, ended := g.Ended(l); ended {
				return none, fmt.Errorf("delegation %s has ended (%s)", l.DelegationID, status)
			}
		}
	}
	caps := scope.Capabilities
	switch method {
	case MethodToolsList:
		return func(n string) bool { return g.Policy.Visible(n, caps) }, nil
	case MethodResourcesList:
		return func(n string) bool { return g.Policy.ResourceVisible(n, caps) }, nil
	case MethodResourceTemplatesList:
		return func(n string) bool { return g.Policy.ResourceTemplateVisible(n, caps) }, nil
	case MethodPromptsList:
		return func(n string) bool { return g.Policy.PromptVisible(n, caps) }, nil
	}
	return none, fmt.Errorf("%s is not a list the gate filters", method)
}

func covered(caps []dct.Capability, c policy.Call) bool {
	for i := range caps {
		if caps[i].Covers(c.Namespace, c.Action, c.Resource) {
			return true
		}
	}
	return false
}
