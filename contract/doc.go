// Package contract implements signed task contracts (DelegateOS §5): what a
// delegator asks for, how the result will be verified, and within which
// budget, deadline, chain depth and capabilities the work must stay.
//
// # Signing
//
// A contract is signed like every other protocol structure: the issuer signs
// BLAKE2b-256 of the RFC 8785 canonical JSON of the contract without its
// signature member. Unlike a token, a contract file need not be canonical:
// contracts carry free-form JSON (task inputs, an output schema, the
// verification spec) and people pretty-print them. Parse decodes strictly
// (no duplicate, re-cased or unknown members, bounded size and depth) and
// replaces inputs, outputSchema and verification by their canonical forms,
// so what every later reader sees is byte for byte what the signature
// covers. Two spellings of one JSON value (1E3 and 1000, "\u00e9" and "é")
// are the same signed contract.
//
// Numbers in the free-form members follow RFC 8785's model, IEEE 754
// doubles: 0.1 stays 0.1, -0 is 0, 1E3 is 1000. A number no double holds
// (1e400) is refused, and so is an integer literal beyond ±(2^53−1), as
// written or in the canonical form (1e20 is written 100000000000000000000):
// a reader with exact integers would see another value than the double the
// signature covers.
//
// # Binding to a token
//
// CheckBinding implements §5.2 on a token's verified scope: the token must
// be bound to this contract, grant every required capability, and the
// contract must be issued by a principal that signed a block of the token.
// See CheckBinding for what "grant" means.
//
// # Decomposition
//
// Decompose splits a contract into a signed Plan of sub-tasks (the
// DelegateOS reference's DecompositionPlan, made enforceable): a child
// contract and an attenuated token per sub-task, validated against the
// parent token and contract. PlanDir keeps plans in a workspace, where
// the proxy's gate enforces their dependencies and budgets.
//
// # Storage
//
// A Store holds contracts by ID and never replaces one with different
// content. Memory keeps them in memory; Dir keeps one file per contract.
// Both verify a contract on Put and on Get.
package contract
