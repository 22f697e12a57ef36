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
// authority first. The rules are deliberately stricter than the
// specification's "isRevoked(revocationId)":
//
//   - An entry for block i is honoured only if its revokedBy signed block i
//     or a block before it in the same token. Anyone can sign an entry, so
//     without this rule a delegatee further down a chain could revoke the
//     tokens of the principals above it (or a stranger could revoke anyone's).
//     The root can revoke any block; a delegator can revoke what it and its
//     delegates issued; an entry from anyone else is ignored for that token.
//   - Scope "chain": an honoured entry matching any block denies the token,
//     and therefore every token attenuated from the revoked one.
//   - Scope "block": an honoured entry denies the token only when it matches
//     the token's last block, that is, exactly the token that was revoked.
//     Its holder may already have attenuated it, and those tokens stay valid.
//     To cut off a holder and everything delegated below it, use "chain".
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
// mistyped path must not silently turn revocation off.
//
// File is a list backed by a file that a long-running verifier re-reads
// when it changes (looked at in the background, at most once per
// CheckInterval). If the file becomes unreadable, disappears or stops being
// a valid list, File.Revoked returns an error, which the verifier turns
// into a denial, until the file is valid again; it never falls back to an
// empty list.
//
// Revoked is on the path of every verification, cached or not: it takes a
// read lock and looks up each block in a map, and does not allocate.
package revocation
