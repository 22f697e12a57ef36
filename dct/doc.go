// Package dct implements Delegation Capability Tokens in the Signed JSON
// Token format (DelegateOS §3, §10): creation, attenuation, serialization,
// inspection, revocation IDs and verification.
//
// A token is an authority block signed by a root principal followed by
// attenuation blocks, each signed by the delegatee of the block before it.
// Each block may only narrow what the token grants. Verification follows
// §10.1 step by step and is stricter where the specification is loose; see
// Verifier.Verify for every rule. A refusal is always a *Denial carrying one
// of the specification's denial types.
//
// Values read from a token that has not been verified are reported by
// Inspect and Token methods as they are written in the token; nothing in
// them is trusted until a Verifier has accepted the token.
package dct
