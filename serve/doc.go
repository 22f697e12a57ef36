// Package serve is the MCP Streamable HTTP front of the DCT gate: the
// transport of `delegateos serve`.
//
// Each MCP session is one relay (proxy.Run, with its own upstream for a
// stdio server): the session's HTTP requests are fed into the relay's
// client side as newline-delimited frames, and every frame the relay
// writes back is routed to the HTTP response or SSE stream it belongs to.
// The relay, and so the gate, decides every request exactly as it does for
// `delegateos proxy` on stdio; this package adds the HTTP transport and
// nothing that decides what a token may do.
//
// What it does on the wire (MCP Streamable HTTP, 2025-03-26 to 2025-11-25):
//
//   - POST on the endpoint carries one JSON-RPC message (batches are
//     refused: the relay reads one message a frame). A request is answered
//     with an SSE stream (text/event-stream) that opens with a priming
//     event (an id and a retry delay), carries the messages for the client
//     that belong to the request (progress, a sampling, elicitation or
//     roots request, a log line) and ends with its response; with
//     Options.JSONResponses, a response that comes alone is an
//     application/json body instead. Notifications and responses get 202
//     Accepted.
//   - Without Mcp-Session-Id, initialize starts a session; a request of the
//     stateless style of MCP 2026-07-28 (server/discover, or
//     MCP-Protocol-Version 2026-07-28 or later) is served by a relay shared
//     by the requests that present the same credential. Those may be
//     different clients (every anonymous one, say), so nothing crosses
//     between their requests: a server message that names none of them
//     is dropped, a progress token in use is refused, and a POSTed
//     cancellation or response (which cannot be told apart) is refused;
//     closing a request's stream cancels it; delegateos/delegate, which
//     binds a token to the session, is refused. The shared relay
//     initializes its upstream itself (initialize, then
//     notifications/initialized) before the first of their requests.
//   - GET opens the session's standalone SSE stream for server messages
//     that belong to no open request; with Last-Event-ID it resumes any
//     stream of the session from after that event (the session keeps the
//     last events of each stream until they are delivered).
//   - DELETE ends the session: its upstream is shut down and its calls
//     settled.
//   - Mcp-Session-Id names the session (128 random bits); MCP-Protocol-
//     Version, when sent, must be a version this front speaks.
//
// Security checks run before anything reaches a session: Host and Origin
// (DNS-rebinding protection), body size, content negotiation, the
// session's credential (a session created with an Authorization header is
// bound to it, or, for an AVP-Sig signature there, to its signer; a request
// with another is refused, and so is one with two), whether the session's
// token still authorizes anything (Options.SessionLive: a revoked token's
// session is closed with its upstream), and Options.Authorize. One token,
// or one delegation tree, holds a bounded share of the sessions
// (Options.MaxCredentialSessions, MaxTreeSessions). Signatures, applied to
// the Options, is holder-of-key authorization (require_signature): every
// request signed (AVP-Sig) by the holder of the token the gate decides it
// with.
package serve
