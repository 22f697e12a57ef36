package oauth

import "time"

// Limits on what unauthenticated clients can make the server hold or read.
const (
	// MaxRegistrationBytes bounds a registration request's body.
	MaxRegistrationBytes = 16 << 10
	// MaxFormBytes bounds a /token or consent form body.
	MaxFormBytes = 16 << 10
	// MaxRedirectURIs and MaxURIBytes bound a client's redirect URIs.
	MaxRedirectURIs = 8
	MaxURIBytes     = 2048
	// MaxClientNameBytes bounds a client's name.
	MaxClientNameBytes = 200
	// MaxScopes bounds the scopes one request asks for.
	MaxScopes = 64
	// MaxClients bounds the registered clients; a registration beyond it
	// forgets the oldest client no one has approved.
	MaxClients = 1024
	// MaxUnapprovedClients bounds the registered clients no one has
	// approved yet (anyone may register one).
	MaxUnapprovedClients = 256
	// MaxPending bounds the authorization requests waiting for consent,
	// and MaxPendingPerClient those of one client: a client's new one
	// beyond its bound forgets its own oldest; a new one beyond MaxPending
	// forgets the oldest of the client with the most.
	MaxPending          = 256
	MaxPendingPerClient = 4
	// MaxCodes bounds the authorization codes not yet exchanged.
	MaxCodes = 256
	// MaxFamilies bounds the approvals whose refresh tokens are live.
	MaxFamilies = 4096
	// MaxIssued bounds the access tokens remembered (for DPoP binding and
	// to recognize this server's own tokens): each costs about 16 KB (its
	// token, parsed, and the key the server made for it), so about
	// 160 MiB in all.
	MaxIssued = 10_000
	// MaxExchangedPerFamily bounds the live tokens made by token exchange
	// under one approval.
	MaxExchangedPerFamily = 64
	// MaxDPoPBytes bounds a DPoP proof.
	MaxDPoPBytes = 8 << 10
	// MaxDPoPJTIs bounds the proof IDs remembered against replay.
	MaxDPoPJTIs = 200_000
)

// Lifetimes.
const (
	// PendingTTL is how long a consent page may be left open.
	PendingTTL = 10 * time.Minute
	// CodeTTL is how long an authorization code may wait to be exchanged.
	CodeTTL = time.Minute
	// BearerTTL is the life of an access token not bound to a key, and
	// DPoPTTL of one bound with DPoP.
	BearerTTL = 10 * time.Minute
	DPoPTTL   = time.Hour
	// DPoPWindow is how far a proof's iat may be from the server's clock.
	DPoPWindow = time.Minute
	// ConsentFailures wrong consent passwords on one consent page close
	// it. Once ConsentGlobalFailures wrong ones (on any pages) came within
	// ConsentLockout, passwords are checked one per ConsentPace; one whose
	// turn is more than ConsentMaxWait away is refused (429, Retry-After).
	ConsentFailures       = 5
	ConsentLockout        = time.Minute
	ConsentGlobalFailures = 20
	ConsentPace           = time.Second
	ConsentMaxWait        = 30 * time.Second
	// MinPasswordBytes is the shortest consent password accepted.
	MinPasswordBytes = 12
)
