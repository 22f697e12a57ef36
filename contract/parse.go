package contract

import (
	"bytes"
	"crypto/ed25519"

	"github.com/gowebpki/jcs"

	"github.com/delegateos/delegateos/internal/canon"
	"github.com/delegateos/delegateos/internal/strictjson"
)

// Parse decodes a contract and checks its structure, but not its
// signature (see Verify). Decoding is strict: the input must be at most
// MaxContractSize bytes of one JSON object with no duplicate, re-cased or
// unknown members, valid UTF-8 and nesting within strictjson.MaxDepth.
// Whitespace and the spelling of free-form values are free; the free-form
// members are replaced by their canonical forms.
func Parse(data []byte) (*TaskContract, error) {
	c, _, _, err := parse(data)
	return c, err
}

// parse is Parse, also returning the issuer's key and the decoded
// signature for a signature check that follows.
func parse(data []byte) (*TaskContract, ed25519.PublicKey, []byte, error) {
	if len(data) > MaxContractSize {
		return nil, nil, nil, malformed("%d bytes, over the limit of %d", len(data), MaxContractSize)
	}
	var c TaskContract
	if err := strictjson.Unmarshal(data, &c); err != nil {
		return nil, nil, nil, malformed("%v", err)
	}
	if err := c.normalize(); err != nil {
		return nil, nil, nil, err
	}
	if err := c.checkLossless(data); err != nil {
		return nil, nil, nil, err
	}
	pub, raw, err := c.checkStructure()
	if err != nil {
		return nil, nil, nil, err
	}
	return &c, pub, raw, nil
}

// checkLossless requires the canonical form of the input to be the
// canonical form of what was decoded. encoding/json reads a null member as
// the zero value, which would then be checked and signed as if it had been
// written ("description":null verifying as ""); any such loss is refused.
func (c *TaskContract) checkLossless(data []byte) error {
	want, err := jcs.Transform(data)
	if err != nil {
		return malformed("%v", err)
	}
	got, err := c.canonical()
	if err != nil {
		return err
	}
	if !bytes.Equal(got, want) {
		return malformed("a member is null or does not keep its value when decoded")
	}
	return nil
}

// normalize replaces the free-form members by their canonical forms.
func (c *TaskContract) normalize() error {
	for _, m := range []struct {
		name string
		v    *[]byte
	}{
		{"task.inputs", (*[]byte)(&c.Task.Inputs)},
		{"task.outputSchema", (*[]byte)(&c.Task.OutputSchema)},
		{"verification", (*[]byte)(&c.Verification)},
	} {
		if *m.v == nil {
			return malformed("%s is missing", m.name)
		}
		v, err := canonicalValue(*m.v)
		if err != nil {
			return malformed("%s: %v", m.name, err)
		}
		*m.v = v
	}
	return nil
}

// canonical is the canonical JSON of the contract as it stands.
func (c *TaskContract) canonical() ([]byte, error) {
	b, err := canon.Marshal(c)
	if err != nil {
		return nil, malformed("canonicalize: %v", err)
	}
	return b, nil
}

// signedPayload is the canonical JSON of the contract without its signature.
func (c *TaskContract) signedPayload() ([]byte, error) {
	u := *c
	u.Signature = ""
	return u.canonical()
}
