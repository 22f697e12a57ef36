// Package chain records the delegation chain (DelegateOS §8): who delegated
// to whom, under which token and contract, and how each delegation ended.
//
// # Records and invariants
//
// A Delegation is the §8.1 record. Every Store checks every record it is
// given, whether from a caller's Insert or from replaying a log, against
// the §8.2 invariants and the rules this package adds; a refusal is an
// *InvariantError naming the rule (errors.Is with ErrRoot, ErrNoParent,
// ...), or an error wrapping ErrMalformed or ErrDuplicate. See
// Store.Insert for the full list.
//
// The record must describe its token. A root record carries a root token
// (the authority block alone) issued by From to To; a child record carries
// its parent's token, byte for byte, followed by one or more attenuation
// blocks, the first made by From, the last naming To as delegatee. The
// record's ID and contract are the delegation and contract IDs of the
// token's last block, so a record, the budget level it spends from and the
// token the proxy verifies all name the same delegation.
//
// # Keys
//
// A delegation ID is chosen by whoever attenuates, so two delegations of
// different trees (or a sybil's and her victim's) may share one. A record
// is identified by its Key instead: the last of its token's
// dct.Token.DelegationKeys, the digest its block's signature covers, which
// holds the root block and the whole path of blocks. The store derives Key
// and ParentKey from the token; a child's parent is the record whose key is
// its ParentKey. Every method that names a delegation takes a key, or an ID
// that one record alone has (ErrAmbiguous otherwise); StatusReader.Status,
// which the gate asks, takes keys only.
//
// This package reads tokens with dct.Parse and compares them, but never
// checks a signature, the attenuation rules or expiry: the caller runs a
// dct.Verifier before recording a delegation, as the proxy does before it
// acts on a token. A chain store is a record of verified delegations, not a
// verifier.
//
// NewRoot and NewChild make the record of a delegation from its token (and
// its parent's record), and Records makes the records of every delegation a
// token's chain holds, so that a proxy that has verified a token can record
// the chain it came through.
//
// # Status
//
// A delegation is active until it is completed, failed or revoked, and
// then never changes again: a status change of an ended delegation is a
// *TransitionError matching ErrTerminal. Only an active delegation may
// have a child inserted under it. Revoking a delegation also revokes its
// active descendants; descendants that had already completed or failed
// keep that status, as the history of what happened. CompletedAt is set
// by every ending, revocation included: it is when the delegation ended.
//
// # Memory and File
//
// Memory keeps the records in memory. File keeps them in an append-only
// log of JSON lines, one event per line, in canonical JSON (RFC 8785):
//
//	{"delegation":{...the §8.1 record...},"op":"insert"}
//	{"at":"2026-01-01T00:05:00.000Z","attestationId":"att_0123456789ab","id":"del_...","key":"...","op":"complete"}
//	{"at":"2026-01-01T00:06:00.000Z","id":"del_...","key":"...","op":"fail"}
//	{"at":"2026-01-01T00:07:00.000Z","id":"del_...","key":"...","op":"revoke"}
//
// A log written before keys has no "key" (in its records or its status
// lines) and is read as it is: each of its status lines named the one
// delegation with its ID.
//
// A revoke line revokes the subtree as it stood at that point of the log,
// so every reader replays the same result. Each line is written and synced
// before the call that wrote it returns.
//
// Any number of File values, in one process or several, may share a log:
// every operation, reads included, holds an exclusive lock (flock on the
// log's path + ".lock") while it reads the lines other writers have added,
// checks them, and appends its own, so every writer decides on the whole
// history and no record is lost. A read first looks at the log (one stat,
// no allocation on Linux): when it is the file replayed and has the size
// replayed, nothing was appended, and the read answers without the lock.
// So a read sees every change another File's call finished before it
// began, and File.Status, which a proxy asks on every call, costs one
// stat while the log is unchanged. The log is read strictly: each line must
// decode with no unknown or repeated members and be exactly the canonical
// encoding of what it holds, and is then replayed through the same checks
// as an Insert. Only a final line without its newline is tolerated, since
// a crash during an append leaves one (the next writer truncates it); any
// other line that does not read or replay is an error naming it, and the
// log is not changed. A log that shrinks or is replaced while open is an
// error too: the log only grows.
//
// # Showing the chain
//
// Tree arranges records as a forest, Text renders it as lines for a
// terminal and Mermaid as a `graph TD` diagram. Both escape every string
// that comes from a record.
package chain
