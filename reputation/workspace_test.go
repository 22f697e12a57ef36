package reputation

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestOpen(t *testing.T) {
	if _, err := Open(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Fatal("opened a missing directory")
	}
	f := filepath.Join(t.TempDir(), "file")
	os.WriteFile(f, nil, 0o600)
	if _, err := Open(f); err == nil {
		t.Fatal("opened a file")
	}
}

// Agents given as principal IDs and as did:key are the same agent, stored
// as did:key in a file named by its key; the directory and files are
// private.
func TestRecordCreatesProfile(t *testing.T) {
	w := testWorkspace(t)
	a, src := testKey(t, 1), testKey(t, 2)
	p, err := w.Record(a.ID(), "Alice", sig(src.ID(), 0.9, t0))
	if err != nil {
		t.Fatal(err)
	}
	slug, _ := AgentSlug(a.DID())
	if p.Slug != slug || p.AgentDID != a.DID() || p.AgentName != "Alice" || p.Signals[0].Source != src.DID() {
		t.Fatalf("%+v", p)
	}
	q, err := w.Record(a.DID(), "ignored", sig(src.DID(), 0.9, t0))
	if err != nil || q.Slug != slug || q.AgentName != "Alice" || len(q.Signals) != 2 {
		t.Fatalf("%+v, %v", q, err)
	}
	for _, name := range []string{ProfilesDir, filepath.Join(ProfilesDir, slug+".md")} {
		fi, err := os.Stat(filepath.Join(w.Dir(), name))
		if err != nil || fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s: %v %v", name, fi.Mode(), err)
		}
	}
	// Unnamed agents are named by their DID.
	b := testKey(t, 3)
	r, err := w.Record(b.ID(), "", sig(src.ID(), 0.1, t0))
	if err != nil || r.AgentName != b.DID() {
		t.Fatalf("%+v, %v", r, err)
	}
	// Sources other than Ed25519 keys may be any DID.
	if _, err := w.Record(b.ID(), "", sig("did:web:example.com", 0.1, t0)); err != nil {
		t.Fatal(err)
	}
}

func TestRecordRefuses(t *testing.T) {
	w := testWorkspace(t)
	a, src := testKey(t, 1).ID(), testKey(t, 2).ID()
	good := sig(src, 0.5, t0)
	mod := func(f func(*Signal)) Signal { s := good; f(&s); return s }
	for name, c := range map[string]struct {
		agent   string
		signals []Signal
		want    error
	}{
		"no signals":            {a, nil, ErrInvalid},
		"too many":              {a, make([]Signal, MaxSignalsPerRecord+1), ErrInvalid},
		"score above 1":         {a, []Signal{mod(func(s *Signal) { s.Score = 1.01 })}, ErrInvalid},
		"score NaN":             {a, []Signal{mod(func(s *Signal) { s.Score = nan() })}, ErrInvalid},
		"no timestamp":          {a, []Signal{mod(func(s *Signal) { s.Timestamp = time.Time{} })}, ErrInvalid},
		"no source":             {a, []Signal{mod(func(s *Signal) { s.Source = "" })}, ErrInvalid},
		"bad dimension":         {a, []Signal{mod(func(s *Signal) { s.Dimension = "Reliability" })}, ErrInvalid},
		"path dimension":        {a, []Signal{mod(func(s *Signal) { s.Dimension = "../x" })}, ErrInvalid},
		"domain without name":   {a, []Signal{mod(func(s *Signal) { s.Dimension = DomainCompetence })}, ErrInvalid},
		"domain on reliability": {a, []Signal{mod(func(s *Signal) { s.Domain = "law" })}, ErrInvalid},
		"bad domain":            {a, []Signal{mod(func(s *Signal) { s.Dimension, s.Domain = DomainCompetence, "Law" })}, ErrInvalid},
		"control in message":    {a, []Signal{mod(func(s *Signal) { s.Message = "\x1b]0;pwned\x07" })}, ErrInvalid},
		"newline in evidence":   {a, []Signal{mod(func(s *Signal) { s.Evidence = "a\nb" })}, ErrInvalid},
		"hostile agent":         {"../../etc/passwd", []Signal{good}, ErrInvalid},
		"agent with dots":       {"..", []Signal{good}, ErrInvalid},
		"absolute path":         {"/etc/passwd", []Signal{good}, ErrInvalid},
		"bad DID":               {"did:key:", []Signal{good}, ErrInvalid},
		"unknown other DID":     {"did:web:example.com", []Signal{good}, ErrUnsupportedAgent},
		"unknown slug":          {"research-bot", []Signal{good}, ErrNotFound},
	} {
		if _, err := w.Record(c.agent, "", c.signals...); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", name, err, c.want)
		}
	}
	if _, err := os.Stat(filepath.Join(w.Dir(), ProfilesDir)); err == nil {
		entries, _ := os.ReadDir(filepath.Join(w.Dir(), ProfilesDir))
		for _, e := range entries {
			if e.Name() != lockName {
				t.Errorf("a refused record wrote %s", e.Name())
			}
		}
	}
}

// Profiles written by other tools are found by their agentDid, whatever
// their slug; signals then go to them rather than to a new file.
func TestLookupByDID(t *testing.T) {
	w := testWorkspace(t)
	a, src := testKey(t, 1), testKey(t, 2)
	writeWS(t, w, "reputation/alice-bot.md", strings.NewReplacer(
		"research-bot", "alice-bot", "did:key:zResearchBot123", a.DID()).Replace(specExampleA1))
	writeWS(t, w, "reputation/research-bot.md", specExampleA1)
	p, err := w.Record(a.ID(), "", sig(src.ID(), 0.5, t0.Add(time.Hour)))
	if err != nil || p.Slug != "alice-bot" || len(p.Signals) != 2 {
		t.Fatalf("%+v, %v", p, err)
	}
	// A profile of another DID method is found by DID and by slug, and can
	// take signals, but none is created for such a DID.
	for _, ref := range []string{"did:key:zResearchBot123", "research-bot"} {
		p, err := w.Record(ref, "", sig(src.ID(), 0.5, t0.Add(time.Hour)))
		if err != nil || p.Slug != "research-bot" {
			t.Fatalf("%s: %+v, %v", ref, p, err)
		}
	}
	// Two profiles of one agent: refused, never merged or guessed.
	writeWS(t, w, "reputation/alice-2.md", strings.NewReplacer(
		"research-bot", "alice-2", "did:key:zResearchBot123", a.DID()).Replace(specExampleA1))
	if _, err := w.Record(a.ID(), "", sig(src.ID(), 0.5, t0)); !errors.Is(err, ErrConflict) {
		t.Fatalf("two profiles: %v", err)
	}
	if _, err := w.Trust(a.ID(), t0); !errors.Is(err, ErrConflict) {
		t.Fatalf("two profiles: %v", err)
	}
}

// The file named for a key but holding another agent is a conflict: a
// profile is never written into another agent's file.
func TestSlugTakenByAnotherAgent(t *testing.T) {
	w := testWorkspace(t)
	a, b := testKey(t, 1), testKey(t, 2)
	slug, _ := AgentSlug(a.ID())
	writeWS(t, w, "reputation/"+slug+".md", strings.NewReplacer("research-bot", slug, "did:key:zResearchBot123", b.DID()).Replace(specExampleA1))
	before := readWS(t, w, "reputation/"+slug+".md")
	if _, err := w.Record(a.ID(), "", sig(b.ID(), 1, t0)); !errors.Is(err, ErrConflict) {
		t.Fatalf("%v", err)
	}
	if readWS(t, w, "reputation/"+slug+".md") != before {
		t.Fatal("file changed")
	}
}

// AgentSlug is one slug per key: two did:keys that differ only in letter
// case (base58 is case-sensitive) get different slugs.
func TestAgentSlugIsCaseSafe(t *testing.T) {
	seen := map[string]string{}
	for seed := byte(1); seed < 60; seed++ {
		did := testKey(t, seed).DID()
		// Flip the case of letters near the end until another valid
		// did:key results.
		for i := len(did) - 1; i > len(did)-8; i-- {
			c := did[i]
			var flipped byte
			switch {
			case 'a' <= c && c <= 'z':
				flipped = c - 32
			case 'A' <= c && c <= 'Z':
				flipped = c + 32
			default:
				continue
			}
			other := did[:i] + string(flipped) + did[i+1:]
			s1, err1 := AgentSlug(did)
			s2, err2 := AgentSlug(other)
			if err1 != nil {
				t.Fatal(err1)
			}
			if err2 == nil && s1 == s2 {
				t.Fatalf("%s and %s share the slug %s", did, other, s1)
			}
			if err2 == nil {
				seen[s2] = other
			}
		}
		s, _ := AgentSlug(did)
		if prev, ok := seen[s]; ok && prev != did {
			t.Fatalf("slug %s for %s and %s", s, prev, did)
		}
		seen[s] = did
		if !ValidSlug(s) || !strings.HasPrefix(s, "key-") {
			t.Fatalf("slug %q", s)
		}
	}
	if len(seen) < 100 {
		t.Fatalf("only %d case variants tried", len(seen))
	}
}

func TestSlugify(t *testing.T) {
	for in, want := range map[string]string{
		"AI Research":             "ai-research",
		"  --legal/analysis":      "legal-analysis",
		"../../etc/passwd":        "etc-passwd",
		"Ünïcode Straße":          "n-code-stra-e",
		"":                        "",
		"---":                     "",
		strings.Repeat("ab ", 40): strings.TrimRight(strings.Repeat("ab-", 21), "-") + "-a",
	} {
		if got := Slugify(in); got != want {
			t.Errorf("Slugify(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestLinkSlug(t *testing.T) {
	for in, want := range map[string]string{
		"del_f7e8d9c0b1a2": "del-f7e8d9c0b1a2",
		"del_F7E8D9C0B1A2": "del-x-",
		"del_f7e8d9c0b1a":  "del-x-",
		"del-f7e8d9c0b1a2": "del-x-",
		"../x":             "del-x-",
	} {
		got, err := LinkSlug(in)
		if err != nil || !strings.HasPrefix(got, want) || !ValidSlug(got) {
			t.Errorf("LinkSlug(%q) = %q, %v", in, got, err)
		}
	}
	a, _ := LinkSlug("del_a")
	b, _ := LinkSlug("del_b")
	if a == b {
		t.Fatal("two IDs share a slug")
	}
	for _, bad := range []string{"", strings.Repeat("x", MaxIDLen+1)} {
		if _, err := LinkSlug(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("LinkSlug(%d bytes): %v", len(bad), err)
		}
	}
}

func TestValidDID(t *testing.T) {
	for _, ok := range []string{"did:key:zResearchBot123", "did:web:example.com", "did:web:example.com:user:alice", "did:example:a%20b", "did:ion:EiA_x-y.z"} {
		if !ValidDID(ok) {
			t.Errorf("%q refused", ok)
		}
	}
	for _, bad := range []string{"", "did:", "did:key", "did:key:", "did::x", "did:Key:x", "did:key:a:", "did:key:a b", "did:key:a/b", "did:key:%2", "did:key:%zz", "DID:key:x", "did:key:é", "did:key:" + strings.Repeat("z", MaxIDLen)} {
		if ValidDID(bad) {
			t.Errorf("%q accepted", bad)
		}
	}
}

// Workspace files are read only as regular files: a link to a file
// elsewhere, or a FIFO that would block the reader, is refused.
func TestOnlyRegularFiles(t *testing.T) {
	w := testWorkspace(t)
	secret := filepath.Join(t.TempDir(), "secret.md")
	os.WriteFile(secret, []byte(specExampleA1), 0o600)
	os.MkdirAll(filepath.Join(w.Dir(), ProfilesDir), 0o700)
	if err := os.Symlink(secret, filepath.Join(w.Dir(), ProfilesDir, "research-bot.md")); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Profile("research-bot"); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("%v", err)
	}
	r, err := w.Validate()
	if err != nil || len(r.Problems) != 1 || !strings.Contains(r.Problems[0].Message, "not a regular file") {
		t.Fatalf("%+v %v", r, err)
	}
}

func TestProfilesLists(t *testing.T) {
	w := testWorkspace(t)
	if ps, err := w.Profiles(); err != nil || len(ps) != 0 {
		t.Fatalf("empty workspace: %v %v", ps, err)
	}
	writeWS(t, w, "reputation/research-bot.md", specExampleA1)
	writeWS(t, w, "reputation/README.txt", "not a profile")
	writeWS(t, w, "reputation/.hidden.md.tmp-1", "partial write")
	record(t, w, testKey(t, 1).ID(), 1, 0.5, t0)
	ps, err := w.Profiles()
	if err != nil || len(ps) != 2 {
		t.Fatalf("%v %v", ps, err)
	}
	writeWS(t, w, "reputation/broken.md", "---\n---\n")
	if _, err := w.Profiles(); !errors.Is(err, ErrInvalid) {
		t.Fatalf("broken profile: %v", err)
	}
}

// Files beyond MaxFileSize are neither read nor written.
func TestFileSizeLimits(t *testing.T) {
	w := testWorkspace(t)
	writeWS(t, w, "reputation/huge.md", specExampleA1+strings.Repeat("x", MaxFileSize))
	if _, err := w.Profile("huge"); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("%v", err)
	}
	err := writeFile(filepath.Join(w.Dir(), "big.md"), make([]byte, MaxFileSize+1))
	if err == nil || !strings.Contains(err.Error(), "takes no more signals") {
		t.Fatalf("%v", err)
	}
	if _, err := os.Stat(filepath.Join(w.Dir(), "big.md")); err == nil {
		t.Fatal("written")
	}
}

func TestRecordRefusesBadAgentName(t *testing.T) {
	w := testWorkspace(t)
	for _, name := range []string{"a\nb", "\x1b[1mBold", strings.Repeat("n", MaxTextLen+1)} {
		if _, err := w.Record(testKey(t, 1).ID(), name, sig(testKey(t, 2).ID(), 1, t0)); !errors.Is(err, ErrInvalid) {
			t.Errorf("%q: %v", name, err)
		}
	}
}
