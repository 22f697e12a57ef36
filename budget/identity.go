package budget

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/delegateos/delegateos/internal/fsutil"
	"github.com/delegateos/delegateos/internal/redisconn"
)

// A Redis spend store knows its own history, so that a fleet notices when
// Redis forgets (FLUSHALL, a restart without persistence, keys deleted or
// evicted, a failover to a replica that had not caught up) instead of
// spending every budget again:
//
//   - identityKey is a hash with the store's identity ("id", random), its
//     generation ("g", which only grows: a new one is after every one
//     known, the Unix time in milliseconds only when that is later),
//     who made it ("by": "proxy", "init" for a plain store init, or
//     "operator" for store init --reset and store recover, the only
//     generations proxies take as lifting a loss), what operators lifted
//     ("all", "lifted", "recovered", see Identity) and, once a proxy has
//     found the store lost data, why ("reset") and the highest generation
//     such a proxy saw ("need"). The first proxy, or delegateos store
//     init, creates it.
//   - stampKeyPrefix, the tree's hash tag in braces, is a hash per
//     delegation tree, in the tree's slot, holding the identity and
//     generation the tree was written under,
//     a field "k:KEY" per spend key it has had, and, once a proxy found
//     the tree lost data, why ("reset"). Every reservation checks it in
//     its script (no extra round trip), and refuses when it is gone, names
//     another identity or is marked reset, when one of the tree's spend
//     keys is gone, or when the chain's first key counts fewer calls ("n"
//     of its spend hash) than the proxy has seen.
//   - treesKey is the set of the trees' hash tags: a tree whose stamp is
//     gone while the set names it lost its keys. It is kept twice, in
//     two slots: treesKey in the identity hash's slot (its hash tag is
//     identityKey), and treesCopyKey (its name before, in a slot of its
//     own), so that on a Redis Cluster a shard that loses a tree's stamp
//     cannot take every set naming it: with the identity's shard lost the
//     copy remains (and a store whose identity is gone while a set names
//     trees lost data), with the copy's shard lost the identity's set
//     remains.
//
// A proxy that finds any of this refuses calls with an error matching
// redisconn.ErrReset (store_reset) and marks the tree's stamp reset, or,
// for a loss of the whole store (its identity gone, changed or gone
// back), the identity hash and every stamp, so that a proxy started later
// refuses too, until an operator acts: store
// recover (rebuilds the spend from the audit logs) or store init --reset
// (accepts the loss), either of which writes a new generation, by
// "operator", which the proxies adopt.
const (
	identityKey    = redisconn.Prefix + "store"
	stampKeyPrefix = redisconn.Prefix + "stamp:"
	treesKey       = redisconn.Prefix + "trees{" + identityKey + "}"
	treesCopyKey   = redisconn.Prefix + "trees"
)

// stampKey returns the Redis key of the stamp of a budget key's tree.
func stampKey(key string) string {
	return stampKeyPrefix + "{" + redisconn.HashTag(key) + "}"
}

// Identity is a spend store's identity and generation.
type Identity struct {
	ID  string `json:"id"`
	Gen int64  `json:"gen"`
	// By is who wrote it: "proxy" (the first proxy to open the store) or
	// "operator" (store init or store recover).
	By string `json:"by,omitempty"`
	// Reset, when not empty, says why a proxy found the store has lost
	// data; calls are refused until an operator acts.
	Reset string `json:"reset,omitempty"`
	// Lifted and AllAt, in a generation an operator wrote, say whose
	// losses operators have accepted: every tree's at generation AllAt
	// (store init --reset), and since then each tree in Lifted at its
	// generation (store init --reset --root). A count of calls a proxy
	// saw under an earlier generation is kept only for a tree whose loss
	// none accepted since: a tree another root's acceptance did not
	// name is still found lost.
	Lifted map[string]int64 `json:"-"`
	AllAt  int64            `json:"-"`
	// Recovered says, per tree, the generation at which store recover
	// last rebuilt it since AllAt: that lifts the tree's reset, but the
	// counts the proxies saw are kept, so that a rebuild from fewer
	// calls than a proxy saw (an audit log left out) is found by it.
	Recovered map[string]int64 `json:"-"`
	// Need is the highest generation a proxy that found the store lost
	// data knew (see markResetScript): the next operator's generation is
	// after it, whatever the operator's clock says.
	Need int64 `json:"-"`
	// ResetRest, when not empty, says why the whole store was found lost
	// before an operator lifted the loss of some trees only (store init
	// --reset --root, store recover): those, in ResetExcept, go on; any
	// other tree is still lost (its stamp may be gone with the rest of the
	// store, so this is the only record of its loss), refused until an
	// operator lifts it too, or every tree (store init --reset).
	ResetRest   string          `json:"-"`
	ResetExcept map[string]bool `json:"-"`
	// was, in an identity nextIdentity made, is the store's identity it
	// read (nil: none): writeIdentity writes only over that one.
	was *Identity
}

// restLost reports whether tree tag is one a store-wide loss that an
// operator lifted for other trees only still holds (see ResetRest).
func (id *Identity) restLost(tag string) bool {
	return id.ResetRest != "" && !id.ResetExcept[tag]
}

// keeps reports whether a count of tree tag seen under generation since
// still holds under id.
func (id *Identity) keeps(tag string, since int64) bool {
	return since >= id.AllAt && since >= id.Lifted[tag]
}

// lifts reports whether id lifted a loss of tree tag found under
// generation since: an operator accepted it, or rebuilt the tree.
func (id *Identity) lifts(tag string, since int64) bool {
	return id.By == "operator" && (!id.keeps(tag, since) || id.Recovered[tag] > since)
}

// forgetLifted drops from seen, counts seen under generation since, those
// of the trees an operator has lifted since (see Identity.Lifted).
func forgetLifted(seen map[string]int64, id *Identity, since int64) map[string]int64 {
	for k := range seen {
		if !id.keeps(redisconn.HashTag(k), since) {
			delete(seen, k)
		}
	}
	return seen
}

// ResetError is a store that has lost data its fleet wrote.
type ResetError struct {
	Store  string
	Reason string
	// Root, when not empty, is the root issuer of the one delegation tree
	// that lost data (the rest of the store did not).
	Root string
}

func (e *ResetError) Error() string {
	if e.Root != "" {
		return fmt.Sprintf("spend store %s has lost data of the delegation tree of root %s: %s; its calls are refused until an operator rebuilds it from the fleet's audit logs ('delegateos store recover --store URL --root %s --audit LOG... --policy FILE') or accepts the loss ('delegateos store init --store URL --reset --root %s')", e.Store, e.Root, e.Reason, e.Root, e.Root)
	}
	return fmt.Sprintf("spend store %s has lost data: %s; calls are refused until an operator rebuilds it from the fleet's audit logs ('delegateos store recover --store URL --root ID --audit LOG... --policy FILE') or accepts the loss ('delegateos store init --store URL --reset')", e.Store, e.Reason)
}

// Is makes errors.Is(err, redisconn.ErrReset) hold.
func (e *ResetError) Is(target error) bool { return target == redisconn.ErrReset }

// readIdentity reads the identity hash; nil when there is none.
func readIdentity(ctx context.Context, c redis.Cmdable) (*Identity, error) {
	m, err := c.HGetAll(ctx, identityKey).Result()
	if err != nil {
		return nil, err
	}
	if len(m) == 0 {
		return nil, nil
	}
	return identityOf(m)
}

func identityOf(m map[string]string) (*Identity, error) {
	g, err := strconv.ParseInt(m["g"], 10, 64)
	if err != nil || m["id"] == "" || g <= 0 {
		return nil, fmt.Errorf("the store's identity %s is not one delegateos writes (id %q, g %q)", identityKey, m["id"], m["g"])
	}
	id := &Identity{ID: m["id"], Gen: g, By: m["by"], Reset: m["reset"]}
	if id.By == "operator" {
		// An operator's generation that does not say (an older version's)
		// lifted every tree.
		id.AllAt = g
		if a, err := strconv.ParseInt(m["all"], 10, 64); err == nil && a >= 0 && a <= g {
			id.AllAt = a
		}
		if json.Unmarshal([]byte(m["lifted"]), &id.Lifted) != nil {
			id.Lifted, id.AllAt = nil, g
		}
		if m["recovered"] != "" && json.Unmarshal([]byte(m["recovered"]), &id.Recovered) != nil {
			id.Recovered = nil
		}
	}
	if need, err := strconv.ParseInt(m["need"], 10, 64); err == nil && need > 0 {
		id.Need = need
	}
	if id.ResetRest = m["reset_rest"]; id.ResetRest != "" {
		var except []string
		// Unreadable: no tree is excepted (fail closed).
		if json.Unmarshal([]byte(m["reset_except"]), &except) == nil {
			id.ResetExcept = make(map[string]bool, len(except))
			for _, t := range except {
				id.ResetExcept[t] = true
			}
		}
	}
	return id, nil
}

// newIdentity returns a new identity whose generation is after after.
func newIdentity(by string, after int64) *Identity {
	var b [12]byte
	rand.Read(b[:])
	return &Identity{ID: hex.EncodeToString(b[:]), Gen: max(time.Now().UnixMilli(), after+1), By: by}
}

// createIdentityScript writes the identity ARGV (id, g, by) when the store
// has none, and returns the store's identity hash, as HGETALL would.
var createIdentityScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('HSET', KEYS[1], 'id', ARGV[1], 'g', ARGV[2], 'by', ARGV[3])
end
return redis.call('HGETALL', KEYS[1])
`)

// markResetScript records that the store lost data (ARGV[3], why) in its
// identity hash, unless an operator has written a generation after the
// one the proxy knows (ARGV[1], ARGV[2]): then the proxy adopts that. A
// generation a proxy wrote (one that found the store empty after it lost
// its data) is marked too, and so is an operator's before the proxy's
// (written by an operator whose clock is behind, on a store that had lost
// its identity): "need" keeps the highest generation a proxy saw, which
// the operator's next generation is after (nextIdentity).
// A store that lost its identity gets the proxy's back, marked reset.
var markResetScript = redis.NewScript(`
local g = redis.call('HGET', KEYS[1], 'g')
if g and tonumber(g) > tonumber(ARGV[2]) and redis.call('HGET', KEYS[1], 'by') == 'operator' then return 0 end
if not g then redis.call('HSET', KEYS[1], 'id', ARGV[1], 'g', ARGV[2], 'by', 'proxy') end
if not redis.call('HGET', KEYS[1], 'reset') then redis.call('HSET', KEYS[1], 'reset', ARGV[3]) end
if tonumber(redis.call('HGET', KEYS[1], 'need') or '0') < tonumber(ARGV[2]) then redis.call('HSET', KEYS[1], 'need', ARGV[2]) end
return 1
`)

// changedWhy says how a store whose identity is now cur, not the was
// that who (this proxy, this machine) saw, lost data.
func changedWhy(cur, was Identity, who string) string {
	switch {
	case cur.ID == was.ID && cur.Gen < was.Gen:
		return fmt.Sprintf("its generation %d is before the %d %s saw: Redis went back to an older snapshot", cur.Gen, was.Gen, who)
	case cur.By == "operator" && cur.Gen <= was.Gen:
		return fmt.Sprintf("its identity is now %s (generation %d), which an operator wrote, not the %s (generation %d) %s saw: an operator's generation lifts a loss only when it is after the one the proxies saw (the operator's clock may be behind theirs, or Redis went back to an older snapshot); the store now records that a proxy saw generation %d, so an operator who accepts the loss runs store init --reset (or store recover) again, which gives a generation after it", cur.ID, cur.Gen, was.ID, was.Gen, who, was.Gen)
	}
	return fmt.Sprintf("its identity is now %s (generation %d), not the %s (generation %d) %s saw: Redis lost its data and another proxy (or a plain store init) started it anew", cur.ID, cur.Gen, was.ID, was.Gen, who)
}

// hashMap reads a flat array of field, value as HGETALL returns it.
func hashMap(res any) (map[string]string, error) {
	arr, ok := res.([]any)
	if !ok || len(arr)%2 != 0 {
		return nil, fmt.Errorf("the identity script replied %v", res)
	}
	m := make(map[string]string, len(arr)/2)
	for i := 0; i < len(arr); i += 2 {
		k, ok1 := arr[i].(string)
		v, ok2 := arr[i+1].(string)
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("the identity script replied %v", res)
		}
		m[k] = v
	}
	return m, nil
}

// StateDir is where a proxy keeps what it must remember of its stores
// across restarts: the identity of each Redis spend store it has used,
// and the releases it could not send. It is the command line's default
// (a library passes its own directory to Open): $DELEGATEOS_STATE_DIR, else
// $XDG_STATE_HOME/delegateos, else ~/.local/state/delegateos; "" when
// none can be found (nothing is remembered).
//
// A relative $DELEGATEOS_STATE_DIR (or $XDG_STATE_HOME) gives "": it
// would name another directory for each working directory a proxy starts
// in, each remembering nothing of the others; StateDirError says so, and
// the stores that need one refuse to open.
func StateDir() string {
	if StateDirError() != nil {
		return ""
	}
	if d := os.Getenv("DELEGATEOS_STATE_DIR"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "delegateos")
	}
	if h, err := os.UserHomeDir(); err == nil && h != "" {
		return filepath.Join(h, ".local", "state", "delegateos")
	}
	return ""
}

// StateDirError is an error when the state directory's variable is set
// to a relative path.
func StateDirError() error {
	for _, v := range []string{"DELEGATEOS_STATE_DIR", "XDG_STATE_HOME"} {
		if d := os.Getenv(v); d != "" {
			if !filepath.IsAbs(d) {
				return fmt.Errorf("%s is the relative path %q: proxies started in other working directories would each keep their state apart, and none would notice a store that lost data; set it to an absolute path", v, d)
			}
			return nil
		}
	}
	return nil
}

// CheckStateDir is an error when dir, a state directory given to Open, is
// a relative path (for the reason StateDirError gives), or exists and
// another user could change what it holds: writable by its group or by
// other users, or owned by another user than the proxy's (who could
// delete or replace the machine's ID, counts and revocation copies, and
// so hide a store that lost data), or lies in a directory another user
// could write, or on the way through another user's (checkStatePath).
// One that does not exist yet is made 0700 by the proxy.
func CheckStateDir(dir string) error {
	if dir != "" && !filepath.IsAbs(dir) {
		return fmt.Errorf("the state directory %q is a relative path: proxies started in other working directories would each keep their state apart, and none would notice a store that lost data; give an absolute path", dir)
	}
	if dir == "" {
		return nil
	}
	if err := checkStatePath(dir); err != nil {
		return err
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return nil // made, or refused, when it is first written
	}
	const risk = "another local user could delete or replace what this machine keeps there (its machine ID, the counts of calls it saw, its copies of revocations) and hide a store that lost data"
	if fi.IsDir() && fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("the state directory %s is writable by its group or by other users (mode %04o): %s; run chmod go-w %s, or set DELEGATEOS_STATE_DIR to a directory only this user can write", dir, fi.Mode().Perm(), risk, dir)
	}
	if owner, me, ok := fileOwner(fi); ok && owner != me {
		return fmt.Errorf("the state directory %s is owned by the user %d, not this proxy's user %d: %s; use a directory of this user's (chown it, or set DELEGATEOS_STATE_DIR to another)", dir, owner, me, risk)
	}
	return nil
}

// stateName returns the file name, in a state directory, of what is kept
// about the store at rawURL, named by its host and path as written: the
// journals, and an older version's index and counts. The index of the
// store's identity is named by the store's canonical address (indexName);
// the counts by the store's identity (seenPath), which the URL's spelling
// (a name or an address) does not change.
func stateName(rawURL, suffix string) string {
	where := rawURL
	if u, err := url.Parse(rawURL); err == nil {
		where = u.Host + u.Path
	}
	sum := sha256.Sum256([]byte(where))
	return "redis-" + hex.EncodeToString(sum[:8]) + suffix
}

// indexName returns the file name, in a state directory, of the index of
// the identity last seen at the store at rawURL: named by its canonical
// address (storeAddress), so that the spellings of one database of one
// server (the default database or port left out, a trailing slash, the
// host's case, a cluster's seeds in another order) name one index.
func indexName(rawURL string) string {
	sum := sha256.Sum256([]byte("store " + storeAddress(rawURL)))
	return "redis-" + hex.EncodeToString(sum[:8]) + ".json"
}

// storeAddress returns the canonical address of the store at rawURL
// (redisconn.Address).
func storeAddress(rawURL string) string { return redisconn.Address(rawURL) }

// sameServer reports whether the canonical addresses a and b (see
// storeAddress) name the same database of the same server: the same
// database, and a HOST:PORT of each whose ports are equal and whose
// hosts resolve to a common address (localhost and 127.0.0.1, a name and
// its address).
func sameServer(a, b string) bool {
	ha, da, _ := strings.Cut(a, "/")
	hb, db, _ := strings.Cut(b, "/")
	if da != db {
		return false
	}
	resolved := func(hosts string) map[string]bool {
		m := make(map[string]bool)
		for _, hp := range strings.Split(hosts, ",") {
			host, port, err := net.SplitHostPort(hp)
			if err != nil {
				m[hp] = true
				continue
			}
			m[net.JoinHostPort(host, port)] = true
			ctx, cancel := context.WithTimeout(context.Background(), redisconn.Timeout)
			addrs, err := net.DefaultResolver.LookupHost(ctx, host)
			cancel()
			if err != nil {
				continue
			}
			for _, ad := range addrs {
				if ip := net.ParseIP(ad); ip != nil {
					ad = ip.String()
				}
				m[net.JoinHostPort(ad, port)] = true
			}
		}
		return m
	}
	ra := resolved(ha)
	for hp := range resolved(hb) {
		if ra[hp] {
			return true
		}
	}
	return false
}

// knownState is what a state directory keeps, under the store URL's name
// (stateName), of the identity this machine last saw at that URL. Counts
// says that the counts file of that identity (seenPath) was written
// since: a machine that made no calls has one too, so a file that is gone
// while Counts says it was written was deleted.
type knownState struct {
	ID     string `json:"id"`
	Gen    int64  `json:"gen"`
	By     string `json:"by,omitempty"`
	Counts bool   `json:"counts,omitempty"`
	// Store is the store's canonical address (storeAddress), so that a
	// proxy naming the same server another way (localhost, its address)
	// finds the index (otherIndex).
	Store string `json:"store,omitempty"`
}

func (s *Redis) knownPath() string {
	return filepath.Join(s.stateDir, indexName(s.rawURL))
}

// legacyKnownPath is where an older version kept the index: named by the
// URL's host and path as written.
func (s *Redis) legacyKnownPath() string {
	return filepath.Join(s.stateDir, stateName(s.rawURL, ".json"))
}

// knownIdentity reads the identity this machine last saw at the store's
// URL, and whether the counts file of that identity was written; nil
// when it has none.
func (s *Redis) knownIdentity() (*Identity, bool, error) {
	if s.stateDir == "" {
		return nil, false, nil
	}
	path := s.knownPath()
	b, err := readStateFile(path)
	if errors.Is(err, os.ErrNotExist) {
		// An older version's, named by the URL as written.
		path = s.legacyKnownPath()
		b, err = readStateFile(path)
	}
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		// None (a state directory that is not one is named when the
		// index is written).
		return nil, false, nil
	}
	if err != nil {
		// Fail closed: an index that exists but cannot be read (another
		// user's file, a symbolic link in a loop) taken for none would
		// take a store that lost its identity for a new one.
		return nil, false, fmt.Errorf("%s, this machine's index of the store's identity, cannot be read (%v): make it readable by the proxy, or remove it (a store that lost its identity before this proxy starts again is then not noticed by this machine)", path, err)
	}
	var k knownState
	if err := json.Unmarshal(b, &k); err != nil || k.ID == "" || k.Gen <= 0 {
		return nil, false, fmt.Errorf("%s is not a store identity delegateos writes: restore it, or remove it (this machine's counts are kept in the store-*.seen.json files, but a store that lost its identity before this proxy starts again is then not noticed by this machine)", path)
	}
	return &Identity{ID: k.ID, Gen: k.Gen, By: k.By}, k.Counts, nil
}

// otherIndex returns the identity that another index of the state
// directory names, written by a proxy that named the same database of the
// same server another way (sameServer: localhost and 127.0.0.1, a name
// and its address), and the URL's canonical address it was written
// under; nil when there is none. Of several, the latest generation's. An
// index that exists but cannot be read is an error: it may be this
// store's.
func (s *Redis) otherIndex() (*Identity, string, error) {
	if s.stateDir == "" {
		return nil, "", nil
	}
	paths, err := fsutil.GlobIn(s.stateDir, "redis-*.json")
	if err != nil {
		return nil, "", fmt.Errorf("the state directory %s cannot be listed: %w", s.stateDir, err)
	}
	own, where := s.knownPath(), storeAddress(s.rawURL)
	var found *Identity
	var at string
	for _, path := range paths {
		if path == own || strings.HasSuffix(path, ".seen.json") || strings.HasSuffix(path, ".ended.json") || strings.HasSuffix(path, ".revocations.json") || strings.Contains(filepath.Base(path), ".unsent-") {
			continue
		}
		b, err := readStateFile(path)
		if errors.Is(err, os.ErrNotExist) {
			continue // removed meanwhile
		}
		if err != nil {
			return nil, "", fmt.Errorf("%s, an index of a store's identity in this machine's state directory, cannot be read (%v): make it readable by the proxy, or remove it", path, err)
		}
		var k knownState
		if json.Unmarshal(b, &k) != nil || k.ID == "" || k.Gen <= 0 || k.Store == "" || k.Store == where {
			continue
		}
		if (found == nil || k.Gen > found.Gen) && sameServer(where, k.Store) {
			found, at = &Identity{ID: k.ID, Gen: k.Gen, By: k.By}, k.Store
		}
	}
	return found, at, nil
}

// rememberIdentity records the identity in the state directory, and
// counts that its counts file is written.
func (s *Redis) rememberIdentity(id Identity, counts bool) error {
	if s.stateDir == "" {
		return nil
	}
	if err := MakeStateDir(s.stateDir); err != nil {
		return err
	}
	b, _ := json.Marshal(knownState{ID: id.ID, Gen: id.Gen, By: id.By, Counts: counts, Store: storeAddress(s.rawURL)})
	return writeFileAtomic(s.knownPath(), b)
}

// writeFileAtomic replaces path with b through a temporary file of its
// own (proxies sharing a state directory write the same files at once),
// synced before it is renamed into place, so that path is always whole.
func writeFileAtomic(path string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

// seenState is what a state directory keeps of the calls the proxies of
// a machine have seen each chain's first key count, under one identity
// and generation: a proxy restarted after Redis went back to an older
// snapshot (an RDB restart, a failover to a replica that had not caught
// up), which keeps the identity and generation, finds the counts gone
// back.
type seenState struct {
	ID   string           `json:"id"`
	Gen  int64            `json:"gen"`
	Seen map[string]int64 `json:"seen"`
	// Machine is the state directory's ID (machineID) and MSeen the
	// highest count the machine's proxies saw each first key reach under
	// generation Gen, which their reservations raised its field
	// "m:MACHINE" to (see Redis.mseen).
	Machine string           `json:"machine,omitempty"`
	MSeen   map[string]int64 `json:"mseen,omitempty"`
	// MInst is, per key, the instance of the machine (machineInstance)
	// that last raised its field from this state directory.
	MInst map[string]string `json:"minst,omitempty"`
	path  string            // read from
}

// keptMachine returns the counts of st that the machine's field of each
// key holds at least, under identity id: st's own, of id's generation,
// written under machine's ID.
func keptMachine(st *seenState, id Identity, machine string) map[string]int64 {
	if st == nil || machine == "" || st.Machine != machine || st.ID != id.ID || st.Gen != id.Gen {
		return nil
	}
	m := make(map[string]int64, len(st.MSeen))
	for k, n := range st.MSeen {
		if n > 0 {
			m[k] = n
		}
	}
	return m
}

// keptInst returns the instances of st that last raised each key's
// machine field, under the conditions of keptMachine.
func keptInst(st *seenState, id Identity, machine string) map[string]string {
	if st == nil || machine == "" || st.Machine != machine || st.ID != id.ID || st.Gen != id.Gen || len(st.MInst) == 0 {
		return nil
	}
	m := make(map[string]string, len(st.MInst))
	for k, v := range st.MInst {
		m[k] = v
	}
	return m
}

// laterInst merges the instances of from into to, keeping per key the
// later of the two by rank (an instance rank does not name counts as
// earliest), making to if need be.
func laterInst(to, from map[string]string, rank map[string]int) map[string]string {
	if len(from) == 0 {
		return to
	}
	if to == nil {
		to = make(map[string]string, len(from))
	}
	for k, v := range from {
		if cur, ok := to[k]; !ok || instRank(rank, v) > instRank(rank, cur) {
			to[k] = v
		}
	}
	return to
}

// instRank is the rank of instance v in rank, -1 when it names none.
func instRank(rank map[string]int, v string) int {
	if r, ok := rank[v]; ok {
		return r
	}
	return -1
}

// machineID returns the ID of the state directory dir, made at its first
// use: what a machine's proxies write in the keys' field "m:ID".
func machineID(dir string) (string, error) {
	path := filepath.Join(dir, "machine-id")
	b, err := readStateFile(path)
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		// Counts written under a machine ID while the ID is gone: it was
		// deleted, and with it what shows a store gone back to an older
		// snapshot that other machines' calls took back up.
		counts, err := fsutil.GlobIn(dir, "store-*.seen.json")
		if err != nil && !errors.Is(err, syscall.ENOTDIR) {
			return "", fmt.Errorf("the state directory %s cannot be listed: %w", dir, err)
		}
		for _, c := range counts {
			var st seenState
			if cb, err := readStateFile(c); err == nil && json.Unmarshal(cb, &st) == nil && st.Machine != "" {
				return "", fmt.Errorf("%s, this machine's ID, which its counts file %s names (%s), is gone (deleted): a store gone back to an older snapshot would not be noticed; restore it (its content is that ID), or accept the loss with delegateos store init --reset and remove the counts files", path, c, st.Machine)
			}
		}
		if err := MakeStateDir(dir); err != nil {
			return "", fmt.Errorf("the state directory %s cannot be made: %w; set DELEGATEOS_STATE_DIR to a directory the proxy can write", dir, err)
		}
		var r [12]byte
		rand.Read(r[:])
		f, err := os.CreateTemp(dir, "machine-id.*.tmp")
		if err != nil {
			return "", fmt.Errorf("the state directory %s cannot be written: %w; set DELEGATEOS_STATE_DIR to a directory the proxy can write", dir, err)
		}
		_, err = f.WriteString(hex.EncodeToString(r[:]) + "\n")
		if err == nil {
			err = f.Sync()
		}
		f.Close()
		if err == nil {
			// Made whole, or not at all: another proxy's made first wins.
			if lerr := os.Link(f.Name(), path); lerr != nil && !errors.Is(lerr, os.ErrExist) {
				err = lerr
			}
		}
		os.Remove(f.Name())
		if err != nil {
			return "", fmt.Errorf("the state directory %s cannot be written: %w; set DELEGATEOS_STATE_DIR to a directory the proxy can write", dir, err)
		}
		return machineID(dir)
	}
	if err != nil {
		return "", fmt.Errorf("%s cannot be read: %w", path, err)
	}
	id := strings.TrimSpace(string(b))
	if len(id) != 24 || strings.Trim(id, "0123456789abcdef") != "" {
		return "", fmt.Errorf("%s is not a machine ID delegateos writes: remove it (this machine's proxies then take a new one)", path)
	}
	// Counts written under another machine ID: the ID was replaced (or
	// the counts copied from another machine), and the counts they hold,
	// which show a store gone back to an older snapshot, would be dropped
	// as another machine's.
	counts, err := fsutil.GlobIn(dir, "store-*.seen.json")
	if err != nil {
		return "", fmt.Errorf("the state directory %s cannot be listed: %w", dir, err)
	}
	for _, c := range counts {
		var st seenState
		if cb, err := readStateFile(c); err == nil && json.Unmarshal(cb, &st) == nil && st.Machine != "" && st.Machine != id {
			return "", fmt.Errorf("%s, this machine's ID, is %s, but its counts file %s names the machine ID %s: the ID was replaced, or the file copied from another machine, and a store gone back to an older snapshot would not be noticed; restore the ID the file names, or accept the loss with delegateos store init --reset and remove the counts files", path, id, c, st.Machine)
		}
	}
	return id, nil
}

// seenPath is the file of the counts kept under the store identity id:
// named by the identity, not the URL, so that a proxy that names the same
// server another way (localhost, its address, another node's name) finds
// them.
func (s *Redis) seenPath(id string) string {
	sum := sha256.Sum256([]byte(id))
	return filepath.Join(s.stateDir, "store-"+hex.EncodeToString(sum[:8])+".seen.json")
}

// legacySeenPath is where an older version kept the counts: named by the
// URL.
func (s *Redis) legacySeenPath() string {
	return filepath.Join(s.stateDir, stateName(s.rawURL, ".seen.json"))
}

// readSeenFile reads the counts file of identity id (or, when there is
// none, an older version's file of the URL holding that identity's); nil
// when there is none. A file that exists but cannot be read or parsed is
// an error (fail closed, as for the identity file): taking it for "no
// counts" would accept the store back on an older snapshot.
func (s *Redis) readSeenFile(id string) (*seenState, error) {
	if s.stateDir == "" {
		return nil, nil
	}
	for i, path := range []string{s.seenPath(id), s.legacySeenPath()} {
		b, err := readStateFile(path)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%s cannot be read: %v", path, err)
		}
		var st seenState
		if err := json.Unmarshal(b, &st); err != nil || st.ID == "" || st.Gen <= 0 {
			return nil, fmt.Errorf("%s is not a file of seen counts delegateos writes", path)
		}
		if i == 0 && st.ID != id {
			return nil, fmt.Errorf("%s is not a file of seen counts delegateos writes (it names the identity %s)", path, st.ID)
		}
		if st.ID != id {
			continue // an older version's, of another identity
		}
		st.path = path
		return &st, nil
	}
	return nil, nil
}

// keptSeen returns the counts of st that hold under identity id: those
// kept under id's generation, and those kept under an earlier one for
// the trees no operator accepted the loss of since (see Identity.Lifted).
func keptSeen(st *seenState, id Identity) map[string]int64 {
	if st == nil || st.ID != id.ID || st.Gen > id.Gen {
		return nil
	}
	seen := make(map[string]int64, len(st.Seen))
	for k, n := range st.Seen {
		if n > 0 {
			seen[k] = n
		}
	}
	if st.Gen < id.Gen {
		if id.By != "operator" {
			return nil
		}
		seen = forgetLifted(seen, &id, st.Gen)
	}
	return seen
}

// loadSeen starts the counts this proxy has seen from the state
// directory's file st, at open, and from the live records dead of the
// machine's proxies that were killed (folded into the file, then
// removed). known is the identity the state
// directory's index names for the URL and counts says its counts file was
// written: such a file that is gone was deleted, and the counts it kept
// are lost (unless an operator accepted every tree's loss since). marked
// says the index as written at this open says so already.
func (s *Redis) loadSeen(st *seenState, dead []deadRecord, known *Identity, counts, marked bool) error {
	s.mu.Lock()
	id := s.ident
	s.mu.Unlock()
	if st == nil && counts && known != nil && known.ID == id.ID && !(id.By == "operator" && id.AllAt > known.Gen) {
		return fmt.Errorf("spend store %s: %s, where this machine keeps the counts of calls it saw at the store (identity %s), is gone (deleted): a store gone back to an older snapshot would not be noticed; restore the file, or accept the loss with delegateos store init --reset", s.url, s.seenPath(id.ID), id.ID)
	}
	if seen := keptSeen(st, id); len(seen) > 0 {
		s.mu.Lock()
		s.seen = seen
		s.mu.Unlock()
	}
	if m := keptMachine(st, id, s.machine); len(m) > 0 {
		s.mu.Lock()
		s.mseen = m
		s.mu.Unlock()
	}
	s.mu.Lock()
	s.minst = laterInst(s.minst, keptInst(st, id, s.machine), s.irank)
	s.mu.Unlock()
	for _, d := range dead {
		seen, m := keptSeen(d.st, id), keptMachine(d.st, id, s.machine)
		s.mu.Lock()
		s.seen = mergeMax(s.seen, seen)
		s.mseen = mergeMax(s.mseen, m)
		s.minst = laterInst(s.minst, keptInst(d.st, id, s.machine), s.irank)
		s.mu.Unlock()
	}
	if s.stateDir == "" {
		return nil
	}
	fresh := st == nil || st.path != s.seenPath(id.ID)
	if fresh || len(dead) > 0 {
		// The identity's own file is written now, empty if need be, so
		// that one deleted later is told from none.
		if err := s.storeSeen(true); err != nil {
			return fmt.Errorf("spend store %s: the counts of calls this machine sees cannot be kept in the state directory %s (%v): a proxy restarted after the store went back to an older snapshot would not notice it; set DELEGATEOS_STATE_DIR to a directory the proxy can write", s.url, s.stateDir, err)
		}
		closeDead(dead, true)
	}
	if !fresh && marked {
		return nil
	}
	if err := s.rememberIdentity(id, true); err != nil {
		return fmt.Errorf("spend store %s: its identity cannot be kept in the state directory %s (%v): a proxy restarted after the store lost data would not notice it; set DELEGATEOS_STATE_DIR to a directory the proxy can write", s.url, s.stateDir, err)
	}
	return nil
}

// mergeMax raises the counts of to to those of from, making to if need
// be.
func mergeMax(to, from map[string]int64) map[string]int64 {
	if len(from) == 0 {
		return to
	}
	if to == nil {
		to = make(map[string]int64, len(from))
	}
	for k, n := range from {
		to[k] = max(to[k], n)
	}
	return to
}

// saveSeen writes the counts this proxy has seen to the state directory
// (see storeSeen); a failure is not the calls': the next start of a
// proxy on the directory names it.
func (s *Redis) saveSeen() {
	if !s.foldDead() {
		s.storeSeen(false)
	}
}

// storeSeen writes the counts this proxy has seen to its identity's
// counts file, merged with what other proxies of the machine wrote there
// under the same generation (the larger of each), holding the file's
// lock, so that two proxies writing at once do not drop each other's
// raises. A file of a newer generation is left alone, as is one that
// cannot be read (the next start refuses it). With force the file is
// written even with no counts.
func (s *Redis) storeSeen(force bool) error {
	_, err := s.writeSeen(force)
	return err
}

// writeSeen is storeSeen, reporting whether it wrote the file. What the
// file held is merged into the counts this proxy checks too (the
// machine's other proxies wrote it), and the write is counted in the
// state directory's epoch.
func (s *Redis) writeSeen(force bool) (wrote bool, err error) {
	// A write that found its lock file deleted or replaced while it held
	// it (lockLost) is made again under the lock file now at the path.
	for range 3 {
		wrote, err = s.writeSeenOnce(force)
		if !errors.Is(err, errLockLost) {
			return wrote, err
		}
	}
	return wrote, err
}

// lockTaken, when set (tests), is called with the path of the counts
// file's lock once writeSeen holds it.
var lockTaken atomic.Pointer[func(path string)]

func (s *Redis) writeSeenOnce(force bool) (bool, error) {
	if s.stateDir == "" {
		return false, nil
	}
	s.mu.Lock()
	id := s.ident
	seen := make(map[string]int64, len(s.seen))
	for k, n := range s.seen {
		seen[k] = n
	}
	mseen := make(map[string]int64, len(s.mseen))
	for k, n := range s.mseen {
		mseen[k] = n
	}
	rank := s.irank
	minst := laterInst(nil, s.minst, rank)
	s.mu.Unlock()
	// Written in the reset state too: they are what this proxy saw under
	// the identity it knows (s.ident), and the raises of the last second
	// before it found a loss are what shows a recovery from only some
	// audit logs short (the generation check below keeps a newer
	// generation's file).
	if len(seen) == 0 && !force {
		return false, nil
	}
	if err := MakeStateDir(s.stateDir); err != nil {
		return false, err
	}
	path := s.seenPath(id.ID)
	lock, err := lockWait(path + ".lock")
	if err != nil {
		return false, err
	}
	defer lock.Close()
	if h := lockTaken.Load(); h != nil {
		(*h)(path + ".lock")
	}
	// The write is counted in the state directory's epoch, not in one
	// this proxy maps that was replaced or cut since.
	s.checkEpoch()
	s.mu.Lock()
	var e0 uint64
	var eerr error
	if s.epoch != nil {
		e0, eerr = s.epoch.load()
	}
	s.mu.Unlock()
	st, err := s.readSeenFile(id.ID)
	if err != nil {
		return false, err
	}
	if st != nil && st.Gen > id.Gen {
		return false, nil // never replace a newer generation's counts with older ones
	}
	if st != nil {
		s.mergeSeen(st, id)
	}
	for k, n := range keptSeen(st, id) {
		seen[k] = max(seen[k], n)
	}
	for k, n := range keptMachine(st, id, s.machine) {
		mseen[k] = max(mseen[k], n)
	}
	minst = laterInst(minst, keptInst(st, id, s.machine), rank)
	if s.machine == "" {
		mseen, minst = nil, nil
	}
	b, _ := json.Marshal(seenState{ID: id.ID, Gen: id.Gen, Seen: seen, Machine: s.machine, MSeen: mseen, MInst: minst})
	// The lock file deleted (rm STATE_DIR/*.lock) or replaced while held:
	// another proxy may hold a new one and write at once, and one of the
	// two writes would drop the other's raises. Checked before the write
	// (then not made) and after it (then made again under the new lock,
	// and this proxy's live record kept at Close).
	if !lockHeld(lock, path+".lock") {
		return false, errLockLost
	}
	if err := writeFileAtomic(path, b); err != nil {
		return false, err
	}
	if !lockHeld(lock, path+".lock") {
		s.mu.Lock()
		s.seenUnsure = true
		s.mu.Unlock()
		return false, errLockLost
	}
	written, _ := os.Lstat(path) // under the lock: no other write since
	s.mu.Lock()
	if written != nil && s.ident.ID == id.ID {
		s.seenFile = written
	}
	if s.epoch != nil {
		e1, err := s.epoch.bump()
		if err == nil && eerr == nil && e1 == e0+1 && s.ident.ID == id.ID && s.ident.Gen == id.Gen {
			// No other write since this one read the file: nothing new
			// to read.
			s.epochSeen = e1
		}
		if err != nil {
			// Cut while mapped: counted in a whole one, mapped again.
			old := s.epoch
			s.mu.Unlock()
			s.remapEpoch(old)
			s.mu.Lock()
		}
	}
	s.mu.Unlock()
	return true, nil
}

// seenGrew is called when a reservation raised a count this proxy has
// seen: the counts are written to the state directory at most once per
// seenEvery (and at Close), in the background. A raise that comes within
// seenEvery of the last write arms a timer, so that it is written at most
// seenEvery later even if the proxy then idles.
func (s *Redis) seenGrew() {
	s.mu.Lock()
	if s.stateDir == "" || s.closed {
		s.mu.Unlock()
		return
	}
	if since := time.Since(s.seenSaved); s.savingSeen || since < seenEvery {
		if !s.seenTimer {
			s.seenTimer = true
			wait := seenEvery - since
			if s.savingSeen || wait <= 0 {
				wait = seenEvery
			}
			time.AfterFunc(wait, func() {
				s.mu.Lock()
				s.seenTimer = false
				s.mu.Unlock()
				s.seenGrew()
			})
		}
		s.mu.Unlock()
		return
	}
	s.savingSeen = true
	s.pending.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.pending.Done()
		s.saveSeen()
		s.mu.Lock()
		s.savingSeen, s.seenSaved = false, time.Now()
		s.mu.Unlock()
	}()
}

// seenEvery bounds how often a proxy writes the counts it has seen.
const seenEvery = time.Second

// join reads the store's identity at open: it creates it when the store
// is new, adopts an operator's new generation, and enters the reset state
// when the store has lost what this machine or the store's own stamps
// say it held.
func (s *Redis) join(ctx context.Context) error {
	known, counts, err := s.knownIdentity()
	if err != nil {
		return &StateError{fmt.Errorf("spend store %s: %w", s.url, err)}
	}
	cur, err := readIdentity(ctx, s.c)
	if err != nil {
		return s.fail(err)
	}
	if cur == nil {
		var lost string
		switch {
		case known != nil:
			lost = fmt.Sprintf("its identity %s (generation %d), which this machine saw, is gone: Redis was flushed or restarted without persistence", known.ID, known.Gen)
		default:
			// Seen by this machine under another name of the server
			// (localhost, its address): the same loss.
			other, at, err := s.otherIndex()
			if err != nil {
				return &StateError{fmt.Errorf("spend store %s: %w", s.url, err)}
			}
			if other != nil {
				known = other
				lost = fmt.Sprintf("its identity %s (generation %d), which this machine saw at %s (the same server, named another way), is gone: Redis was flushed or restarted without persistence", other.ID, other.Gen, at)
				break
			}
			stamped, err := s.anyKey(ctx, stampKeyPrefix+"*")
			if err != nil {
				return s.fail(err)
			}
			// A set of trees with its identity gone: a Cluster shard that
			// held the identity and the trees' stamps lost its data.
			var listed int64
			if !stamped {
				if listed, err = s.c.Exists(ctx, treesKey).Result(); err == nil && listed == 0 {
					listed, err = s.c.Exists(ctx, treesCopyKey).Result()
				}
				if err != nil {
					return s.fail(err)
				}
			}
			if stamped || listed > 0 {
				lost = "its identity is gone while its delegation trees' stamps (or the list of its trees) remain: the key " + identityKey + " was deleted or evicted, or the Redis Cluster shard holding it lost its data"
			}
		}
		if lost != "" {
			id := known
			if id == nil {
				id = newIdentity("proxy", 0)
			}
			s.ident = *id
			return s.markStoreReset(ctx, lost)
		}
		n := newIdentity("proxy", 0)
		res, err := createIdentityScript.Run(ctx, s.c, []string{identityKey}, n.ID, n.Gen, n.By).Result()
		if err != nil {
			return s.fail(err)
		}
		m, err := hashMap(res)
		if err != nil {
			return s.fail(err)
		}
		if cur, err = identityOf(m); err != nil {
			return err
		}
	}
	if known != nil && (cur.ID != known.ID || cur.Gen != known.Gen) && !(cur.By == "operator" && cur.Gen > known.Gen) {
		s.ident = *known
		return s.markStoreReset(ctx, changedWhy(*cur, *known, "this machine"))
	}
	// The machine's fold lock of the identity, held from the read of its
	// counts file to the fold of the dead live records into it: a proxy
	// starting while another folds waits, then reads the folded file (a
	// record found locked under it is a running proxy's, not one being
	// folded).
	fold, err := s.lockFold(cur.ID)
	if err != nil {
		return &StateError{fmt.Errorf("spend store %s: the state directory %s cannot be written: %w; set DELEGATEOS_STATE_DIR to a directory the proxy can write", s.url, s.stateDir, err)}
	}
	unlock := func() {
		if fold != nil {
			fold.Close()
			fold = nil
		}
	}
	defer unlock()
	// What the machine's proxies wrote since is read again by this one
	// at its next reservation (syncMachine).
	s.markEpoch()
	// The counts this machine keeps under the store's identity, whatever
	// the URL's spelling: a generation after the store's is a store gone
	// back to an older snapshot.
	st, serr := s.readSeenFile(cur.ID)
	// And the live records of this machine's proxies that were killed
	// before they wrote their last counts there (see live.go).
	dead, derr := s.deadLive(cur.ID)
	defer closeDead(dead)
	if serr == nil {
		serr = derr
	}
	if serr == nil {
		for _, d := range append([]deadRecord{{st: st}}, dead...) {
			if d.st != nil && d.st.Gen > cur.Gen {
				s.ident = Identity{ID: cur.ID, Gen: d.st.Gen, By: cur.By}
				unlock()
				return s.markStoreReset(ctx, fmt.Sprintf("its generation %d is before the %d this machine saw: Redis went back to an older snapshot", cur.Gen, d.st.Gen))
			}
		}
	}
	s.ident = *cur
	if cur.Reset != "" {
		s.resetReason = cur.Reset
		// The proxy that marked the identity may have stopped (a kill)
		// before it marked every tree's stamp, which is what the proxies
		// that took the emptied store for a new one read.
		if err := markStamps(ctx, s.c, cur.Reset, cur.Gen); err != nil {
			return s.fail(err)
		}
		return nil
	}
	marked := counts && known.ID == cur.ID
	if err := s.rememberIdentity(*cur, marked); err != nil {
		// Fail closed: without it a proxy restarted after the store lost
		// data, or went back to an older snapshot, would not notice.
		return &StateError{fmt.Errorf("spend store %s: its identity cannot be kept in the state directory %s (%v): a proxy restarted after the store lost data would not notice it; set DELEGATEOS_STATE_DIR to a directory the proxy can write", s.url, s.stateDir, err)}
	}
	if serr != nil {
		return &StateError{fmt.Errorf("spend store %s: %v: the counts this machine saw are lost, so a store gone back to an older snapshot would not be noticed; restore the file, or remove it and accept the loss with delegateos store init --reset", s.url, serr)}
	}
	if err := s.loadSeen(st, dead, known, counts, marked); err != nil {
		return &StateError{err}
	}
	unlock()
	if err := s.carrySeen(known, *cur); err != nil {
		return &StateError{err}
	}
	return nil
}

// StateError is a store refused at open for what the state directory
// holds or cannot hold (an index or counts file cut, deleted or
// unreadable, a directory that cannot be written), not for Redis: its
// message names its own remedy.
type StateError struct{ Err error }

func (e *StateError) Error() string { return e.Err.Error() }
func (e *StateError) Unwrap() error { return e.Err }

// carrySeen keeps, when this proxy adopted an operator's identity cur
// other than the identity known that the machine's index names (store
// recover or store init --reset --root on a store that had lost its
// identity gives it a new one), the counts the machine kept under known:
// those of the trees no operator accepted the loss of since, as for a
// new generation of the same identity (see keptSeen). Else a rebuild
// from only some audit logs, or another root's acceptance, would leave
// the counts that show it short under an identity no proxy reads again.
func (s *Redis) carrySeen(known *Identity, cur Identity) error {
	if known == nil || known.ID == cur.ID || cur.By != "operator" || s.stateDir == "" {
		return nil
	}
	fold, err := s.lockFold(known.ID)
	if err != nil {
		return fmt.Errorf("spend store %s: the state directory %s cannot be written: %w; set DELEGATEOS_STATE_DIR to a directory the proxy can write", s.url, s.stateDir, err)
	}
	defer fold.Close()
	old, err := s.readSeenFile(known.ID)
	// And the live records, under known, of the machine's proxies killed
	// before they wrote their last counts there.
	dead, derr := s.deadLive(known.ID)
	defer closeDead(dead)
	if err == nil {
		err = derr
	}
	if err != nil {
		return fmt.Errorf("spend store %s: %v: the counts this machine saw are lost, so a rebuild of the store from fewer calls than it saw would not be noticed; restore the file, or remove it and accept the loss with delegateos store init --reset", s.url, err)
	}
	seen := map[string]int64{}
	for _, src := range append([]deadRecord{{st: old}}, dead...) {
		if src.st == nil || src.st.Gen >= cur.Gen {
			continue
		}
		kept := make(map[string]int64, len(src.st.Seen))
		for k, n := range src.st.Seen {
			if n > 0 {
				kept[k] = n
			}
		}
		seen = mergeMax(seen, forgetLifted(kept, &cur, src.st.Gen))
	}
	if len(seen) == 0 {
		return nil
	}
	s.mu.Lock()
	if s.seen == nil {
		s.seen = make(map[string]int64, len(seen))
	}
	for k, n := range seen {
		s.seen[k] = max(s.seen[k], n)
	}
	s.mu.Unlock()
	if err := s.storeSeen(true); err != nil {
		return fmt.Errorf("spend store %s: the counts of calls this machine sees cannot be kept in the state directory %s (%v): a proxy restarted after the store went back to an older snapshot would not notice it; set DELEGATEOS_STATE_DIR to a directory the proxy can write", s.url, s.stateDir, err)
	}
	closeDead(dead, true)
	return nil
}

// anyKey reports whether the store holds a key matching pattern (on any
// primary of a cluster).
func (s *Redis) anyKey(ctx context.Context, pattern string) (bool, error) {
	found := errors.New("found")
	err := redisconn.Scan(ctx, s.c, pattern, func(keys []string) error {
		if len(keys) > 0 {
			return found
		}
		return nil
	})
	if errors.Is(err, found) {
		return true, nil
	}
	return false, err
}

// markReset enters the reset state for why, and records it in the store
// for the rest of the fleet, unless an operator has acted meanwhile.
func (s *Redis) markReset(ctx context.Context, why string) error {
	s.mu.Lock()
	id := s.ident
	if s.resetReason == "" {
		s.resetReason = why
	}
	s.mu.Unlock()
	n, err := markResetScript.Run(ctx, s.c, []string{identityKey}, id.ID, id.Gen, why).Int()
	if err != nil {
		return s.fail(err)
	}
	if n == 0 {
		return s.refresh(ctx)
	}
	return nil
}

// markStoreReset is markReset for a loss of the whole store (its identity
// gone, changed or gone back): every tree's stamp is marked reset too, so
// that the proxies that took the emptied store for a new one, whose
// reservations check only their tree's stamp, refuse from their next
// call on.
func (s *Redis) markStoreReset(ctx context.Context, why string) error {
	// The stamps first too, unless an operator's newer generation is
	// there (markReset adopts it): a proxy killed between the marks then
	// leaves the running proxies refusing, not only those started later.
	s.mu.Lock()
	gen := s.ident.Gen
	s.mu.Unlock()
	if cur, err := readIdentity(ctx, s.c); err == nil && !(cur != nil && cur.By == "operator" && cur.Gen > gen) {
		if err := markStamps(ctx, s.c, why, gen); err != nil {
			return s.fail(err)
		}
	}
	if err := s.markReset(ctx, why); err != nil {
		return err
	}
	s.mu.Lock()
	reset := s.resetReason != ""
	s.mu.Unlock()
	if !reset {
		return nil // an operator acted meanwhile
	}
	if err := markStamps(ctx, s.c, why, gen); err != nil {
		return s.fail(err)
	}
	return nil
}

// markStamps marks every tree's stamp reset for why (a stamp marked
// already keeps its reason), as a proxy that knew generation gen found
// it (see markStampScript).
func markStamps(ctx context.Context, c redisconn.Client, why string, gen int64) error {
	return redisconn.Scan(ctx, c, stampKeyPrefix+"*", func(keys []string) error {
		_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, k := range keys {
				markStampScript.Eval(ctx, p, []string{k}, why, gen)
			}
			return nil
		})
		return err
	})
}

// markStamp marks one tree's stamp (key) reset for why, as markStamps.
func markStamp(ctx context.Context, c redisconn.Client, key, why string, gen int64) {
	markStampScript.Run(ctx, c, []string{key}, why, gen)
}

// markStampScript marks the stamp KEYS[1] reset for ARGV[1], found by a
// proxy that knew generation ARGV[2], unless an operator lifted the
// tree's loss at a later generation (its field "o", see restampScript):
// a mark found before the operator's command and landing after it (a
// delayed command, a slow proxy) would else undo the operator's reset
// and leave every proxy refusing the tree while the command said it
// succeeded. It returns 1 when it set the mark.
var markStampScript = redis.NewScript(`
local o = tonumber(redis.call('HGET', KEYS[1], 'o') or '0') or 0
if o > tonumber(ARGV[2]) then return 0 end
return redis.call('HSETNX', KEYS[1], 'reset', ARGV[1])
`)

// checkNewStamp is called when a reservation of this proxy made tree
// tag's stamp: a proxy that found the store lost data marks its identity,
// then every stamp there is, so a stamp made after that marking is found
// by reading the identity after it was made. nil when the identity is the
// one this proxy knows, unmarked; else the stamp is marked too and the
// call is refused.
func (s *Redis) checkNewStamp(tag string) error {
	cur, err := readIdentity(s.ctx, s.c)
	if err != nil {
		return s.fail(err)
	}
	s.mu.Lock()
	id := s.ident
	s.mu.Unlock()
	if cur != nil && cur.ID == id.ID && cur.Gen == id.Gen && cur.Reset == "" {
		return nil
	}
	if cur != nil && cur.Reset != "" {
		markStamp(s.ctx, s.c, stampKeyPrefix+"{"+tag+"}", cur.Reset, id.Gen)
	}
	if err := s.storeChanged(tag); err != nil && !errors.Is(err, errRetry) {
		return err
	}
	// An operator's newer generation, adopted: the call is refused as
	// one the store could not decide, which the client may retry.
	return s.fail(errors.New("the store's identity changed while this call's delegation tree was first stamped"))
}

// refresh reads the store's identity again, for a proxy in the reset
// state or one whose generation is behind a tree's: an operator's newer
// generation, without a reset, is adopted (and what the proxy saw of
// each tree forgotten).
func (s *Redis) refresh(ctx context.Context) error {
	cur, err := readIdentity(ctx, s.c)
	if err != nil {
		return s.fail(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur != nil && cur.By == "operator" && cur.Reset == "" && cur.Gen > s.ident.Gen {
		s.seen = forgetLifted(s.seen, cur, s.ident.Gen)
		// The keys' fields of proxies and machines are not rebuilt by an
		// operator's action: only the counts (seen) are kept.
		s.own, s.mseen = nil, nil
		for tag := range s.treeReset {
			if cur.lifts(tag, s.ident.Gen) {
				delete(s.treeReset, tag)
			}
		}
		s.ident = *cur
		s.resetReason = ""
		s.mu.Unlock()
		// The counts the other proxies of the machine kept (one whose
		// calls a recovery left out), and, as at open, a failure is not
		// the call's.
		if st, err := s.readSeenFile(cur.ID); err == nil {
			s.mu.Lock()
			for k, n := range keptSeen(st, *cur) {
				if n > s.seen[k] {
					if s.seen == nil {
						s.seen = make(map[string]int64)
					}
					s.seen[k] = n
				}
			}
			s.mu.Unlock()
		}
		if s.storeSeen(true) == nil {
			s.rememberIdentity(*cur, true)
		}
		s.mu.Lock()
	}
	return nil
}

// resetErr returns the error of a call refused because the store is in
// the reset state, or nil, after reading the store's identity again (an
// operator may have acted).
func (s *Redis) resetErr() error {
	s.mu.Lock()
	why := s.resetReason
	s.mu.Unlock()
	if why == "" {
		return nil
	}
	if err := s.refresh(s.ctx); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.resetReason == "" {
		return nil
	}
	return &ResetError{Store: s.url, Reason: s.resetReason}
}

// ResetReason returns why the store is in the reset state, or "".
func (s *Redis) ResetReason() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.resetReason
}

// newTree is called when a reservation finds no stamp for its tree and
// this proxy has seen none: the tree is new unless the store's identity
// has changed or the set of trees names it (its keys were deleted). For a
// new tree it is added to the set, and the reservation runs again,
// creating the stamp.
//
// listed says a run before this one found the tree listed; then a tree
// still listed is one that lost its keys. errListed asks for that run.
func (s *Redis) newTree(tag string, listed bool) error {
	var idc *redis.MapStringStringCmd
	var member, copyMember *redis.BoolCmd
	_, err := s.c.Pipelined(s.ctx, func(p redis.Pipeliner) error {
		idc = p.HGetAll(s.ctx, identityKey)
		member = p.SIsMember(s.ctx, treesKey, tag)
		copyMember = p.SIsMember(s.ctx, treesCopyKey, tag)
		return nil
	})
	if err != nil {
		return s.fail(err)
	}
	s.mu.Lock()
	id := s.ident
	s.mu.Unlock()
	m := idc.Val()
	if len(m) == 0 {
		return s.resetStore(tag, fmt.Sprintf("its identity %s (generation %d) is gone: Redis was flushed or restarted without persistence", id.ID, id.Gen))
	}
	cur, err := identityOf(m)
	if err != nil {
		return err
	}
	if cur.ID != id.ID || cur.Gen != id.Gen {
		if err := s.refresh(s.ctx); err != nil {
			return err
		}
		s.mu.Lock()
		adopted := s.ident.Gen == cur.Gen
		s.mu.Unlock()
		if !adopted {
			return s.resetStore(tag, changedWhy(*cur, id, "this proxy"))
		}
		return errRetry
	}
	if cur.Reset != "" {
		return s.resetNow(cur.Reset)
	}
	if cur.restLost(tag) {
		// A tree without a stamp on a store whose loss an operator lifted
		// for other trees only: its stamp may be gone with the rest.
		return s.resetTree(tag, fmt.Sprintf("the store lost its data (%s) and an operator has lifted the loss of other delegation trees only", cur.ResetRest))
	}
	if member.Val() || copyMember.Val() {
		// Listed after its stamp was made: a reservation that ran while
		// another made it, which finds it when run again, or a tree whose
		// keys are gone.
		if listed {
			return s.resetTree(tag, fmt.Sprintf("the keys of delegation tree {%s} are gone (deleted or evicted) while the store lists the tree", tag))
		}
		return errListed
	}
	// The reservation runs again, making the tree's stamp; the tree is
	// listed only once it has one (addTree), so that a tree listed without
	// a stamp is one that lost it.
	return errRetry
}

// addTree lists a tree whose stamp a reservation of this proxy made (or
// found made): once per tree and proxy.
func (s *Redis) addTree(tag string) {
	s.mu.Lock()
	done := s.listed[tag]
	s.mu.Unlock()
	if done {
		return
	}
	// Both sets, each in its slot (one round trip on one server).
	_, err := s.c.Pipelined(s.ctx, func(p redis.Pipeliner) error {
		p.SAdd(s.ctx, treesKey, tag)
		p.SAdd(s.ctx, treesCopyKey, tag)
		return nil
	})
	if err != nil {
		return // listed again by the next reservation that makes a stamp
	}
	s.mu.Lock()
	if s.listed == nil {
		s.listed = make(map[string]bool)
	}
	s.listed[tag] = true
	s.mu.Unlock()
}

// errRetry asks Reserve to run its script again, and errListed to run it
// again as for a tree it may not make a stamp for.
var (
	errRetry  = errors.New("retry")
	errListed = errors.New("listed")
)

// resetTree handles a loss found at tree tag: unless the store's
// identity has changed (a loss of the whole store, see resetStore), only
// the tree is marked lost, in its stamp (every proxy's next reservation
// of the tree then refuses, that of a proxy that took the store for a new
// one included) and in this proxy: the other trees, another fleet's on a
// shared Redis, go on.
func (s *Redis) resetTree(tag, why string) error {
	if err := s.storeChanged(tag); err != nil {
		return err
	}
	s.mu.Lock()
	if g := s.ident.Recovered[tag]; g > 0 && strings.Contains(why, "fewer than the") {
		why += fmt.Sprintf(" (store recover rebuilt the tree at generation %d from fewer calls than this proxy saw: run it again with the audit logs of every proxy of the fleet, this proxy's included)", g)
	}
	s.mu.Unlock()
	markStamp(s.ctx, s.c, stampKeyPrefix+"{"+tag+"}", why, s.knownGen())
	s.mu.Lock()
	if s.treeReset == nil {
		s.treeReset = make(map[string]string)
	}
	if s.treeReset[tag] == "" {
		s.treeReset[tag] = why
	}
	s.mu.Unlock()
	return s.treeResetErr(tag)
}

// storeChanged reads the store's identity for a loss found at tree tag:
// nil when it is the one this proxy knows, errRetry when the proxy
// adopted an operator's newer generation, else the error of a loss of
// the whole store.
func (s *Redis) storeChanged(tag string) error {
	cur, err := readIdentity(s.ctx, s.c)
	if err != nil {
		return s.fail(err)
	}
	s.mu.Lock()
	id := s.ident
	s.mu.Unlock()
	switch {
	case cur == nil:
		return s.resetStore(tag, fmt.Sprintf("its identity %s (generation %d) is gone: Redis was flushed or restarted without persistence", id.ID, id.Gen))
	case cur.ID == id.ID && cur.Gen == id.Gen:
		if cur.Reset != "" {
			return s.resetNow(cur.Reset)
		}
		return nil
	}
	if err := s.refresh(s.ctx); err != nil {
		return err
	}
	s.mu.Lock()
	adopted := s.ident.ID == cur.ID && s.ident.Gen == cur.Gen
	s.mu.Unlock()
	if adopted {
		return errRetry
	}
	if cur.Reset != "" && cur.By == "operator" && cur.Gen > id.Gen {
		// An operator's generation that a proxy found lost data since.
		return s.resetNow(cur.Reset)
	}
	return s.resetStore(tag, changedWhy(*cur, id, "this proxy"))
}

// treeResetErr returns the error of a call of tree tag, which this proxy
// found lost, or nil, after reading the store's identity again (an
// operator may have lifted it).
func (s *Redis) treeResetErr(tag string) error {
	s.mu.Lock()
	why := s.treeReset[tag]
	s.mu.Unlock()
	if why == "" {
		return nil
	}
	if err := s.refresh(s.ctx); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if why = s.treeReset[tag]; why == "" {
		return nil
	}
	return &ResetError{Store: s.url, Reason: why, Root: tag}
}

// resetStore is resetTree for a loss of the whole store: every tree's
// stamp is marked (see markStoreReset).
func (s *Redis) resetStore(tag, why string) error {
	markStamp(s.ctx, s.c, stampKeyPrefix+"{"+tag+"}", why, s.knownGen())
	if err := s.markStoreReset(s.ctx, why); err != nil && !errors.Is(err, redisconn.ErrUnavailable) {
		return err
	}
	if err := s.resetErr(); err != nil {
		return err
	}
	return errRetry
}

// resetNow enters the reset state and returns the call's error.
func (s *Redis) resetNow(why string) error {
	if err := s.markReset(s.ctx, why); err != nil && !errors.Is(err, redisconn.ErrUnavailable) {
		return err
	}
	if err := s.resetErr(); err != nil {
		return err
	}
	return errRetry
}

// tagOf returns the hash tag of a stamp, open-reservations or spend key.
func tagOf(redisKey string) string {
	_, rest, _ := strings.Cut(redisKey, "{")
	tag, _, _ := strings.Cut(rest, "}")
	return tag
}

// InitStore gives the Redis spend store at rawURL its identity (see
// identityKey), as an operator: a new store gets one, a store that has
// one is left as it is. With reset the operator accepts that the store
// has lost data: it gets a new generation, which lifts the reset state
// (every proxy adopts it at its next call), and its list of trees is
// made again from the trees' stamps. Without reset, a store that has
// lost its identity, or is in the reset state, is an error saying so.
//
// roots, with reset, limits the loss accepted to the delegation trees of
// those root issuers: other trees marked reset stay so (another fleet's,
// on a shared Redis). stateDir is the operator's state directory (see
// StateDir), whose last generation seen at rawURL the new one follows.
func InitStore(rawURL, stateDir string, reset bool, roots ...string) (Identity, error) {
	c, err := redisconn.Open(rawURL)
	if err != nil {
		return Identity{}, fmt.Errorf("spend store: %w", err)
	}
	defer c.Close()
	ctx := context.Background()
	what := "spend store " + redisconn.Redact(rawURL)
	fail := func(err error) (Identity, error) { return Identity{}, redisconn.Unavailable(what, err) }
	cur, err := readIdentity(ctx, c)
	if err != nil {
		return fail(err)
	}
	if !reset {
		if cur != nil {
			if cur.Reset != "" {
				return *cur, &ResetError{Store: redisconn.Redact(rawURL), Reason: cur.Reset}
			}
			return *cur, nil
		}
		s := &Redis{c: c}
		stamped, err := s.anyKey(ctx, stampKeyPrefix+"*")
		if err != nil {
			return fail(err)
		}
		if !stamped {
			// One key a command: the two sets are in two slots.
			for _, set := range []string{treesKey, treesCopyKey} {
				listed, err := c.Exists(ctx, set).Result()
				if err != nil {
					return fail(err)
				}
				stamped = stamped || listed > 0
			}
		}
		if stamped {
			return Identity{}, &ResetError{Store: redisconn.Redact(rawURL), Reason: "its identity is gone while its delegation trees' stamps (or the list of its trees) remain"}
		}
		// Not "operator": a proxy that saw the store before takes a
		// store that a plain init found empty for one that lost its data,
		// as it would without the init. Only store init --reset and store
		// recover accept or mend a loss.
		n := newIdentity("init", 0)
		res, err := createIdentityScript.Run(ctx, c, []string{identityKey}, n.ID, n.Gen, n.By).Result()
		if err != nil {
			return fail(err)
		}
		m, err := hashMap(res)
		if err != nil {
			return fail(err)
		}
		id, err := identityOf(m)
		if err != nil {
			return Identity{}, err
		}
		return *id, nil
	}
	if cur != nil && cur.Reset == "" && len(roots) > 0 {
		// A root that names no tree the store holds or still has lost
		// (a typo, another fleet's root, the wrong key's did:key) lifts
		// nothing: refused, naming the trees marked reset, rather than
		// told it worked.
		var unknown []string
		for _, r := range roots {
			tag := redisconn.HashTag(r)
			if cur.restLost(tag) {
				continue
			}
			n, err := c.Exists(ctx, stampKeyPrefix+"{"+tag+"}").Result()
			if err != nil {
				return fail(err)
			}
			if n == 0 {
				unknown = append(unknown, r)
			}
		}
		if len(unknown) > 0 {
			marked, err := treesMarkedReset(ctx, c)
			if err != nil {
				return fail(err)
			}
			still := "none"
			if len(marked) > 0 {
				still = strings.Join(marked, ", ")
			}
			return Identity{}, fmt.Errorf("%s: --root %s names no delegation tree of the store: nothing was changed (the roots of the trees marked reset: %s)", what, strings.Join(unknown, ", "), still)
		}
	}
	n, err := nextIdentity(ctx, c, rawURL, stateDir)
	if err != nil {
		return fail(err)
	}
	if err := markNext(ctx, c, n.Gen); err != nil {
		return fail(err)
	}
	var lifted map[string]bool
	if len(roots) > 0 {
		lifted = make(map[string]bool)
		for _, r := range roots {
			lifted[redisconn.HashTag(r)] = true
		}
	}
	// What the trees' keys hold for reservations the loss took is
	// released (settleHeld).
	if _, err := settleHeld(ctx, c, lifted); err != nil {
		return fail(err)
	}
	if err := restamp(ctx, c, *n, lifted); err != nil {
		return fail(err)
	}
	if err := writeIdentity(ctx, c, *n, lifted, true); err != nil {
		if errors.Is(err, ErrIdentityChanged) {
			return Identity{}, fmt.Errorf("spend store %s: %w", redisconn.Redact(rawURL), err)
		}
		return fail(err)
	}
	return *n, nil
}

// treesMarkedReset returns the roots (hash tags) of the trees whose
// stamps are marked reset, sorted.
func treesMarkedReset(ctx context.Context, c redisconn.Client) ([]string, error) {
	var marked []string
	err := redisconn.Scan(ctx, c, stampKeyPrefix+"*", func(keys []string) error {
		for _, k := range keys {
			ok, err := c.HExists(ctx, k, "reset").Result()
			if err != nil {
				return err
			}
			if ok {
				marked = append(marked, tagOf(k))
			}
		}
		return nil
	})
	slices.Sort(marked)
	return marked, err
}

// nextIdentity is the identity an operator's action gives the store at
// rawURL: its own identity (a new one if it has lost it) with a new
// generation. The generation is after every one known: the store's, the
// highest a proxy that found it lost data saw (Identity.Need), and the
// one the operator's own state directory (stateDir) saw at the URL, whatever the
// operator's clock says; the clock only makes generations grow with
// time. (A store that lost its identity before any proxy found it may
// get one before the proxies'; they refuse it, record theirs, and the
// operator's next generation is after it.)
func nextIdentity(ctx context.Context, c redis.Cmdable, rawURL, stateDir string) (*Identity, error) {
	cur, err := readIdentity(ctx, c)
	if err != nil {
		return nil, err
	}
	after := int64(0)
	r := &Redis{rawURL: rawURL, stateDir: stateDir}
	if known, _, err := r.knownIdentity(); err == nil && known != nil {
		after = known.Gen
	} else if other, _, _ := r.otherIndex(); other != nil {
		after = other.Gen
	}
	if cur != nil {
		after = max(after, cur.Gen, cur.Need)
	}
	n := newIdentity("operator", min(after, 1<<63-2))
	n.was = cur
	if cur == nil {
		// The store lost its identity before a proxy found it: an
		// operator who lifts some trees only (--root, store recover)
		// leaves the rest lost (see Identity.ResetRest).
		n.ResetRest = "its identity was gone (Redis flushed or restarted without persistence) when an operator lifted the loss of some delegation trees"
	}
	if cur != nil {
		n.ID = cur.ID
		n.Lifted, n.AllAt, n.Recovered = cur.Lifted, cur.AllAt, cur.Recovered
		// A loss of the whole store that a proxy found and no operator
		// lifted for every tree since (see Identity.ResetRest).
		n.ResetRest, n.ResetExcept = cur.ResetRest, cur.ResetExcept
		if cur.Reset != "" {
			// A loss found since: every tree's, those lifted before too.
			n.ResetRest, n.ResetExcept = cur.Reset, nil
		}
	}
	return n, nil
}

// markNext records in the store's identity (if it has one) the
// generation gen an operator's command is about to give the trees'
// stamps and then the identity: a proxy that meanwhile finds a stamp
// after its generation refuses the call without marking the store lost
// (Redis.operatorActing). writeIdentity drops it.
func markNext(ctx context.Context, c redis.Cmdable, gen int64) error {
	return markNextScript.Run(ctx, c, []string{identityKey}, gen).Err()
}

var markNextScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 1 then redis.call('HSET', KEYS[1], 'next', ARGV[1]) end
return 1
`)

// writeIdentity writes id as the store's identity, last: the proxies
// adopt it at their next call.
// lifted names the trees whose loss it lifts (nil: every tree), added to
// those id (from nextIdentity) says were lifted before: with accept
// (store init --reset) their loss is accepted (the proxies forget the
// counts they saw), else they were rebuilt (store recover: the counts are
// kept).
func writeIdentity(ctx context.Context, c redis.Cmdable, id Identity, lifted map[string]bool, accept bool) error {
	all, was, rec := id.AllAt, map[string]int64{}, map[string]int64{}
	if lifted == nil {
		all = id.Gen
	}
	for t, g := range id.Lifted {
		if g > all {
			was[t] = g
		}
	}
	for t, g := range id.Recovered {
		if g > all {
			rec[t] = g
		}
	}
	for t := range lifted {
		if accept {
			was[t] = id.Gen
		} else {
			rec[t] = id.Gen
		}
	}
	b, _ := json.Marshal(was)
	r, _ := json.Marshal(rec)
	fields := []any{"id", id.ID, "g", id.Gen, "by", id.By, "all", all, "lifted", string(b), "recovered", string(r)}
	if lifted != nil && id.ResetRest != "" {
		// Some trees only lifted: the store-wide loss holds for the rest.
		except := make([]string, 0, len(id.ResetExcept)+len(lifted))
		for t := range id.ResetExcept {
			except = append(except, t)
		}
		for t := range lifted {
			if !id.ResetExcept[t] {
				except = append(except, t)
			}
		}
		slices.Sort(except)
		e, _ := json.Marshal(except)
		fields = append(fields, "reset_rest", id.ResetRest, "reset_except", string(e))
	}
	// Only over the identity the operator's command read: a loss a proxy
	// found and marked meanwhile (Redis flushed again during the command)
	// or another operator's generation is not overwritten.
	read := []any{"", "", "", 0}
	if id.was != nil {
		read = []any{id.was.ID, id.was.Gen, id.was.Reset, id.was.Need}
	}
	ok, err := writeIdentityScript.Run(ctx, c, []string{identityKey}, append(read, fields...)...).Int()
	if err != nil {
		return err
	}
	if ok == 0 {
		return ErrIdentityChanged
	}
	return nil
}

// ErrIdentityChanged is an operator's command that found the store's
// identity changed between its read and its write: nothing is lifted.
var ErrIdentityChanged = errors.New("the store's identity changed while the command ran (a proxy found a new loss, Redis lost its data again, or another operator acted): nothing was lifted; look at the store again (delegateos spend) and run the command again")

// writeIdentityScript replaces the identity hash (KEYS[1]) with the fields
// ARGV[5...] when it is the one an operator read: identity ARGV[1] ("":
// none), generation ARGV[2], reset mark ARGV[3] and need ARGV[4]; it
// returns 1, or 0 when it is not.
var writeIdentityScript = redis.NewScript(`
local cur = redis.call('HMGET', KEYS[1], 'id', 'g', 'reset', 'need')
if (cur[1] or '') ~= ARGV[1] or (tonumber(cur[2] or '') or '') ~= (tonumber(ARGV[2]) or '') or (cur[3] or '') ~= ARGV[3] or (tonumber(cur[4] or '0') or 0) ~= tonumber(ARGV[4]) then
  return 0
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], unpack(ARGV, 5))
return 1
`)

// restamp gives every tree's stamp the identity and generation id, and
// makes the list of trees again from the stamps. It lifts the reset of
// the trees lifted names (of every tree when lifted is nil): a tree
// another root's recovery did not rebuild stays reset.
func restamp(ctx context.Context, c redisconn.Client, id Identity, lifted map[string]bool) error {
	var tags []any
	err := redisconn.Scan(ctx, c, stampKeyPrefix+"*", func(keys []string) error {
		_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, k := range keys {
				lift := "0"
				if lifted == nil || lifted[tagOf(k)] {
					lift = "1"
				}
				restampScript.Eval(ctx, p, []string{k}, id.ID, id.Gen, lift)
			}
			return nil
		})
		for _, k := range keys {
			tags = append(tags, tagOf(k))
		}
		return err
	})
	if err != nil {
		return err
	}
	// Each set in its own transaction: they are in two slots.
	for _, set := range []string{treesKey, treesCopyKey} {
		_, err = c.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Del(ctx, set)
			if len(tags) > 0 {
				p.SAdd(ctx, set, tags...)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// restampScript gives a tree's stamp (KEYS[1]) the identity ARGV[1] and
// generation ARGV[2]; with ARGV[3] = "1" it lifts the tree's loss: drops
// its reset mark (recording the generation it was lifted at in "o", so
// that a mark found before it and landing late is dropped), and the
// marks of its spend keys that are gone (whose loss the operator accepted: else the next reservation finds them gone
// again). The spend keys are the tree's, in its slot.
var restampScript = redis.NewScript(`
redis.call('HSET', KEYS[1], 'id', ARGV[1], 'g', ARGV[2])
if ARGV[3] == '1' then
  redis.call('HDEL', KEYS[1], 'reset')
  redis.call('HSET', KEYS[1], 'o', ARGV[2])
  for _, f in ipairs(redis.call('HKEYS', KEYS[1])) do
    local kind = string.sub(f, 1, 2)
    if (kind == 'k:' or kind == 'r:') and redis.call('EXISTS', string.sub(f, 3)) == 0 then
      redis.call('HDEL', KEYS[1], f)
    elseif kind == 'k:' then
      -- The key's count as it is now is accepted with the loss.
      redis.call('HSET', KEYS[1], f, redis.call('HGET', string.sub(f, 3), 'n') or '1')
    end
  end
end
return 1
`)

// anyTreeReset reports whether the stamp of a tree of usage is marked
// reset: one another root's recovery left so.
func anyTreeReset(ctx context.Context, c redis.Cmdable, usage []Usage) bool {
	seen := map[string]bool{}
	for _, u := range usage {
		if checkKey(u.Key) != nil || seen[stampKey(u.Key)] {
			continue
		}
		seen[stampKey(u.Key)] = true
		if n, err := c.HExists(ctx, stampKey(u.Key), "reset").Result(); err == nil && n {
			return true
		}
	}
	return false
}

// recoverKeyScript makes a spend key (KEYS[1]) hold at least the total
// ARGV[1] (committed, and held: its held reservations are kept), the
// calls ARGV[2] and the last call ARGV[3], and marks it in its tree's
// stamp (KEYS[2]), atomically.
var recoverKeyScript = redis.NewScript(luaDecimal + `
local k, total = KEYS[1], ARGV[1]
local v = fields(k)
if cmp(add(v[1], v[2]), total) < 0 then
  redis.call('HSET', k, 'c', total)
  if v[2] ~= '0' then redis.call('HINCRBY', k, 'c', '-' .. v[2]) end
end
if cmp(v[3], ARGV[2]) < 0 then redis.call('HSET', k, 'n', ARGV[2]) end
if cmp(v[4], ARGV[3]) < 0 then redis.call('HSET', k, 't', ARGV[3]) end
redis.call('HSET', KEYS[2], 'k:' .. k, redis.call('HGET', k, 'n') or '1')
return 1
`)

// RecoverStore rebuilds the spend of the Redis spend store at rawURL from
// usage read elsewhere (the fleet's audit logs), as an operator, and lifts
// its reset state: each key's spend becomes at least what usage says (a
// key the store still holds keeps more, if it holds more, and its held
// reservations), its calls and last call at least usage's; every tree
// gets a stamp, and the store a new generation, written last, which the
// proxies adopt at their next call. stateDir is as for InitStore.
func RecoverStore(rawURL, stateDir string, usage []Usage) (Identity, error) {
	c, err := redisconn.Open(rawURL)
	if err != nil {
		return Identity{}, fmt.Errorf("spend store: %w", err)
	}
	defer c.Close()
	ctx := context.Background()
	fail := func(err error) (Identity, error) {
		return Identity{}, redisconn.Unavailable("spend store "+redisconn.Redact(rawURL), err)
	}
	// Only a store in the reset state, whose proxies refuse every call,
	// is rebuilt: on a store the fleet spends, a rebuild races the
	// proxies' commits, and a store that lost nothing needs none.
	cur, err := readIdentity(ctx, c)
	if err != nil {
		return fail(err)
	}
	restLost := false
	for _, u := range usage {
		restLost = restLost || (cur != nil && cur.restLost(redisconn.HashTag(u.Key)))
	}
	if cur != nil && cur.Reset == "" && !restLost && !anyTreeReset(ctx, c, usage) {
		return Identity{}, fmt.Errorf("spend store %s is not in the reset state (no proxy has found it lost data), and its proxies may be spending: store recover rebuilds only a store whose proxies refuse every call; if it has lost data that no proxy has found yet, stop the fleet, or run a call so that a proxy finds it, and run store recover again", redisconn.Redact(rawURL))
	}
	n, err := nextIdentity(ctx, c, rawURL, stateDir)
	if err != nil {
		return fail(err)
	}
	if err := markNext(ctx, c, n.Gen); err != nil {
		return fail(err)
	}
	// What the trees' keys hold for reservations the loss took is
	// released first (settleHeld), so that the rebuilt spend is not
	// counted short of what the logs hold by it.
	tags := make(map[string]bool)
	for _, u := range usage {
		if err := checkKey(u.Key); err != nil {
			return Identity{}, err
		}
		tags[redisconn.HashTag(u.Key)] = true
	}
	if _, err := settleHeld(ctx, c, tags); err != nil {
		return fail(err)
	}
	lifted := make(map[string]bool)
	for _, u := range usage {
		if err := checkKey(u.Key); err != nil {
			return Identity{}, err
		}
		k := spendKey(u.Key)
		at := int64(0)
		if !u.LastCall.IsZero() {
			at = min(max(u.LastCall.UnixMilli(), 0), maxAt)
		}
		// One script per key: a commit landing meanwhile (in flight when
		// the loss was found) is not overwritten.
		err := recoverKeyScript.Run(ctx, c, []string{k, stampKey(u.Key)}, addSat(u.Committed, u.Reserved), u.Calls, at).Err()
		if err != nil {
			if strings.Contains(err.Error(), "not a decimal") {
				return Identity{}, fmt.Errorf("the key %s: %w", k, err)
			}
			return fail(err)
		}
		lifted[redisconn.HashTag(u.Key)] = true
	}
	if err := restamp(ctx, c, *n, lifted); err != nil {
		return fail(err)
	}
	if err := writeIdentity(ctx, c, *n, lifted, false); err != nil {
		if errors.Is(err, ErrIdentityChanged) {
			return Identity{}, fmt.Errorf("spend store %s: %w", redisconn.Redact(rawURL), err)
		}
		return fail(err)
	}
	return *n, nil
}

// knownGen is the generation of the store this proxy knows.
func (s *Redis) knownGen() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ident.Gen
}
