package main

import (
	"context"

	"go.uber.org/zap"

	"github.com/delegateos/delegateos/avpsig"
	"github.com/delegateos/delegateos/internal/redisconn"
	"github.com/delegateos/delegateos/policy"
)

// nonceStoreURL returns the Redis a server that requires signatures keeps
// their nonces in, so that every server sharing it accepts a signed
// request once between them: the policy's spend store when it is a Redis
// URL, else its revocation list when that is one. "" means the server's
// own memory.
func nonceStoreURL(pol *policy.Policy) string {
	for _, u := range []string{pol.SpendStore, pol.RevocationList} {
		if redisconn.IsURL(u) {
			return u
		}
	}
	return ""
}

// shareNonces gives v the nonce store of nonceStoreURL, if any, after
// checking that v's window is no longer than the fleet's (see
// avpsig.RedisNonces.Join), with v's bound per delegation tree.
func shareNonces(v *avpsig.Verifier, pol *policy.Policy, log *zap.Logger) error {
	url := nonceStoreURL(pol)
	if url == "" {
		return nil
	}
	s, err := avpsig.OpenRedisNonces(url)
	if err != nil {
		return fixf("%v", err)
	}
	if err := s.Join(context.Background(), v.Window); err != nil {
		s.Close()
		return fixf("signature nonces cannot be shared in Redis: %v", err)
	}
	s.MaxPerTree = v.MaxNoncesPerTree
	v.Store = s
	log.Info("signature nonces are shared in Redis: a signed request is accepted once by all the servers that use it", zap.String("store", redisconn.Redact(url)))
	return nil
}
