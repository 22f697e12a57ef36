// Package proxy is the MCP side of delegateos: a stdio relay between an MCP
// client and an upstream MCP server that gates the whole MCP surface, and
// the MCP message model it reads (the frame scanner, the strict params
// reader, ReadClientMessage for other fronts).
//
// Every request that does something — tools/call, resources/read,
// resources/subscribe, subscriptions/listen, prompts/get and
// completion/complete — is decided by a gate.Gate (token verified,
// revocation and ended delegations checked, capability covered, budget
// reserved) and either forwarded or refused with the JSON-RPC error of
// DelegateOS §11.2; the four lists are filtered to what the token could
// use; the lifecycle, ping, logging and task methods are forwarded; any
// other method is refused. The relay numbers the requests it forwards
// itself and gives each answer back under the client's id, cuts
// params._delegateos out of every message, and reads client frames and
// upstream answers as strictly as any reader on either side could, so that
// what is forwarded is what was decided. Other frames are written as they
// were read.
//
// A client request is read in this order, each file top to bottom:
// request.go (clientRequest: id, method role, params), gated.go (the
// gate.CallRequest read from the params, the decision), approval.go (a call
// whose rule asks for a person's approval is held; approval_ask.go writes
// the elicitation/create, approval_answer.go reads the answer,
// approval_mrtr.go is the same for MCP 2026-07-28 clients), forward.go
// (what is forwarded, byte for byte). evidence.go is the hand-over to the
// audit log at each step of a call's life (payload, decision, approval,
// forwarded bytes, response, outcome); proxy.go runs the pumps and
// settles answers.
package proxy
