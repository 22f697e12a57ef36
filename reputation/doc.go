// Package reputation implements the workspace side of the Reputation &
// Delegation Protocol (RDP 1.0): reputation profiles made of append-only
// signals, scores that decay toward the unknown baseline, and delegation
// contracts whose evaluation generates the signals.
//
// # Files
//
// A Workspace is an AWP workspace directory. Profiles live in
// reputation/<slug>.md and contracts in contracts/<slug>.md, each YAML
// front matter (the fields of §2.2, §3.1 and §5.2) and a Markdown body.
// Files written by other tools load; this package rewrites only the fields
// it sets and keeps every other field, its order and comments, and the
// body. Reading is strict and bounded (limits.go): one YAML document, no
// anchors, aliases or custom tags, no duplicate keys, no control
// characters in strings, every rule of §6 checked with the file and line
// named (Validate, ParseProfile, ParseContract).
//
// # Agents and slugs
//
// Agents given as principal IDs or did:key are stored as did:key. A
// signal's source defaults, in the CLI, to the did of the workspace's AWP
// IDENTITY.md (Observer). The
// profile this package creates for one is reputation/key-<base32 of the
// public key>.md (AgentSlug): base58 is case-sensitive, so a lowercased
// did:key could name two agents. A profile another tool wrote under any
// slug is found by its agentDid; two profiles claiming one agent are a
// conflict. Profiles are created only for Ed25519 agents; other DIDs are
// matched only to profiles that exist. No slug can leave its directory:
// a slug is lowercase letters, digits and hyphens.
//
// # Scores
//
// A dimension's first signal sets its score; each later one updates it by
// EWMA with α = 0.15 over the old score decayed up to the new signal
// (§4.1). Confidence is 1 − 1/(1 + 0.1·n) (§4.2). Decay is applied on
// read, never stored (§4.3): above 0.5 it is the spec's score·e^(−0.02·m)
// floored at 0.5, m in months of 30.44 days; below 0.5 the spec's literal
// formula would pull scores toward 0, against its own rule that decay
// moves every score toward 0.5, so the distance from 1 decays instead:
// 1 − (1 − score)·e^(−0.02·m), capped at 0.5. An agent without signals has
// no score (View.Known is false), never 0 or 0.5. Reading a profile as of
// a time before a dimension's last signal replays that dimension's signals
// up to then. Stored scores are rounded to 4 decimals and confidences to
// 2, as the spec's examples write them.
//
// # Contracts
//
// A contract moves draft → active → completed → evaluated, one step at a
// time, never back (*TransitionError). Criteria weights must sum to 1.0
// (within 1e-6) to create or evaluate a contract; a file from elsewhere
// whose weights do not only draws a warning. Evaluating scores every
// criterion and records, in the delegate's profile, a reliability signal
// with the weighted average and, for a knowledge-artifact output, a
// domain-competence signal for each tag of artifacts/<outputSlug>.md (or
// the extension field task.domain when the artifact has no tags), with
// "contract:<slug>" as evidence and the delegator as source.
//
// # DelegateOS delegations
//
// RecordOutcome is what the proxy calls when a delegation completes or
// fails. The RDP contract that tracks delegation D is
// contracts/<LinkSlug(D)>.md, and it records D (and the task contract)
// in the extension field "delegateos"; a contract at that slug that names
// another delegation or other parties is a conflict. The contract is
// created if missing and driven to completed; accuracy is the verification
// score, timeliness comes from the deadline (TimelinessScore), and
// completeness and clarity from the caller's defaults. With every
// criterion scored it is evaluated at once; otherwise the measured scores
// are kept in the extension field until a person runs Evaluate with the
// rest. Trust and TrustGate let the proxy refuse delegating to an agent
// whose decayed reliability is below a threshold once its confidence is
// high enough; unknown agents are never refused for being unknown. Trust
// reads the stored state with decay (a clock behind the last signal reads
// it undecayed, never as unknown) and caches parsed profiles while their
// files are unchanged; an error from it means the gate cannot decide.
//
// # Concurrency and crashes
//
// Writers take the lock file reputation/.lock or contracts/.lock (both
// when an evaluation writes a contract and a profile, always contracts
// first), re-read the file, and replace it with a synced temporary file
// renamed into place: concurrent writers, in one process or many, lose
// nothing, and a crash leaves the old file. When signals are appended the
// text of the existing signals list is copied from the file as read, not
// re-encoded. A signals list in the layout this package writes is read by
// a line scanner rather than as YAML nodes (fastpath.go; any other text
// is parsed as YAML, with the same result). A profile of logMinProfile
// bytes or more takes new signals in its append-only signal log,
// reputation/<slug>.signals.jsonl, synced before Record returns and folded
// into the profile file every logMaxEntries signals (siglog.go); readers
// read both. An evaluation writes the profile before the contract; if it
// is interrupted in between, evaluating again finds its signals already
// recorded and does not add them twice.
//
// # Peer attestations
//
// An Attestation is an AVP peer attestation, signed by its attester's
// did:key over the bytes the AVP SDK signs (SigningInput).
// ParseAttestations reads them from outside strictly and verifies each;
// RecordAttestations records each as one signal of the attested agent in
// the dimension PeerAttestation (see attestation.go for the mapping).
// TrustGate's StarterFloor holds an agent's reliability at 0.25 until
// enough of the listed trusted attesters have attested it positively;
// TrustGate.Report says whether the floor applied.
package reputation
