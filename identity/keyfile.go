package identity

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/delegateos/delegateos/internal/b64"
	"github.com/delegateos/delegateos/internal/strictjson"
)

// KeyFileVersion is written into every key file.
const KeyFileVersion = 1

// maxKeyFileSize bounds what LoadKeyFile reads.
const maxKeyFileSize = 64 << 10

// ErrKeyFilePermissions is wrapped when a key file is readable by group or others.
var ErrKeyFilePermissions = errors.New("key file is readable by other users")

// keyFile is the on-disk form. The seed is the secret; principal and did are
// written for people and checked on load, so a hand-edited file cannot claim
// another identity.
type keyFile struct {
	Version   int    `json:"version"`
	Name      string `json:"name,omitempty"`
	Principal string `json:"principal"`
	DID       string `json:"did"`
	Seed      string `json:"seed"`
}

// SaveKeyFile writes k to path with mode 0600. It refuses to overwrite an
// existing file: losing a key is not something to do by accident.
func SaveKeyFile(path string, k *Keypair) error {
	data, err := json.MarshalIndent(keyFile{
		Version:   KeyFileVersion,
		Name:      k.name,
		Principal: k.ID(),
		DID:       k.DID(),
		Seed:      b64.Encode(k.Seed()),
	}, "", "  ")
	if err != nil {
		return err
	}
	// Write a temporary file, sync it, then link it into place: the link
	// fails if path exists (no overwrite), and a crash or full disk never
	// leaves a partial key file behind at path.
	if _, err := os.Lstat(path); err == nil {
		return fmt.Errorf("key file %s already exists; choose another path or remove it first", path)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("create key file: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("create key file: %w", err)
	}
	if _, err := tmp.Write(append(data, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("write key file %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("write key file %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write key file %s: %w", path, err)
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("key file %s already exists; choose another path or remove it first", path)
		}
		return fmt.Errorf("create key file: %w", err)
	}
	return nil
}

// LoadKeyFile reads a key file, refusing one that group or others can read.
func LoadKeyFile(path string) (*Keypair, error) {
	// O_NONBLOCK, because opening a FIFO for reading would otherwise wait
	// for a writer before the file type could be checked. It has no effect
	// on reading a regular file.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("open key file: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("stat key file: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("key file %s is not a regular file", path)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%w: %s has mode %04o; run: chmod 600 %s", ErrKeyFilePermissions, path, st.Mode().Perm(), path)
	}
	if st.Size() > maxKeyFileSize {
		return nil, fmt.Errorf("key file %s is %d bytes; a key file is well under %d", path, st.Size(), maxKeyFileSize)
	}
	data := make([]byte, st.Size())
	if _, err := readFull(f, data); err != nil {
		return nil, fmt.Errorf("read key file %s: %w", path, err)
	}
	return parseKeyFile(path, data)
}

func readFull(f *os.File, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := f.Read(buf[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

func parseKeyFile(path string, data []byte) (*Keypair, error) {
	var kf keyFile
	if err := strictjson.Unmarshal(data, &kf); err != nil {
		return nil, fmt.Errorf("key file %s is not a delegateos key file: %v", path, err)
	}
	if kf.Version != KeyFileVersion {
		return nil, fmt.Errorf("key file %s has version %d; this delegateos reads version %d", path, kf.Version, KeyFileVersion)
	}
	seed, err := b64.Decode(kf.Seed)
	if err != nil {
		return nil, fmt.Errorf("key file %s: seed is not base64url", path)
	}
	k, err := FromSeed(seed, kf.Name)
	if err != nil {
		return nil, fmt.Errorf("key file %s: %v", path, err)
	}
	if kf.Principal != k.ID() {
		return nil, fmt.Errorf("key file %s: principal %q does not match its seed (%s)", path, kf.Principal, k.ID())
	}
	if kf.DID != "" && kf.DID != k.DID() {
		return nil, fmt.Errorf("key file %s: did %q does not match its seed", path, kf.DID)
	}
	return k, nil
}
