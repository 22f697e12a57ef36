package policy

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"gopkg.in/yaml.v3"
)

// ReceiptsConfig is the receipts section: what the proxy's signed receipts
// hold besides hashes.
type ReceiptsConfig struct {
	// IncludeArguments puts a request's params.arguments in clear into its
	// decision receipt; by default only their SHA-256 is.
	IncludeArguments bool
	// IncludeResults puts a response's result in clear into its execution
	// receipt; by default only the response's SHA-256 is.
	IncludeResults bool
	// SignEach signs every receipt on its own, as well as the audit log's
	// checkpoints (which sign the Merkle tree of every receipt), for
	// consumers that read receipts one by one.
	SignEach bool
}

func (ps *parser) receipts(n *yaml.Node, key string, out *ReceiptsConfig) {
	if n.Kind != yaml.MappingNode {
		ps.errorf(n, key, "must be a mapping with include_arguments, include_results and sign_each (true or false)")
		return
	}
	ps.mapping(n, key, []string{"include_arguments", "include_results", "sign_each"}, func(k string, v *yaml.Node) {
		switch k {
		case "include_arguments":
			ps.boolean(v, key+"."+k, &out.IncludeArguments)
		case "include_results":
			ps.boolean(v, key+"."+k, &out.IncludeResults)
		case "sign_each":
			ps.boolean(v, key+"."+k, &out.SignEach)
		}
	})
}

// LoadWithDigest is Load that also returns the hex SHA-256 of the bytes
// it parsed, which receipts name the policy by.
func LoadWithDigest(path string) (*Policy, string, error) {
	return loadDigest(path, false)
}

// ErrHalfWritten is wrapped by LoadWhole's error for a file that may have
// been read half written.
var ErrHalfWritten = errors.New("the file may be half written")

// LoadWhole is LoadWithDigest for a file that may be being written in
// place while it is read (a reload): the open file is read twice, and a
// file whose two reads differ, or whose text does not end with a newline,
// is refused (ErrHalfWritten). Its first bytes may be a valid policy that
// says more than the whole file, not only less ("default_cost: 100" cut
// to "default_cost: 1"). A file replaced by a rename meanwhile is read
// whole: the open file is the one it replaced.
func LoadWhole(path string) (*Policy, string, error) {
	return loadDigest(path, true)
}

func loadDigest(path string, whole bool) (*Policy, string, error) {
	f, err := openFile(path)
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	read := func() ([]byte, error) {
		data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", path, err)
		}
		if len(data) > MaxFileSize {
			return nil, fmt.Errorf("%s: larger than %d bytes", path, MaxFileSize)
		}
		return data, nil
	}
	data, err := read()
	if err != nil {
		return nil, "", err
	}
	if whole {
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return nil, "", fmt.Errorf("read %s: %w", path, err)
		}
		again, err := read()
		if err != nil {
			return nil, "", err
		}
		switch {
		case !bytes.Equal(data, again):
			return nil, "", fmt.Errorf("%s changed while it was read: %w", path, ErrHalfWritten)
		case len(data) > 0 && data[len(data)-1] != '\n':
			return nil, "", fmt.Errorf("%s does not end with a newline (end it with one if it is whole): %w", path, ErrHalfWritten)
		}
	}
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return nil, "", err
	}
	p, _, err := parse(data, dir)
	if errs, ok := err.(Errors); ok {
		for _, e := range errs {
			e.File = path
		}
	}
	d := sha256.Sum256(data)
	return p, hex.EncodeToString(d[:]), err
}
