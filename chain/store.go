package chain

import "time"

// Store holds the delegation chain. Memory and File implement it; both
// are safe for concurrent use.
type Store interface {
	// Insert records a new delegation. It checks, in this order, and
	// records nothing if any check fails:
	//
	//   - the record on its own (ErrMalformed): ID and ParentID are "del_"
	//     and 12 lowercase hex digits and ID is not del_000000000000; From
	//     and To are principal IDs; ContractID is 1..dct.MaxStringLen bytes;
	//     Depth is not negative; Status is active; CreatedAt is a timestamp
	//     as timestamp.Format writes it; CompletedAt and AttestationID are
	//     empty; DCT has the dct.Format and its token parses (dct.Parse);
	//   - Key and ParentKey, if given, are the token's (ErrTokenMismatch);
	//     the store sets them from the token;
	//   - the key is not recorded yet (ErrDuplicate): another delegation
	//     with the same ID but another key is a different delegation;
	//   - for a root (ParentID del_000000000000): depth 0 and a root token
	//     (ErrRoot), then the binding below, and From is the issuer
	//     (ErrTokenMismatch);
	//   - for a child: the parent, found by the key of its token's prefix,
	//     is recorded (ErrNoParent), has ParentID (ErrTokenMismatch) and is
	//     active
	//     (ErrParentInactive); From is the parent's To (ErrFromMismatch);
	//     Depth is the parent's + 1 (ErrDepth) and at most the root token's
	//     authority.maxChainDepth (ErrMaxDepth); then the binding below; then
	//     the token is the parent's token, byte for byte, followed by at
	//     least one attenuation block whose first is made by From
	//     (ErrNotAttenuation);
	//   - the binding (ErrTokenMismatch): the token has one signature per
	//     block, To is its last delegatee, ID and ContractID are its last
	//     block's delegation and contract IDs.
	//
	// Insert does not verify the token's signatures, its attenuation rules,
	// revocation or expiry: run a dct.Verifier on it first.
	Insert(d Delegation) error
	// Get returns the delegation ref names, or an error wrapping
	// fs.ErrNotExist. ref is a key, or an ID; an ID more than one recorded
	// delegation has is an error wrapping ErrAmbiguous. The methods below
	// that take a ref read it the same way. Code acting for someone
	// passes a key: anyone may choose an ID.
	Get(ref string) (Delegation, error)
	// WithID returns every delegation with the given ID, in the order they
	// were inserted.
	WithID(id string) ([]Delegation, error)
	// List returns every delegation in the order they were inserted.
	List() ([]Delegation, error)
	// Complete marks an active delegation completed at the given time,
	// naming its attestation ("att_" + 12 hex digits) or none (""). A
	// delegation that has ended is refused with a *TransitionError.
	Complete(ref, attestationID string, at time.Time) error
	// Fail is Complete for a delegation that failed.
	Fail(ref, attestationID string, at time.Time) error
	// Revoke marks an active delegation and each of its active descendants
	// revoked at the given time, and returns the keys it changed: the
	// delegation first, then descendants, parents before children. Ended
	// descendants keep their status, and so do the active descendants of
	// a delegation that has ended, which Revoke refuses with a
	// *TransitionError: revoke those by their own keys.
	Revoke(ref string, at time.Time) ([]string, error)
	// Close releases the store. Using a closed File is an error; a closed
	// Memory stays usable.
	Close() error
}

// StatusReader is implemented by stores that look up a delegation's status
// alone: no record is copied and no error is made for a delegation that is
// not recorded, so a proxy can ask on every call. Memory and File
// implement it.
type StatusReader interface {
	// Status returns the status of the delegation with the given key, and
	// recorded false (and no error) when there is none. An error means the
	// store cannot be read. It takes a key only, never an ID.
	Status(key string) (st Status, recorded bool, err error)
}
