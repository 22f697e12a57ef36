package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/policy"
	"github.com/delegateos/delegateos/proxy"
	"github.com/delegateos/delegateos/receipt"
)

// reloader applies a policy file again while proxy or serve runs: on
// SIGHUP, and for serve on POST /reload at --metrics-listen. It reads the
// policy (and checks its pins) exactly as the command did at start, and
// swaps in a snapshot sharing the stores of the one in force
// (gate.Current.Reload). A policy that does not load, or that changes
// what cannot change while running, is refused and logged, and the policy
// in force is kept.
type reloader struct {
	// mu makes each reload whole, from reading the file to the swap: two
	// at once are applied one after the other, so the last to finish is
	// the file as last read.
	mu      sync.Mutex
	stopped bool // the command is ending: its audit log may be closed
	current *gate.Current
	// load reads the policy as the command prepared it at start (its
	// flags applied), and the file's digest ("" for built-in defaults).
	load func() (*policy.Policy, string, error)
	opts gate.Options
	log  *zap.Logger
	// recorded, when set, records each policy about to be swapped in (in
	// the audit log); an error refuses the reload.
	recorded func(hash string, at time.Time) error
	// applied are told of each snapshot swapped in (onApplied).
	applied []func(*gate.Snapshot)
}

// onApplied has f told of each snapshot a reload swaps in, after the swap
// (the metrics' per-tool labels follow the policy).
func (r *reloader) onApplied(f func(*gate.Snapshot)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.applied = append(r.applied, f)
}

// reloadResult is what a reload answers at POST /reload.
type reloadResult struct {
	Reloaded   bool   `json:"reloaded"`
	PolicyHash string `json:"policy_hash,omitempty"`
	// Unchanged says the file was the policy in force: nothing was
	// swapped or recorded (the revocation list was read again).
	Unchanged bool   `json:"unchanged,omitempty"`
	Error     string `json:"error,omitempty"`
}

// reload applies the policy file again; trigger names what asked
// ("SIGHUP", "POST /reload") in the log.
func (r *reloader) reload(trigger string) reloadResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	start := time.Now()
	refused := func(err error) reloadResult {
		r.log.Error("reload refused: the policy in force is kept", zap.String("trigger", trigger), zap.Error(err))
		return reloadResult{Error: err.Error()}
	}
	if r.stopped {
		return refused(errors.New("stopping"))
	}
	pol, digest, err := r.load()
	if err != nil {
		return refused(err)
	}
	opts := r.opts
	opts.PolicyDigest = digest
	hash := policyHash(digest)
	if cur := r.current.Load(); policyHash(cur.PolicyDigest) == hash {
		// The same file again: no new snapshot and no record, so that
		// whoever can reload cannot grow the audit log by reloading.
		if revs := cur.Revocations; revs != nil {
			if err := revs.Reload(); err != nil {
				return refused(fmt.Errorf("the revocation list %s cannot be read now: %w", cur.Policy.RevocationList, err))
			}
		}
		r.log.Info("policy unchanged", zap.String("trigger", trigger), zap.String("policy_hash", hash))
		return reloadResult{Reloaded: true, PolicyHash: hash, Unchanged: true}
	}
	var commit func(*gate.Snapshot) error
	if r.recorded != nil {
		commit = func(*gate.Snapshot) error { return r.recorded(hash, start) }
	}
	s, err := r.current.Reload(pol, opts, commit)
	if err != nil {
		return refused(err)
	}
	for _, f := range r.applied {
		f(s)
	}
	r.log.Info("policy reloaded", zap.String("trigger", trigger), zap.String("policy_hash", hash),
		zap.Duration("took", time.Since(start)))
	return reloadResult{Reloaded: true, PolicyHash: hash}
}

// policyHash is the hex SHA-256 receipts name a policy by: the file's, or
// for built-in defaults that of no bytes.
func policyHash(digest string) string {
	if digest == "" {
		d := sha256.Sum256(nil)
		return hex.EncodeToString(d[:])
	}
	return digest
}

// hangups takes SIGHUP from the start of a command that reloads on it:
// one that arrives while the command starts is kept for onHangup, since
// the policy may have been read before it was changed, and none ends the
// process. stop must be called when the command returns.
func hangups() (c <-chan os.Signal, stop func()) {
	hups := make(chan os.Signal, 1)
	signal.Notify(hups, syscall.SIGHUP)
	return hups, func() { signal.Stop(hups) }
}

// notifyReady tells systemd that serve is ready (sd_notify "READY=1" on
// $NOTIFY_SOCKET, for a unit of Type=notify), once it listens and SIGHUP
// reloads: until then systemd holds back `systemctl reload`, whose SIGHUP
// would end a process that has not taken SIGHUP yet (the Go runtime's
// start, before the command's first line). Without $NOTIFY_SOCKET it does
// nothing.
func notifyReady(log *zap.Logger) {
	addr := os.Getenv("NOTIFY_SOCKET")
	if addr == "" {
		return
	}
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: addr, Net: "unixgram"})
	if err == nil {
		_, err = c.Write([]byte("READY=1"))
		c.Close()
	}
	if err != nil {
		log.Warn("systemd was not told the server is ready (NOTIFY_SOCKET)", zap.String("notify_socket", addr), zap.Error(err))
	}
}

// onHangup reloads on every SIGHUP from hups until stop is called; stop
// waits for a reload under way, and no reload (POST /reload included) is
// applied after it, so the audit log can be closed. Signals that arrive
// during a reload are folded into one more reload, which reads the file
// as it is then.
func (r *reloader) onHangup(hups <-chan os.Signal) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-hups:
				r.reload("SIGHUP")
			case <-done:
				return
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(done)
			wg.Wait()
			r.mu.Lock()
			r.stopped = true
			r.mu.Unlock()
		})
	}
}

// ServeHTTP is POST /reload: 200 with the new policy's hash, or 409 with
// why the policy in force was kept.
func (r *reloader) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "POST to reload the policy", http.StatusMethodNotAllowed)
		return
	}
	res := r.reload("POST " + ReloadPath)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if !res.Reloaded {
		w.WriteHeader(http.StatusConflict)
	}
	_ = json.NewEncoder(w).Encode(res)
}

// ReloadPath is the reload endpoint on serve's --metrics-listen.
const ReloadPath = "/reload"

// reloadPolicy reads the policy file again for a reload, as start did:
// the built-in defaults when there is none, and prepare (the command's
// flags over it) applied.
func reloadPolicy(path string, prepare func(*policy.Policy) error) func() (*policy.Policy, string, error) {
	return func() (*policy.Policy, string, error) {
		pol, digest := policy.Default(), ""
		if path != "" {
			p, d, err := policy.LoadWhole(path)
			if errors.Is(err, policy.ErrHalfWritten) {
				return nil, "", fmt.Errorf("%w; the policy in force is kept: replace the file by a rename (write it beside, then mv it over) and reload again", err)
			}
			if err != nil {
				return nil, "", errors.New(policyLoadError(path, err).Error())
			}
			pol, digest = p, d
		}
		if err := prepare(pol); err != nil {
			return nil, "", err
		}
		return pol, digest, nil
	}
}

// recordReload is how the audit log, when there is one, records a policy
// swapped in: a decision receipt of method delegateos/reload whose
// resource is the policy file (what) and whose policy_context_hash is the
// new policy's, as the receipts of the decisions it makes will be. It is
// queued before the swap, so it comes before all of them in the log.
func recordReload(ev proxy.Evidence, what string) func(hash string, at time.Time) error {
	if ev == nil {
		return nil
	}
	return func(hash string, at time.Time) error {
		if ev.Failed() {
			return errors.New("the audit log cannot be written, so the reload cannot be recorded")
		}
		ev.Decided(&receipt.Decision{Method: ReloadMethod, Target: what, Allowed: true, Enforced: true, At: at, PolicyHash: hash})
		return nil
	}
}

// ReloadMethod is the method of the decision receipt that records a
// reload.
const ReloadMethod = "delegateos/reload"

// reloadTarget names the policy a reload reads, for its receipt.
func reloadTarget(path string) string {
	if path == "" {
		return "(built-in defaults)"
	}
	if abs, err := filepath.Abs(path); err == nil {
		return abs
	}
	return path
}
