package reputation

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/delegateos/delegateos/internal/fsutil"
)

// File modes: §7 asks that reputation data be treated as private.
const (
	dirMode  fs.FileMode = 0o700
	fileMode fs.FileMode = 0o600
)

// lockName is the lock file each RDP directory's writers take.
const lockName = ".lock"

// Workspace is an AWP workspace directory holding RDP's reputation/ and
// contracts/ directories. Its methods may be called from several
// goroutines and processes at once: every write takes the directory's lock
// file, re-reads the file, and replaces it atomically (temporary file,
// fsync, rename), so concurrent writers lose nothing and a crash leaves
// the old file. Readers take no lock; they see a whole old or new file.
type Workspace struct {
	dir     string
	cache   profileCache // for Trust
	writers writerCache  // for appendLocked
}

// Open returns the workspace in dir, which must exist. The RDP
// directories are created (mode 0700) by the first write.
func Open(dir string) (*Workspace, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("workspace: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("workspace %s is not a directory", dir)
	}
	return &Workspace{dir: dir}, nil
}

// Dir returns the workspace directory.
func (w *Workspace) Dir() string { return w.dir }

// rel returns the workspace-relative name of a file, as problems name it.
func rel(sub, slug string) string { return sub + "/" + slug + ".md" }

func (w *Workspace) path(sub, slug string) string { return filepath.Join(w.dir, sub, slug+".md") }

// readFile reads a workspace file: a regular file (not a link, FIFO or
// device) of at most MaxFileSize bytes. A missing file wraps ErrNotFound.
func readFile(path string) ([]byte, error) {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w", path, ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file; workspace files are not followed through links", path)
	}
	if fi.Size() > MaxFileSize {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, MaxFileSize)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// The size read by Lstat sizes the buffer; the file may have grown
	// since, which the limit still catches.
	buf := bytes.NewBuffer(make([]byte, 0, fi.Size()+bytes.MinRead))
	_, err = buf.ReadFrom(io.LimitReader(f, MaxFileSize+1))
	data := buf.Bytes()
	if err != nil {
		return nil, err
	}
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, MaxFileSize)
	}
	return data, nil
}

// lock takes the exclusive lock of an RDP directory, creating the
// directory if needed.
func (w *Workspace) lock(sub string) (unlock func(), err error) {
	dir := filepath.Join(w.dir, sub)
	if err := os.MkdirAll(dir, dirMode); err != nil {
		return nil, err
	}
	return fsutil.Lock(filepath.Join(dir, lockName), fileMode)
}

// writeFile replaces a workspace file atomically.
var writeFile = func(path string, data []byte) error {
	if len(data) > MaxFileSize {
		return fmt.Errorf("%s would grow beyond %d bytes; it takes no more signals", path, MaxFileSize)
	}
	return fsutil.WriteFileAtomic(path, data, fileMode)
}

// loadedProfile is a profile with the document it was read from.
type loadedProfile struct {
	p   *Profile
	doc *document
	// size is the profile file's; log is its signal log, whose pending
	// signals (applied to p, not in doc) were not folded into the file.
	size    int
	log     *signalLog
	pending []Signal
	// attesters is set by cachedProfile, whose p has no signals: see
	// positiveAttesters.
	attesters []string
}

// parseProfileFile parses a profile file's bytes; name is the workspace-
// relative file name used in problems.
func parseProfileFile(data []byte, slug string) (*loadedProfile, []Problem, error) {
	if lp, ok := parseProfileFast(data, slug); ok {
		return lp, nil, nil
	}
	return parseProfileSlow(data, slug)
}

// parseProfileSlow is parseProfileFile parsing the whole front matter as
// YAML nodes.
func parseProfileSlow(data []byte, slug string) (*loadedProfile, []Problem, error) {
	d := &decoder{file: rel(ProfilesDir, slug)}
	doc, err := parseDocument(data)
	if err != nil {
		le := &lineError{msg: err.Error()}
		errors.As(err, &le)
		d.problems = append(d.problems, Problem{File: d.file, Line: le.line, Message: le.msg, Severity: SeverityError})
		return nil, d.problems, d.err()
	}
	p := d.decodeProfile(doc, slug)
	if err := d.err(); err != nil {
		return nil, d.problems, err
	}
	return &loadedProfile{p: p, doc: doc}, d.problems, nil
}

// ParseProfile parses the bytes of the profile file reputation/<slug>.md.
// Errors are *ValidationError.
func ParseProfile(data []byte, slug string) (*Profile, error) {
	if !ValidSlug(slug) {
		return nil, fmt.Errorf("%w: %q is not a slug", ErrInvalid, clip(slug))
	}
	lp, _, err := parseProfileFile(data, slug)
	if err != nil {
		return nil, err
	}
	return lp.p, nil
}

// readProfile loads reputation/<slug>.md.
func (w *Workspace) readProfile(slug string) (*loadedProfile, error) {
	return w.loadProfile(slug, nil)
}

// slugs lists the slugs of the *.md files of an RDP directory (missing:
// none). Files whose names are not slugs are skipped here and reported by
// Validate.
func (w *Workspace) slugs(sub string) ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(w.dir, sub))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if slug, ok := strings.CutSuffix(e.Name(), ".md"); ok && ValidSlug(slug) {
			out = append(out, slug)
		}
	}
	sort.Strings(out)
	return out, nil
}

// agentRef is how a caller named an agent.
type agentRef struct {
	did  string // the DID to match agentDid against ("" for a bare slug)
	slug string // the slug to try first
	ed   bool   // an Ed25519 agent: a profile may be created at slug
}

// parseAgent reads an agent given as a principal ID, did:key, any other
// DID, or a profile slug.
func parseAgent(agent string) (agentRef, error) {
	if did, err := CanonicalDID(agent); err == nil {
		slug, _ := AgentSlug(did)
		return agentRef{did: did, slug: slug, ed: true}, nil
	}
	if strings.HasPrefix(agent, "did:") {
		if !ValidDID(agent) {
			return agentRef{}, fmt.Errorf("%w: %q is not a valid DID", ErrInvalid, clip(agent))
		}
		return agentRef{did: agent}, nil
	}
	if ValidSlug(agent) {
		return agentRef{slug: agent}, nil
	}
	return agentRef{}, fmt.Errorf("%w: agent %q is not a principal ID, a DID or a profile slug", ErrInvalid, clip(agent))
}

// profileLoader reads the profile reputation/<slug>.md. Given a needle,
// it may return nil, nil for a file that does not contain it (and so
// cannot be the profile looked for).
type profileLoader func(slug string, needle []byte) (*loadedProfile, error)

// loadProfile reads and parses a profile file on every call; writers use
// it, under the lock.
func (w *Workspace) loadProfile(slug string, needle []byte) (*loadedProfile, error) {
	// The log is read first: see signalLogSuffix.
	log, err := w.readSignalLog(slug)
	if err != nil {
		return nil, err
	}
	data, err := readFile(w.path(ProfilesDir, slug))
	if err != nil {
		return nil, err
	}
	// A file that does not mention the DID cannot be its profile; it is
	// not parsed.
	if needle != nil && !bytes.Contains(data, needle) {
		return nil, nil
	}
	lp, _, err := parseProfileFile(data, slug)
	if err != nil {
		return nil, err
	}
	lp.size, lp.log = len(data), log
	lp.pending = log.merge(lp.p)
	return lp, nil
}

// findProfile finds the profile of ref. For a DID it tries the slug this
// package would use, then every profile whose agentDid is the DID (files
// written by other tools use other slugs); two such profiles are a
// conflict. It returns ErrNotFound when there is none.
func (w *Workspace) findProfile(ref agentRef, load profileLoader) (*loadedProfile, error) {
	if ref.slug != "" {
		lp, err := load(ref.slug, nil)
		switch {
		case err == nil && ref.did != "" && lp.p.AgentDID != ref.did:
			return nil, fmt.Errorf("%w: %s belongs to %s, not %s", ErrConflict, rel(ProfilesDir, ref.slug), lp.p.AgentDID, ref.did)
		case err == nil:
			return lp, nil
		case !errors.Is(err, ErrNotFound):
			return nil, err
		case ref.did == "":
			return nil, fmt.Errorf("no profile %s: %w", rel(ProfilesDir, ref.slug), ErrNotFound)
		}
	}
	slugs, err := w.slugs(ProfilesDir)
	if err != nil {
		return nil, err
	}
	var found *loadedProfile
	needle := []byte(ref.did)
	for _, slug := range slugs {
		if slug == ref.slug {
			continue
		}
		lp, err := load(slug, needle)
		if errors.Is(err, ErrNotFound) {
			continue // removed since the directory was read
		}
		if err != nil {
			return nil, err
		}
		if lp == nil || lp.p.AgentDID != ref.did {
			continue
		}
		if found != nil {
			return nil, fmt.Errorf("%w: both %s and %s are profiles of %s", ErrConflict, rel(ProfilesDir, found.p.Slug), rel(ProfilesDir, slug), ref.did)
		}
		found = lp
	}
	if found == nil {
		return nil, fmt.Errorf("no profile for %s: %w", ref.did, ErrNotFound)
	}
	return found, nil
}

// Profile returns the profile of an agent given as a principal ID, a DID
// or a profile slug. An agent without a profile is unknown: the error
// wraps ErrNotFound.
func (w *Workspace) Profile(agent string) (*Profile, error) {
	ref, err := parseAgent(agent)
	if err != nil {
		return nil, err
	}
	lp, err := w.findProfile(ref, w.loadProfile)
	if err != nil {
		return nil, err
	}
	return lp.p, nil
}

// Profiles returns every profile in the workspace, by slug. A file that
// is not a valid profile is an error (Validate lists them all).
func (w *Workspace) Profiles() ([]*Profile, error) {
	slugs, err := w.slugs(ProfilesDir)
	if err != nil {
		return nil, err
	}
	out := make([]*Profile, 0, len(slugs))
	for _, slug := range slugs {
		lp, err := w.readProfile(slug)
		if errors.Is(err, ErrNotFound) {
			continue // removed since the directory was read
		}
		if err != nil {
			return nil, err
		}
		out = append(out, lp.p)
	}
	return out, nil
}

// Record appends signals to an agent's profile and updates its scores
// (§4.1). The agent is a principal ID or DID, or the slug of an existing
// profile. A missing profile is created for an Ed25519 agent (principal ID
// or did:key), named agentName (the DID when empty); agentName is not used
// otherwise. Each signal's Source may be a principal ID (stored as its
// did:key) or any DID. Signals are only ever appended: existing ones, and
// every field this package does not know, are written back unchanged.
func (w *Workspace) Record(agent, agentName string, signals ...Signal) (*Profile, error) {
	if len(signals) == 0 || len(signals) > MaxSignalsPerRecord {
		return nil, fmt.Errorf("%w: record 1 to %d signals at a time", ErrInvalid, MaxSignalsPerRecord)
	}
	ref, err := parseAgent(agent)
	if err != nil {
		return nil, err
	}
	if err := checkText(agentName, MaxTextLen, textLine); err != nil {
		return nil, fmt.Errorf("%w: agent name: %v", ErrInvalid, err)
	}
	clean := make([]Signal, len(signals))
	for i, s := range signals {
		if s.Source, err = sourceDID(s.Source); err != nil {
			return nil, err
		}
		s.Timestamp = truncate(s.Timestamp)
		if err := s.check(); err != nil {
			return nil, err
		}
		clean[i] = s
	}
	unlock, err := w.lock(ProfilesDir)
	if err != nil {
		return nil, err
	}
	defer unlock()
	return w.appendLocked(ref, agentName, clean, nil)
}

// appendLocked appends signals to ref's profile; the caller holds the
// profiles lock. skip, when set, drops signals the profile already holds
// (see Evaluate).
func (w *Workspace) appendLocked(ref agentRef, agentName string, signals []Signal, skip func(*Profile, Signal) bool) (*Profile, error) {
	lp, err := w.findProfile(ref, w.writerProfile)
	switch {
	case errors.Is(err, ErrNotFound) && ref.ed:
		if agentName == "" {
			agentName = ref.did
		}
		p := &Profile{Slug: ref.slug, AgentDID: ref.did, AgentName: agentName}
		for _, s := range signals {
			p.apply(s)
		}
		// A log left by a profile file removed since is not this profile's.
		if err := w.removeSignalLog(p.Slug); err != nil {
			return nil, err
		}
		doc := newProfileDocument(p)
		setState(doc, p, signals)
		items := make([]*yamlNode, len(signals))
		for i, s := range signals {
			items[i] = s.node()
		}
		data, err := doc.encodeAppending(items)
		if err != nil {
			return nil, err
		}
		if err := writeFile(w.path(ProfilesDir, p.Slug), data); err != nil {
			return nil, err
		}
		return p, nil
	case errors.Is(err, ErrNotFound) && ref.did != "":
		return nil, fmt.Errorf("%w: no profile names %s, and profiles are created only for Ed25519 agents (principal IDs or did:key)", ErrUnsupportedAgent, ref.did)
	case err != nil:
		return nil, err
	}
	p := lp.p
	var added []Signal
	for _, s := range signals {
		if skip != nil && skip(p, s) {
			continue
		}
		p.apply(s)
		added = append(added, s)
	}
	if len(added) == 0 {
		return p, nil
	}
	// The log's positions must go on from its last line: a profile file
	// changed by another tool since the log was started is compacted.
	first := len(p.Signals) - len(added)
	aligned := len(lp.pending) == 0 || lp.log.entries[len(lp.log.entries)-1].n == first-1
	if lp.size >= logMinProfile && aligned && len(lp.pending)+len(added) < logMaxEntries {
		if len(lp.pending) == 0 && len(lp.log.entries) > 0 {
			// Every line was folded already: start a new log.
			if err := w.removeSignalLog(p.Slug); err != nil {
				return nil, err
			}
			lp.log = &signalLog{}
		}
		if err := w.appendSignalLog(p.Slug, lp.log, first, added); err != nil {
			return nil, err
		}
		lp.pending = append(lp.pending, added...)
		w.keepWriter(p.Slug, lp)
		return p.clone(), nil
	}
	// The profile file takes the log's pending signals and the new ones.
	all := append(append([]Signal(nil), lp.pending...), added...)
	setState(lp.doc, p, all)
	items := make([]*yamlNode, len(all))
	for i, s := range all {
		items[i] = s.node()
	}
	data, err := lp.doc.encodeAppending(items)
	if err != nil {
		return nil, err
	}
	if err := writeFile(w.path(ProfilesDir, p.Slug), data); err != nil {
		return nil, err
	}
	if lp.log.exists {
		if err := w.removeSignalLog(p.Slug); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// IdentityFile is the AWP file that names the workspace's own agent.
const IdentityFile = "IDENTITY.md"

// Observer returns the DID in the front matter of the workspace's
// IDENTITY.md (AWP): the agent on whose behalf the workspace records
// signals. It wraps ErrNotFound when there is no such file or field.
func (w *Workspace) Observer() (string, error) {
	data, err := readFile(filepath.Join(w.dir, IdentityFile))
	if err != nil {
		return "", err
	}
	doc, err := parseDocument(data)
	if err != nil {
		return "", fmt.Errorf("%w: %s: %v", ErrInvalid, IdentityFile, err)
	}
	n := lookup(doc.root, "did")
	if n == nil {
		return "", fmt.Errorf("%s has no did field: %w", IdentityFile, ErrNotFound)
	}
	d := &decoder{file: IdentityFile}
	did, _ := d.did(n, "did")
	if err := d.err(); err != nil {
		return "", err
	}
	return did, nil
}
