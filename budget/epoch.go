package budget

import (
	"os"
	"strings"
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
// (the caller reads them next).
func (s *Redis) markEpoch() {
	s.mu.Lock()
	if s.epoch != nil {
		s.epochSeen = s.epoch.load()
	}
	s.mu.Unlock()
}

// epochMoved reports whether a counts file of the state directory was
// written since this proxy last read it (s.mu held): a load from memory.
func (s *Redis) epochMoved() bool {
	return s.epoch != nil && s.epoch.load() != s.epochSeen
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
	e, id := s.epoch.load(), s.ident
	s.mu.Unlock()
	st, err := s.readSeenFile(id.ID)
	s.mu.Lock()
	s.epochSeen = e
	s.mu.Unlock()
	if err == nil && st != nil {
		s.mergeSeen(st, id)
	}
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
