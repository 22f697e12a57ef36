package audit

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/internal/fsutil"
)

// Source is where a witness reads a log's checkpoints and hands its
// cosignatures: a log file (FileSource) or a server that publishes one
// (URLSource, what serve mounts with NewWitnessHandler).
type Source interface {
	// Fetch returns the C2SP tlog-witness add-checkpoint body of the
	// log's latest checkpoint for a witness that last cosigned size old.
	Fetch(old int64) ([]byte, error)
	// Submit hands over the checkpoint with the witness's cosignature.
	Submit(cosigned []byte) error
}

// FileSource is a log file, signed by LogKey; cosignatures go to its
// cosignature file.
type FileSource struct{ Path, LogKey string }

func (s FileSource) Fetch(old int64) ([]byte, error) {
	t, err := loadTree(s.Path, VerifyOptions{Trusted: []string{s.LogKey}})
	if err != nil {
		return nil, err
	}
	c, ok := t.latest()
	if !ok {
		return nil, fmt.Errorf("%s has no tree checkpoint yet", s.Path)
	}
	return witnessBody(t, c, []byte(c.note), old)
}

func (s FileSource) Submit(cosigned []byte) error {
	_, err := AddCosignatures(s.Path, cosigned, s.LogKey)
	return err
}

// URLSource is a server (delegateos serve) publishing its log at Base.
type URLSource struct {
	Base   string
	Client *http.Client
}

func (s URLSource) Fetch(old int64) ([]byte, error) {
	resp, err := s.Client.Get(fmt.Sprintf("%s%s?old=%d", strings.TrimSuffix(s.Base, "/"), CheckpointPath, old))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxCheckpointBytes+maxProofHashes*45+32+1))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %s", CheckpointPath, resp.Status, clip(b))
	}
	return b, nil
}

func (s URLSource) Submit(cosigned []byte) error {
	resp, err := s.Client.Post(strings.TrimSuffix(s.Base, "/")+CosignaturePath, "text/plain; charset=utf-8", bytes.NewReader(cosigned))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s: %s: %s", CosignaturePath, resp.Status, clip(b))
	}
	return nil
}

func clip(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return fmt.Sprintf("%q", s)
}

// Witness cosigns a log's checkpoints, each only once it has checked
// that the log's tree extends the one it cosigned last (kept in State).
type Witness struct {
	Key *identity.Keypair
	// LogKey is the did:key that signs the log's checkpoints.
	LogKey string
	// State is the file holding the last checkpoint cosigned.
	State string
	// Now is the cosignatures' clock; nil means time.Now.
	Now func() time.Time
}

// ErrFork is returned by Witness.Step for a checkpoint that is not an
// extension of the one the witness cosigned: the log was rewritten (or
// shown to the witness as two different logs).
var ErrFork = errors.New("the log forked")

// WitnessResult is what one Step did.
type WitnessResult struct {
	// Old and New are the sizes of the checkpoint cosigned before and now.
	Old, New int64
}

// Step fetches the log's latest checkpoint, checks it against the last one
// the witness cosigned, cosigns it and hands the cosignature over.
func (w *Witness) Step(src Source) (*WitnessResult, error) {
	var old Checkpoint
	var hadState bool
	if b, err := os.ReadFile(w.State); err == nil {
		if old, _, err = OpenCheckpoint(b, w.LogKey); err != nil {
			return nil, fmt.Errorf("the witness state %s: %v", w.State, err)
		}
		hadState = true
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	body, err := src.Fetch(old.Size)
	if err != nil {
		return nil, err
	}
	gotOld, proof, note, err := parseWitnessBody(body)
	if err != nil {
		return nil, err
	}
	if gotOld != old.Size {
		return nil, fmt.Errorf("asked for a proof from size %d, given one from %d", old.Size, gotOld)
	}
	cp, n, err := OpenCheckpoint(note, w.LogKey)
	if err != nil {
		return nil, err
	}
	switch {
	case !hadState || old.Size == 0:
	case cp.Size < old.Size:
		return nil, fmt.Errorf("%w: its checkpoint is of %d entries, fewer than the %d this witness cosigned", ErrFork, cp.Size, old.Size)
	case cp.Size == old.Size:
		if cp.Root != old.Root {
			return nil, fmt.Errorf("%w: its checkpoint of %d entries is not the one this witness cosigned (another root)", ErrFork, cp.Size)
		}
	default:
		if err := tlog.CheckTree(proof, cp.Size, cp.Root, old.Size, old.Root); err != nil {
			return nil, fmt.Errorf("%w: its checkpoint of %d entries does not extend the one of %d entries this witness cosigned (%v)", ErrFork, cp.Size, old.Size, err)
		}
	}
	now := time.Now
	if w.Now != nil {
		now = w.Now
	}
	cosigned := append(append([]byte(nil), note...), Cosign(n.Text, w.Key, uint64(now().Unix()))...)
	// Kept before the cosignature leaves: a witness that cosigned a
	// checkpoint must never cosign a fork of it, even after a crash.
	if err := fsutil.WriteFileAtomic(w.State, note, 0o600); err != nil {
		return nil, err
	}
	if err := src.Submit(cosigned); err != nil {
		return nil, err
	}
	return &WitnessResult{Old: old.Size, New: cp.Size}, nil
}
