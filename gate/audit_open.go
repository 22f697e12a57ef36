package gate

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"

	"go.uber.org/zap"

	"github.com/delegateos/delegateos/audit"
	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/policy"
	"github.com/delegateos/delegateos/receipt"
)

// AuditOptions are what the front opening an audit log adds to its policy.
type AuditOptions struct {
	// PolicyDigest is the hex SHA-256 of the policy file the receipts are
	// made under; "" for a front without one (its built-in defaults are
	// named by the digest of no bytes).
	PolicyDigest string
	// Key is the key file receipts are signed with; "" means the policy's
	// proxy_key. KeyFrom names where it came from, for the messages that
	// say what to fix ("--key"); "" means "proxy_key in the policy".
	Key, KeyFrom string
	// Log is told how the log was opened and closed; nil means
	// zap.NewNop().
	Log *zap.Logger
}

// OpenAudit opens the audit log the policy names, signed with the proxy
// key, for the fronts to hand their decisions and outcomes to; close
// closes it and logs its head. Without an audit log it returns nil. An
// audit log without a key is refused: a key made up on the spot would
// sign evidence nobody could tell from an impostor's. It is apart from
// Open so that a front can take what may still fail (an address, a
// certificate) before the log records that it started.
func OpenAudit(pol *policy.Policy, opts AuditOptions) (l *audit.Log, close func() error, err error) {
	log := opts.Log
	if log == nil {
		log = zap.NewNop()
	}
	keyPath, keyWhat := pol.ProxyKey, "proxy_key in the policy"
	if opts.Key != "" {
		keyPath, keyWhat = opts.Key, "--key"
		if opts.KeyFrom != "" {
			keyWhat = opts.KeyFrom
		}
	}
	if pol.AuditLog == "" {
		if keyPath != "" {
			log.Warn("a proxy key is set but no audit_log: no receipts are written; set audit_log in the policy to keep them")
		}
		return nil, func() error { return nil }, nil
	}
	if keyPath == "" {
		return nil, nil, settingf("audit_log %s needs a key to sign its receipts with: create one with 'delegateos keygen --out proxy.key' and set proxy_key: proxy.key in the policy (or give --key proxy.key)", pol.AuditLog)
	}
	k, err := identity.LoadKeyFile(keyPath)
	if err != nil {
		return nil, nil, storef("the proxy key %s cannot be used: %v; fix %s", keyPath, err, keyWhat)
	}
	aopts := audit.Options{
		Receipts: receiptOptions(pol, opts.PolicyDigest),
		SignEach: pol.Receipts.SignEach,
		OnError: func(err error) {
			log.Error("the audit log cannot be written: no more receipts are kept, and every gated request is refused (evidence_unavailable) until the proxy is restarted", zap.Error(err))
		},
	}
	if audit.IsDir(pol.AuditLog) {
		// A log of this process's own in the directory: the proxies of one
		// policy each write theirs.
		var skipped []error
		l, skipped, err = audit.OpenDir(pol.AuditLog, receipt.NewSigner(k), aopts)
		for _, s := range skipped {
			log.Warn("an audit log in the directory cannot be continued and is left as it is ('delegateos audit verify DIR' reports it); another is used", zap.Error(s))
		}
	} else {
		l, err = audit.Open(pol.AuditLog, receipt.NewSigner(k), aopts)
	}
	if err != nil {
		if errors.Is(err, audit.ErrInUse) {
			return nil, nil, settingf("%v", err)
		}
		return nil, nil, storef("the audit log %s cannot be opened: %v; fix audit_log in the policy", pol.AuditLog, err)
	}
	if n := l.Recovered(); n > 0 {
		log.Warn("the audit log was not closed cleanly (the proxy was killed, or entries were removed from its end): it is continued after a recovery checkpoint at entry recovered_at, and receipts of calls made before that entry may be missing ('delegateos audit verify' reports it)",
			zap.String("audit_log", l.Path()), zap.Int64("recovered_at", n))
	}
	log.Info("receipts are signed and appended to the audit log", zap.String("audit_log", l.Path()), zap.String("proxy_did", k.DID()))
	closeLog := func() error {
		err := l.Close()
		seq, head := l.Head()
		// Kept outside the audit log, these catch a log cut back to an
		// earlier session's end: audit verify --head.
		log.Info("audit log closed", zap.String("audit_log", l.Path()), zap.Int64("entries", seq), zap.String("head", head))
		return err
	}
	return l, closeLog, nil
}

// receiptOptions: a proxy without a policy file names its built-in
// defaults by the digest of no bytes.
func receiptOptions(pol *policy.Policy, h string) receipt.Options {
	if h == "" {
		d := sha256.Sum256(nil)
		h = hex.EncodeToString(d[:])
	}
	return receipt.Options{PolicyHash: h, IncludeArguments: pol.Receipts.IncludeArguments, IncludeResults: pol.Receipts.IncludeResults}
}
