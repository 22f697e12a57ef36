package ldp

import "time"

const (
	// MaxEnvelopeSize bounds an envelope read from a peer, task input and
	// output included.
	MaxEnvelopeSize = 1 << 20
	// MaxCardSize bounds an identity card read from a peer.
	MaxCardSize = 256 << 10
	// MaxIDLen bounds identifiers: message, session, task and delegate IDs,
	// skill names, nonces, trust domain names.
	MaxIDLen = 256
	// MaxTextLen bounds free text: names, descriptions, reasons, messages.
	MaxTextLen = 8 << 10
	// MaxListLen bounds lists of modes, capabilities, trusted peers,
	// criteria and the members of metadata.
	MaxListLen = 256
	// MaxDCTLen bounds the token in a delegateos member.
	MaxDCTLen = 64 << 10

	// DefaultWindow is how far an envelope's timestamp may lie behind the
	// verifier's clock: the reference's default replay window.
	DefaultWindow = 60 * time.Second
	// DefaultMaxAhead is how far it may lie ahead (clocks differ). A
	// message_id is remembered until its timestamp leaves the window, so a
	// timestamp far ahead would hold it longer.
	DefaultMaxAhead = 30 * time.Second
	// DefaultMaxSeen bounds the message IDs and nonces a MemoryReplay
	// holds; when that many are live a new envelope is refused (busy)
	// rather than one forgotten early.
	DefaultMaxSeen = 100_000

	// DefaultTTL is a session's inactivity timeout when SESSION_PROPOSE
	// names none (§5.4).
	DefaultTTL = 3600 * time.Second
	// MaxTTL bounds the inactivity timeout a peer may ask for.
	MaxTTL = 24 * time.Hour
	// DefaultMaxSessions bounds the sessions a Sessions table holds.
	DefaultMaxSessions = 10_000
	// DefaultMaxSessionsPerPeer bounds the live sessions of one peer.
	DefaultMaxSessionsPerPeer = 64
	// DefaultMaxSessionsPerTree bounds the live sessions of one delegation
	// tree (see Responder.Tree): an eighth of the table, which the holders
	// of one token cannot multiply as they multiply keys.
	DefaultMaxSessionsPerTree = DefaultMaxSessions / 8
)
