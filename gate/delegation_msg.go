package gate

import "encoding/json"

// The delegation messages of DelegateOS §9. The proxy answers these methods
// itself; they are never forwarded to the upstream.
const (
	MethodDelegate = "delegateos/delegate"
	MethodComplete = "delegateos/complete"
	MethodRevoke   = "delegateos/revoke"
	// MethodDecompose records a decomposition plan the session's
	// delegate signed, splitting its own task within its token.
	MethodDecompose = "delegateos/decompose"
)

// DelegateParams are the params of delegateos/delegate (§9.1): a signed
// task contract and the DCT bound to it, for the delegation DelegationID.
type DelegateParams struct {
	Contract           json.RawMessage `json:"contract"`
	DCT                string          `json:"dct"`
	DCTFormat          string          `json:"dctFormat"`
	DelegationID       string          `json:"delegationId"`
	ParentDelegationID string          `json:"parentDelegationId"`
}

// DelegateResult answers delegateos/delegate: an accept (§9.2) or a reject
// (§9.3). The estimates of an accept are omitted when the proxy has none.
type DelegateResult struct {
	Accepted                bool   `json:"accepted"`
	DelegationID            string `json:"delegationId,omitempty"`
	EstimatedDurationMs     *int64 `json:"estimatedDurationMs,omitempty"`
	EstimatedCostMicrocents *int64 `json:"estimatedCostMicrocents,omitempty"`
	Reason                  string `json:"reason,omitempty"`
	Details                 string `json:"details,omitempty"`
}

// Reject reasons of delegateos/delegate. §9.3 names capability_mismatch;
// the others say which check refused.
const (
	RejectInvalidParams      = "invalid_params"
	RejectInvalidContract    = "invalid_contract"
	RejectInvalidToken       = "invalid_token"
	RejectContractMismatch   = "contract_mismatch"
	RejectCapabilityMismatch = "capability_mismatch"
	RejectDelegationMismatch = "delegation_mismatch"
	RejectChainInvariant     = "chain_invariant"
	RejectUntrusted          = "insufficient_reputation"
	RejectInternal           = "internal_error"
)

// CompleteParams are the params of delegateos/complete (§9.4).
type CompleteParams struct {
	DelegationID string          `json:"delegationId"`
	Attestation  json.RawMessage `json:"attestation"`
}

// CompleteResult answers delegateos/complete when it was sent as a request.
// Status is the delegation's status afterwards: completed when the
// attestation verified and reports success, failed otherwise.
type CompleteResult struct {
	DelegationID  string `json:"delegationId"`
	AttestationID string `json:"attestationId"`
	Status        string `json:"status"`
	// Verified says whether the attestation passed §7.3; Problems says
	// what failed.
	Verified bool     `json:"verified"`
	Problems []string `json:"problems,omitempty"`
	// Score is the verification score of the output, when there is one.
	Score *float64 `json:"score,omitempty"`
	// DelegationKey identifies the delegation completed, which its ID may
	// not.
	DelegationKey string `json:"-"`
}

// RevokeParams are the params of delegateos/revoke (§9.5).
type RevokeParams struct {
	Revocation json.RawMessage `json:"revocation"`
}

// RevokeResult answers delegateos/revoke when it was sent as a request.
type RevokeResult struct {
	RevocationID string `json:"revocationId"`
	// Delegations are the delegations recorded as revoked because of it.
	Delegations []string `json:"delegations,omitempty"`
}

// DecomposeParams are the params of delegateos/decompose: a signed plan
// and, in its order, each sub-task's signed contract and token, as
// `delegateos contract decompose` writes them.
type DecomposeParams struct {
	Plan      json.RawMessage   `json:"plan"`
	Contracts []json.RawMessage `json:"contracts"`
	DCTs      []string          `json:"dcts"`
	// DCT is the parent token; empty means the session's (the one
	// delegateos/delegate bound it to, or the proxy's --token).
	DCT string `json:"dct,omitempty"`
}

// DecomposeResult answers delegateos/decompose: the plan is recorded and
// enforced, or refused with a reason (one of the Reject reasons, or
// dependency_pending) and details.
type DecomposeResult struct {
	Accepted bool   `json:"accepted"`
	PlanID   string `json:"planId,omitempty"`
	Reason   string `json:"reason,omitempty"`
	Details  string `json:"details,omitempty"`
}
