package audit

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/delegateos/delegateos/internal/canon"
	"github.com/delegateos/delegateos/receipt"
)

// BundleKind is the schema_version of an inclusion proof bundle.
const BundleKind = "audit_proof/1"

// MaxBundleBytes bounds a bundle read from outside: one receipt, its
// proof (at most 63 hashes) and a checkpoint.
const MaxBundleBytes = 2*receipt.MaxBytes + MaxCheckpointBytes + 8<<10

// maxProofHashes bounds a proof: a tree of 2^63 leaves needs 63.
const maxProofHashes = 63

// Bundle is one receipt with the proof that it is in its log: the entry's
// bytes, its inclusion proof and the signed checkpoint the proof leads to
// (docs/receipts.md). It is checked with the proxy's did:key alone.
type Bundle struct {
	// Checkpoint is the signed note (with any witness cosignatures).
	Checkpoint string `json:"checkpoint"`
	// Entry is the log line, without its newline.
	Entry string `json:"entry"`
	// Proof is the RFC 6962 inclusion proof, hashes in base64.
	Proof []string `json:"proof"`
	// Receipt is the entry's number (its leaf index + 1).
	Receipt       int64  `json:"receipt"`
	SchemaVersion string `json:"schema_version"`
}

// treeLog is a verified log with its tree's stored hashes and its tree
// checkpoints.
type treeLog struct {
	rep    *Report
	store  hashStore
	checks []treeCheck
	// kept is the line loadTreeFrom was asked to keep.
	kept []byte
}

// treeCheck is a tree checkpoint of a log: its note and what it signs.
type treeCheck struct {
	Checkpoint
	note   string
	signer string
	entry  int64
}

// loadTree verifies the log at path (as Export does: it may still be
// written, and may have recoveries) and hashes its tree, in one read.
func loadTree(path string, o VerifyOptions) (*treeLog, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	t, err := loadTreeFrom(f, o, 0)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// loadTreeFrom is loadTree of a log read from r, keeping line keep (when
// not 0).
func loadTreeFrom(r io.Reader, o VerifyOptions, keep int64) (*treeLog, error) {
	o.Open, o.AllowRecovered = true, true
	t := &treeLog{}
	rep, err := verify(r, o, func(l *rawLine, rc *receipt.Receipt) error {
		if l.no != t.store.n+1 {
			return errors.New("an export, not a log")
		}
		if err := t.store.add(l.leaf); err != nil {
			return err
		}
		if l.no == keep {
			t.kept = l.text
		}
		if c, ok := rc.Body.(*receipt.CheckpointBody); ok && c.Checkpoint != "" {
			// verify has checked the note and its root.
			cp, _, err := OpenCheckpoint([]byte(c.Checkpoint), rc.Signer)
			if err != nil {
				return err
			}
			t.checks = append(t.checks, treeCheck{Checkpoint: cp, note: c.Checkpoint, signer: rc.Signer, entry: l.no})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("the log does not verify: %w", err)
	}
	if rep.Export {
		return nil, errors.New("an export, not a log")
	}
	t.rep = rep
	return t, nil
}

// latest is the log's last tree checkpoint.
func (t *treeLog) latest() (treeCheck, bool) {
	if len(t.checks) == 0 {
		return treeCheck{}, false
	}
	return t.checks[len(t.checks)-1], true
}

// Prove returns the bundle of receipt n of the log at path, proven to the
// log's last tree checkpoint (with the cosignatures of it in cosigs, if
// any). The log is verified first.
func Prove(path string, n int64, o VerifyOptions) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	t, err := loadTreeFrom(f, o, n)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t.prove(path, n)
}

func (t *treeLog) prove(path string, n int64) ([]byte, error) {
	if n < 1 || n > t.rep.Last {
		return nil, fmt.Errorf("the log has entries 1 to %d: there is no entry %d", t.rep.Last, n)
	}
	c, ok := t.latest()
	if !ok {
		return nil, fmt.Errorf("%s has no tree checkpoint (it was written before audit_checkpoint/3): export the receipt with 'audit export' instead", path)
	}
	if n > c.Size {
		return nil, fmt.Errorf("entry %d is not yet covered by a tree checkpoint (the last covers entries 1 to %d): prove it once the proxy has written the next one", n, c.Size)
	}
	p, err := tlog.ProveRecord(c.Size, n-1, &t.store)
	if err != nil {
		return nil, err
	}
	entry := t.kept
	cosigs, err := cosignaturesOf(path, c.Size)
	if err != nil {
		return nil, err
	}
	b := Bundle{Checkpoint: c.note + cosigs, Entry: string(entry), Receipt: n, SchemaVersion: BundleKind, Proof: make([]string, len(p))}
	for i, h := range p {
		b.Proof[i] = base64.StdEncoding.EncodeToString(h[:])
	}
	out, err := canon.Marshal(b)
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

// readEntry is line n of the log at path.
func readEntry(path string, n int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	lr := newLineReader(f)
	for {
		l := lr.line()
		if l == nil {
			return nil, fmt.Errorf("%s changed while it was read", path)
		}
		if l.no == n {
			if !l.complete || l.tooLong {
				return nil, fmt.Errorf("%s changed while it was read", path)
			}
			return l.text, nil
		}
	}
}

// ParseBundle reads a bundle strictly: at most MaxBundleBytes of canonical
// JSON with exactly a bundle's members. It checks nothing: Bundle.Verify
// does.
func ParseBundle(data []byte) (*Bundle, error) {
	data = bytes.TrimSuffix(data, []byte("\n"))
	if len(data) > MaxBundleBytes {
		return nil, fmt.Errorf("the bundle is longer than %d bytes", MaxBundleBytes)
	}
	var b Bundle
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		return nil, fmt.Errorf("the bundle is not an %s: %v", BundleKind, err)
	}
	if dec.More() {
		return nil, errors.New("data after the bundle")
	}
	if b.SchemaVersion != BundleKind {
		return nil, fmt.Errorf("the bundle's schema_version is %q, not %s", b.SchemaVersion, BundleKind)
	}
	again, err := canon.Marshal(b)
	if err != nil || !bytes.Equal(again, data) {
		return nil, fmt.Errorf("the bundle is not the canonical JSON (RFC 8785) of an %s", BundleKind)
	}
	if len(b.Proof) > maxProofHashes {
		return nil, fmt.Errorf("the proof has %d hashes, more than %d", len(b.Proof), maxProofHashes)
	}
	return &b, nil
}

// BundleReport is what a verified bundle proves.
type BundleReport struct {
	Receipt *receipt.Receipt
	// Checkpoint is what the proof leads to, signed by the log's key.
	Checkpoint Checkpoint
	// Cosigners are the witnesses whose cosignatures verified.
	Cosigners []string
}

// Verify checks the bundle with the log's did:key alone: the checkpoint
// is signed by it, the entry is receipt Receipt (and, if it has a proof
// of its own, that verifies by did too) and the inclusion proof leads
// from the entry to the checkpoint's root. Witnesses, when given, must
// each have cosigned the checkpoint.
func (b *Bundle) Verify(did string, witnesses []string) (*BundleReport, error) {
	cp, cosigners, err := OpenWitnessed([]byte(b.Checkpoint), did, witnesses)
	if err != nil {
		return nil, err
	}
	rc, err := receipt.ParseEntry([]byte(b.Entry))
	if err != nil {
		return nil, fmt.Errorf("the entry: %v", err)
	}
	if rc.Position().Seq != b.Receipt {
		return nil, fmt.Errorf("the entry is entry %d, not %d", rc.Position().Seq, b.Receipt)
	}
	if rc.Signed() {
		if err := rc.Verify([]string{did}); err != nil {
			return nil, fmt.Errorf("the entry's own proof: %v", err)
		}
	}
	if b.Receipt < 1 || b.Receipt > cp.Size {
		return nil, fmt.Errorf("the checkpoint covers entries 1 to %d, not entry %d", cp.Size, b.Receipt)
	}
	proof := make(tlog.RecordProof, len(b.Proof))
	for i, s := range b.Proof {
		h, err := base64.StdEncoding.DecodeString(s)
		if err != nil || len(h) != tlog.HashSize {
			return nil, fmt.Errorf("proof hash %d is not a 32-byte hash in base64", i+1)
		}
		copy(proof[i][:], h)
	}
	if err := tlog.CheckRecord(proof, cp.Size, cp.Root, b.Receipt-1, LeafHash([]byte(b.Entry))); err != nil {
		return nil, fmt.Errorf("the entry is not in the log the checkpoint signs: the inclusion proof does not lead to its root (%v)", err)
	}
	return &BundleReport{Receipt: rc, Checkpoint: cp, Cosigners: cosigners}, nil
}

// ConsistencyReport is what Consistency proved.
type ConsistencyReport struct {
	Old, New Checkpoint
	// Proof is the RFC 6962 consistency proof from Old to New.
	Proof tlog.TreeProof
}

// Consistency checks that the log at newPath extends what the file at
// oldPath signed: a signed checkpoint note, a bundle, or an earlier copy
// of the log (its last tree checkpoint). The new log is verified, and its
// last tree checkpoint must prove, by a consistency proof, that its tree
// extends the old one: a log rewritten after the old state was taken
// fails.
func Consistency(oldPath, newPath string, o VerifyOptions) (*ConsistencyReport, error) {
	t, err := loadTree(newPath, o)
	if err != nil {
		return nil, err
	}
	c, ok := t.latest()
	if !ok {
		return nil, fmt.Errorf("%s has no tree checkpoint", newPath)
	}
	oldCP, err := oldCheckpoint(oldPath, c.signer, o)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", oldPath, err)
	}
	if oldCP.Size > c.Size {
		return nil, fmt.Errorf("the old checkpoint is of %d entries, the new log's last of only %d: the log was cut back", oldCP.Size, c.Size)
	}
	if oldCP.Size == 0 {
		// Every tree extends the empty one.
		if oldCP.Root != emptyRoot {
			return nil, errors.New("the old checkpoint is of no entries but not of the empty tree's root")
		}
		return &ConsistencyReport{Old: oldCP, New: c.Checkpoint}, nil
	}
	p, err := tlog.ProveTree(c.Size, oldCP.Size, &t.store)
	if err != nil {
		return nil, err
	}
	if err := tlog.CheckTree(p, c.Size, c.Root, oldCP.Size, oldCP.Root); err != nil {
		return nil, fmt.Errorf("the log is not an extension of the old checkpoint's: its first %d entries are not those the old checkpoint signed (%v)", oldCP.Size, err)
	}
	return &ConsistencyReport{Old: oldCP, New: c.Checkpoint, Proof: p}, nil
}

// oldCheckpoint reads what Consistency is given as the old state, signed
// by signer.
func oldCheckpoint(path, signer string, o VerifyOptions) (Checkpoint, error) {
	f, err := os.Open(path)
	if err != nil {
		return Checkpoint{}, err
	}
	head := make([]byte, len("audit.delegateos/"))
	n, _ := io.ReadFull(f, head)
	f.Close()
	head = head[:n]
	switch {
	case string(head) == "audit.delegateos/":
		b, err := readLimited(path, MaxCheckpointBytes)
		if err != nil {
			return Checkpoint{}, err
		}
		cp, _, err := OpenCheckpoint(b, signer)
		return cp, err
	case bytes.HasPrefix(head, []byte(`{"checkpoint":`)):
		b, err := readLimited(path, MaxBundleBytes+1)
		if err != nil {
			return Checkpoint{}, err
		}
		bundle, err := ParseBundle(b)
		if err != nil {
			return Checkpoint{}, err
		}
		r, err := bundle.Verify(signer, nil)
		if err != nil {
			return Checkpoint{}, err
		}
		return r.Checkpoint, nil
	}
	o.Trusted = []string{signer}
	t, err := loadTree(path, o)
	if err != nil {
		return Checkpoint{}, err
	}
	c, ok := t.latest()
	if !ok {
		return Checkpoint{}, errors.New("the old log has no tree checkpoint")
	}
	return c.Checkpoint, nil
}

// readLimited reads at most limit bytes of the file at path, refusing a
// longer one.
func readLimited(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s is longer than %d bytes", path, limit)
	}
	return b, nil
}
