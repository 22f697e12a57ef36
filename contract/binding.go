package contract

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/delegateos/delegateos/dct"
)

// Requirement is one entry of constraints.requiredCapabilities.
type Requirement struct {
	Namespace, Action string
}

func (r Requirement) String() string { return r.Namespace + ":" + r.Action }

// ParseRequirement reads "namespace:action". The action is what follows
// the last colon, so a custom namespace may itself contain colons
// ("acme:billing:charge" is action "charge" in namespace "acme:billing",
// §12). Namespace and action are non-empty, valid UTF-8 and at most
// dct.MaxStringLen bytes each.
func ParseRequirement(s string) (Requirement, error) {
	i := strings.LastIndexByte(s, ':')
	if i <= 0 || i == len(s)-1 {
		return Requirement{}, fmt.Errorf("required capability %q: want NAMESPACE:ACTION, e.g. docs:read", clip(s))
	}
	r := Requirement{Namespace: s[:i], Action: s[i+1:]}
	if len(r.Namespace) > dct.MaxStringLen || len(r.Action) > dct.MaxStringLen || !utf8.ValidString(s) {
		return Requirement{}, fmt.Errorf("required capability %q: namespace and action must be valid UTF-8 of at most %d bytes", clip(s), dct.MaxStringLen)
	}
	return r, nil
}

// GrantedBy reports whether a capability grants the requirement. A
// requirement names no resource: it says which kinds of action the task
// needs, while the token says where. So a capability for the namespace and
// action on any resource counts. A capability's namespace or action of "*"
// grants any value, as in dct; a "*" in a requirement is a literal that
// only a "*" grants.
func (r Requirement) GrantedBy(c dct.Capability) bool {
	return nameGranted(c.Namespace, r.Namespace) && nameGranted(c.Action, r.Action) && c.Resource != ""
}

func nameGranted(granted, required string) bool { return granted == "*" || granted == required }

// CheckBinding is the contract–token binding of §5.2, applied to the scope
// a dct.Verifier returned for the token (never to unverified token
// fields). It returns a *BindingError when:
//
//   - contract_mismatch: the token is bound to another contract
//     (scope.ContractID), or the contract's issuer signed no block of the
//     token. Contract IDs are neither secret nor unique across issuers, so
//     without the issuer rule anyone could publish a contract under a
//     token's contract ID and have its constraints apply;
//   - capability_mismatch: some required capability is granted by none of
//     the token's effective capabilities (see Requirement.GrantedBy).
//
// The contract must already have been verified (Verify, or a Store); its
// deadline is checked by CheckDeadline.
func CheckBinding(c *TaskContract, scope *dct.AuthorizedScope) error {
	if c == nil || scope == nil {
		return errors.New("contract binding: no contract or no token scope")
	}
	if scope.ContractID != c.ID {
		return &BindingError{
			Reason: ContractMismatch, ContractID: c.ID, TokenContractID: scope.ContractID,
			Detail: fmt.Sprintf("the token is bound to contract %q, not %s", clip(scope.ContractID), c.ID),
		}
	}
	if !signedBlock(c.Issuer, scope) {
		return &BindingError{
			Reason: ContractMismatch, ContractID: c.ID, TokenContractID: scope.ContractID,
			Detail: fmt.Sprintf("contract %s is issued by %s, who signed no block of the token", c.ID, c.Issuer),
		}
	}
	var missing []string
	for _, s := range c.Constraints.RequiredCapabilities {
		r, err := ParseRequirement(s)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrMalformed, err)
		}
		if !granted(r, scope.Capabilities) {
			missing = append(missing, s)
		}
	}
	if len(missing) > 0 {
		return &BindingError{
			Reason: CapabilityMismatch, ContractID: c.ID, TokenContractID: scope.ContractID, Missing: missing,
			Detail: fmt.Sprintf("contract %s requires %s, which the token does not grant", c.ID, strings.Join(missing, ", ")),
		}
	}
	return nil
}

func granted(r Requirement, caps []dct.Capability) bool {
	for _, c := range caps {
		if r.GrantedBy(c) {
			return true
		}
	}
	return false
}

// signedBlock reports whether p signed a block of the token: the root
// issuer signed the authority, and the delegatee of each level but the
// last signed the attenuation after it.
func signedBlock(p string, scope *dct.AuthorizedScope) bool {
	if p == scope.Issuer {
		return true
	}
	for i := 0; i+1 < len(scope.Chain); i++ {
		if scope.Chain[i].Delegatee == p {
			return true
		}
	}
	return false
}
