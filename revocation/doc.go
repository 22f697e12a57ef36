// Package revocation holds signed revocation entries (DelegateOS §4), the
// list a verifier consults on every token verification (§10.1 step 2), and
// the file that stores the list.
//
// # Entries
//
// An Entry names a block of a token by its revocation ID (§3.5: base64url of
// BLAKE2b-256 of the block's canonical JSON) and is signed by the principal
// that revokes it, over canonicalize({revocationId, revokedBy, revokedAt,
// scope}). An entry whose structure or signature is wrong is never accepted
// into a List.
//
// # When an entry revokes a token
//
// List.Revoked and File.Revoked implement dct.Revocations. They are given a
// token's block revocation IDs and the principal that signed each block,
// authority first. They follow DelegateOS §10.1 step 2 — a revoked ID that
// matches any block of a token revokes the token — with one rule the
// specification does not have:
//
//   - An entry for block i is honoured only if its revokedBy signed block i
//     or a block before it in the same token. Anyone can sign an entry, so
//     without this rule a delegatee further down a chain could revoke the
//     tokens of the principals above it (or a stranger could revoke anyone's).
//     The root can revoke any block; a delegator can revoke what it and its
//     delegates issued; an entry from anyone else is ignored for that token.
//   - An honoured entry matching any block denies the token, whatever its
//     scope: the token that ends with the revoked block, and every token
//     attenuated from it. A holder cannot escape a revocation by appending
//     a block of its own.
//   - The scope ("block" or "chain", §4.1) is signed with the entry and
//     kept, but decides nothing here: it records what the revoker meant.
//     `delegateos revoke` writes "chain" unless told otherwise; lists from
//     the reference implementation, where "block" is the default, are read
//     with the same effect as "chain".
//   - Several entries may name the same revocation ID (different revokers or
//     scopes); every one is considered.
//
// A revoked token reports the revocation ID of the first (closest to the
// authority) block that revokes it.
//
// # Storage
//
// Load reads a list file; Append adds one entry to it under an exclusive
// lock, writing a temporary file that is synced and renamed over the list,
// so a crash leaves either the old or the new list and concurrent writers
// never lose an entry. A missing file is an error, never an empty list: a
// mistyped path must not silently turn revocation off. A list file with
// several names (hard links) is rewritten in place instead, under a lock
// on the file itself, since renaming over one name would leave a reader of
// another on the old list; a reader that looks during the write refuses
// every token until it is done. A file bind-mounted into a container pins
// its inode the same way and cannot be detected: mount the directory, not
// the file. An entry whose revoker already revoked the same block is not
// added again (its time and scope change nothing), so no revoker can grow
// the list without bound.
//
// File.Append adds an entry at the cost of the entry, for a process that
// keeps the list open (a server taking pushed revocations): under the same
// lock it verifies only the new entry, checks it against the entries the
// File has verified, writes it in place of the closing bracket and syncs
// the file, with no rename. The bytes it replaces are first recorded,
// synced, in LIST.append; every writer, and OpenFile when the list does
// not read, first undoes an append the file does not hold whole (a crash
// before the sync), so a crash still leaves the old or the new list. A
// record is acted on only when it proves it is this list's (the list's
// device and inode, the SHA-256 of its bytes before the append, only
// blanks and the closing bracket saved, a list that parses put back);
// any other LIST.append (planted, or copied from another host) stops
// every writer with an error naming it, and no entry is ever cut. A list
// with several names (a hard link, a bind mount) is written in place even
// when it is empty, so every name sees the entry.
//
// File is a list backed by a file, for a long-running verifier such as the
// proxy. Every File.Revoked looks at the file first (one stat, which does
// not allocate on Linux amd64 and arm64) and, when it has changed, re-reads
// it before answering, so a revocation is in force for every call that
// begins after Append (or `delegateos revoke`) has returned. A re-read
// verifies only entries it has not verified before, and when the file grew
// by entries appended after the last one, as Append writes them, parses
// only those. If the file becomes unreadable, disappears or stops being a
// valid list, File.Revoked returns an error, which the verifier turns into
// a denial, until the file is valid again; it never falls back to an empty
// list. The file's stamp (device, inode, size, mode, modification and
// change times) can miss a same-size change in place made within one tick
// of the file system's clock, so for 20 ms after a change (2 s where
// the file system keeps whole seconds) every call compares the file's
// content instead; and the
// file last read is held open, so that its inode is not reused by a file
// that replaces it.
//
// With 100,000 entries (2-core VM, Go 1.26, `make bench`): a decision on
// an unchanged file, File.Revoked, takes 0.41–0.43 µs (0.50–0.53 µs for a
// token of 9 blocks), most of it the stat, and the whole per-call
// verification of a cached token (dct.Verifier.VerifyChain with the File
// as its revocations) 0.45–0.56 µs, against 0.013 µs without a list; none
// of these allocate. The first decision after Append added one entry takes
// 33–52 ms: the 28 MB file read and hashed, its last entry parsed and
// verified. After any other change it takes 1.0–1.1 s: the whole file
// parsed, no signature verified again. While the stamp cannot be trusted,
// a decision takes 19–21 ms (read and hash). Calls that arrive during a
// re-read wait for it.
//
// Revoked is on the path of every verification, cached or not: after the
// stat it takes a read lock and looks up each block in a map.
//
// # A list in Redis
//
// Load, Append and Open also take a redis:// or rediss:// URL: the list of
// a fleet of proxies, kept in one Redis hash (delegateos:revocations) from
// "REVOCATION_ID REVOKED_BY" to the entry's JSON. Append adds an entry and
// publishes its field on the channel delegateos:revocations in one script.
// Redis, the Live list a proxy decides on, keeps a copy: it is subscribed
// to the channel, reads each announced entry from the hash, and reads the
// whole hash again whenever its subscription is made or made again, so a
// proxy that missed messages while disconnected catches up before it
// answers again. Every entry read is verified (strict JSON, its signature,
// its field); one that does not verify makes the list fail closed, as a
// file that does not verify does. Redis.Revoked answers only while the
// copy holds everything Redis held less than a second ago (the copy pings
// it every 250 ms, and counts from when the ping answered was sent, so a
// slowed path cannot stretch the second), and otherwise returns an error matching redisconn.ErrUnavailable. A
// running proxy only adds to its copy: an entry deleted from Redis stays
// in force at a proxy until it starts again (a file's list, re-read on
// every change, loses the entry at once). A
// revocation reached three proxies in 2.4 ms at the median and 13.8 ms at
// the 99th percentile (BenchmarkRedisRevokeFleet).
package revocation
