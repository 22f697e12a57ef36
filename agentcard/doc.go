// Package agentcard serves an A2A agent card at Path
// (/.well-known/agent-card.json) describing a delegateos verifier. Beside
// the A2A members (name, description, version, supportedInterfaces,
// capabilities, default modes, skills) it carries a "delegateos" member
// with what a peer needs to trust and reach the verifier: its did:key and
// principal ID, its revocation endpoint (DelegateOS 0.2 §4.3, the
// revocationEndpoint agent cards gain) and whether it takes pushed
// revocations, the token formats it verifies, its MCP endpoint and whether
// requests must be signed (AVP-Sig v2).
//
// The verifier speaks MCP, not an A2A protocol binding, so
// supportedInterfaces is empty and skills lists none; the MCP endpoint is
// in the delegateos member.
//
// URLs in the card are absolute. They are built from Card.PublicURL when it
// is set; otherwise from the request's scheme and Host, which the daemon
// must have validated (DNS-rebinding protection) before this handler runs.
package agentcard
