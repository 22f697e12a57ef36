// Package proxy is the MCP side of delegateos: a stdio relay between an MCP
// client and an upstream MCP server that gates the whole MCP surface.
//
// Every request that does something — tools/call, resources/read,
// resources/subscribe, subscriptions/listen, prompts/get and
// completion/complete — is decided by the Gate (token verified, revocation
// and ended delegations checked, capability covered, budget reserved) and
// either forwarded or refused with the JSON-RPC error of DelegateOS §11.2;
// the four lists are filtered to what the token could use; the lifecycle,
// ping, logging and task methods are forwarded; any other method is
// refused. The relay numbers the requests it forwards itself and gives
// each answer back under the client's id, cuts params._delegateos out of
// every message, and reads client frames and upstream answers as strictly
// as any reader on either side could, so that what is forwarded is what
// was decided. Other frames are written as they were read.
package proxy
