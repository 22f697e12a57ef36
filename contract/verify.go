package contract

import (
	"crypto/ed25519"
	"fmt"
	"slices"
	"unicode/utf8"

	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/internal/canon"
	"github.com/delegateos/delegateos/internal/sig"
	"github.com/delegateos/delegateos/verify"
)

// Verify checks the contract's structure (see Parse), that its
// verification spec and output schema are accepted by verify.ParseSpec,
// and its signature against Issuer. It does not look at the clock; see
// CheckDeadline.
func (c *TaskContract) Verify() error {
	pub, raw, err := c.checkStructure()
	if err != nil {
		return err
	}
	return c.checkSignature(pub, raw)
}

// checkSignature checks a structurally valid contract's signature.
func (c *TaskContract) checkSignature(pub ed25519.PublicKey, raw []byte) error {
	payload, err := c.signedPayload()
	if err != nil {
		return err
	}
	if sig.VerifyDigest(pub, sig.Digest(payload), raw) != nil {
		return fmt.Errorf("%w (contract %s, issuer %s)", ErrInvalidSignature, c.ID, c.Issuer)
	}
	return nil
}

// checkStructure checks every member and returns the issuer's public key
// and the decoded signature.
func (c *TaskContract) checkStructure() (ed25519.PublicKey, []byte, error) {
	pub, err := c.checkUnsigned()
	if err != nil {
		return nil, nil, err
	}
	raw, err := sig.DecodeSignature(c.Signature)
	if err != nil {
		return nil, nil, malformed("%v", err)
	}
	return pub, raw, nil
}

// checkUnsigned checks every member but the signature and returns the
// issuer's public key.
func (c *TaskContract) checkUnsigned() (ed25519.PublicKey, error) {
	if !ValidID(c.ID) {
		return nil, malformed("id %q is not %q and 12 lowercase hex digits", clip(c.ID), IDPrefix)
	}
	if c.Version != Version {
		return nil, malformed("version %q, want %q", clip(c.Version), Version)
	}
	pub, err := identity.PublicKey(c.Issuer)
	if err != nil {
		return nil, malformed("issuer: %v", err)
	}
	created, err := c.Created()
	if err != nil {
		return nil, err
	}
	if err := c.checkTask(); err != nil {
		return nil, err
	}
	if err := c.checkVerification(); err != nil {
		return nil, err
	}
	if err := c.checkConstraints(); err != nil {
		return nil, err
	}
	deadline, _ := c.Deadline() // checked by checkConstraints
	if !deadline.After(created) {
		return nil, malformed("deadline %s is not after createdAt %s", c.Constraints.Deadline, c.CreatedAt)
	}
	return pub, nil
}

func (c *TaskContract) checkTask() error {
	t := &c.Task
	if t.Title == "" {
		return malformed("task.title is empty")
	}
	if len(t.Title) > MaxTitleLen {
		return malformed("task.title is %d bytes, over the limit of %d", len(t.Title), MaxTitleLen)
	}
	for _, s := range []struct{ name, v string }{{"task.title", t.Title}, {"task.description", t.Description}} {
		if !utf8.ValidString(s.v) {
			return malformed("%s is not valid UTF-8", s.name)
		}
	}
	if err := checkObject("task.inputs", t.Inputs); err != nil {
		return err
	}
	return checkObject("task.outputSchema", t.OutputSchema)
}

// checkVerification parses the verification spec, and the output schema
// as the spec of a schema_match, so that a contract whose output can never
// be checked is refused when it is made, not when work is delivered.
func (c *TaskContract) checkVerification() error {
	if err := checkObject("verification", c.Verification); err != nil {
		return err
	}
	if _, err := c.Spec(); err != nil {
		return err
	}
	if _, err := SchemaSpec(c.Task.OutputSchema); err != nil {
		return malformed("task.outputSchema: %v", err)
	}
	return nil
}

// SchemaSpec is the verification spec that checks an output against a
// contract's task.outputSchema: a schema_match with that schema.
func SchemaSpec(outputSchema []byte) (*verify.Spec, error) {
	spec := make([]byte, 0, len(outputSchema)+40)
	spec = append(spec, `{"method":"schema_match","schema":`...)
	spec = append(spec, outputSchema...)
	spec = append(spec, '}')
	return verify.ParseSpec(spec)
}

func checkObject(name string, v []byte) error {
	cv, err := canonicalValue(v)
	if err != nil {
		return malformed("%s: %v", name, err)
	}
	if !isObject(cv) {
		return malformed("%s is not a JSON object", name)
	}
	return nil
}

func (c *TaskContract) checkConstraints() error {
	k := &c.Constraints
	for _, f := range []struct {
		name string
		v    int64
	}{{"maxBudgetMicrocents", k.MaxBudgetMicrocents}, {"maxChainDepth", k.MaxChainDepth}} {
		if f.v < 0 || f.v > canon.MaxSafeInteger {
			return malformed("constraints.%s %d is outside 0..2^53-1", f.name, f.v)
		}
	}
	if _, err := c.Deadline(); err != nil {
		return err
	}
	if k.RequiredCapabilities == nil {
		return malformed("constraints.requiredCapabilities is missing")
	}
	if len(k.RequiredCapabilities) > MaxRequiredCapabilities {
		return malformed("%d required capabilities, over the limit of %d", len(k.RequiredCapabilities), MaxRequiredCapabilities)
	}
	for i, s := range k.RequiredCapabilities {
		if _, err := ParseRequirement(s); err != nil {
			return fmt.Errorf("%w: constraints.requiredCapabilities[%d]: %v", ErrMalformed, i, err)
		}
		if slices.Contains(k.RequiredCapabilities[:i], s) {
			return malformed("constraints.requiredCapabilities lists %q twice", clip(s))
		}
	}
	return nil
}
