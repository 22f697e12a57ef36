package budget

import (
	"fmt"
	"os"
	"strings"
	"time"
)

// The proxies of a machine that run at once learn what the others saw
// (RT6-10): a proxy writes its counts to the counts file of the store's
// identity within a second of its raises, and at its exit, merging there
// what the others wrote (storeSeen); each write is counted in the state
// directory's epochFile, which every proxy maps (countsEpoch) and reads
// at each reservation, reading the counts file again when it moved. And
// a proxy that writes its counts first folds the live records of the
// machine's proxies that were killed (foldDead), as a starting proxy
// does. A running proxy so checks its calls against what the machine's
// other proxies saw, within about a second of their calls (the counts
// file is written at most once a second), and within a second of its
// next call for a proxy killed meanwhile (whose last calls are in its
// live record until a proxy of the machine folds it).
const epochFile = "counts-epoch"

// lockFold takes the machine's fold lock of identity id (see join): held
// around a read of the counts file, the search of the dead live records
// and their fold into the file. It is taken before the counts file's own
// lock (storeSeen), never inside it. nil without a state directory.
func (s *Redis) lockFold(id string) (*os.File, error) {
	if s.stateDir == "" {
		return nil, nil
	}
	if err := MakeStateDir(s.stateDir); err != nil {
		return nil, err
	}
	return lockWait(strings.TrimSuffix(s.seenPath(id), ".seen.json") + ".fold.lock")
}

// markEpoch records that what the counts files held up to now is read
// (the caller reads them next). A mapping that faults is left to the next
// reservation (epochMoved), which maps a whole one again.
func (s *Redis) markEpoch() {
	s.mu.Lock()
	if s.epoch != nil {
		if e, err := s.epoch.load(); err == nil {
			s.epochSeen = e
		}
	}
	s.mu.Unlock()
}

// epochMoved reports whether a counts file of the state directory was
// written since this proxy last read it (s.mu held): a load from memory.
// An error says the epoch's file was cut while mapped (see guardFault).
func (s *Redis) epochMoved() (bool, error) {
	if s.epoch == nil {
		return false, nil
	}
	e, err := s.epoch.load()
	return e != s.epochSeen, err
}

// syncMachine reads the counts file of the store's identity again, which
// the machine's other proxies wrote since this one last read it, into
// the counts this proxy checks. A file that cannot be read is left (the
// next start refuses it, naming it).
func (s *Redis) syncMachine() {
	s.mu.Lock()
	if s.epoch == nil {
		s.mu.Unlock()
		return
	}
	e, eerr := s.epoch.load()
	id := s.ident
	s.mu.Unlock()
	st, err := s.readSeenFile(id.ID)
	if eerr == nil {
		s.mu.Lock()
		s.epochSeen = e
		s.mu.Unlock()
	}
	if err == nil && st != nil {
		s.mergeSeen(st, id)
	}
}

// mapCheckEvery is how often a running proxy checks, off the calls'
// path, that the files it maps are still the state directory's and
// whole (checkMaps): the counts epoch removed, replaced by a rename (a
// restore of the directory) or moved with its directory (a symbolic link
// pointed at a copy), or a file cut, is so found within mapCheckEvery,
// as a Redis copy finds its subscription stale (redisset's pingEvery).
const mapCheckEvery = 250 * time.Millisecond

// watchMaps runs checkMaps every mapCheckEvery until the store closes.
func (s *Redis) watchMaps() {
	defer close(s.watchDone)
	t := time.NewTicker(mapCheckEvery)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		s.checkMaps()
	}
}

// checkMaps maps the counts epoch again when the one this proxy maps is
// no longer the state directory's or was cut (checkEpoch), and takes a
// new live record when its own was cut, rewritten, or its name taken
// from it (checkLive). What it could not repair refuses the calls until
// it can (epochErr, liveErr: see repairMaps).
func (s *Redis) checkMaps() {
	s.checkEpoch()
	s.checkLive()
	// The counts the machine's other proxies wrote are read here too, off
	// the calls' path, rather than at this proxy's next reservation; and
	// a proxy that idles keeps up with the epoch, so that a counter put
	// back to an older value (a restore rewriting it in place) and bumped
	// back up to the value it last read is not taken for unmoved.
	s.mu.Lock()
	moved, err := s.epochMoved()
	s.mu.Unlock()
	if moved && err == nil {
		s.syncMachine()
	}
}

// checkEpoch maps the state directory's counts epoch again when the one
// this proxy maps was cut, or its path names another file now (removed
// and made again by a proxy started since, replaced by a rename, its
// directory moved): else this proxy and those started since would count
// their counts files' writes in two files, and it would not learn what
// they saw (red team 7, RT7-2). Two system calls (fstat, lstat); run off
// the calls' path (watchMaps) and before each write of the counts file.
func (s *Redis) checkEpoch() error {
	s.mu.Lock()
	e := s.epoch
	s.mu.Unlock()
	if e == nil || !e.replaced() {
		return nil
	}
	return s.remapEpoch(e)
}

// remapEpoch replaces old, the counts epoch this proxy maps, with the
// state directory's (made whole if there is none, or it was cut), counts
// a write in both (the proxies still mapping the old one, and those
// mapping the new one, read the counts file again: each may have missed
// the other's writes), and reads the counts file again. When it cannot,
// the calls are refused (epochErr) if the old one was cut; one still
// whole is kept.
func (s *Redis) remapEpoch(old *countsEpoch) error {
	n, err := openEpoch(s.stateDir)
	s.mu.Lock()
	if s.epoch != old {
		s.mu.Unlock()
		if n != nil {
			n.close()
		}
		return nil // done by another caller meanwhile
	}
	if err != nil {
		if _, lerr := old.load(); lerr != nil || old.cut() {
			err = fmt.Errorf("the counter of the writes of the state directory's counts files, %s, was cut while this proxy mapped it, and cannot be made again (%v): remove it, or set DELEGATEOS_STATE_DIR to a directory the proxy can write", old.path, err)
			s.epochErr = err
		} else {
			err = nil
		}
		s.mu.Unlock()
		return err
	}
	old.bump()
	old.close()
	s.epoch, s.epochErr = n, nil
	n.bump()
	s.mu.Unlock()
	s.syncMachine()
	return nil
}

// mergeSeen raises the counts this proxy checks to those st, a counts
// file or live record of the machine, keeps under identity id (unless
// the proxy adopted another meanwhile).
func (s *Redis) mergeSeen(st *seenState, id Identity) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ident.ID != id.ID || s.ident.Gen != id.Gen {
		return
	}
	s.seen = mergeMax(s.seen, keptSeen(st, id))
	s.mseen = mergeMax(s.mseen, keptMachine(st, id, s.machine))
	s.minst = laterInst(s.minst, keptInst(st, id, s.machine), s.irank)
}

// foldDead folds, for a running proxy about to write its counts, the
// live records of the machine's proxies killed since (see deadLive) into
// what it checks and into the counts file, and removes them; it reports
// whether it wrote the counts file. A record of a generation after this
// proxy's is left to a proxy that knows it.
func (s *Redis) foldDead() bool {
	if s.stateDir == "" || !liveRecords {
		return false
	}
	s.mu.Lock()
	id := s.ident
	s.mu.Unlock()
	fold, err := s.lockFold(id.ID)
	if err != nil {
		return false
	}
	defer fold.Close()
	dead, err := s.deadLive(id.ID)
	if err != nil {
		return false // the next start refuses it, naming it
	}
	var fold1 []deadRecord
	for _, d := range dead {
		if d.st != nil && d.st.Gen > id.Gen {
			d.f.Close()
			continue
		}
		fold1 = append(fold1, d)
		if d.st != nil {
			s.mergeSeen(d.st, id)
		}
	}
	if len(fold1) == 0 {
		return false
	}
	wrote, err := s.writeSeen(true)
	closeDead(fold1, wrote && err == nil)
	return wrote && err == nil
}
