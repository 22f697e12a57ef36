// Package revdist distributes revocation lists between verifiers
// (DelegateOS 0.2 §4.3): a verifier publishes its list at a well-known URL,
// accepts signed delegateos/revoke notifications pushed to it, pushes the
// entries it learns to its peers and polls theirs.
//
// # Publishing
//
// Handler serves the list at Path. GET returns the JSON array of entries
// (the form of revocation.List.MarshalJSON) with a strong ETag, the
// SHA-256 of those bytes, and answers 304 Not Modified to a GET whose
// If-None-Match names the current ETag. The encoded list is kept while
// its length stays the same, for up to 30 s (10,000 entries take about
// 34 ms to encode and hash on a 2-core VM), so a flood of GETs costs no
// more than that; an entry added shows at once. POST takes a JSON-RPC 2.0
// delegateos/revoke message whose params are {"revocation": entry} (§9.5):
// as a notification it is answered 202 Accepted with no body; as a request
// (with an id) by a JSON-RPC response. Bodies over MaxPushBytes, JSON that
// is not strict (duplicate, unknown or case-variant members, trailing
// data), entries whose signature does not verify and entries whose revoker
// the Authority does not accept are refused (400 or 403, or a JSON-RPC
// error) before anything is stored.
//
// # Who may revoke
//
// Anyone can sign an entry. A verifier honours an entry only when its
// revoker signed the revoked block or one before it in the token presented
// (see package revocation), so a stranger's entry changes no decision; but
// it would still grow every list it reaches. The Authority decides which
// revokers a verifier takes entries from, pushed or polled: Principals (a
// fixed set, such as the policy's trusted roots, who may revoke any block of
// the tokens they issue), Tokens (the signers of blocks of tokens this
// verifier has accepted, for the block they signed and those after it), or
// AnyOf several.
//
// # Peers
//
// A Distributor polls each peer's revocation URL every Interval (60 s by
// default, §4.3) with If-None-Match, and merges the entries that verify and
// that its Authority accepts; an entry that does not is skipped and counted,
// and does not stop the others. An entry new to the local store, whether
// pushed, polled or appended to the list file by another process
// (`delegateos revoke`, a proxy's delegateos/revoke), is pushed at once to
// every peer as a delegateos/revoke notification; a peer answering 404, 405
// or 501 does not take pushes and is only polled from then on. Since the
// store ignores entries it holds, a push that comes back changes nothing
// and goes no further. Consistency is eventual: a revocation reaches a
// verifier that polls within one interval, and one that takes pushes in one
// round trip.
package revdist
