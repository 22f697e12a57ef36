// Package gate makes every allow/deny decision of delegateos, for every
// front that takes MCP requests (the stdio relay of package proxy, serve's
// HTTP sessions, later fronts): a Gate decides a CallRequest (the target
// visible to the token, mapped to a capability, the token verified with
// revocation and ended delegations, the contract and delegation named,
// the rate limits and the budget at every level of the chain) and settles
// what an allowed call cost; ListView filters the four lists; a refusal is
// a Denial carrying DelegateOS §11.2's reason.
//
// Open builds a Gate from a policy with every store, key and limiter it
// names (verifier and revocation list, spend store, rate-limit windows,
// the workspace's Delegations) into a Snapshot that no one changes
// afterwards. Delegations answers the delegateos/ messages (§9) over the
// workspace and tells the Gate which delegations have ended, which wait on
// others and what a plan holds back for its sub-tasks.
//
// The gate knows nothing of frames, transports or sessions: a front reads
// its messages, hands the gate a CallRequest and writes the Decision back
// in its own protocol. It imports no front (internal/importrules checks).
package gate
