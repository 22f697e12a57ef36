package avpsig

import (
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"testing"
	"time"
)

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func TestCanonicalQueryVectors(t *testing.T) {
	var file struct {
		Cases []struct {
			Name      string
			Query     *string
			Pairs     [][2]string
			Canonical string
			Error     bool
		}
	}
	readJSON(t, "testdata/canonical_query.json", &file)
	if len(file.Cases) < 20 {
		t.Fatalf("only %d cases", len(file.Cases))
	}
	for _, c := range file.Cases {
		t.Run(c.Name, func(t *testing.T) {
			var got string
			var err error
			if c.Query != nil {
				got, err = CanonicalQuery(*c.Query)
			} else {
				ps := make([]Pair, len(c.Pairs))
				for i, p := range c.Pairs {
					ps[i] = Pair{p[0], p[1]}
				}
				got = CanonicalPairs(ps)
			}
			if c.Error {
				if !errors.Is(err, ErrBadQuery) {
					t.Fatalf("got %q, %v; want ErrBadQuery", got, err)
				}
				return
			}
			if err != nil || got != c.Canonical {
				t.Fatalf("got %q, %v; want %q", got, err, c.Canonical)
			}
			// The canonical form is a fixed point.
			if again, err := CanonicalQuery(got); err != nil || again != got {
				t.Fatalf("canonical form %q canonicalizes to %q, %v", got, again, err)
			}
		})
	}
}

func TestSignatureVectors(t *testing.T) {
	var file struct {
		Cases []struct {
			Name, Seed, DID, Method, Path, Query, Body string
			TS                                         int64
			Nonce, Message, Sig                        string
		}
	}
	readJSON(t, "testdata/signatures.json", &file)
	for _, c := range file.Cases {
		t.Run(c.Name, func(t *testing.T) {
			seed, _ := hex.DecodeString(c.Seed)
			key := ed25519.NewKeyFromSeed(seed)
			q, err := CanonicalQuery(c.Query)
			if err != nil {
				t.Fatal(err)
			}
			msg := Message(c.Method, c.Path, q, c.TS, c.Nonce, BodySHA256([]byte(c.Body)))
			if string(msg) != c.Message {
				t.Fatalf("message\n got %s\nwant %s", msg, c.Message)
			}
			nonce, _ := hex.DecodeString(c.Nonce)
			s, err := Sign(key, c.Method, c.Path, c.Query, []byte(c.Body), time.Unix(c.TS, 0), fixedReader(nonce))
			if err != nil {
				t.Fatal(err)
			}
			want := `AVP-Sig v="2",did="` + c.DID + `",ts="` + itoa(c.TS) + `",nonce="` + c.Nonce + `",sig="` + c.Sig + `"`
			if s.Signature != want {
				t.Fatalf("authorization\n got %s\nwant %s", s.Signature, want)
			}
			v := &Verifier{Now: func() time.Time { return time.Unix(c.TS, 0) }}
			if err := v.VerifyParts(c.Method, c.Path, c.Query, []string{want}, nil, []byte(c.Body), c.DID); err != nil {
				t.Fatal(err)
			}
		})
	}
}
