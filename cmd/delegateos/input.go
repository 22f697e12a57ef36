package main

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/internal/timestamp"
)

// readToken reads TOKEN: the token itself (bare or {token, format} JSON),
// "-" for standard input, or "@FILE".
func readToken(e *env, arg string) (string, error) {
	switch {
	case arg == "":
		return "", usagef("--token is required")
	case arg == "-":
		b, err := io.ReadAll(io.LimitReader(e.stdin, dct.MaxWrapperLen+1))
		if err != nil {
			return "", inputf("read token from stdin: %v", err)
		}
		return strings.TrimSpace(string(b)), nil
	case strings.HasPrefix(arg, "@"):
		f, err := os.Open(arg[1:])
		if err != nil {
			return "", inputf("read token: %v", err)
		}
		defer f.Close()
		b, err := io.ReadAll(io.LimitReader(f, dct.MaxWrapperLen+1))
		if err != nil {
			return "", inputf("read token: %v", err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	if looksLikePath(arg) {
		if _, err := dct.ParseInput(arg); err != nil {
			return "", fixf("--token %q is not a token; did you mean --token @%s? (@ reads the token from a file)", arg, arg)
		}
	}
	return arg, nil
}

// looksLikePath reports whether a --token value names a file rather than
// holding a token: it exists, or has a path's shape. A token is base64url
// or JSON, which have neither slashes nor file extensions.
func looksLikePath(s string) bool {
	if _, err := os.Stat(s); err == nil {
		return true
	}
	if strings.ContainsAny(s, `/\`) || strings.HasPrefix(s, "~") || strings.HasPrefix(s, ".") {
		return !strings.HasPrefix(s, "{")
	}
	switch strings.ToLower(filepath.Ext(s)) {
	case ".tok", ".token", ".dct", ".json", ".txt", ".jwt":
		return true
	}
	return false
}

// parseToken reads and parses TOKEN; a token that cannot be parsed is
// unreadable input.
func parseToken(e *env, arg string) (*dct.Token, error) {
	s, err := readToken(e, arg)
	if err != nil {
		return nil, err
	}
	tok, err := dct.ParseInput(s)
	if err != nil {
		return nil, inputf("the token cannot be read (%v); pass the whole token as printed by 'dct mint' or 'dct attenuate'", err)
	}
	return tok, nil
}

func loadKey(path string) (*identity.Keypair, error) {
	if path == "" {
		return nil, usagef("--key is required")
	}
	k, err := identity.LoadKeyFile(path)
	if err != nil {
		return nil, inputError{err}
	}
	return k, nil
}

func principal(flag, s string) (string, error) {
	if s == "" {
		return "", usagef("%s is required", flag)
	}
	id, err := identity.NormalizePrincipal(s)
	if err != nil {
		return "", usagef("%s: %v (give a principal ID or a did:key)", flag, err)
	}
	return id, nil
}

func parseCaps(flags []string) ([]dct.Capability, error) {
	caps := make([]dct.Capability, 0, len(flags))
	for _, f := range flags {
		c, err := dct.ParseCapability(f)
		if err != nil {
			return nil, usagef("--cap: %v", err)
		}
		caps = append(caps, c)
	}
	return caps, nil
}

func parseTime(flag, s string) (time.Time, error) {
	t, err := timestamp.Parse(s)
	if err != nil {
		return time.Time{}, usagef("%s: %v", flag, err)
	}
	return t, nil
}

// expiry reads the mutually exclusive --ttl and --expires; neither means
// the default lifetime.
func expiry(ttl time.Duration, ttlSet bool, expires string, now time.Time) (time.Time, error) {
	switch {
	case ttlSet && expires != "":
		return time.Time{}, usagef("give --ttl or --expires, not both")
	case expires != "":
		return parseTime("--expires", expires)
	case ttlSet:
		if ttl <= 0 {
			return time.Time{}, usagef("--ttl must be positive")
		}
		return now.Add(ttl), nil
	}
	return now.Add(dct.DefaultTTL), nil
}

// newDelegationID is "del_" and 12 random hex digits, the spec's ID shape.
func newDelegationID() string {
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err))
	}
	return "del_" + hex.EncodeToString(b)
}
