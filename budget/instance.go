package budget

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/delegateos/delegateos/internal/fsutil"
	"github.com/delegateos/delegateos/internal/redisconn"
)

// A machine's ID (machineID) is kept in its state directory, and a state
// directory can be copied: a VM image with it baked in, a container
// image, a backup restored on a second host. Two hosts then raise the one
// field "m:ID" of every key they call, and a store gone back to an older
// snapshot is hidden from one by the other's calls. So each reservation
// also names the instance of the machine that makes it, in the key's
// field "i:ID": a token of the state directory's ID, the host's boot
// (/proc/sys/kernel/random/boot_id) and the directory's device and inode,
// the same for every proxy of the host on that directory, another for a
// copy of it or after a reboot. The state directory lists, in
// machine-instances, every instance it ran as: a reboot (a new instance)
// takes over a key whose field names one it ran as before, while a
// proxy that finds the field naming an instance its directory never ran
// as, with a count of its machine's own to check there, refuses the
// tree's calls (SharedMachineError): another host uses its machine ID.
// So does one that finds the field naming an instance of its directory
// earlier than the one that, as the directory recorded (the counts
// file's "minst", the live records), last raised the key from it: an
// earlier instance writes again only where a copy of the directory runs
// as it beside the later one — another host, or another container of
// the host whose image had the directory baked in (same boot, same
// path, another device and inode) — (a rollback of the store to before
// the later instance's write also takes the count below what the
// directory saw, which is found first). The one exception is a running
// proxy whose directory is no longer the one at its path (moved to
// another disk, a symbolic link pointed at a copy, a remount that gave
// it another device number): it finds the field raised by the
// instance of the directory now at its path, and from then on runs as
// that instance (followPath), as a proxy started there does; a copy in
// another container or on another host is never at its path.

// instancesFile is the state directory's list of the instances it ran
// as, one a line, the earliest first: its token (an earlier version
// wrote a mark of the boot and path after it, read and ignored).
const instancesFile = "machine-instances"

// maxInstances bounds the list: the oldest are dropped first. A key last
// called that many reboots ago, whose field names a dropped instance, is
// refused as another host's until an operator's new generation (store
// init --reset or store recover) lifts it: fail closed.
const maxInstances = 4096

// machineInstance returns the token of this host's instance of the
// machine of state directory dir (ID machine) and the instances the
// directory ran as, this one included (recorded, synced, before any
// reservation names it), each with its rank: the later, the higher.
func machineInstance(dir, machine string) (string, map[string]int, error) {
	token := instanceToken(dir, machine)
	rank, err := readInstances(dir, token)
	return token, rank, err
}

// instanceToken is the token of the instance of machine whose state
// directory is the one now at dir, in this boot of the host.
func instanceToken(dir, machine string) string {
	sum := sha256.Sum256([]byte("delegateos machine instance\n" + machine + "\n" + bootID() + "\n" + dirIdentity(dir)))
	return hex.EncodeToString(sum[:12])
}

// readInstances reads the state directory dir's list of instances, under
// its lock, adding token when it is not listed yet ("": only read).
func readInstances(dir, token string) (map[string]int, error) {
	path := filepath.Join(dir, instancesFile)
	lock, err := lockWait(path + ".lock")
	if err != nil {
		return nil, fmt.Errorf("the state directory %s cannot be written: %w; set DELEGATEOS_STATE_DIR to a directory the proxy can write", dir, err)
	}
	defer lock.Close()
	b, err := readStateFile(path)
	if errors.Is(err, os.ErrNotExist) {
		// Counts that name the instances which raised their keys while
		// the list is gone: it was deleted, and this directory's earlier
		// instances would be taken for another host's.
		counts, err := fsutil.GlobIn(dir, "store-*.seen.json")
		if err != nil {
			return nil, fmt.Errorf("the state directory %s cannot be listed: %w", dir, err)
		}
		for _, c := range counts {
			var st seenState
			if cb, err := readStateFile(c); err == nil && json.Unmarshal(cb, &st) == nil && len(st.MInst) > 0 {
				return nil, fmt.Errorf("%s, the list of the instances this machine's state directory ran as, which its counts file %s names, is gone (deleted): restore it, or accept the loss with delegateos store init --reset and remove the counts files", path, c)
			}
		}
	} else if err != nil {
		return nil, fmt.Errorf("%s cannot be read: %w", path, err)
	}
	hexa := func(v string) bool { return len(v) == 24 && strings.Trim(v, "0123456789abcdef") == "" }
	var list []string
	seen := map[string]int{}
	for _, l := range strings.Split(string(b), "\n") {
		if l == "" {
			continue
		}
		tok, mark, marked := strings.Cut(l, " ")
		if !hexa(tok) || marked && !hexa(mark) {
			return nil, fmt.Errorf("%s is not a list of machine instances delegateos writes: restore it, or remove it (a key last called by an instance it named is then refused as another host's until store init --reset or store recover)", path)
		}
		if _, ok := seen[tok]; !ok {
			seen[tok] = len(list)
			list = append(list, l)
		}
	}
	if _, ok := seen[token]; !ok && token != "" {
		list = append(list, token)
		if len(list) > maxInstances {
			list = list[len(list)-maxInstances:]
		}
		if err := writeFileAtomic(path, []byte(strings.Join(list, "\n")+"\n")); err != nil {
			return nil, fmt.Errorf("the state directory %s cannot be written: %w; set DELEGATEOS_STATE_DIR to a directory the proxy can write", dir, err)
		}
		seen = make(map[string]int, len(list))
		for i, l := range list {
			tok, _, _ := strings.Cut(l, " ")
			seen[tok] = i
		}
	}
	return seen, nil
}

// bootID names this boot of the host: the kernel's boot_id where there
// is one, else the host's name (then a reboot is the same instance, and
// two copies of a state directory are told apart by their directories'
// device and inode only).
func bootID() string {
	if b, err := os.ReadFile("/proc/sys/kernel/random/boot_id"); err == nil {
		if s := strings.TrimSpace(string(b)); s != "" {
			return "boot:" + s
		}
	}
	h, _ := os.Hostname()
	return "host:" + h
}

// SharedMachineError is the refusal of a tree's call by a proxy whose
// machine ID another host uses too: the key's field "i:ID" names an
// instance its state directory never ran as, while its machine has a
// count of its own to check there. It matches redisconn.ErrReset (the
// denial is store_reset): a store gone back to an older snapshot would be
// hidden by the other host's calls.
type SharedMachineError struct {
	Store, Root, Key, Machine, Instance, Dir string
	// Later, when not empty, is the directory's instance after Instance
	// that last raised the key's field from it.
	Later string
}

func (e *SharedMachineError) Error() string {
	why := "which the state directory " + e.Dir + " never ran as"
	if e.Later != "" {
		why = "an instance the state directory " + e.Dir + " ran as before its instance " + e.Later + " raised it, which only a copy of the directory still running as it on another host, or in another container of this one, does"
	}
	return fmt.Sprintf("spend store %s: this machine's ID %s (%s) is used by another host too: %s records the latest reservation of this machine's proxies as made by instance %s, %s (a copy of the state directory on another host, or in another container of this one: a VM or container image with it baked in, a restored backup); that copy's calls raise this machine's count of the calls of the delegation tree of root %s, which would hide a store gone back to an older snapshot, so they are refused; give each host, and each container, a state directory of its own (on the copy: stop its proxies and remove its state directory, or point DELEGATEOS_STATE_DIR at an empty one), then check the tree's spend with 'delegateos store recover --store URL --root %s --audit LOG... --policy FILE' or accept it with 'delegateos store init --store URL --reset --root %s'",
		e.Store, e.Machine, filepath.Join(e.Dir, "machine-id"), e.Key, e.Instance, why, e.Root, e.Root, e.Root)
}

// Is makes errors.Is(err, redisconn.ErrReset) hold.
func (e *SharedMachineError) Is(target error) bool { return target == redisconn.ErrReset }
