package revocation

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
)

func TestListAdd(t *testing.T) {
	k := testKey(t, 1)
	a := testEntry(t, k, testID("a"), ScopeChain)
	b := testEntry(t, k, testID("b"), ScopeBlock)
	l := NewList()
	for _, e := range []Entry{b, a, b, a} {
		if err := l.Add(e); err != nil {
			t.Fatal(err)
		}
	}
	if l.Len() != 2 {
		t.Errorf("Len = %d, want 2 (adding an entry twice does nothing)", l.Len())
	}
	if got := l.Entries(); !slices.Equal(got, []Entry{b, a}) {
		t.Errorf("Entries not in insertion order: %+v", got)
	}
	bad := a
	bad.Scope = ScopeBlock
	if err := l.Add(bad); !errors.Is(err, ErrInvalidSignature) {
		t.Errorf("Add of a tampered entry: got %v", err)
	}
	if l.Len() != 2 {
		t.Errorf("a refused entry was added")
	}
	if !l.IsRevoked(testID("a")) || !l.IsRevoked(testID("b")) || l.IsRevoked(testID("c")) {
		t.Error("IsRevoked wrong")
	}
	// Entries is a copy.
	l.Entries()[0].Scope = "x"
	if l.Entries()[0] != b {
		t.Error("Entries exposes the list's storage")
	}
	var zero List
	if err := zero.Add(a); err != nil || !zero.IsRevoked(a.RevocationID) {
		t.Errorf("zero List: %v", err)
	}
}

// A three-level chain: block 0 (authority) signed by root, block 1 signed by
// a (root's delegatee), block 2 signed by b (a's delegatee).
func TestRevokedRules(t *testing.T) {
	const R, A, B, S = 1, 2, 3, 4 // root, a, b and a stranger: key numbers
	blocks := []string{testID("block0"), testID("block1"), testID("block2")}
	signers := []string{testKey(t, R).ID(), testKey(t, A).ID(), testKey(t, B).ID()}
	type rev struct {
		by    byte
		block int
		scope Scope
	}
	entry := func(r rev) Entry { return testEntry(t, testKey(t, r.by), blocks[r.block], r.scope) }
	tests := []struct {
		name   string
		revs   []rev
		blocks int    // the token is blocks[:blocks]
		want   string // revoked block ID, or "" for not revoked
	}{
		{"empty list", nil, 3, ""},
		{"root chain on authority", []rev{{R, 0, ScopeChain}}, 3, blocks[0]},
		{"root chain on a later block", []rev{{R, 2, ScopeChain}}, 3, blocks[2]},
		{"root chain on a middle block", []rev{{R, 1, ScopeChain}}, 3, blocks[1]},
		{"own signer chain", []rev{{A, 1, ScopeChain}}, 3, blocks[1]},
		{"own signer chain, last block", []rev{{B, 2, ScopeChain}}, 3, blocks[2]},
		{"earlier signer chain", []rev{{A, 2, ScopeChain}}, 3, blocks[2]},
		{"later attenuator on its parent's block", []rev{{B, 1, ScopeChain}}, 3, ""},
		{"later attenuator on the authority", []rev{{B, 0, ScopeChain}}, 3, ""},
		{"delegatee on the authority", []rev{{A, 0, ScopeChain}}, 3, ""},
		{"stranger", []rev{{S, 0, ScopeChain}, {S, 1, ScopeChain}, {S, 2, ScopeChain}, {S, 2, ScopeBlock}}, 3, ""},
		// Scope block revokes every token containing the block, as chain
		// does (§10.1 step 2), and is honoured under the same rule.
		{"block scope on last block", []rev{{R, 2, ScopeBlock}}, 3, blocks[2]},
		{"block scope by own signer on last block", []rev{{B, 2, ScopeBlock}}, 3, blocks[2]},
		{"block scope on a middle block", []rev{{R, 1, ScopeBlock}}, 3, blocks[1]},
		{"block scope by own signer on a middle block", []rev{{A, 1, ScopeBlock}}, 3, blocks[1]},
		{"block scope on the authority of a longer token", []rev{{R, 0, ScopeBlock}}, 3, blocks[0]},
		{"block scope, token ends at that block", []rev{{A, 1, ScopeBlock}}, 2, blocks[1]},
		{"block scope, one-block token", []rev{{R, 0, ScopeBlock}}, 1, blocks[0]},
		{"block scope by a later attenuator on its parent's block", []rev{{B, 1, ScopeBlock}}, 3, ""},
		{"block scope by a delegatee on the authority", []rev{{A, 0, ScopeBlock}}, 3, ""},
		{"chain scope on a block the token lacks", []rev{{R, 2, ScopeChain}}, 2, ""},
		{"block scope on a block the token lacks", []rev{{R, 2, ScopeBlock}}, 2, ""},
		{"several entries, one honoured", []rev{{B, 1, ScopeChain}, {B, 1, ScopeBlock}, {S, 1, ScopeChain}, {A, 1, ScopeBlock}}, 3, blocks[1]},
		{"several entries, none honoured", []rev{{B, 1, ScopeChain}, {B, 1, ScopeBlock}, {S, 1, ScopeChain}, {S, 0, ScopeBlock}}, 3, ""},
		{"first revoked block reported", []rev{{B, 2, ScopeChain}, {R, 0, ScopeChain}}, 3, blocks[0]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := NewList()
			for _, r := range tt.revs {
				if err := l.Add(entry(r)); err != nil {
					t.Fatal(err)
				}
			}
			id, revoked, err := l.Revoked(blocks[:tt.blocks], signers[:tt.blocks])
			if err != nil {
				t.Fatal(err)
			}
			if revoked != (tt.want != "") || id != tt.want {
				t.Errorf("Revoked = %q, %v; want %q", id, revoked, tt.want)
			}
		})
	}
}

func TestRevokedBadInput(t *testing.T) {
	l := testList(t, testEntry(t, testKey(t, 1), testID("a"), ScopeChain))
	for _, ll := range []*List{NewList(), l} {
		if _, _, err := ll.Revoked([]string{testID("a")}, nil); err == nil {
			t.Error("blocks without signers: want error")
		}
		if _, _, err := ll.Revoked(nil, nil); err == nil {
			t.Error("no blocks: want error")
		}
	}
	var nilList *List
	if _, _, err := nilList.Revoked([]string{testID("a")}, []string{"x"}); err == nil {
		t.Error("nil list: want error")
	}
}

func TestRevokedDoesNotAllocate(t *testing.T) {
	root := testKey(t, 1)
	blocks := []string{testID("0"), testID("1")}
	signers := []string{root.ID(), testKey(t, 2).ID()}
	lists := map[string]*List{
		"empty":       NewList(),
		"not revoked": testList(t, testEntry(t, root, testID("other"), ScopeChain)),
		"revoked":     testList(t, testEntry(t, root, blocks[1], ScopeChain)),
		"ignored":     testList(t, testEntry(t, testKey(t, 2), blocks[0], ScopeBlock)),
	}
	for name, l := range lists {
		if n := testing.AllocsPerRun(100, func() { l.Revoked(blocks, signers) }); n != 0 {
			t.Errorf("%s: %v allocations", name, n)
		}
	}
}

func TestParseList(t *testing.T) {
	k := testKey(t, 1)
	a := testEntry(t, k, testID("a"), ScopeChain)
	b := testEntry(t, k, testID("b"), ScopeBlock)
	obj := func(e Entry) string {
		j, _ := json.Marshal(e)
		return string(j)
	}
	badSig := b
	badSig.Scope = ScopeChain
	// Replace the first member name of an object.
	rename := func(e Entry, from, to string) string {
		return strings.Replace(obj(e), `"`+from+`"`, `"`+to+`"`, 1)
	}
	tests := []struct {
		name    string
		in      string
		want    []Entry
		wantErr string
	}{
		{"empty", `[]`, nil, ""},
		{"whitespace", " \n[ " + obj(a) + " ,\n" + obj(b) + "]\n", []Entry{a, b}, ""},
		{"repeated entry kept once", "[" + obj(a) + "," + obj(b) + "," + obj(a) + "]", []Entry{a, b}, ""},
		{"null", `null`, nil, "not a JSON array"},
		{"object", obj(a), nil, "not a JSON array"},
		{"nothing", ``, nil, "not a JSON array"},
		{"trailing data", "[" + obj(a) + "] []", nil, "trailing"},
		{"duplicate member", "[" + strings.Replace(obj(a), `{`, `{"scope":"block",`, 1) + "]", nil, "duplicate member"},
		{"unknown member", "[" + strings.Replace(obj(a), `{`, `{"note":"x",`, 1) + "]", nil, "unknown member"},
		{"member case", "[" + rename(a, "revocationId", "RevocationId") + "]", nil, "unknown member"},
		{"missing member", "[" + strings.Replace(obj(a), `"scope":"chain",`, ``, 1) + "]", nil, "entry 0"},
		{"wrong type", "[" + strings.Replace(obj(a), `"scope":"chain"`, `"scope":1`, 1) + "]", nil, "malformed"},
		{"null entry", `[null]`, nil, "entry 0"},
		{"bad signature names its index", "[" + obj(a) + "," + obj(badSig) + "]", nil, "entry 1"},
		{"invalid UTF-8", "[\"\xff\"]", nil, "UTF-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := ParseList([]byte(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v, want an error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := l.Entries(); !slices.Equal(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
	_, err := ParseList([]byte("[" + obj(a) + "," + obj(badSig) + "]"))
	if !errors.Is(err, ErrInvalidSignature) {
		t.Errorf("bad signature: %v does not wrap ErrInvalidSignature", err)
	}
	if _, err := ParseList([]byte(`{}`)); !errors.Is(err, ErrMalformedList) {
		t.Errorf("object: %v does not wrap ErrMalformedList", err)
	}
}

func TestMarshalJSON(t *testing.T) {
	k := testKey(t, 1)
	entries := []Entry{testEntry(t, k, testID("b"), ScopeBlock), testEntry(t, k, testID("a"), ScopeChain)}
	l := testList(t, entries...)
	got, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	want.WriteString("[")
	for i, e := range entries {
		if i > 0 {
			want.WriteString(",")
		}
		fmt.Fprintf(&want, `{"revocationId":%q,"revokedBy":%q,"revokedAt":%q,"scope":%q,"signature":%q}`,
			e.RevocationID, e.RevokedBy, e.RevokedAt, e.Scope, e.Signature)
	}
	want.WriteString("]")
	if string(got) != want.String() {
		t.Errorf("MarshalJSON\n got %s\nwant %s", got, want.String())
	}
	for _, data := range [][]byte{got, must(l.fileBytes())} {
		back, err := ParseList(data)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(back.Entries(), entries) {
			t.Errorf("round trip of %s changed the entries", data)
		}
	}
	if got, _ := json.Marshal(NewList()); string(got) != "[]" {
		t.Errorf("empty list is %s, want []", got)
	}
	if got, _ := NewList().fileBytes(); string(got) != "[]\n" {
		t.Errorf("empty list file is %q", got)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestListConcurrent(t *testing.T) {
	root := testKey(t, 1)
	entries := make([]Entry, 50)
	for i := range entries {
		entries[i] = testEntry(t, root, testID(fmt.Sprint(i)), ScopeChain)
	}
	l := NewList()
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := w; i < len(entries); i += 4 {
				if err := l.Add(entries[i]); err != nil {
					t.Error(err)
				}
				l.Revoked([]string{entries[i].RevocationID}, []string{root.ID()})
				l.Entries()
				_, _ = l.MarshalJSON()
			}
		})
		wg.Go(func() {
			for i := range entries {
				l.Revoked([]string{entries[i].RevocationID}, []string{root.ID()})
				l.IsRevoked(entries[i].RevocationID)
				l.Len()
			}
		})
	}
	wg.Wait()
	if l.Len() != len(entries) {
		t.Fatalf("Len = %d", l.Len())
	}
	for _, e := range entries {
		if _, revoked, _ := l.Revoked([]string{e.RevocationID}, []string{root.ID()}); !revoked {
			t.Errorf("%s not revoked", e.RevocationID)
		}
	}
}
