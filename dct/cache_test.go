package dct

import (
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"
)

// corrupted parses s again and breaks every decoded signature, leaving the
// serialized form (the cache key) as it is. Only a verifier that skips the
// signature work can accept it.
func corrupted(tb testing.TB, s string) *Token {
	tb.Helper()
	tok, err := Parse(s)
	if err != nil {
		tb.Fatal(err)
	}
	for _, sg := range tok.sigs {
		sg[0] ^= 1
	}
	if _, err := mustVerifier(tb, Options{CacheSize: -1}).VerifyToken(tok, readReq()); !errors.Is(err, ErrInvalidSignature) {
		tb.Fatalf("a corrupted token is not refused without the cache: %v", err)
	}
	return tok
}

func TestCacheSkipsSignatureWork(t *testing.T) {
	s := chain2(t).String()
	v := mustVerifier(t, Options{})
	cold, err := v.Verify(s, readReq())
	if err != nil {
		t.Fatal(err)
	}
	if v.cache.len() != 1 {
		t.Fatalf("cache holds %d tokens after one verification", v.cache.len())
	}
	// The same serialized token with broken signatures is accepted: its
	// signatures were not checked again.
	warm, err := v.VerifyToken(corrupted(t, s), readReq())
	if err != nil {
		t.Fatalf("cached token re-verified: %v", err)
	}
	if !reflect.DeepEqual(cold, warm) {
		t.Errorf("cached scope differs:\n%+v\n%+v", warm, cold)
	}
	// Verify with the string does no issuer or signature work either: with
	// the trusted roots gone, only the cached token is still accepted.
	v.roots = map[string]bool{}
	if _, err := v.Verify(s, readReq()); err != nil {
		t.Fatalf("cached token re-verified: %v", err)
	}
	_, err = v.Verify(mustCreate(t, rootParams()).String(), readReq())
	wantDenial(t, err, ErrInvalidSignature)
	if v.cache.len() != 1 {
		t.Fatalf("cache holds %d tokens", v.cache.len())
	}
}

func TestCacheDisabled(t *testing.T) {
	s := chain2(t).String()
	v := mustVerifier(t, Options{CacheSize: -1})
	if _, err := v.Verify(s, readReq()); err != nil {
		t.Fatal(err)
	}
	if v.cache != nil || v.cache.len() != 0 {
		t.Fatal("a disabled cache holds tokens")
	}
	_, err := v.VerifyToken(corrupted(t, s), readReq())
	wantDenial(t, err, ErrInvalidSignature)
}

func TestCacheDefaultSize(t *testing.T) {
	v := mustVerifier(t, Options{})
	if v.cache == nil || v.cache.max != DefaultCacheSize {
		t.Fatalf("default cache %+v", v.cache)
	}
	v = mustVerifier(t, Options{CacheSize: 1 << 40})
	if v.cache.max != 1<<40 {
		t.Fatal("cache size not kept")
	}
}

// Every per-request check runs on a cached token.
func TestCachedCallsStillCheck(t *testing.T) {
	s := chain2(t).String()
	revs := &fakeRevocations{}
	v := mustVerifier(t, Options{Revocations: revs})
	if _, err := v.Verify(s, readReq()); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		edit func(*Request)
		want *Denial
	}{
		{"expired", func(r *Request) { r.Now = t0.Add(31 * time.Minute) }, ErrExpired},
		{"not valid yet", func(r *Request) { r.Now = t0.Add(-time.Minute) }, ErrExpired},
		{"budget spent", func(r *Request) { r.SpentMicrocents = 500 }, ErrBudgetExceeded},
		{"negative spend", func(r *Request) { r.SpentMicrocents = -1 }, ErrBudgetExceeded},
		{"resource", func(r *Request) { r.Resource = "/project/other" }, ErrCapabilityNotGranted},
		{"action", func(r *Request) { r.Action = "write" }, ErrCapabilityNotGranted},
		{"namespace", func(r *Request) { r.Namespace = "web" }, ErrCapabilityNotGranted},
		{"still fine", func(r *Request) { r.SpentMicrocents = 499 }, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := readReq()
			c.edit(&req)
			scope, err := v.Verify(s, req)
			if c.want == nil {
				if err != nil || scope.RemainingBudgetMicrocents != 1 {
					t.Fatalf("%+v, %v", scope, err)
				}
				return
			}
			wantDenial(t, err, c.want)
		})
	}
	if v.cache.len() != 1 {
		t.Fatalf("cache holds %d tokens", v.cache.len())
	}

	t.Run("revoked after caching", func(t *testing.T) {
		tok := corrupted(t, s) // proves the next calls take the cached path
		calls := revs.calls
		revs.revoke(tok.RevocationIDs()[2])
		_, err := v.VerifyToken(tok, readReq())
		wantDenial(t, err, ErrRevoked)
		_, err = v.Verify(s, readReq())
		wantDenial(t, err, ErrRevoked)
		if revs.calls != calls+2 {
			t.Errorf("revocations consulted %d times for 2 calls", revs.calls-calls)
		}
		revs.mu.Lock()
		revs.revoked = nil
		revs.err = fmt.Errorf("list unreadable")
		revs.mu.Unlock()
		_, err = v.Verify(s, readReq())
		wantDenial(t, err, ErrRevoked)
		revs.mu.Lock()
		revs.err = nil
		revs.mu.Unlock()
		if _, err := v.VerifyToken(tok, readReq()); err != nil {
			t.Fatalf("after the revocation was withdrawn: %v", err)
		}
	})
}

func TestCacheKeepsOnlyAcceptedTokens(t *testing.T) {
	good := chain2(t)
	revs := &fakeRevocations{}
	revs.revoke(good.RevocationIDs()[1])
	v := mustVerifier(t, Options{Revocations: revs})
	st := good.Unverified()
	st.Signatures[2].Signature = flipBit(st.Signatures[2].Signature, 3)
	p := rootParams()
	p.Issuer = evilKey
	for name, s := range map[string]string{
		"revoked":          good.String(),
		"bad signature":    serialize(t, st),
		"untrusted root":   mustCreate(t, p).String(),
		"broken chain":     handToken(t, baseAuthority(), []Attenuation{att(bobKey, carolKey, "del_2")}, rootKey, bobKey),
		"malformed":        good.String()[1:],
		"chain depth":      handToken(t, baseAuthority(), []Attenuation{withDepth(a0, 5)}, rootKey, aliceKey),
		"authority depths": handToken(t, Authority{}, nil, rootKey),
	} {
		if _, err := v.Verify(s, readReq()); err == nil {
			t.Errorf("%s: accepted", name)
		}
		if n := v.cache.len(); n != 0 {
			t.Fatalf("%s: cache holds %d tokens", name, n)
		}
	}
}

func TestCacheLRU(t *testing.T) {
	v := mustVerifier(t, Options{CacheSize: 2})
	var toks []string
	for i := range 4 {
		p := rootParams()
		p.DelegationID = fmt.Sprintf("del_%012d", i)
		toks = append(toks, mustCreate(t, p).String())
	}
	verify := func(i int) {
		t.Helper()
		if _, err := v.Verify(toks[i], readReq()); err != nil {
			t.Fatal(err)
		}
	}
	cached := func(i int) bool {
		t.Helper()
		_, err := v.VerifyToken(corrupted(t, toks[i]), readReq())
		return err == nil
	}
	verify(0)
	verify(1)
	verify(2) // evicts 0
	if n := v.cache.len(); n != 2 {
		t.Fatalf("cache of 2 holds %d", n)
	}
	if cached(0) || !cached(1) || !cached(2) {
		t.Fatalf("after 0, 1, 2: cached 0=%v 1=%v 2=%v", cached(0), cached(1), cached(2))
	}
	verify(1) // 1 is now the most recently used
	verify(3) // evicts 2
	if cached(2) || !cached(1) || !cached(3) || v.cache.len() != 2 {
		t.Fatalf("after using 1 and adding 3: cached 1=%v 2=%v 3=%v", cached(1), cached(2), cached(3))
	}
}

func TestCacheUnit(t *testing.T) {
	var nilCache *cache
	nilCache.put("a", &verified{})
	if nilCache.get("a") != nil || nilCache.len() != 0 {
		t.Fatal("a nil cache holds something")
	}
	c := newCache(2)
	v1, v2, v3 := &verified{expires: "1"}, &verified{expires: "2"}, &verified{expires: "3"}
	c.put("a", v1)
	c.put("a", v2) // two verifications of the same token racing
	if c.get("a") != v2 || c.len() != 1 {
		t.Fatal("replacing an entry")
	}
	c.put("b", v1)
	c.get("a")
	c.put("c", v3)
	if c.get("b") != nil || c.get("a") != v2 || c.get("c") != v3 || c.len() != 2 {
		t.Fatal("least recently used entry not evicted")
	}
	if len(c.items) != c.ll.Len() {
		t.Fatal("map and list disagree")
	}
}

func TestVerifyConcurrent(t *testing.T) {
	var toks []string
	for i := range 6 {
		p := rootParams()
		p.DelegationID = fmt.Sprintf("del_%012d", i)
		tok := mustCreate(t, p)
		toks = append(toks, mustAttenuate(t, tok, AttenuateParams{Attenuator: aliceKey, Delegatee: bobKey.ID(), DelegationID: p.DelegationID + "x"}).String())
	}
	revs := &fakeRevocations{}
	revoked, err := Parse(toks[5])
	if err != nil {
		t.Fatal(err)
	}
	revs.revoke(revoked.RevocationIDs()[1])
	v := mustVerifier(t, Options{CacheSize: 3, Revocations: revs}) // smaller than the working set: evictions race with hits
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	report := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		errs = append(errs, err)
	}
	for g := range 8 {
		wg.Go(func() {
			for i := range 60 {
				k := (g + i) % len(toks)
				req := readReq()
				req.SpentMicrocents = int64(i)
				scope, err := v.Verify(toks[k], req)
				switch {
				case k == 5 && !errors.Is(err, ErrRevoked):
					report(fmt.Errorf("revoked token: %v", err))
				case k != 5 && err != nil:
					report(err)
				case k != 5 && scope.RemainingBudgetMicrocents != 1000-int64(i):
					report(fmt.Errorf("remaining %d", scope.RemainingBudgetMicrocents))
				}
				if i%7 == 0 {
					_ = v.cache.len()
				}
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if i == 5 {
			t.Fatalf("and %d more", len(errs)-i)
		}
		t.Error(err)
	}
	if n := v.cache.len(); n > 3 {
		t.Errorf("cache of 3 holds %d", n)
	}
}

// The {token, format} form is cached under its own text too, so repeating
// it skips parsing as well as the signature work.
func TestCacheWrapperForm(t *testing.T) {
	tok := chain2(t)
	wrapped := `{"token":"` + tok.String() + `","format":"` + Format + `"}`
	v := mustVerifier(t, Options{})
	if _, err := v.Verify(wrapped, readReq()); err != nil {
		t.Fatal(err)
	}
	if n := v.cache.len(); n != 2 {
		t.Fatalf("cache holds %d entries, want the token and its wrapper", n)
	}
	v.roots = map[string]bool{} // only cached tokens can still be accepted
	for _, s := range []string{wrapped, tok.String()} {
		if _, err := v.Verify(s, readReq()); err != nil {
			t.Fatalf("cached form re-verified: %v", err)
		}
	}
	// A wrapper around a refused token is not cached.
	bad := `{"token":"` + mustCreate(t, rootParams()).String() + `","format":"` + Format + `"}`
	_, err := v.Verify(bad, readReq())
	wantDenial(t, err, ErrInvalidSignature)
	if n := v.cache.len(); n != 2 {
		t.Fatalf("cache holds %d entries after a denial", n)
	}
}

// The last token verified is served without the cache's lookup, but only
// for that very string, with time and revocation still checked on every
// call, and never by a verifier without a cache.
func TestLastTokenMemo(t *testing.T) {
	s := chain2(t).String()
	revs := &fakeRevocations{}
	v := mustVerifier(t, Options{Revocations: revs})
	now := readReq().Now
	first, err := v.VerifyChain(s, now)
	if err != nil {
		t.Fatal(err)
	}
	if l := v.last.Load(); l == nil || l.token != s {
		t.Fatal("the verified token is not remembered")
	}
	again, err := v.VerifyChain(s, now)
	if err != nil || again != first {
		t.Fatalf("the remembered token gave %p, %v; want the same scope %p", again, err, first)
	}
	// Any other string is verified in full.
	b := []byte(s)
	i := len(b) / 2
	b[i] = map[bool]byte{true: 'A', false: 'B'}[b[i] != 'A']
	if _, err := v.VerifyChain(string(b), now); err == nil {
		t.Fatal("a token differing from the remembered one in one character was accepted")
	}
	wantDenial(t, func() error { _, err := v.VerifyChain(s, t0.Add(31*time.Minute)); return err }(), ErrExpired)
	tok, err := Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	revs.revoke(tok.RevocationIDs()[0])
	_, err = v.VerifyChain(s, now)
	wantDenial(t, err, ErrRevoked)

	off := mustVerifier(t, Options{CacheSize: -1})
	if _, err := off.VerifyChain(s, now); err != nil {
		t.Fatal(err)
	}
	if off.last.Load() != nil {
		t.Fatal("a verifier without a cache remembered a token")
	}
}
