// Package attest implements signed attestations (DelegateOS §7): an
// agent's signed record of the work it did under a task contract, and the
// checks that decide whether the record can be trusted and whether the work
// meets its contract (§7.3, §10.3), recursively over the attestations of
// the sub-tasks it delegated (the v0.2 form).
//
// # Signing
//
// An attestation is signed by its principal over BLAKE2b-256 of the RFC
// 8785 canonical JSON of every member but the signature (§7.2), as contracts
// are. The output is free-form JSON; Parse decodes strictly and keeps the
// output's canonical form, with the same number rules as package contract.
// Optional members (output, outputHash, verificationOutcome, score,
// details) are signed exactly when present: an empty string or a null is
// a value, not an absence.
//
// outputHash, when present, is "blake2b-256:" and the lowercase hex
// BLAKE2b-256 of the canonical JSON of the output (see OutputHash), so
// reformatting the output does not change it. An attestation may carry the
// output, its hash, both (they must agree) or neither.
//
// # Verification
//
// Verifier.Verify produces a Report with one Step per check and a Verdict:
//
//   - invalid: the record cannot be trusted. Its signature or structure is
//     bad; its contract is missing or does not verify; it was made before
//     its contract or in the future; it claims a cost over the contract's
//     budget; it claims a verification outcome that the recomputed one
//     contradicts (method, passed, or a score off by more than
//     ScoreTolerance), or claims a passed outcome while reporting
//     success=false; or one of its children is invalid, missing, repeated,
//     too deep, or was not issued a contract by this attestation's principal;
//     or its children cost more than it reports or than its budget.
//   - failed: the record is authentic, but the work does not meet the
//     contract: success is false, the output is absent, does not match
//     task.outputSchema or fails the contract's verification spec, the
//     attestation was made after the deadline, or a child failed.
//   - unverified: a check could not run (the context ended, a store or a
//     verification backend failed); nothing is concluded.
//   - passed: every check ran and passed.
//
// Verify returns an error unless the verdict is passed, so ignoring the
// report never accepts work. The error matches ErrInvalid, ErrFailed or
// ErrUnverified.
//
// # Recursion
//
// childAttestations are IDs looked up in an attestation Store. Each child
// is verified against its own contract, recursively; a parent passes only
// if every child passes. A child's contract must be issued by the parent's
// principal: the parent delegated that sub-task. A parent's
// costMicrocents includes what its children spent (as budgets do), so the
// children's costs must sum to no more than the parent's cost, which must
// be within the parent's budget. Every attestation may appear once in a
// tree (which rules out cycles), at most MaxDepth levels below the root,
// with at most MaxChildren children each and MaxTreeSize in all.
//
// # Storage
//
// A Store holds attestations by ID and never replaces one with different
// content. Memory keeps them in memory; Dir keeps one file per
// attestation. Both check the signature on Put and on Get.
package attest
