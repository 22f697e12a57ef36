// Package ldpfront is the LDP front of delegateos serve (docs/ldp.md): when
// the policy has an ldp section, the identity card and the LDP message
// endpoints are served beside the MCP endpoint, and each task is a
// tools/call of the skill's tool made through that endpoint (in process,
// in MCP's stateless style, under the task's token), so the same gate
// decides, charges, rate-limits and records it.
//
// The front admits a session only for the holder of a token the gate
// accepts (unless the policy allows calls without one), holds a
// TASK_SUBMIT's Ed25519 signer to its token's delegatee, and turns a
// gate's denial into a TASK_FAILED with the type and message an MCP client
// gets. With a workspace it records ATTESTATIONs as RDP signals and gives
// each skill the server's own RDP score as its quality hint.
package ldpfront
