package main

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/delegateos/delegateos/ldp"
)

// fillSessions opens day-long sessions at the delegate at base as peers
// k = 0, 1, … (peer makes each its client and the token member it
// proposes with; nil member: none), up to ldp.DefaultMaxSessionsPerPeer
// each, four peers at a time, until the delegate answers SESSIONS_FULL or
// maxPeers peers have opened theirs. It returns how many sessions opened
// and whether the delegate said it was full.
func fillSessions(t *testing.T, base string, maxPeers int, peer func(k int) (*ldp.Client, *ldp.DelegateOSMember, error)) (opened int64, full bool) {
	t.Helper()
	cfg := daySession()
	var n atomic.Int64
	var isFull atomic.Bool
	peers := make(chan int)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range peers {
				c, m, err := peer(k)
				if err != nil {
					t.Error(err)
					return
				}
				for range ldp.DefaultMaxSessionsPerPeer {
					if _, err := c.Open(context.Background(), base, "ldp:delegate:docs", cfg, m, "", ""); err != nil {
						if strings.Contains(err.Error(), ldp.CodeSessionsFull) {
							isFull.Store(true)
							break
						}
						t.Error(err)
						return
					}
					n.Add(1)
				}
			}
		}()
	}
	for k := 0; !isFull.Load() && k < maxPeers; k++ {
		peers <- k
	}
	close(peers)
	wg.Wait()
	return n.Load(), isFull.Load()
}

// daySession is the session configuration fillSessions opens with.
func daySession() ldp.SessionConfig {
	day := uint64(86400)
	return ldp.SessionConfig{PreferredPayloadModes: []ldp.PayloadMode{ldp.ModeText}, TTLSecs: &day}
}
