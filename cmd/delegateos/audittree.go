package main

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/delegateos/delegateos/audit"
	"github.com/delegateos/delegateos/identity"
)

// writeNew writes b to path (refusing to overwrite), or to standard
// output when path is "".
func writeNew(e *env, path string, b []byte) error {
	if path == "" {
		_, err := e.stdout.Write(b)
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
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
	return nil
}

var auditProveCmd = &command{
	name:    "prove",
	args:    "FILE|--policy FILE --receipt N [--out FILE] [--key-id DID]...",
	summary: "print an inclusion proof bundle of one receipt (the receipt, its Merkle proof and the log's last signed checkpoint), checked offline by 'audit verify-receipt'",
	flags: func(fs *pflag.FlagSet) func(*env, []string) error {
		policyPath := fs.String("policy", "", "read the policy's audit_log")
		n := fs.Int64("receipt", 0, "the entry number of the receipt (audit show lists them)")
		out := fs.String("out", "", "write the bundle to this file (refuses to overwrite; default: standard output)")
		keyIDs := fs.StringArray("key-id", nil, "the did:key the log must be signed by (repeatable)")
		asJSON := fs.Bool("json", false, "with --out, say what was written as JSON ({\"receipt\", \"out\", \"bytes\"}); the bundle itself is JSON")
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
			b, err := audit.Prove(path, *n, audit.VerifyOptions{Trusted: trusted})
			if err != nil {
				return checkError{err.Error()}
			}
			if err := writeNew(e, *out, b); err != nil || !*asJSON || *out == "" {
				return err
			}
			return writeJSON(e, map[string]any{"receipt": *n, "out": *out, "bytes": len(b)})
		}
	},
}

var auditVerifyReceiptCmd = &command{
	name:    "verify-receipt",
	args:    "BUNDLE --key-id DID [--witness DID]... [--json]",
	summary: "check an inclusion proof bundle offline with only the proxy's did:key: its checkpoint is signed by it and the receipt is in the log that checkpoint signs",
	flags: func(fs *pflag.FlagSet) func(*env, []string) error {
		keyID := fs.String("key-id", "", "the proxy's did:key, which signs the log's checkpoints (required)")
		witnesses := fs.StringArray("witness", nil, "the did:key of a witness that must have cosigned the checkpoint (repeatable)")
		asJSON := fs.Bool("json", false, "print the result as JSON: {ok, receipt, kind, digest, size, root, cosigners, problem}")
		return func(e *env, args []string) error {
			if len(args) != 1 {
				return usagef("give one BUNDLE file ('audit prove' writes it)")
			}
			if *keyID == "" {
				return usagef("--key-id DID is required: the proxy's did:key ('delegateos id --policy FILE' prints it)")
			}
			if _, err := trustedKeys(append([]string{*keyID}, *witnesses...)); err != nil {
				return err
			}
			data, err := os.ReadFile(args[0])
			if err != nil {
				return inputError{err}
			}
			b, err := audit.ParseBundle(data)
			var rep *audit.BundleReport
			if err == nil {
				rep, err = b.Verify(*keyID, *witnesses)
			}
			if *asJSON {
				out := map[string]any{"ok": err == nil, "file": args[0]}
				if err != nil {
					out["problem"] = err.Error()
				} else {
					out["receipt"], out["kind"], out["digest"] = b.Receipt, rep.Receipt.Kind, rep.Receipt.Digest
					out["size"], out["root"], out["cosigners"] = rep.Checkpoint.Size, base64.StdEncoding.EncodeToString(rep.Checkpoint.Root[:]), rep.Cosigners
				}
				if jerr := writeJSON(e, out); jerr != nil {
					return jerr
				}
			} else if err == nil {
				fmt.Fprintf(e.stdout, "OK receipt %d (%s, digest %s) is in the log of %s: its checkpoint of %d entries is signed by that key\n",
					b.Receipt, rep.Receipt.Kind, rep.Receipt.Digest, *keyID, rep.Checkpoint.Size)
				for _, w := range rep.Cosigners {
					fmt.Fprintf(e.stdout, "  cosigned by the witness %s\n", w)
				}
			} else {
				fmt.Fprintf(e.stdout, "FAILED %s: %v\n", args[0], err)
			}
			if err != nil {
				return checkError{"the bundle does not verify"}
			}
			return nil
		}
	},
}

var auditConsistencyCmd = &command{
	name:    "consistency",
	args:    "OLD NEW [--key-id DID]... [--json]",
	summary: "check that the audit log NEW extends OLD (a checkpoint, a bundle or an earlier copy of the log): a consistency proof from OLD's signed tree to NEW's",
	flags: func(fs *pflag.FlagSet) func(*env, []string) error {
		keyIDs := fs.StringArray("key-id", nil, "the did:key the logs must be signed by (repeatable)")
		asJSON := fs.Bool("json", false, "print the result as JSON: {ok, old_size, new_size, proof, problem}")
		return func(e *env, args []string) error {
			if len(args) != 2 {
				return usagef("give OLD and NEW")
			}
			trusted, err := trustedKeys(*keyIDs)
			if err != nil {
				return err
			}
			rep, err := audit.Consistency(args[0], args[1], audit.VerifyOptions{Trusted: trusted})
			if *asJSON {
				out := map[string]any{"ok": err == nil}
				if err != nil {
					out["problem"] = err.Error()
				} else {
					proof := make([]string, len(rep.Proof))
					for i, h := range rep.Proof {
						proof[i] = base64.StdEncoding.EncodeToString(h[:])
					}
					out["old_size"], out["new_size"], out["proof"] = rep.Old.Size, rep.New.Size, proof
				}
				if jerr := writeJSON(e, out); jerr != nil {
					return jerr
				}
			} else if err == nil {
				fmt.Fprintf(e.stdout, "OK %s extends %s: its tree of %d entries holds the %d the old checkpoint signed, unchanged\n", args[1], args[0], rep.New.Size, rep.Old.Size)
			} else {
				fmt.Fprintf(e.stdout, "FAILED %v\n", err)
			}
			if err != nil {
				return checkError{"the logs are not consistent"}
			}
			return nil
		}
	},
}

var auditWitnessCmd = &command{
	name:    "witness",
	args:    "--key FILE --log URL|FILE --log-key DID --state FILE [--interval DURATION]",
	summary: "witness an audit log: cosign (C2SP tlog-cosignature) each new checkpoint once its consistency proof shows it extends the last one cosigned, and refuse a forked log",
	flags: func(fs *pflag.FlagSet) func(*env, []string) error {
		keyFile := fs.String("key", "", "the witness's key file (delegateos keygen); its did:key names its cosignatures")
		logArg := fs.String("log", "", "the log: the URL of a 'delegateos serve' (its "+audit.CheckpointPath+" and "+audit.CosignaturePath+"), or an audit log FILE (cosignatures go to FILE.cosignatures)")
		logKey := fs.String("log-key", "", "the did:key that signs the log's checkpoints (the proxy's)")
		state := fs.String("state", "", "the file holding the last checkpoint this witness cosigned (created at the first)")
		interval := fs.Duration("interval", 0, "check again every DURATION until stopped (default: once)")
		asJSON := fs.Bool("json", false, "say what each check did as a JSON line ({\"cosigned\", \"previous\", \"witness\"}, or {\"fork\"}, or {\"error\"})")
		return func(e *env, args []string) error {
			if len(args) > 0 {
				return usagef("unexpected argument %q", args[0])
			}
			if *keyFile == "" || *logArg == "" || *logKey == "" || *state == "" {
				return usagef("give --key, --log, --log-key and --state")
			}
			if _, err := trustedKeys([]string{*logKey}); err != nil {
				return err
			}
			k, err := identity.LoadKeyFile(*keyFile)
			if err != nil {
				return inputf("the witness key %s cannot be used: %v", *keyFile, err)
			}
			var src audit.Source = audit.FileSource{Path: *logArg, LogKey: *logKey}
			if strings.HasPrefix(*logArg, "http://") || strings.HasPrefix(*logArg, "https://") {
				src = audit.URLSource{Base: *logArg, Client: &http.Client{Timeout: 30 * time.Second}}
			}
			w := &audit.Witness{Key: k, LogKey: *logKey, State: *state}
			for {
				r, err := w.Step(src)
				switch {
				case errors.Is(err, audit.ErrFork):
					if *asJSON {
						_ = writeJSONLine(e, map[string]any{"fork": err.Error(), "log": *logArg})
					} else {
						fmt.Fprintf(e.stdout, "FORK %s: %v\n", *logArg, err)
					}
					return checkError{"the log is not an extension of the checkpoint this witness cosigned: not cosigned"}
				case err != nil && *interval == 0:
					return inputf("%s: %v", *logArg, err)
				case err != nil && *asJSON:
					_ = writeJSONLine(e, map[string]any{"error": err.Error(), "log": *logArg})
				case err != nil:
					fmt.Fprintf(e.stderr, "%s: %v\n", *logArg, err)
				case *asJSON:
					_ = writeJSONLine(e, map[string]any{"cosigned": r.New, "previous": r.Old, "witness": k.DID(), "log": *logArg})
				default:
					fmt.Fprintf(e.stdout, "cosigned the checkpoint of %d entries of %s (as %s; the last cosigned was of %d)\n", r.New, *logArg, k.DID(), r.Old)
				}
				if *interval == 0 {
					return nil
				}
				time.Sleep(*interval)
			}
		}
	},
}

// writeJSONLine writes v as one line of JSON (for commands that report
// more than once).
func writeJSONLine(e *env, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = e.stdout.Write(append(b, '\n'))
	return err
}
