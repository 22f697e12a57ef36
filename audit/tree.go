package audit

import (
	"crypto/sha256"
	"fmt"

	"golang.org/x/mod/sumdb/tlog"
)

// LeafHash is the Merkle tree leaf of one entry: the RFC 6962 leaf hash
// of its digest, SHA-256(0x00 || SHA-256(line)), the line without its
// newline. The writer hashes each entry once: its digest names it in the
// chain and is its leaf's record.
func LeafHash(line []byte) tlog.Hash {
	d := sha256.Sum256(line)
	return leafOfDigest(d)
}

// leafOfDigest is the leaf of an entry whose digest (SHA-256) is d.
func leafOfDigest(d [32]byte) tlog.Hash { return tlog.RecordHash(d[:]) }

// frontier is the right edge of a Merkle tree being appended to: the
// roots of its complete subtrees, largest first. It is all the writer
// needs to sign the tree's root, in O(log n) memory.
type frontier struct {
	n     int64
	nodes []tlog.Hash
}

// add appends a leaf.
func (f *frontier) add(leaf tlog.Hash) {
	f.nodes = append(f.nodes, leaf)
	// Subtree sizes are the bits of n: a carry merges two equal subtrees.
	for n := f.n; n&1 == 1; n >>= 1 {
		k := len(f.nodes)
		f.nodes[k-2] = tlog.NodeHash(f.nodes[k-2], f.nodes[k-1])
		f.nodes = f.nodes[:k-1]
	}
	f.n++
}

// root is the RFC 6962 root of the tree.
func (f *frontier) root() tlog.Hash {
	if len(f.nodes) == 0 {
		return emptyRoot
	}
	h := f.nodes[len(f.nodes)-1]
	for i := len(f.nodes) - 2; i >= 0; i-- {
		h = tlog.NodeHash(f.nodes[i], h)
	}
	return h
}

// emptyRoot is the RFC 6962 root of an empty tree, the SHA-256 of no
// bytes (as tlog.TreeHash(0) gives).
var emptyRoot = tlog.Hash(sha256.Sum256(nil))

// hashStore is a whole tree's stored hashes in memory (about two per
// leaf), for proofs: tlog.HashReader over it.
type hashStore struct {
	n      int64
	hashes []tlog.Hash
}

func (s *hashStore) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	for i, x := range indexes {
		if x < 0 || x >= int64(len(s.hashes)) {
			return nil, fmt.Errorf("no stored hash %d", x)
		}
		out[i] = s.hashes[x]
	}
	return out, nil
}

// add appends a leaf given by its hash.
func (s *hashStore) add(leaf tlog.Hash) error {
	hs, err := tlog.StoredHashesForRecordHash(s.n, leaf, s)
	if err != nil {
		return err
	}
	s.hashes = append(s.hashes, hs...)
	s.n++
	return nil
}
