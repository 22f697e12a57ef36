// Package audit keeps the proxy's audit log: an append-only file of signed
// receipts, one per line, each naming its position and the digest of the
// entry before it, with signed checkpoints of the log's length and head
// written periodically and at shutdown (docs/receipts.md). It also
// verifies a log offline and exports one receipt with the entries that
// prove its place.
package audit

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/delegateos/delegateos/internal/fsutil"
	"github.com/delegateos/delegateos/internal/timestamp"
	"github.com/delegateos/delegateos/receipt"
)

// MaxLineBytes bounds one entry: a receipt and its newline.
const MaxLineBytes = receipt.MaxBytes + 1

// Defaults for Options.
const (
	DefaultQueue              = 1 << 16
	DefaultCheckpointEvery    = 1024
	DefaultCheckpointInterval = time.Second
	DefaultSyncInterval       = 10 * time.Millisecond
	maxBatch                  = 4096
	maxBatchBytes             = 1 << 20
)

// Options tune a Log.
type Options struct {
	// Receipts are the policy's choices for what receipts contain.
	Receipts receipt.Options
	// Queue is how many events may wait for the writer before the relay
	// waits for it; zero means DefaultQueue.
	Queue int
	// CheckpointEvery and CheckpointInterval: a checkpoint is written once
	// this many entries, or this much time, have passed since the last
	// (when there are new entries); zero means the defaults.
	CheckpointEvery    int
	CheckpointInterval time.Duration
	// SyncInterval is the longest a batch written to the log may wait for
	// its fsync: each batch is written at once, in one write (a process
	// killed after it loses none of it), and the file is synced when the
	// last sync is this old, at every checkpoint and at Close, so that at
	// most this much of the log is lost at a power loss or an OS crash;
	// zero means DefaultSyncInterval.
	SyncInterval time.Duration
	// Now is the clock of checkpoints; nil means time.Now.
	Now func() time.Time
	// OnError, when set, is told of a failure to write or sync the log.
	OnError func(error)
	// SignEach signs every receipt on its own as well (receipts:
	// {sign_each: true}), for consumers that read receipts one by one;
	// otherwise only checkpoints are signed, and they sign the Merkle tree
	// of every entry before them.
	SignEach bool
}

// ErrInUse is returned by Open when another process has the log open.
var ErrInUse = errors.New("the audit log is in use by another process")

// Log appends receipts to an audit log file from one writer goroutine:
// Decided, Executed and Append only queue their event, and the writer
// signs, appends and fsyncs in batches.
type Log struct {
	path   string
	signer *receipt.Signer
	opts   Options
	f      *os.File
	unlock func()

	events chan event
	done   chan struct{}
	once   sync.Once

	// recovered is the entry of the recovery checkpoint Open wrote, if any.
	recovered int64

	// Writer state: tree is the Merkle tree of the entries so far.
	seq  int64
	prev [32]byte // the last entry's digest (zeros before the first)
	tree frontier
	enc  receipt.Encoder
	// size is the file's size as written; pending, the last checkpoint
	// buffered (its note, and where its line ends in buf).
	size    int64
	pending *published

	// pub is the last checkpoint written to the file, for witnesses.
	pubMu sync.Mutex
	pub   *published
	// published, when set (by tests, before any event), is told of each
	// checkpoint written.
	published func(*published)
	// unsynced is set while a batch written is not yet synced (since
	// lastSync, by the monotonic clock); toPublish is a checkpoint written
	// and not yet synced, published once it is.
	unsynced  bool
	lastSync  time.Time
	toPublish *published
	// syncFile syncs the file (tests make it fail); synced and wroteBatch,
	// when set (by tests, before any event), are told of each sync and
	// each batch written.
	syncFile    func() error
	synced      func()
	wroteBatch  func()
	sinceCkpt   int
	lastCkpt    time.Time
	buf         []byte
	err         error
	errMu       sync.Mutex
	closeErr    error
	writeFailed bool
	// failed is set with err: the relay reads it on every request.
	failed atomic.Bool
}

type event struct {
	decision  *receipt.Decision
	execution *receipt.Execution
	body      receipt.Body
	result    chan<- AppendResult
	// written, when set, is closed once the writer has reached it: every
	// event queued before it is written (to the buffer).
	written chan struct{}
}

// AppendResult is where a receipt given to Append was written.
type AppendResult struct {
	Seq    int64
	Digest string
	Err    error
}

// Open opens (creating it, mode 0600) the audit log at path for
// appending, signed by signer. It refuses a log another process holds
// (ErrInUse; the lock is path + ".lock"), a log whose last line is not a
// whole entry, and a symbolic link. Nothing already in the log is changed:
// the new entries continue its chain. A log whose last entry is not a
// final checkpoint (its proxy was killed, or entries were cut from its
// end) is continued after a recovery checkpoint, written and synced
// before Open returns (Recovered names it), which verify reports.
func Open(path string, signer *receipt.Signer, opts Options) (*Log, error) {
	if opts.Queue <= 0 {
		opts.Queue = DefaultQueue
	}
	if opts.CheckpointEvery <= 0 {
		opts.CheckpointEvery = DefaultCheckpointEvery
	}
	if opts.CheckpointInterval <= 0 {
		opts.CheckpointInterval = DefaultCheckpointInterval
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.SyncInterval <= 0 {
		opts.SyncInterval = DefaultSyncInterval
	}
	if opts.Receipts.BlockIDs == nil {
		opts.Receipts.BlockIDs = lastBlockIDs()
	}
	if opts.Receipts.AgentDIDs == nil {
		opts.Receipts.AgentDIDs = lastAgentDID()
	}
	unlock, err := fsutil.TryLock(path+".lock", 0o600)
	if errors.Is(err, fsutil.ErrLocked) {
		return nil, fmt.Errorf("%s: %w (a second proxy must use its own audit_log)", path, ErrInUse)
	}
	if err != nil {
		return nil, fmt.Errorf("lock the audit log: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND|oNoFollow, 0o600)
	if err != nil {
		unlock()
		return nil, err
	}
	if err := lockLog(f); err != nil {
		f.Close()
		unlock()
		if errors.Is(err, ErrInUse) {
			return nil, fmt.Errorf("%s: %w (through another name: a second proxy must use its own audit_log)", path, ErrInUse)
		}
		return nil, fmt.Errorf("lock the audit log: %w", err)
	}
	l := &Log{path: path, signer: signer, opts: opts, f: f, unlock: unlock,
		events: make(chan event, opts.Queue), done: make(chan struct{})}
	l.syncFile = l.f.Sync
	if err := l.readLog(); err != nil {
		f.Close()
		unlock()
		return nil, err
	}
	if l.recovered > 0 {
		l.checkpoint(false, true)
		l.flush(true)
		if err := l.Err(); err != nil {
			f.Close()
			unlock()
			return nil, err
		}
	}
	if l.seq == 0 {
		// A new log's directory entry must be as durable as its entries.
		if err := fsutil.SyncDir(filepath.Dir(path)); err != nil {
			f.Close()
			unlock()
			return nil, fmt.Errorf("sync the audit log's directory: %w", err)
		}
	}
	l.lastCkpt = opts.Now()
	go l.run()
	return l, nil
}

// readLog finds the last entry's position and digest, so that the log
// continues where it ends, and hashes every entry into the tree the next
// checkpoint signs.
func (l *Log) readLog() error {
	st, err := l.f.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", l.path)
	}
	l.size = st.Size()
	if st.Size() == 0 {
		return nil
	}
	if _, err := l.f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	lr := newLineReader(l.f)
	var last *rawLine
	for {
		line := lr.line()
		if line == nil {
			if lr.err != nil {
				return lr.err
			}
			break
		}
		if line.tooLong {
			return fmt.Errorf("%s: line %d is longer than %d bytes: run 'delegateos audit verify %s', keep the file as evidence and start a new log", l.path, line.no, MaxLineBytes, l.path)
		}
		if !line.complete {
			return fmt.Errorf("%s ends in the middle of an entry (the proxy was stopped while writing it, or the file was cut): it is not continued, since that would mean cutting the partial entry out of the log; run 'delegateos audit verify %s', keep the file as evidence and start a new log", l.path, l.path)
		}
		l.tree.add(LeafHash(line.text))
		last = line
	}
	if last == nil {
		return nil
	}
	r, err := receipt.ParseEntry(last.text)
	if err != nil {
		return fmt.Errorf("%s: its last entry cannot be read (%v): run 'delegateos audit verify %s', keep the file as evidence and start a new log", l.path, err, l.path)
	}
	pos := r.Position()
	if pos.Seq == 0 {
		return fmt.Errorf("%s: its last entry has no audit_seq: it is not an audit log", l.path)
	}
	if pos.Seq != last.no {
		// Its tree's leaves are its lines: continued, the log's checkpoints
		// would sign a tree whose leaf n is not entry n.
		return fmt.Errorf("%s: its last entry is entry %d but on line %d: entries were removed or inserted; run 'delegateos audit verify %s', keep the file as evidence and start a new log", l.path, pos.Seq, last.no, l.path)
	}
	if n, err := hex.Decode(l.prev[:], []byte(r.Digest)); err != nil || n != len(l.prev) {
		return fmt.Errorf("%s: the digest of its last entry is %q", l.path, r.Digest)
	}
	l.seq = pos.Seq
	// Continued from anywhere but a final checkpoint without a word, the
	// log would hide what happened before: entries cut from its end, or
	// the receipts a killed proxy had not written yet. A signed recovery
	// checkpoint says so at the place it happened.
	if c, ok := r.Body.(*receipt.CheckpointBody); !ok || !c.Final {
		l.recovered = pos.Seq + 1
	}
	return nil
}

// lastBlockIDs parses tokens for their block IDs, remembering the last:
// a session presents the same token call after call. Only the writer
// calls it.
func lastBlockIDs() receipt.BlockIDs {
	var token string
	var ids []string
	return func(t string) []string {
		if t != token || ids == nil {
			token, ids = t, receipt.ParseBlockIDs(t)
		}
		return ids
	}
}

// lastAgentDID converts principal IDs to did:keys, remembering the last:
// a session's calls are one agent's. Only the writer calls it.
func lastAgentDID() func(string) string {
	var principal, did string
	return func(p string) string {
		if p != principal || did == "" {
			principal, did = p, receipt.AgentDID(p)
		}
		return did
	}
}

// Decided queues a decision receipt. It returns at once unless the queue
// is full.
func (l *Log) Decided(d *receipt.Decision) { l.send(event{decision: d}) }

// Executed queues an execution receipt; its decision must have been
// queued before.
func (l *Log) Executed(e *receipt.Execution) { l.send(event{execution: e}) }

// Append queues a receipt body (a human approval, say) to be signed and
// appended; where it was written is sent on result, when not nil.
func (l *Log) Append(b receipt.Body, result chan<- AppendResult) {
	l.send(event{body: b, result: result})
}

// Approval checks a human approval receipt, signs it into the log and
// returns its digest once it is written to the log's buffer: the decision
// it let through, handed over next, names it.
func (l *Log) Approval(b *receipt.HumanApprovalBody) (string, error) {
	if err := receipt.CheckHumanApproval(b); err != nil {
		return "", err
	}
	res := make(chan AppendResult, 1)
	l.Append(b, res)
	r := <-res
	return r.Digest, r.Err
}

// Written returns a channel closed once the writer has written every
// receipt queued before the call (to its buffer: their digests are known,
// Decision.Digest and Execution.Digest may be read).
func (l *Log) Written() <-chan struct{} {
	ch := make(chan struct{})
	l.send(event{written: ch})
	return ch
}

func (l *Log) send(ev event) {
	defer func() {
		// A send after Close is a programming error elsewhere; the event
		// is lost rather than the process, and the log counts as failed so
		// that nothing more is decided without evidence.
		if recover() != nil {
			l.failed.Store(true)
			if ev.result != nil {
				ev.result <- AppendResult{Err: errors.New("the audit log is closed")}
			}
			if ev.written != nil {
				close(ev.written)
			}
		}
	}()
	l.events <- ev
}

// Failed reports whether a receipt could not be signed or written; it
// costs an atomic load.
func (l *Log) Failed() bool { return l.failed.Load() }

// Err is the first write or sync failure, if any.
func (l *Log) Err() error {
	l.errMu.Lock()
	defer l.errMu.Unlock()
	return l.err
}

// Head is the log's last entry and its digest; after Close, the final
// checkpoint's (the values to keep elsewhere and give verify as --head).
func (l *Log) Head() (seq int64, digest string) {
	<-l.done
	return l.seq, l.prevHex()
}

// prevHex is the last entry's digest in hex (64 zeros before the first:
// receipt.GenesisPrev).
func (l *Log) prevHex() string { return hex.EncodeToString(l.prev[:]) }

// Recovered is the entry of the recovery checkpoint Open wrote because the
// log did not end with a final checkpoint (receipts written before it may
// be missing), or 0.
func (l *Log) Recovered() int64 { return l.recovered }

// Close writes what is queued and a final checkpoint, syncs the file and
// releases the log.
func (l *Log) Close() error {
	l.once.Do(func() {
		close(l.events)
		<-l.done
		if err := l.f.Close(); err != nil && l.closeErr == nil {
			l.closeErr = err
		}
		l.unlock()
	})
	return l.closeErr
}

func (l *Log) run() {
	defer close(l.done)
	tick := time.NewTicker(l.opts.CheckpointInterval)
	defer tick.Stop()
	// syncTimer runs only while a batch written is unsynced: it syncs the
	// file once SyncInterval has passed since the last sync, when no
	// later batch has done it.
	syncTimer := time.NewTimer(time.Hour)
	syncTimer.Stop()
	var syncDue <-chan time.Time
	for {
		select {
		case ev, ok := <-l.events:
			if !ok {
				l.checkpoint(true, false)
				l.flush(true)
				l.closeErr = l.Err()
				return
			}
			l.write(ev)
			for n := 1; n < maxBatch && len(l.buf) < maxBatchBytes; n++ {
				select {
				case ev, ok := <-l.events:
					if !ok {
						l.checkpoint(true, false)
						l.flush(true)
						l.closeErr = l.Err()
						return
					}
					l.write(ev)
					continue
				default:
				}
				break
			}
			l.flush(false)
		case <-tick.C:
			if l.sinceCkpt > 0 && l.opts.Now().Sub(l.lastCkpt) >= l.opts.CheckpointInterval {
				l.checkpoint(false, false)
				l.flush(false)
			}
		case <-syncDue:
			syncDue = nil
			l.flush(false)
		}
		if l.unsynced && syncDue == nil {
			syncTimer.Reset(max(0, l.opts.SyncInterval-time.Since(l.lastSync)))
			syncDue = syncTimer.C
		}
	}
}

// write signs one event's receipt into the buffer.
func (l *Log) write(ev event) {
	if ev.written != nil {
		close(ev.written)
		return
	}
	if !l.opts.SignEach && ev.body == nil {
		l.writeDirect(ev)
		return
	}
	var b receipt.Body
	switch {
	case ev.decision != nil:
		b = ev.decision.Body(&l.opts.Receipts)
	case ev.execution != nil:
		b = ev.execution.Body(&l.opts.Receipts)
	default:
		b = ev.body
	}
	seq, digest, err := l.entry(b, l.opts.SignEach)
	if err != nil && (ev.decision != nil || ev.execution != nil) {
		// Arguments or a result in clear can make a receipt too large:
		// it is written with their hashes only, and says so.
		receipt.OmitClear(b)
		seq, digest, err = l.entry(b, l.opts.SignEach)
	}
	if err == nil && ev.decision != nil {
		ev.decision.Signed(l.prev)
	}
	if err == nil && ev.execution != nil {
		ev.execution.Signed(l.prev)
	}
	if ev.result != nil {
		ev.result <- AppendResult{Seq: seq, Digest: digest, Err: err}
	}
	l.wrote(err)
}

// writeDirect writes a decision or execution receipt (unsigned) straight
// from its record into the buffer: the bytes write would write of its
// body.
func (l *Log) writeDirect(ev event) {
	var err error
	for omit := false; ; omit = true {
		start := len(l.buf)
		if ev.decision != nil {
			l.buf = l.enc.AppendDecision(l.buf, ev.decision, &l.opts.Receipts, l.seq+1, &l.prev, omit)
		} else {
			l.buf = l.enc.AppendExecution(l.buf, ev.execution, &l.opts.Receipts, l.seq+1, &l.prev, omit)
		}
		if n := len(l.buf) - start; n > receipt.MaxBytes {
			// Arguments or a result in clear can make a receipt too large:
			// it is written with their hashes only, and says so.
			l.buf = l.buf[:start]
			err = fmt.Errorf("the receipt is %d bytes, more than %d", n, receipt.MaxBytes)
			if !omit {
				continue
			}
		} else {
			l.appended(start)
			err = nil
			if ev.decision != nil {
				ev.decision.Signed(l.prev)
			} else {
				ev.execution.Signed(l.prev)
			}
		}
		break
	}
	l.wrote(err)
}

// wrote ends the writing of an event's receipt, which failed if err is
// not nil, and writes a checkpoint when one is due.
func (l *Log) wrote(err error) {
	if err != nil {
		// A receipt missing from the log would not show in its chain:
		// nothing more is written, so the log ends without its final
		// checkpoint and verify names the gap.
		l.flush(true)
		l.writeFailed = true
		l.fail(err)
	}
	if l.sinceCkpt >= l.opts.CheckpointEvery {
		l.checkpoint(false, false)
	}
}

// entry encodes b at the next position (signed, with sign), adds it to
// the tree and buffers it.
func (l *Log) entry(b receipt.Body, sign bool) (int64, string, error) {
	if b == nil {
		return 0, "", errors.New("no receipt to append")
	}
	pos := receipt.PositionOf(b)
	*pos = receipt.Position{Seq: l.seq + 1, Prev: l.prevHex()}
	start := len(l.buf)
	var err error
	if sign {
		var line []byte
		if line, err = l.signer.Sign(b); err == nil {
			l.buf = append(l.buf, line...)
		}
	} else {
		// Encoded straight into the batch, in the encoder's own buffers.
		l.buf, err = l.enc.Append(l.buf, b)
		if err == nil && len(l.buf)-start > receipt.MaxBytes {
			err = fmt.Errorf("the receipt is %d bytes, more than %d", len(l.buf)-start, receipt.MaxBytes)
		}
	}
	if err != nil {
		l.buf = l.buf[:start]
		*pos = receipt.Position{}
		return 0, "", err
	}
	l.appended(start)
	return l.seq, l.prevHex(), nil
}

// appended takes the entry encoded in the buffer from start as the next:
// hashed once, its digest the chain's and its leaf's.
func (l *Log) appended(start int) {
	l.prev = sha256.Sum256(l.buf[start:])
	l.seq++
	l.tree.add(leafOfDigest(l.prev))
	l.sinceCkpt++
	l.buf = append(l.buf, '\n')
}

// checkpoint buffers a checkpoint of the log as it stands: final when the
// log is closed, recovered when a log that was not closed is continued.
func (l *Log) checkpoint(final, recovered bool) {
	if !final && !recovered && l.sinceCkpt == 0 {
		return
	}
	now := l.opts.Now()
	origin := Origin(l.signer.DID())
	note, err := signCheckpoint(Checkpoint{Origin: origin, Size: l.seq, Root: l.tree.root()}, l.signer.PublicKey(), l.signer.SignBytes)
	if err != nil {
		l.fail(err)
		return
	}
	c := &receipt.CheckpointBody{SchemaVersion: receipt.KindCheckpoint, Length: l.seq, Head: l.prevHex(), Final: final,
		Recovered: &recovered, At: timestamp.Format(now), Checkpoint: string(note)}
	if _, _, err := l.entry(c, true); err != nil {
		l.fail(err)
		return
	}
	l.pending = &published{note: note, end: int64(len(l.buf))}
	l.sinceCkpt = 0
	l.lastCkpt = now
}

// flush writes the buffer in one write, and syncs the file when the
// last sync is SyncInterval old, when the buffer ends with a checkpoint
// (a checkpoint is published, to witnesses, only once it is synced), or
// when force is set.
func (l *Log) flush(force bool) {
	if len(l.buf) > 0 && !l.writeFailed {
		if _, err := l.f.Write(l.buf); err != nil {
			l.writeFailed = true
			l.fail(fmt.Errorf("write the audit log %s: %w", l.path, err))
		} else {
			if p := l.pending; p != nil {
				p.end += l.size
				l.toPublish = p
			}
			l.size += int64(len(l.buf))
			l.unsynced = true
			if l.wroteBatch != nil {
				l.wroteBatch()
			}
		}
	}
	l.pending = nil
	if cap(l.buf) > 2*maxBatchBytes+MaxLineBytes {
		l.buf = nil
	} else {
		l.buf = l.buf[:0]
	}
	if l.unsynced && !l.writeFailed && (force || l.toPublish != nil || time.Since(l.lastSync) >= l.opts.SyncInterval) {
		l.sync()
	}
}

// sync syncs the file and publishes the checkpoint it made durable. A
// failure stops the log as a failed write does: what was written since
// the last sync may not be on disk.
func (l *Log) sync() {
	if err := l.syncFile(); err != nil {
		l.writeFailed = true
		l.unsynced = false
		l.toPublish = nil
		l.fail(fmt.Errorf("sync the audit log %s: %w", l.path, err))
		return
	}
	l.unsynced = false
	l.lastSync = time.Now()
	if p := l.toPublish; p != nil {
		l.toPublish = nil
		l.pubMu.Lock()
		l.pub = p
		l.pubMu.Unlock()
		if l.published != nil {
			l.published(p)
		}
	}
	if l.synced != nil {
		l.synced()
	}
}

// fail records the first failure and tells OnError. After a failed write
// nothing more is written: what follows could not continue the chain.
func (l *Log) fail(err error) {
	l.errMu.Lock()
	first := l.err == nil
	if first {
		l.err = err
		l.failed.Store(true)
	}
	l.errMu.Unlock()
	if first && l.opts.OnError != nil {
		l.opts.OnError(err)
	}
}
