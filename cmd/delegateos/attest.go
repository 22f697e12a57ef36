package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/delegateos/delegateos/attest"
	"github.com/delegateos/delegateos/contract"
)

var attestCreateCmd = &command{
	name: "create",
	args: "--key FILE --contract FILE --delegation DEL [--token TOKEN] --output FILE [--failed] [--hash-only] --cost MICROCENTS " +
		"[--duration D] [--child ATT_ID]... [--no-outcome] [--out FILE] [--json]",
	summary: "sign an attestation of work done under a contract; the contract's verification is run on the output and claimed",
	flags: func(fs *pflag.FlagSet) func(*env, []string) error {
		key := fs.String("key", "", "the attester's key file: the delegatee who did the work")
		cfile := fs.String("contract", "", "the task contract file")
		del := fs.String("delegation", "", "the delegation ID the work was done under")
		token := fs.String("token", "", "the token of that delegation (its last block is DEL; or @FILE, - for stdin): the attestation names its delegation key, so no other delegation with the same IDs can be completed with it")
		ofile := fs.String("output", "", "the output: a JSON file, or - for standard input")
		failed := fs.Bool("failed", false, "attest that the work failed (result.success false)")
		hashOnly := fs.Bool("hash-only", false, "record the output's hash instead of the output")
		cost := fs.Int64("cost", -1, "what the work cost, in microcents (children's costs included)")
		duration := fs.Duration("duration", 0, "how long the work took")
		children := fs.StringArray("child", nil, "the attestation ID of a delegated sub-task (repeatable)")
		noOutcome := fs.Bool("no-outcome", false, "do not run the contract's verification and claim its outcome")
		judge := fs.String("judge", "", "the llm_judge program, if the contract's verification needs one")
		judgeArgs := fs.StringArray("judge-arg", nil, "an argument for the judge program (repeatable)")
		out := fs.String("out", "", "write the attestation to FILE instead of standard output")
		fs.Bool("json", true, "output is always JSON: the signed attestation")
		return func(e *env, args []string) error {
			if len(args) > 0 {
				return usagef("unexpected argument %q", args[0])
			}
			switch {
			case *cfile == "" || *del == "" || *ofile == "":
				return usagef("--contract, --delegation and --output are required")
			case *cost < 0:
				return usagef("--cost is required (microcents, 0 or more)")
			case *duration < 0:
				return usagef("--duration must not be negative")
			}
			k, err := loadKey(*key)
			if err != nil {
				return err
			}
			c, err := readContract(e, *cfile)
			if err != nil {
				return err
			}
			arg := *ofile
			if arg != "-" {
				arg = "@" + arg
			}
			output, err := readDocument(e, "--output", arg)
			if err != nil {
				return err
			}
			p := attest.CreateParams{ContractID: c.ID, DelegationID: *del, Success: !*failed, Output: output,
				HashOnly: *hashOnly, CostMicrocents: *cost, DurationMs: duration.Milliseconds(), Children: *children}
			if *token != "" {
				tok, err := parseToken(e, *token)
				if err != nil {
					return err
				}
				st := tok.Unverified()
				last := st.Authority.DelegationID
				if n := len(st.Attenuations); n > 0 {
					last = st.Attenuations[n-1].DelegationID
				}
				if last != *del {
					return usagef("--token delegates %s in its last block, not --delegation %s", last, *del)
				}
				keys := tok.DelegationKeys()
				p.DelegationKey = keys[len(keys)-1]
			}
			if !*noOutcome {
				spec, err := c.Spec()
				if err != nil {
					return checkError{fmt.Sprintf("contract %s: %v", c.ID, err)}
				}
				v := outputVerifier(e, *judge, *judgeArgs, 0)
				res, err := v.Verify(context.Background(), spec, c.VerifyTask(), json.RawMessage(output))
				if err != nil {
					return checkError{fmt.Sprintf("the contract's verification could not run (use --no-outcome to attest without it): %v", err)}
				}
				p.Outcome = attest.NewOutcome(spec.Method, res)
			}
			a, err := attest.Create(k, p, time.Now())
			if err != nil {
				return usagef("%v", err)
			}
			b, err := json.MarshalIndent(a, "", "  ")
			if err != nil {
				return err
			}
			return writeOut(e, *out, append(b, '\n'))
		}
	},
}

var attestVerifyCmd = &command{
	name:    "verify",
	args:    "FILE (--contract FILE... | --workspace DIR) [--attestations DIR] [--judge PROGRAM [--judge-arg ARG]...] [--json]",
	summary: "verify an attestation against its contract (§7.3), children included: a report (exit 0 passed, 1 not)",
	flags: func(fs *pflag.FlagSet) func(*env, []string) error {
		cfiles := fs.StringArray("contract", nil, "a contract file (repeatable: the attestation's and its children's)")
		ws := fs.String("workspace", "", "a workspace: contracts from its "+wsTaskContracts+"/, children from its "+wsAttestations+"/")
		adir := fs.String("attestations", "", "a directory of child attestations (att_*.json)")
		judge := fs.String("judge", "", "the llm_judge program, if a contract's verification needs one")
		judgeArgs := fs.StringArray("judge-arg", nil, "an argument for the judge program (repeatable)")
		asJSON := fs.Bool("json", false, "print the report as JSON")
		return func(e *env, args []string) error {
			if len(args) != 1 {
				return usagef("give one attestation FILE (- for standard input)")
			}
			if (len(*cfiles) == 0) == (*ws == "") {
				return usagef("give --contract FILE (repeatable) or --workspace DIR")
			}
			arg := args[0]
			if arg != "-" {
				arg = "@" + arg
			}
			b, err := readDocument(e, "FILE", arg)
			if err != nil {
				return err
			}
			a, err := attest.Parse(b)
			if err != nil {
				return inputf("the attestation cannot be read: %v", err)
			}
			var contracts contract.Store = &contract.Memory{}
			var atts attest.Store = &attest.Memory{}
			if *ws != "" {
				if contracts, err = openExisting(filepath.Join(*ws, wsTaskContracts), func(p string) (contract.Store, error) { return contract.OpenDir(p) }); err != nil {
					return err
				}
				if atts, err = openExisting(filepath.Join(*ws, wsAttestations), func(p string) (attest.Store, error) { return attest.OpenDir(p) }); err != nil {
					return err
				}
			}
			for _, f := range *cfiles {
				c, err := readContract(e, f)
				if err != nil {
					return err
				}
				if err := contracts.Put(c); err != nil {
					return checkError{fmt.Sprintf("contract %s: %v", f, err)}
				}
			}
			if *adir != "" {
				if atts, err = openExisting(*adir, func(p string) (attest.Store, error) { return attest.OpenDir(p) }); err != nil {
					return err
				}
			}
			v := &attest.Verifier{Contracts: contracts, Attestations: atts, Output: outputVerifier(e, *judge, *judgeArgs, 0)}
			report, verr := v.Verify(context.Background(), a)
			if report == nil {
				return checkError{fmt.Sprintf("attestation %s could not be verified: %v", a.ID, verr)}
			}
			if *asJSON {
				if err := writeJSON(e, report); err != nil {
					return err
				}
			} else {
				writeReport(e, report, "")
			}
			if report.Verdict != attest.Passed {
				return checkError{fmt.Sprintf("attestation %s: %s", a.ID, report.Verdict)}
			}
			return nil
		}
	},
}

// openExisting opens a store directory that must already exist: a
// mistyped path must not read as "no contracts".
func openExisting[S any](dir string, open func(string) (S, error)) (S, error) {
	var zero S
	if _, err := os.Stat(dir); err != nil {
		return zero, inputf("%v", err)
	}
	s, err := open(dir)
	if err != nil {
		return zero, inputf("%v", err)
	}
	return s, nil
}

// writeReport prints an attestation report for people, children indented.
func writeReport(e *env, r *attest.Report, indent string) {
	fmt.Fprintf(e.stdout, "%sattestation %s for contract %s by %s: %s\n", indent, r.AttestationID, r.ContractID, r.Principal, strings.ToUpper(string(r.Verdict)))
	for _, st := range r.Steps {
		line := fmt.Sprintf("%s  %-14s %s", indent, st.Name, st.Status)
		if st.Check != nil && st.Check.Score != nil {
			line += fmt.Sprintf(" (score %.2f)", *st.Check.Score)
		}
		if st.Detail != "" {
			line += ": " + oneLine(st.Detail)
		}
		fmt.Fprintln(e.stdout, line)
	}
	for _, c := range r.Children {
		writeReport(e, c, indent+"    ")
	}
}
