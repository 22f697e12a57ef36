package budget

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/delegateos/delegateos/internal/fsutil"
)

// A proxy writes the counts it has seen to its state directory's counts
// file at most once a second (seenEvery), in the background; a proxy
// killed (kill -9, the OOM killer) within that second would lose its last
// raises, and if Redis lost the same last writes (a failover to a replica
// that had not received them) a restarted proxy could not tell. So each
// proxy also keeps its raises in a live record of its own, a file of the
// state directory mapped into its memory (MAP_SHARED) and updated there
// at each raise: no system call, and the kernel's page cache, which the
// mapping is, keeps it when the process dies. The proxy holds the file's
// flock while it runs; a proxy that starts folds the records whose lock
// it can take (their proxies are gone) into the counts file, then removes
// them. A crash of the machine loses what was not yet written back to the
// disk (documented).
//
// Layout: liveMagic, the generation (int64), the identity's length (one
// byte) and bytes, the machine ID's length and bytes, the machine
// instance's (machineInstance) length and bytes, from liveHeader on
// entries of the count (int64, stored atomically), the key's length
// (uint32, stored last: an entry whose length is 0 ends the record) and
// the key, padded to 8 bytes.
const (
	liveMagic  = "DOSLIVE1"
	liveHeader = 256
	liveSize   = 64 << 10
)

// livePrefix begins the names of the live records under the store
// identity id; the proxy's nonce and a number follow.
func (s *Redis) livePrefix(id string) string {
	return strings.TrimSuffix(s.seenPath(id), ".seen.json") + ".live."
}

// deadRecord is a live record whose proxy is gone, read, its lock held.
type deadRecord struct {
	st   *seenState
	path string
	f    *os.File
}

// newPrefix begins the names under which the proxies make their live
// records under identity id before they rename them into place (see
// openLive): a proxy starting meanwhile never sees a record under
// livePrefix that is not whole or not locked.
func (s *Redis) newPrefix(id string) string {
	return strings.TrimSuffix(s.seenPath(id), ".seen.json") + ".new."
}

// liveTorn is how old a record torn before its header was whole must be
// for a starting proxy to remove it: a record is renamed into place
// whole (openLive), so one without its header is an older version's
// being made (its proxy's flock not yet taken, which removing it would
// leave on an unlinked file) or one a crash of the machine cut; either
// holds no count.
const liveTorn = time.Minute

// deadLive returns the live records under identity id whose proxies are
// gone (their flock taken), read; close them with closeDead. A record
// that cannot be read, or is not a regular file, is an error (fail
// closed: its counts would be lost); one torn before its header was
// whole is dropped (it held no count yet) once older than liveTorn, and
// a record being made (under newPrefix) whose proxy is gone is removed.
// The caller holds the identity's fold lock (lockFold).
func (s *Redis) deadLive(id string) ([]deadRecord, error) {
	if s.stateDir == "" || !liveRecords {
		return nil, nil
	}
	made, err := fsutil.GlobIn(s.stateDir, filepath.Base(s.newPrefix(id))+"*")
	if err != nil {
		return nil, fmt.Errorf("the state directory %s cannot be listed: %w", s.stateDir, err)
	}
	for _, p := range made {
		// Never renamed into place: its proxy was killed while it made
		// it (or makes it now: its flock is then held, or the rename
		// fails and it makes another).
		if f, _, err := openRecord(p, false); err == nil {
			os.Remove(p)
			f.Close()
		}
	}
	paths, err := fsutil.GlobIn(s.stateDir, filepath.Base(s.livePrefix(id))+"*")
	if err != nil {
		return nil, fmt.Errorf("the state directory %s cannot be listed: %w", s.stateDir, err)
	}
	var dead []deadRecord
	for _, p := range paths {
		f, b, err := openRecord(p, true)
		if errors.Is(err, os.ErrNotExist) || isLocked(err) {
			continue // removed meanwhile, or its proxy runs
		}
		if err != nil {
			closeDead(dead)
			return nil, fmt.Errorf("%s cannot be read: %w; remove it if it is not a record of counts delegateos wrote (then check the spend with store recover, or accept a loss with store init --reset)", p, err)
		}
		st, err := parseLive(b)
		if err != nil {
			f.Close()
			closeDead(dead)
			return nil, fmt.Errorf("%s is not a record of counts delegateos writes: %v", p, err)
		}
		if st == nil {
			if fi, err := f.Stat(); err != nil || time.Since(fi.ModTime()) < liveTorn {
				f.Close() // being made by an older version's proxy
				continue
			}
		}
		if st != nil && st.ID != id {
			st = nil
		}
		if st != nil {
			st.path = p
		}
		dead = append(dead, deadRecord{st: st, path: p, f: f})
	}
	return dead, nil
}

// closeDead drops the locks of dead records, removing the files when
// remove (their counts are in the counts file).
func closeDead(dead []deadRecord, remove ...bool) {
	for _, d := range dead {
		if len(remove) > 0 && remove[0] {
			os.Remove(d.path)
		}
		d.f.Close()
	}
}

// parseLive reads a live record; nil when its header is not whole (a
// proxy killed while it made it).
func parseLive(b []byte) (*seenState, error) {
	if len(b) < liveHeader || string(b[:len(liveMagic)]) != liveMagic {
		if len(b) >= len(liveMagic) && !bytes.Equal(b[:len(liveMagic)], make([]byte, len(liveMagic))) {
			return nil, errors.New("its header is not one")
		}
		return nil, nil
	}
	gen := int64(binary.NativeEndian.Uint64(b[8:]))
	il := int(b[16])
	if gen <= 0 || il == 0 || 18+il > liveHeader {
		return nil, errors.New("its header is not one")
	}
	ml := int(b[17+il])
	if 19+il+ml > liveHeader {
		return nil, errors.New("its header is not one")
	}
	nl := int(b[18+il+ml])
	if 19+il+ml+nl > liveHeader {
		return nil, errors.New("its header is not one")
	}
	inst := string(b[19+il+ml : 19+il+ml+nl])
	st := &seenState{ID: string(b[17 : 17+il]), Gen: gen, Machine: string(b[18+il : 18+il+ml]), Seen: map[string]int64{}}
	for off := liveHeader; off+16 <= len(b); {
		kl := uint64(binary.NativeEndian.Uint32(b[off+8:]))
		if kl == 0 {
			break
		}
		if kl > uint64(len(b)-off-16) {
			return nil, errors.New("an entry runs past its end")
		}
		n := int64(binary.NativeEndian.Uint64(b[off:]))
		k := string(b[off+16 : off+16+int(kl)])
		if n > 0 {
			st.Seen[k] = max(st.Seen[k], n)
		}
		off += 16 + (int(kl)+7)&^7
	}
	if st.Machine != "" {
		st.MSeen = st.Seen
		if inst != "" {
			st.MInst = make(map[string]string, len(st.Seen))
			for k := range st.Seen {
				st.MInst[k] = inst
			}
		}
	}
	return st, nil
}

// checkLive takes a new live record when this proxy's is no longer whole
// (cut, rewritten, renamed away or replaced: see liveRecord.whole), off
// the calls' path (watchMaps).
func (s *Redis) checkLive() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.live == nil || s.closed || s.liveErr == nil && s.live.whole() {
		return
	}
	s.renewLive()
}

// renewLive replaces this proxy's live record, found cut (a store into it
// faulted), rewritten, renamed away or replaced, by a new one holding the
// counts this proxy checks under the record's identity, and removes the
// old one if its name is still its own (s.mu held). When no new record
// can be made the old one is kept and every reservation is refused
// (liveErr) until one can: a proxy killed then would lose its last
// raises.
func (s *Redis) renewLive() error {
	old := s.live
	if old == nil {
		return nil
	}
	s.live = nil
	err := s.liveFor(Identity{ID: old.id, Gen: old.gen})
	if err == nil && s.ident.ID == old.id && s.ident.Gen == old.gen {
		for k, n := range s.seen {
			if err = s.live.raise(k, n); err != nil {
				break
			}
		}
	}
	if err != nil {
		if s.live != nil {
			s.live.close(true)
		}
		s.live = old
		s.liveErr = fmt.Errorf("this proxy's live record %s was cut, rewritten or replaced while the proxy ran, and a new one cannot be made (%v): a proxy killed within a second of its last calls would lose them; remove what is at that path, or set DELEGATEOS_STATE_DIR to a directory the proxy can write", old.path, err)
		return s.liveErr
	}
	old.close(true)
	s.liveErr = nil
	return nil
}

// repairMaps maps whole again, before a reservation, the counts epoch or
// live record that was cut while mapped and could not be mapped again
// then; an error refuses the reservation (store_unavailable, naming the
// file).
func (s *Redis) repairMaps() error {
	s.mu.Lock()
	eerr, e := s.epochErr, s.epoch
	s.mu.Unlock()
	if eerr != nil && e != nil {
		if err := s.remapEpoch(e); err != nil {
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.liveErr != nil {
		return s.renewLive()
	}
	return nil
}
