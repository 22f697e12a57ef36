package audit

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/delegateos/delegateos/receipt"
)

// Problem kinds, as Problem.Kind names them.
const (
	Edited    = "edited"
	Reordered = "reordered"
	Inserted  = "inserted"
	Removed   = "removed"
	Truncated = "truncated"
	Malformed = "malformed"
	Untrusted = "untrusted"
	// Recovered is a recovery checkpoint: a proxy continued the log after
	// it had not been closed cleanly.
	Recovered = "recovered"
	// Forked is a log that is not the one a witness cosigned: rewritten
	// after it cosigned a checkpoint of it.
	Forked = "forked"
	// Unwitnessed is a log a required witness has cosigned no checkpoint
	// of.
	Unwitnessed = "unwitnessed"
)

// Problem is the first thing wrong with a log: what (Kind), where (Line,
// counted from 1, and the entry it should have held) and why.
type Problem struct {
	Kind  string
	Line  int64
	Entry int64
	Msg   string
}

func (p *Problem) Error() string {
	if p.Line == 0 {
		return p.Kind + ": " + p.Msg
	}
	return fmt.Sprintf("line %d: %s: %s", p.Line, p.Kind, p.Msg)
}

// ExportKind is the schema_version of an export's first line.
const ExportKind = "audit_export/1"

// exportHeader is an export's first line.
type exportHeader struct {
	Receipt       int64  `json:"receipt"`
	SchemaVersion string `json:"schema_version"`
}

// emptyLog is the problem of a log without entries.
var emptyLog = &Problem{Kind: Truncated, Msg: "the log is empty: a proxy that stopped has written at least its final checkpoint, so every entry was removed (or a proxy is still starting: verify with --open)"}

// VerifyOptions say what to trust.
type VerifyOptions struct {
	// Trusted are the did:key values the entries must be signed by; empty
	// accepts the signer of the first entry, for every entry (the report
	// names it).
	Trusted []string
	// Open accepts a log that does not end with a final checkpoint: one a
	// proxy is still writing.
	Open bool
	// Head, when set, is the digest of an entry the log must hold (the
	// head a proxy logged when it closed the log, say): a log cut back to
	// an earlier final checkpoint lacks it.
	Head string
	// AllowRecovered accepts recovery checkpoints (Report.Recovered lists
	// them): the log was continued after its proxy was killed, or after
	// entries were removed from its end.
	AllowRecovered bool
}

// Recovery is a recovery checkpoint: entry Entry, on line Line.
type Recovery struct {
	Entry, Line int64
}

// RecoveryMsg says what a recovery checkpoint at entry n means.
func RecoveryMsg(n int64) string {
	return fmt.Sprintf("the log was not closed cleanly before entry %d: receipts of calls made just before may be missing, or entries were removed from its end", n)
}

// Report is what a verified log holds.
type Report struct {
	// Export is set for an export; First is its receipt's entry.
	Export bool
	First  int64
	// Entries is the number of entries read; Last the last entry's number.
	Entries, Last int64
	// Head is the last entry's digest.
	Head string
	// Checkpoints counts them; LastCheckpoint is the last one's entry and
	// Final whether it was written at shutdown.
	Checkpoints    int
	LastCheckpoint int64
	Final          bool
	// Signers are the keys that signed entries; Kinds counts entries by
	// schema_version.
	Signers []string
	// Unsigned counts the entries without a proof of their own (signed by
	// the checkpoints after them); Trees counts the checkpoints that sign
	// the log's Merkle tree.
	Unsigned int64
	Trees    int
	Kinds    map[string]int
	// Unsealed is the number of entries after the last checkpoint (only
	// with Open).
	Unsealed int64
	// Recovered are the recovery checkpoints, in order.
	Recovered []Recovery
}

// Verify reads an audit log (or an export) and checks every entry: that it
// parses strictly, that its signature verifies by a trusted key, that it
// holds the position its line gives it and names the digest of the line
// before, that every checkpoint agrees with the entries before it, and
// that the log ends with a final checkpoint (a non-final one with Open),
// and that no checkpoint is a recovery (unless AllowRecovered). It returns
// the first problem as a *Problem; a recovery is reported only when
// nothing else is wrong, and Report.Recovered lists every one.
func Verify(r io.Reader, o VerifyOptions) (*Report, error) { return verify(r, o, nil) }

// verify is Verify that shows visit each entry once it is checked.
func verify(r io.Reader, o VerifyOptions, visit func(*rawLine, *receipt.Receipt) error) (*Report, error) {
	lr := newParsingReader(r)
	defer lr.stop()
	rep := &Report{Kinds: map[string]int{}, First: 1}
	signers := map[string]bool{}
	expected := int64(1)
	prev := receipt.GenesisPrev
	checkPrev := true
	headSeen := false
	var tree frontier
	prevSigned := true

	line, next := lr.line(), (*rawLine)(nil)
	if line == nil {
		if lr.err != nil {
			return nil, lr.err
		}
		if !o.Open {
			return rep, emptyLog
		}
		return rep, nil
	}
	if bytes.Contains(line.text, []byte(`"schema_version":"`+ExportKind+`"`)) {
		h, perr := parseExportHeader(line)
		if perr != nil {
			return nil, perr
		}
		rep.Export, rep.First, expected, checkPrev = true, h.Receipt, h.Receipt, false
		if line = lr.line(); line == nil {
			if lr.err != nil {
				return nil, lr.err
			}
			return nil, &Problem{Kind: Truncated, Msg: "the export holds no entries"}
		}
	}
	for line != nil {
		next = lr.line()
		if next == nil && lr.err != nil {
			return nil, lr.err
		}
		if !line.complete {
			return nil, &Problem{Kind: Truncated, Line: line.no, Entry: expected,
				Msg: fmt.Sprintf("the last line is not a whole entry (no newline): the log was cut in the middle of entry %d, or the proxy was killed while writing it", expected)}
		}
		if line.tooLong {
			return nil, &Problem{Kind: Malformed, Line: line.no, Entry: expected, Msg: fmt.Sprintf("the line is longer than %d bytes", MaxLineBytes)}
		}
		rc, perr := line.parsed()
		if perr != nil {
			return nil, &Problem{Kind: Edited, Line: line.no, Entry: expected, Msg: fmt.Sprintf("entry %d cannot be read as a receipt (changed after it was written): %v", expected, perr)}
		}
		trusted := o.Trusted
		if len(trusted) == 0 && len(rep.Signers) > 0 {
			// Without pinned keys, the log is trusted to the key of its
			// first signed entry: entries another key appended are not its
			// own.
			trusted = rep.Signers[:1]
		}
		if !rc.Signed() {
			// An entry without a proof of its own is signed by the
			// checkpoint after it, through the chain and the tree.
		} else if verr := checkSigned(rc, trusted, line.sigErr); verr != nil {
			kind := Edited
			msg := fmt.Sprintf("entry %d was changed after it was signed: %v", expected, verr)
			if !errors.Is(verr, receipt.ErrBadSignature) {
				kind, msg = Untrusted, fmt.Sprintf("entry %d is %v", expected, verr)
				if len(o.Trusted) == 0 {
					msg = fmt.Sprintf("entry %d is signed by %s, not by %s, which signed the first entry: another key appended to the log (if the proxy's key changed, give each with --key-id)", expected, rc.Signer, trusted[0])
				}
			}
			return nil, &Problem{Kind: kind, Line: line.no, Entry: expected, Msg: msg}
		}
		pos := rc.Position()
		if pos.Seq == 0 {
			return nil, &Problem{Kind: Inserted, Line: line.no, Entry: expected, Msg: "this receipt was not written into an audit log (it has no audit_seq): it was inserted"}
		}
		if pos.Seq != expected {
			return nil, misplaced(line.no, expected, pos.Seq, seqOf(next))
		}
		if checkPrev && pos.Prev != prev && !rc.Signed() && next != nil && prevOf(next) != rc.Digest {
			// Neither this entry's digest nor its audit_prev is what its
			// neighbours name: this entry was changed.
			return nil, &Problem{Kind: Edited, Line: line.no, Entry: expected,
				Msg: fmt.Sprintf("entry %d was changed after it was written: it does not name the entry before it, nor does the entry after it name it", expected)}
		}
		if checkPrev && pos.Prev != prev && !prevSigned {
			return nil, &Problem{Kind: Edited, Line: line.no - 1, Entry: expected - 1,
				Msg: fmt.Sprintf("entry %d was changed after it was written: its digest is not the audit_prev of entry %d on the next line", expected-1, expected)}
		}
		if checkPrev && pos.Prev != prev {
			return nil, &Problem{Kind: Reordered, Line: line.no, Entry: expected,
				Msg: fmt.Sprintf("entry %d does not follow the line before it: its audit_prev is not that line's digest (another entry %d was put in its place)", expected, expected-1)}
		}
		checkPrev = true
		if rc.Signed() {
			if !signers[rc.Signer] {
				rep.Signers = append(rep.Signers, rc.Signer)
			}
			signers[rc.Signer] = true
		} else {
			rep.Unsigned++
		}
		prevSigned = rc.Signed()
		rep.Kinds[rc.Kind]++
		rep.Entries++
		if c, ok := rc.Body.(*receipt.CheckpointBody); ok {
			if c.Checkpoint != "" {
				if p := checkTree(c, rc.Signer, &tree, !rep.Export, line.no, expected); p != nil {
					return nil, p
				}
				rep.Trees++
			}
			rep.Checkpoints++
			rep.LastCheckpoint, rep.Final = pos.Seq, c.Final
			if c.IsRecovered() {
				rep.Recovered = append(rep.Recovered, Recovery{Entry: pos.Seq, Line: line.no})
			}
			if rep.Export && next != nil {
				// Its first line is not signed: an export is only its
				// receipt's proof, not a log that may end anywhere.
				return nil, &Problem{Kind: Inserted, Line: next.no, Entry: expected + 1,
					Msg: fmt.Sprintf("an export ends at the first checkpoint after its receipt (entry %d), but more lines follow it: a log with an export's first line put before it", pos.Seq)}
			}
		}
		if !rep.Export {
			tree.add(line.leaf)
		}
		if visit != nil {
			if err := visit(line, rc); err != nil {
				return nil, err
			}
		}
		rep.Last, rep.Head = pos.Seq, rc.Digest
		if rc.Digest == o.Head {
			headSeen = true
		}
		prev = rc.Digest
		expected++
		line = next
	}
	sort.Strings(rep.Signers)
	rep.Unsealed = rep.Last - rep.LastCheckpoint
	switch {
	case o.Head != "" && !headSeen:
		return rep, &Problem{Kind: Truncated, Line: lineOf(rep, rep.Last), Entry: rep.Last,
			Msg: fmt.Sprintf("no entry has the digest %s: entries after entry %d, that one among them, were removed", o.Head, rep.Last)}
	case rep.LastCheckpoint == 0 && !o.Open:
		return rep, &Problem{Kind: Truncated, Line: lineOf(rep, rep.Last), Entry: rep.Last,
			Msg: fmt.Sprintf("no checkpoint follows entry %d: the entries after the last checkpoint were removed, or the proxy was killed before it could write one", rep.Last)}
	case rep.Unsealed > 0 && !o.Open:
		return rep, &Problem{Kind: Truncated, Line: lineOf(rep, rep.Last), Entry: rep.Last,
			Msg: fmt.Sprintf("the log ends at entry %d, %d entries after its last checkpoint (entry %d): entries after it were removed (the checkpoint that followed them with it), or the proxy was killed", rep.Last, rep.Unsealed, rep.LastCheckpoint)}
	case !rep.Final && !rep.Export && !o.Open:
		return rep, &Problem{Kind: Truncated, Line: lineOf(rep, rep.Last), Entry: rep.Last,
			Msg: fmt.Sprintf("the log ends at a periodic checkpoint (entry %d), not at the one a proxy writes when it stops: entries after it were removed, or a proxy is still writing the log (then verify with --open)", rep.Last)}
	case len(rep.Recovered) > 0 && !o.AllowRecovered:
		r := rep.Recovered[0]
		msg := RecoveryMsg(r.Entry)
		if n := len(rep.Recovered); n > 1 {
			msg += fmt.Sprintf(" (and %d more recoveries)", n-1)
		}
		return rep, &Problem{Kind: Recovered, Line: r.Line, Entry: r.Entry, Msg: msg}
	}
	return rep, nil
}

// checkTree checks a checkpoint's signed note: signed by the key that
// signed the checkpoint, of the Length entries before it and (when
// withRoot: the whole log was read) with the root of their tree.
func checkTree(c *receipt.CheckpointBody, signer string, tree *frontier, withRoot bool, line, entry int64) *Problem {
	cp, _, err := OpenCheckpoint([]byte(c.Checkpoint), signer)
	if err != nil {
		return &Problem{Kind: Edited, Line: line, Entry: entry, Msg: fmt.Sprintf("the tree checkpoint of entry %d does not verify: %v", entry, err)}
	}
	if cp.Size != c.Length {
		return &Problem{Kind: Edited, Line: line, Entry: entry, Msg: fmt.Sprintf("the tree checkpoint of entry %d is of %d entries, not of the %d before it", entry, cp.Size, c.Length)}
	}
	if withRoot && cp.Root != tree.root() {
		return &Problem{Kind: Edited, Line: line, Entry: entry,
			Msg: fmt.Sprintf("the entries before entry %d are not those its checkpoint signed (the Merkle tree root differs): entries before it were changed, and the chain rewritten", entry)}
	}
	return nil
}

// lineOf is the line an entry is on.
func lineOf(rep *Report, entry int64) int64 {
	n := entry - rep.First + 1
	if rep.Export {
		n++
	}
	return n
}

// misplaced names what put entry got where entry want should be, given the
// entry on the next line.
func misplaced(line, want, got, next int64) *Problem {
	p := &Problem{Line: line, Entry: want}
	switch {
	case got == want+1 && next == want:
		p.Kind, p.Msg = Reordered, fmt.Sprintf("entries %d and %d are swapped", want, want+1)
	case next == want+1:
		p.Kind, p.Msg = Edited, fmt.Sprintf("entry %d was changed after it was written: its audit_seq says it is entry %d, between entries %d and %d", want, got, want-1, want+1)
	case next == want:
		p.Kind, p.Msg = Inserted, fmt.Sprintf("an entry was inserted before entry %d (it says it is entry %d)", want, got)
	case got > want:
		p.Kind = Removed
		if got == want+1 {
			p.Msg = fmt.Sprintf("entry %d was removed (this line holds entry %d)", want, got)
		} else {
			p.Msg = fmt.Sprintf("entries %d to %d were removed (this line holds entry %d)", want, got-1, got)
		}
	default:
		p.Kind, p.Msg = Reordered, fmt.Sprintf("entry %d is expected here, but this line holds entry %d again: an entry was moved or copied here", want, got)
	}
	return p
}

func seqOf(l *rawLine) int64 {
	if l == nil || !l.complete || l.tooLong {
		return 0
	}
	r, err := receipt.ParseEntry(l.text)
	if err != nil {
		return 0
	}
	return r.Position().Seq
}

func prevOf(l *rawLine) string {
	if l == nil || !l.complete || l.tooLong {
		return ""
	}
	r, err := receipt.ParseEntry(l.text)
	if err != nil {
		return ""
	}
	return r.Position().Prev
}

func parseExportHeader(l *rawLine) (*exportHeader, error) {
	bad := &Problem{Kind: Malformed, Line: 1, Msg: `an export's first line must be exactly {"receipt":N,"schema_version":"` + ExportKind + `"}`}
	if !l.complete || l.tooLong {
		return nil, bad
	}
	var h exportHeader
	if err := json.Unmarshal(l.text, &h); err != nil || h.Receipt < 1 || h.SchemaVersion != ExportKind {
		return nil, bad
	}
	if string(l.text) != fmt.Sprintf(`{"receipt":%d,"schema_version":"%s"}`, h.Receipt, ExportKind) {
		return nil, bad
	}
	return &h, nil
}

// rawLine is one line of a log.
type rawLine struct {
	no       int64
	text     []byte
	complete bool // ended by a newline
	tooLong  bool

	// Set by a parsingReader: the line parsed, its own signature checked
	// (when it has one) and its leaf hash.
	done   bool
	rc     *receipt.Receipt
	perr   error
	sigErr error
	leaf   tlog.Hash
}

// parsed is the line's receipt.
func (l *rawLine) parsed() (*receipt.Receipt, error) {
	if !l.done {
		l.parse()
	}
	return l.rc, l.perr
}

func (l *rawLine) parse() {
	l.done = true
	if !l.complete || l.tooLong {
		return
	}
	sum := sha256.Sum256(l.text)
	l.leaf = leafOfDigest(sum)
	if l.rc, l.perr = receipt.ParseEntryHashed(l.text, &sum); l.perr == nil && l.rc.Signed() {
		l.sigErr = l.rc.Verify(nil)
	}
}

// checkSigned is rc.Verify(trusted) for a receipt whose signature was
// checked already (sigErr).
func checkSigned(rc *receipt.Receipt, trusted []string, sigErr error) error {
	if len(trusted) > 0 && !slices.Contains(trusted, rc.Signer) {
		return fmt.Errorf("signed by %s, which is not a trusted key (%s)", rc.Signer, strings.Join(trusted, ", "))
	}
	return sigErr
}

// parsingReader is a lineReader that parses lines ahead, in batches,
// on every CPU: parsing and signatures are most of verify's work, and
// each line's is its own. A goroutine reads and parses the next batch
// while the lines of the one before are checked in order; stop ends it
// and waits for it, so that nothing reads the input once verify returns.
type parsingReader struct {
	batches  chan []*rawLine
	done     chan struct{}
	finished chan struct{}
	batch    []*rawLine
	// err is why reading ended, if not at EOF: read only once line has
	// returned nil (the channel's close orders it after its write).
	err  error
	once sync.Once
}

// Bounds of a batch parsed at once.
const (
	parseBatch      = 1024
	parseBatchBytes = 8 << 20
)

func newParsingReader(r io.Reader) *parsingReader {
	p := &parsingReader{batches: make(chan []*rawLine, 1), done: make(chan struct{}), finished: make(chan struct{})}
	go p.run(newLineReader(r))
	return p
}

// run reads and parses batches until the end of the input or stop.
func (p *parsingReader) run(lr *lineReader) {
	defer close(p.finished)
	defer close(p.batches)
	for {
		batch := make([]*rawLine, 0, parseBatch)
		size := 0
		for len(batch) < parseBatch && size < parseBatchBytes {
			l := lr.line()
			if l == nil {
				break
			}
			batch = append(batch, l)
			size += len(l.text)
		}
		if len(batch) == 0 {
			p.err = lr.err
			return
		}
		parseAll(batch)
		select {
		case p.batches <- batch:
		case <-p.done:
			return
		}
	}
}

// stop ends the reading ahead (verify has what it needs) and waits until
// the input is no longer read.
func (p *parsingReader) stop() {
	p.once.Do(func() { close(p.done) })
	<-p.finished
}

func (p *parsingReader) line() *rawLine {
	for len(p.batch) == 0 {
		b, ok := <-p.batches
		if !ok {
			return nil
		}
		p.batch = b
	}
	l := p.batch[0]
	p.batch = p.batch[1:]
	return l
}

// parseAll parses a batch's lines on every CPU.
func parseAll(batch []*rawLine) {
	workers := min(runtime.GOMAXPROCS(0), len(batch))
	if workers <= 1 {
		for _, l := range batch {
			l.parse()
		}
		return
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(batch); i += workers {
				batch[i].parse()
			}
		}()
	}
	wg.Wait()
}

// lineReader reads lines of at most MaxLineBytes; a longer line is
// reported (tooLong) and skipped to its end.
type lineReader struct {
	br  *bufio.Reader
	no  int64
	err error
}

func newLineReader(r io.Reader) *lineReader {
	return &lineReader{br: bufio.NewReaderSize(r, 64<<10)}
}

// line returns the next line, or nil at the end (err says why if not EOF).
func (lr *lineReader) line() *rawLine {
	if lr.err != nil {
		return nil
	}
	var buf []byte
	l := &rawLine{}
	read := 0
	var last byte
	for {
		chunk, err := lr.br.ReadSlice('\n')
		read += len(chunk)
		if len(chunk) > 0 {
			last = chunk[len(chunk)-1]
		}
		if !l.tooLong {
			if len(buf)+len(chunk) > MaxLineBytes {
				l.tooLong, buf = true, nil
			} else {
				buf = append(buf, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil && !errors.Is(err, io.EOF) {
			lr.err = err
			return nil
		}
		break
	}
	if read == 0 {
		return nil
	}
	lr.no++
	l.no = lr.no
	if last == '\n' {
		l.complete = true
		if !l.tooLong {
			buf = buf[:len(buf)-1]
		}
	}
	l.text = buf
	return l
}
