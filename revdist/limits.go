package revdist

import "time"

const (
	// Path is where Handler is mounted: the revocation endpoint an agent
	// card names.
	Path = "/.well-known/delegateos/revocations"
	// MaxPushBytes bounds a delegateos/revoke body. An entry is about 300
	// bytes.
	MaxPushBytes = 16 << 10
	// DefaultMaxPeerListBytes bounds a peer's list read by a poll when
	// Distributor.MaxListBytes is zero.
	DefaultMaxPeerListBytes = 16 << 20
	// DefaultInterval is the poll interval of §4.3.
	DefaultInterval = 60 * time.Second
	// DefaultLocalCheck is how often a Distributor looks for entries added
	// to its store by another process, to push them.
	DefaultLocalCheck = time.Second
	// listCacheFor is how long a published list of unchanged length is
	// served from its cache.
	listCacheFor = 30 * time.Second
	// requestTimeout bounds one poll or push.
	requestTimeout = 10 * time.Second
	// MethodRevoke is the JSON-RPC method of a pushed revocation (§9.5).
	MethodRevoke = "delegateos/revoke"
)
