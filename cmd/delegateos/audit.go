package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"go.uber.org/zap"

	"github.com/delegateos/delegateos/audit"
	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/internal/render"
	"github.com/delegateos/delegateos/internal/timestamp"
	"github.com/delegateos/delegateos/policy"
	"github.com/delegateos/delegateos/proxy"
	"github.com/delegateos/delegateos/receipt"
)

// openEvidence opens the audit log the policy names (gate.OpenAudit),
// signed with the proxy key (--key, else proxy_key), and turns its errors
// into the CLI's. Without an audit log there is no evidence (nil).
func openEvidence(pol *policy.Policy, policyDigest, keyFlag string, log *zap.Logger) (proxy.Evidence, func() error, error) {
	keyFrom := ""
	if keyFlag != "" {
		keyFrom = "--key"
	}
	l, closeLog, err := gate.OpenAudit(pol, gate.AuditOptions{PolicyDigest: policyDigest, Key: keyFlag, KeyFrom: keyFrom, Log: log})
	var se *gate.SettingError
	var oe *gate.StoreError
	switch {
	case errors.As(err, &se):
		return nil, nil, fixf("%s", se.Error())
	case errors.As(err, &oe):
		return nil, nil, inputf("%s", oe.Error())
	case err != nil:
		return nil, nil, err
	case l == nil:
		// No audit log: a nil interface, not a nil *audit.Log in one.
		return nil, closeLog, nil
	}
	return l, closeLog, nil
}

var auditGroup = &command{
	name:    "audit",
	summary: "verify, show and export the proxy's signed audit log",
	subs:    []*command{auditVerifyCmd, auditShowCmd, auditExportCmd, auditProveCmd, auditVerifyReceiptCmd, auditConsistencyCmd, auditWitnessCmd},
}

// auditFile is the log a command reads: FILE, or the policy's audit_log.
func auditFile(args []string, policyPath string) (string, error) {
	path, _, err := auditPolicyFile(args, policyPath)
	return path, err
}

// auditPolicyFile is auditFile that also returns the policy's proxy_key
// (with --policy).
func auditPolicyFile(args []string, policyPath string) (path, proxyKey string, err error) {
	switch {
	case len(args) > 1:
		return "", "", usagef("unexpected argument %q", args[1])
	case len(args) == 1 && policyPath != "":
		return "", "", usagef("give the audit log as FILE or with --policy, not both")
	case len(args) == 1:
		return args[0], "", nil
	case policyPath == "":
		return "", "", usagef("give the audit log: FILE or --policy FILE")
	}
	p, err := policy.Load(policyPath)
	if err != nil {
		return "", "", policyLoadError(policyPath, err)
	}
	if p.AuditLog == "" {
		return "", "", fixf("the policy %s sets no audit_log", policyPath)
	}
	return p.AuditLog, p.ProxyKey, nil
}

// logKeys are the keys a log read through a policy must be signed by: the
// --key-id values, or else the did:key of the policy's proxy_key.
func logKeys(ids []string, proxyKey string) ([]string, error) {
	if len(ids) > 0 || proxyKey == "" {
		return trustedKeys(ids)
	}
	k, err := identity.LoadKeyFile(proxyKey)
	if err != nil {
		return nil, fixf("the policy's proxy_key %s cannot be read (%v): give the proxy's did:key with --key-id", proxyKey, err)
	}
	return []string{k.DID()}, nil
}

func trustedKeys(ids []string) ([]string, error) {
	for _, id := range ids {
		if _, err := identity.PublicKeyFromDID(id); err != nil {
			return nil, fixf("--key-id %s: %v; give the proxy's did:key ('delegateos id --policy FILE' prints it)", id, err)
		}
	}
	return ids, nil
}

var auditVerifyCmd = &command{
	name:    "verify",
	args:    "FILE|DIR|--policy FILE [--key-id DID]... [--head DIGEST] [--open] [--allow-recovered] [--witness DID]... [--cosignatures FILE] [--json]",
	summary: "check every signature, the hash chain, the Merkle tree and the checkpoints of an audit log or export, or of every log in a directory of logs, offline",
	flags: func(fs *pflag.FlagSet) func(*env, []string) error {
		policyPath := fs.String("policy", "", "read the policy's audit_log, signed by its proxy_key")
		keyIDs := fs.StringArray("key-id", nil, "the did:key every entry must be signed by (repeatable; default: the policy's proxy_key, else the key of the first entry, for every entry)")
		open := fs.Bool("open", false, "the log is still being written: accept entries after its last checkpoint")
		head := fs.String("head", "", "the digest of an entry the log must hold: the head the proxy logged when it closed the log (\"audit log closed\")")
		allowRecovered := fs.Bool("allow-recovered", false, "accept recovery checkpoints (a proxy continued the log after it was killed, or after entries were removed from its end) and list them")
		asJSON := fs.Bool("json", false, "print the report as JSON")
		witnesses := fs.StringArray("witness", nil, "the did:key of a witness that must have cosigned a checkpoint of the log, and whose every cosignature must be of a checkpoint the log holds unchanged (repeatable)")
		cosigs := fs.String("cosignatures", "", "with --witness: the witnesses' cosignatures (default: FILE.cosignatures, where serve and 'audit witness --log FILE' keep them)")
		return func(e *env, args []string) error {
			path, proxyKey, err := auditPolicyFile(args, *policyPath)
			if err != nil {
				return err
			}
			trusted, err := logKeys(*keyIDs, proxyKey)
			if err != nil {
				return err
			}
			if _, err := trustedKeys(*witnesses); err != nil {
				return err
			}
			if *cosigs != "" && len(*witnesses) == 0 {
				return usagef("--cosignatures is for --witness")
			}
			if *head != "" && (len(*head) != 64 || strings.Trim(*head, "0123456789abcdef") != "") {
				return fixf("--head %q: give the 64 lower-case hex digits the proxy logged as head", *head)
			}
			vo := audit.VerifyOptions{Trusted: trusted, Open: *open, Head: *head, AllowRecovered: *allowRecovered}
			if os.Getenv("GOGC") == "" {
				// Verify's live heap is a few batches of lines (tens of MB)
				// whatever the log's size, while it allocates about 2.7 KB an
				// entry: a GC percent of 400 spends about 13% less CPU on a
				// log of a million entries for twice the peak memory (about
				// 100 MB).
				debug.SetGCPercent(400)
			}
			if fi, err := os.Stat(path); err == nil && fi.IsDir() {
				if *head != "" {
					return usagef("--head names the head of one log: give that log's file, not the directory")
				}
				if *cosigs != "" {
					return usagef("--cosignatures names the cosignatures of one log: give that log's file, not the directory (each log's FILE.cosignatures is read)")
				}
				return verifyAuditDir(e, path, vo, *witnesses, *policyPath != "", *asJSON)
			}
			ok, out, err := verifyAuditLog(e, path, vo, *witnesses, *cosigs, *policyPath != "", !*asJSON)
			if err != nil {
				return err
			}
			if *asJSON {
				if err := writeJSON(e, out); err != nil {
					return err
				}
			}
			if !ok {
				return checkError{"the audit log does not verify"}
			}
			return nil
		}
	},
}

// verifyAuditDir verifies every log of a directory of logs (an audit_log
// ending in "/"), each as audit verify FILE would, and fails if any fails
// or there is none.
func verifyAuditDir(e *env, dir string, vo audit.VerifyOptions, witnesses []string, fromPolicy, asJSON bool) error {
	paths, err := audit.DirLogs(dir)
	if err != nil {
		return inputError{err}
	}
	all := true
	var logs []map[string]any
	for _, p := range paths {
		ok, out, err := verifyAuditLog(e, p, vo, witnesses, "", fromPolicy, !asJSON)
		if err != nil {
			return err
		}
		all = all && ok
		logs = append(logs, out)
	}
	if asJSON {
		if logs == nil {
			logs = []map[string]any{}
		}
		if err := writeJSON(e, map[string]any{"ok": all && len(paths) > 0, "dir": dir, "logs": logs}); err != nil {
			return err
		}
	} else if len(paths) == 0 {
		fmt.Fprintf(e.stdout, "FAILED %s: the directory holds no audit log (log-N.jsonl)\n", dir)
	} else {
		fmt.Fprintf(e.stdout, "%d audit logs in %s\n", len(paths), dir)
	}
	if len(paths) == 0 {
		return checkError{"the directory holds no audit log"}
	}
	if !all {
		return checkError{"an audit log of the directory does not verify"}
	}
	return nil
}

// verifyAuditLog verifies the log at path (and, with witnesses, their
// cosignatures in cosigs, by default the log's FILE.cosignatures),
// printing the report unless print is false, and returns whether it
// verified and the report as JSON would show it.
func verifyAuditLog(e *env, path string, vo audit.VerifyOptions, witnesses []string, cosigs string, fromPolicy, print bool) (bool, map[string]any, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, nil, inputError{err}
	}
	defer f.Close()
	rep, verr := audit.Verify(f, vo)
	var wrep *audit.WitnessReport
	if verr == nil && len(witnesses) > 0 {
		file := cosigs
		if file == "" {
			file = audit.CosignaturesFile(path)
		}
		wrep, verr = audit.CheckWitnesses(path, file, witnesses, audit.VerifyOptions{Trusted: vo.Trusted})
	}
	if verr == nil && rep.Export && fromPolicy {
		verr = &audit.Problem{Kind: audit.Malformed, Line: 1, Msg: "the policy's audit_log holds an export, not the log the proxy writes"}
	}
	var prob *audit.Problem
	if verr != nil && !errors.As(verr, &prob) {
		return false, nil, inputf("%s: %v", path, verr)
	}
	out := map[string]any{"ok": verr == nil, "file": path}
	if rep != nil {
		out["report"] = rep
	}
	if wrep != nil {
		out["cosigned"] = wrep.Cosigned
	}
	if prob != nil {
		out["problem"] = map[string]any{"kind": prob.Kind, "line": prob.Line, "entry": prob.Entry, "message": prob.Msg}
	}
	if !print {
		return verr == nil, out, nil
	}
	if verr == nil {
		what := "audit log"
		if rep.Export {
			what = fmt.Sprintf("export of receipt %d", rep.First)
		}
		fmt.Fprintf(e.stdout, "OK %s %s: %d entries (%d to %d), %d checkpoints, head %s\n", what, path, rep.Entries, rep.First, rep.Last, rep.Checkpoints, rep.Head)
		if rep.Unsealed > 0 {
			fmt.Fprintf(e.stdout, "  %d entries after the last checkpoint (open log)\n", rep.Unsealed)
		}
		printRecoveries(e, rep)
		for _, w := range witnesses {
			fmt.Fprintf(e.stdout, "  witness %s cosigned the log up to its checkpoint of %d entries\n", w, wrep.Cosigned[w])
		}
		if rep.Unsigned > 0 {
			fmt.Fprintf(e.stdout, "  %d entries signed by the %d checkpoints of the log's Merkle tree after them, not on their own\n", rep.Unsigned, rep.Trees)
		}
		fmt.Fprintf(e.stdout, "  signed by %s\n", strings.Join(rep.Signers, ", "))
		if len(vo.Trusted) == 0 && len(rep.Signers) > 0 {
			fmt.Fprintf(e.stdout, "  (no --key-id: the log is checked against the key of its first entry, whoever that is; give the proxy's did:key to check who signed)\n")
		}
	} else {
		fmt.Fprintf(e.stdout, "FAILED %s: %v\n", path, prob)
		if prob.Kind == audit.Recovered {
			printRecoveries(e, rep)
			fmt.Fprintf(e.stdout, "  (--allow-recovered accepts them)\n")
		}
	}
	return verr == nil, out, nil
}

// printRecoveries lists a log's recovery checkpoints, one a line.
func printRecoveries(e *env, rep *audit.Report) {
	for _, r := range rep.Recovered {
		fmt.Fprintf(e.stdout, "  line %d: %s: %s\n", r.Line, audit.Recovered, audit.RecoveryMsg(r.Entry))
	}
}

// showEntry is one line of audit show --json.
type showEntry struct {
	Line    int64           `json:"line"`
	Receipt json.RawMessage `json:"receipt"`
}

var auditShowCmd = &command{
	name:    "show",
	args:    "FILE|--policy FILE [--delegation ID] [--since TIME] [--json]",
	summary: "list an audit log's receipts readably (audit verify checks them)",
	flags: func(fs *pflag.FlagSet) func(*env, []string) error {
		policyPath := fs.String("policy", "", "read the policy's audit_log")
		delegation := fs.String("delegation", "", "only receipts of calls made under this delegation (anywhere on the token's chain)")
		since := fs.String("since", "", "only receipts from this time on (RFC 3339, e.g. 2026-11-25T20:00:00Z)")
		asJSON := fs.Bool("json", false, "print each receipt as a JSON line, as it is in the log")
		return func(e *env, args []string) error {
			path, err := auditFile(args, *policyPath)
			if err != nil {
				return err
			}
			var from time.Time
			if *since != "" {
				if from, err = time.Parse(time.RFC3339Nano, *since); err != nil {
					return fixf("--since %q: give an RFC 3339 time such as 2026-11-25T20:00:00Z", *since)
				}
			}
			f, err := os.Open(path)
			if err != nil {
				return inputError{err}
			}
			defer f.Close()
			// Execution receipts name their decision; the decision names
			// the delegations.
			paths := map[string][]string{}
			err = audit.Read(f, func(line int64, rc *receipt.Receipt) error {
				var at string
				var dels []string
				var text string
				switch b := rc.Body.(type) {
				case *receipt.DecisionBody:
					paths[b.AuditID] = b.DelegationPath
					at, dels = b.DecidedAt, b.DelegationPath
					cost := fmt.Sprintf("reserved %d", b.CostReserved)
					why := b.Reason
					if b.DenialType != "" {
						why = b.DenialType + ": " + b.DenialDetail
					}
					text = fmt.Sprintf("decision   %-5s %s %s  %s  %s", b.Decision, b.Method, b.Resource, cost, why)
				case *receipt.ExecutionBody:
					at, dels = b.CompletedAt, paths[b.GateAuditID]
					text = fmt.Sprintf("execution  %-5s %s %s  charged %d  %dµs  %s", b.Status, b.Operation, b.Resource, b.CostCommitted, b.DurationMicros, b.Outcome)
				case *receipt.HumanApprovalBody:
					at = b.DecidedAt
					text = fmt.Sprintf("approval   %-5s %s %s  %s", b.Decision, b.Action, b.Resource, b.Reason)
					if b.AnsweredBy != "" {
						text += fmt.Sprintf(" (%s by %s)", b.AnswerAction, b.AnsweredBy)
					}
				case *receipt.CheckpointBody:
					at = b.At
					final := ""
					if b.Final {
						final = " (final)"
					}
					if b.IsRecovered() {
						final = " (recovered: the log was not closed cleanly before it)"
					}
					text = fmt.Sprintf("checkpoint length %d head %s%s", b.Length, b.Head, final)
				}
				if *delegation != "" && !contains(dels, *delegation) {
					return nil
				}
				if !from.IsZero() {
					if t, err := timestamp.Parse(at); err != nil || t.Before(from) {
						return nil
					}
				}
				if *asJSON {
					// A receipt is canonical JSON: nothing in it acts on a
					// terminal unescaped.
					b, err := json.Marshal(showEntry{Line: line, Receipt: rc.Raw()})
					if err != nil {
						return err
					}
					_, err = e.stdout.Write(append(b, '\n'))
					return err
				}
				// The log may come from anyone: what it says is shown
				// quoted (render.Printable) when it holds anything else than printable text, never acted on by the terminal.
				fmt.Fprintf(e.stdout, "%5d  %s  %s\n", rc.Position().Seq, render.Printable(at), render.Printable(text))
				return nil
			})
			if err != nil {
				return inputf("%s: %v", path, err)
			}
			return nil
		}
	},
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

var auditExportCmd = &command{
	name:    "export",
	args:    "FILE|--policy FILE --receipt N [--avp [--key FILE]] [--out FILE] [--key-id DID]... [--json]",
	summary: "export one receipt with the entries that prove its place in the log, verifiable alone (or, with --avp, the receipt alone, signed on its own)",
	flags: func(fs *pflag.FlagSet) func(*env, []string) error {
		policyPath := fs.String("policy", "", "read the policy's audit_log")
		n := fs.Int64("receipt", 0, "the entry number of the receipt (audit show lists them)")
		out := fs.String("out", "", "write the export to this file (refuses to overwrite; default: standard output)")
		keyIDs := fs.StringArray("key-id", nil, "the did:key the log must be signed by (repeatable)")
		asJSON := fs.Bool("json", false, "with --out, print what was written as JSON (the export itself is JSON lines)")
		avp := fs.Bool("avp", false, "export the receipt alone, signed on its own (an AVP receipt): a receipt the log signs only by its checkpoints is signed now with the proxy key (--key, else the policy's proxy_key)")
		keyFile := fs.String("key", "", "with --avp: the proxy's key file, to sign a receipt that has no proof of its own")
		return func(e *env, args []string) error {
			path, proxyKey, err := auditPolicyFile(args, *policyPath)
			if err != nil {
				return err
			}
			if *n < 1 {
				return usagef("--receipt N is required (an entry number from 1)")
			}
			trusted, err := logKeys(*keyIDs, proxyKey)
			if err != nil {
				return err
			}
			if *keyFile != "" && !*avp {
				return usagef("--key is for --avp")
			}
			var b []byte
			if *avp {
				var signer *receipt.Signer
				if kp := firstNonEmpty(*keyFile, proxyKey); kp != "" {
					k, err := identity.LoadKeyFile(kp)
					if err != nil {
						return inputf("the proxy key %s cannot be used: %v", kp, err)
					}
					signer = receipt.NewSigner(k)
				}
				b, err = audit.ExportAVP(path, *n, audit.VerifyOptions{Trusted: trusted}, signer)
			} else {
				b, err = audit.Export(path, *n, audit.VerifyOptions{Trusted: trusted})
			}
			if err != nil {
				return checkError{err.Error()}
			}
			if *out == "" {
				_, err = e.stdout.Write(b)
				return err
			}
			f, err := os.OpenFile(*out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
			if err != nil {
				return inputError{err}
			}
			if _, err := f.Write(b); err != nil {
				f.Close()
				return inputError{err}
			}
			if err := f.Close(); err != nil {
				return inputError{err}
			}
			if *asJSON {
				return writeJSON(e, map[string]any{"file": *out, "receipt": *n, "entries": bytes.Count(b, []byte("\n")) - 1})
			}
			return nil
		}
	},
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
