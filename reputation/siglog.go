package reputation

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/delegateos/delegateos/internal/fsutil"
	"github.com/delegateos/delegateos/internal/timestamp"
)

// A large profile is not rewritten for every signal: rewriting and
// syncing a file of thousands of signals costs far more than the signal.
// Signals recorded into a profile of at least logMinProfile bytes are
// appended to its signal log, reputation/<slug>.signals.jsonl, one JSON
// line each, and the log is synced before Record returns. Once the log
// holds logMaxEntries signals, the next Record folds them, with its own,
// into the profile file (one atomic rewrite) and removes the log.
//
// Each line carries the position the signal takes in the profile's list.
// A line whose signal is already at its position in the profile file was
// folded by a compaction whose removal of the log did not happen (a
// crash); it is skipped. The first line that is not folded, and every
// line after it, are applied in order on top of the profile file. Readers
// read the log before the profile file, so a compaction between the two
// reads shows them a complete state. A last line without its newline was
// not acknowledged (its write or sync did not finish): readers ignore it
// and the next writer cuts it off.
const (
	signalLogSuffix = ".signals.jsonl"
	logMinProfile   = 64 << 10
	logMaxEntries   = 256
	// maxLogLine bounds one line of a signal log.
	maxLogLine = MaxIDLen*2 + MaxNameLen*2 + MaxTextLen*6 + 256
)

// logLine is one line of a signal log.
type logLine struct {
	N         int     `json:"n"`
	Source    string  `json:"source"`
	Dimension string  `json:"dimension"`
	Domain    string  `json:"domain,omitempty"`
	Score     float64 `json:"score"`
	Timestamp string  `json:"timestamp"`
	Evidence  string  `json:"evidence,omitempty"`
	Message   string  `json:"message,omitempty"`
}

// logLineFields are the JSON fields of a logLine.
var logLineFields = map[string]bool{
	"n": true, "source": true, "dimension": true, "domain": true, "score": true,
	"timestamp": true, "evidence": true, "message": true,
}

// signalLog is a profile's signal log as read.
type signalLog struct {
	entries []logEntry
	size    int64 // bytes of whole lines; a torn last line follows them
	torn    bool
	exists  bool
}

type logEntry struct {
	n int
	s Signal
}

func (w *Workspace) logPath(slug string) string {
	return filepath.Join(w.dir, ProfilesDir, slug+signalLogSuffix)
}

// readSignalLog reads the signal log of slug; a missing log is empty.
func (w *Workspace) readSignalLog(slug string) (*signalLog, error) {
	data, err := readFile(w.logPath(slug))
	if errors.Is(err, ErrNotFound) {
		return &signalLog{}, nil
	}
	if err != nil {
		return nil, err
	}
	l, err := parseSignalLog(data, ProfilesDir+"/"+slug+signalLogSuffix)
	if err != nil {
		return nil, err
	}
	l.exists = true
	return l, nil
}

// parseSignalLog parses the bytes of a signal log strictly; file names it
// in problems. Errors are *ValidationError.
func parseSignalLog(data []byte, file string) (*signalLog, error) {
	l := &signalLog{}
	fail := func(line int, format string, args ...any) error {
		return &ValidationError{Problems: []Problem{{File: file, Line: line, Message: fmt.Sprintf(format, args...), Severity: SeverityError}}}
	}
	if len(data) > MaxFileSize {
		return nil, fail(0, "larger than %d bytes", MaxFileSize)
	}
	for line := 1; len(data) > 0; line++ {
		nl := bytes.IndexByte(data, '\n')
		if nl < 0 {
			l.torn = true
			break
		}
		text := data[:nl]
		data = data[nl+1:]
		l.size += int64(nl + 1)
		if len(text) > maxLogLine {
			return nil, fail(line, "the line is longer than %d bytes", maxLogLine)
		}
		if err := checkJSONKeys(text, logLineFields, "n", "source", "dimension", "score", "timestamp"); err != nil {
			return nil, fail(line, "not a signal log line: %v", err)
		}
		var ll logLine
		dec := json.NewDecoder(bytes.NewReader(text))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&ll); err != nil {
			return nil, fail(line, "not a signal log line: %v", err)
		}
		if dec.More() {
			return nil, fail(line, "more than one JSON value on the line")
		}
		t, err := timestamp.Parse(ll.Timestamp)
		if err != nil || len(ll.Timestamp) > 64 {
			return nil, fail(line, "timestamp %q is not an RFC 3339 timestamp", clip(ll.Timestamp))
		}
		s := Signal{Source: ll.Source, Dimension: ll.Dimension, Domain: ll.Domain, Score: ll.Score,
			Timestamp: truncate(t), Evidence: ll.Evidence, Message: ll.Message}
		if err := s.check(); err != nil {
			return nil, fail(line, "%v", err)
		}
		if ll.N < 0 || ll.N > MaxFileSize || len(l.entries) > 0 && ll.N != l.entries[len(l.entries)-1].n+1 {
			return nil, fail(line, "position %d does not follow the line before", ll.N)
		}
		l.entries = append(l.entries, logEntry{n: ll.N, s: s})
	}
	return l, nil
}

// merge applies the log's signals that the profile does not hold yet and
// returns them.
func (l *signalLog) merge(p *Profile) (pending []Signal) {
	k := 0
	for k < len(l.entries) {
		e := l.entries[k]
		if e.n >= len(p.Signals) || !sameSignal(p.Signals[e.n], e.s) {
			break
		}
		k++
	}
	for _, e := range l.entries[k:] {
		p.apply(e.s)
		pending = append(pending, e.s)
	}
	return pending
}

func sameSignal(a, b Signal) bool {
	return a.Source == b.Source && a.Dimension == b.Dimension && a.Domain == b.Domain &&
		a.Score == b.Score && a.Timestamp.Equal(b.Timestamp) && a.Evidence == b.Evidence && a.Message == b.Message
}

// appendSignalLog appends signals, the first at position n of the list,
// to the log of slug and syncs it. A torn last line is cut off first.
func (w *Workspace) appendSignalLog(slug string, l *signalLog, n int, signals []Signal) error {
	var b bytes.Buffer
	for i, s := range signals {
		line, err := json.Marshal(logLine{N: n + i, Source: s.Source, Dimension: s.Dimension, Domain: s.Domain,
			Score: s.Score, Timestamp: timestamp.Format(s.Timestamp), Evidence: s.Evidence, Message: s.Message})
		if err != nil {
			return err
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	path := w.logPath(slug)
	if l.size+int64(b.Len()) > MaxFileSize {
		return fmt.Errorf("%s would grow beyond %d bytes", path, MaxFileSize)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, fileMode)
	if err != nil {
		return err
	}
	if l.torn || !l.exists {
		// Whatever follows the last whole line was never acknowledged
		// (and a log that was missing when read holds nothing).
		if err := f.Truncate(l.size); err != nil {
			f.Close()
			return err
		}
	}
	_, err = f.Write(b.Bytes())
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && !l.exists {
		err = fsutil.SyncDir(filepath.Dir(path))
	}
	if err != nil {
		return err
	}
	for i, s := range signals {
		l.entries = append(l.entries, logEntry{n: n + i, s: s})
	}
	l.size += int64(b.Len())
	l.torn, l.exists = false, true
	return nil
}

// writerCache keeps, per slug, the profile as the last log append in this
// process left it, so that the next record into it need not read and scan
// the whole profile file again. An entry is used only under the profiles
// lock and while both files are as that append left them (same file, size
// and modification time, as profileCache checks); it is taken out of the
// cache when used, and put back only after the next append succeeds, so a
// failed or other write leaves nothing behind.
type writerCache struct {
	mu sync.Mutex
	m  map[string]writerEntry
}

type writerEntry struct {
	profile, log fs.FileInfo
	lp           *loadedProfile
}

func (c *writerCache) take(slug string) (writerEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[slug]
	delete(c.m, slug)
	return e, ok
}

func (c *writerCache) put(slug string, e writerEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[string]writerEntry)
	}
	c.m[slug] = e
}

// writerProfile is the profileLoader of writers: loadProfile, or the
// profile the writer cache holds for slug when its files are unchanged.
func (w *Workspace) writerProfile(slug string, needle []byte) (*loadedProfile, error) {
	e, ok := w.writers.take(slug)
	if ok && needle == nil {
		pf, err1 := os.Lstat(w.path(ProfilesDir, slug))
		lf, err2 := os.Lstat(w.logPath(slug))
		if err1 == nil && err2 == nil && sameStat(e.profile, pf) && sameStat(e.log, lf) {
			return e.lp, nil
		}
	}
	return w.loadProfile(slug, needle)
}

// keepWriter caches lp after a log append into slug's profile.
func (w *Workspace) keepWriter(slug string, lp *loadedProfile) {
	pf, err1 := os.Lstat(w.path(ProfilesDir, slug))
	lf, err2 := os.Lstat(w.logPath(slug))
	if err1 == nil && err2 == nil {
		w.writers.put(slug, writerEntry{profile: pf, log: lf, lp: lp})
	}
}

// removeSignalLog removes the log of slug after its signals were written
// into the profile file.
func (w *Workspace) removeSignalLog(slug string) error {
	err := os.Remove(w.logPath(slug))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return fsutil.SyncDir(filepath.Join(w.dir, ProfilesDir))
}
