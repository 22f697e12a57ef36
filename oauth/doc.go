// Package oauth is the OAuth 2.1 authorization server of `delegateos
// serve --authorize`, which hands out delegation tokens through the flow
// MCP clients already speak (the MCP authorization specification), and the
// resource-side checks that go with it.
//
// What it serves:
//
//   - Protected Resource Metadata (RFC 9728) at
//     /.well-known/oauth-protected-resource and its path-specific form
//     (…/oauth-protected-resource/mcp), naming this server as the
//     authorization server and the grant's capabilities as the scopes.
//   - Authorization Server Metadata (RFC 8414) at
//     /.well-known/oauth-authorization-server.
//   - Dynamic client registration (RFC 7591) at /register: public clients
//     only (token_endpoint_auth_method "none"), redirect URIs https or
//     loopback http.
//   - /authorize: the authorization code flow with PKCE (S256 only) and a
//     state; it shows the consent page, where a person who knows the
//     consent password sees the client's name, the capabilities its scopes
//     ask for, the budget and the expiry, and approves (or narrows) them.
//   - /token: authorization_code and refresh_token grants; DPoP proofs
//     (RFC 9449) bind the tokens to the client's key.
//
// What it issues: approving makes a delegation, the grant attenuated by
// the grant key to a key of this server, narrowed to what was approved
// (the consent delegation). Each access token is that delegation
// attenuated again for a short life: so every access token of one
// approval spends from one budget, and revoking the consent delegation
// ends them all and every refresh. Refresh tokens rotate; presenting a
// used one ends the whole family.
//
// Everything is kept in memory: a restart forgets every client, code and
// refresh token, and Protect refuses the access tokens it issued before
// (a token attenuated from the grant that this process did not issue).
package oauth
