package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/policy"
	"github.com/delegateos/delegateos/reputation"
)

var reputationAttestCmd = &command{
	name: "attest",
	args: "(--key FILE --to AGENT --outcome positive|neutral|negative [--weight W] [--context C]\n" +
		"                    [--evidence-hash HEX] [--out FILE] | --import FILE) [--at TIME] [--workspace DIR] [--json]",
	summary: "sign an AVP peer attestation, or import a file of them, and record each as a peer-attestation signal",
	flags: func(fs *pflag.FlagSet) func(*env, []string) error {
		key := fs.String("key", "", "the attester's key file: sign a new attestation with it")
		to := fs.String("to", "", "the agent attested: principal ID or DID")
		outcome := fs.String("outcome", "", "positive, neutral or negative")
		weight := fs.String("weight", "1.0", "how much the outcome counts, 0.0 to 1.0")
		ctx := fs.String("context", "", `the kind of interaction, e.g. "task_completion" (required for negative)`)
		evidence := fs.String("evidence-hash", "", "SHA-256 hex of the interaction's record (required for negative)")
		out := fs.String("out", "", "also write the signed attestation to FILE (JSON), to give to others")
		imp := fs.String("import", "", "a file of attestations from outside (one JSON object or a list), or - for standard input; each is verified")
		at := fs.String("at", "", "when the signals are recorded, RFC 3339 (default: now)")
		dir := workspaceFlag(fs)
		asJSON := fs.Bool("json", false, "print what was recorded as JSON")
		return func(e *env, args []string) error {
			if len(args) > 0 {
				return usagef("unexpected argument %q", args[0])
			}
			when, err := atFlag(*at)
			if err != nil {
				return err
			}
			ws, err := openWorkspace(*dir)
			if err != nil {
				return err
			}
			var atts []reputation.Attestation
			switch {
			case *imp != "" && (*key != "" || *to != "" || *outcome != "" || *out != ""):
				return usagef("--import reads signed attestations: give it alone, without --key, --to, --outcome or --out")
			case *imp != "":
				data, err := readAttestations(e, *imp)
				if err != nil {
					return err
				}
				if atts, err = reputation.ParseAttestations(data); err != nil {
					return inputf("%s: %v", *imp, err)
				}
			default:
				if *to == "" || *outcome == "" {
					return usagef("give --key, --to and --outcome to sign an attestation, or --import FILE")
				}
				k, err := loadKey(*key)
				if err != nil {
					return err
				}
				w, err := strconv.ParseFloat(*weight, 64)
				if err != nil {
					return usagef("--weight must be a number from 0.0 to 1.0")
				}
				toDID, err := reputation.CanonicalDID(*to)
				if err != nil {
					if !reputation.ValidDID(*to) {
						return usagef("--to must be a principal ID or a DID")
					}
					toDID = *to
				}
				a := reputation.Attestation{ToDID: toDID, Outcome: *outcome, Weight: w, Context: *ctx, EvidenceHash: *evidence}
				if err := reputation.SignAttestation(&a, k); err != nil {
					return inputError{err}
				}
				if *out != "" {
					if err := writeAttestation(*out, a); err != nil {
						return err
					}
				}
				atts = []reputation.Attestation{a}
			}
			results, err := ws.RecordAttestations(atts, when)
			if err != nil {
				return repError(err)
			}
			if *asJSON {
				return writeJSON(e, struct {
					Recorded []reputation.AttestationResult `json:"recorded"`
				}{results})
			}
			for _, r := range results {
				a := r.Attestation
				if r.Duplicate {
					fmt.Fprintf(e.stdout, "already recorded: %s attestation of %s by %s in %s\n", a.Outcome, a.ToDID, a.FromDID, r.Profile)
					continue
				}
				fmt.Fprintf(e.stdout, "recorded %s attestation of %s by %s: %s %s in %s\n", a.Outcome, a.ToDID, a.FromDID, reputation.PeerAttestation, fmtScore(r.Signal.Score), r.Profile)
			}
			if *out != "" {
				fmt.Fprintf(e.stdout, "signed attestation written to %s\n", *out)
			}
			return nil
		}
	},
}

// readAttestations reads an attestations file, or standard input for "-",
// up to the size limit.
func readAttestations(e *env, name string) ([]byte, error) {
	var r io.Reader
	if name == "-" {
		r = e.stdin
	} else {
		f, err := os.Open(name)
		if err != nil {
			return nil, inputError{err}
		}
		defer f.Close()
		r = f
	}
	data, err := io.ReadAll(io.LimitReader(r, reputation.MaxAttestationFile+1))
	if err != nil {
		return nil, inputError{err}
	}
	if len(data) > reputation.MaxAttestationFile {
		return nil, inputf("%s is larger than %d bytes", name, reputation.MaxAttestationFile)
	}
	return data, nil
}

// writeAttestation writes a signed attestation as indented JSON, refusing
// to replace a file.
func writeAttestation(path string, a reputation.Attestation) error {
	var b strings.Builder
	if err := writeJSON(&env{stdout: &b}, a); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, os.ErrExist) {
		return inputf("--out %s already exists", path)
	}
	if err != nil {
		return inputError{err}
	}
	if _, err := f.WriteString(b.String()); err != nil {
		f.Close()
		return inputError{err}
	}
	return f.Close()
}

var reputationTrustCmd = &command{
	name: "trust",
	args: "AGENT [--policy FILE | --min-reliability R [--min-confidence C] [--starter-floor --trusted-attester ID... [--min-attesters N]]]\n" +
		"                    [--at TIME] [--workspace DIR] [--json]",
	summary: "show the trust gate's decision about an agent: the score judged, the starter floor, the reason",
	flags: func(fs *pflag.FlagSet) func(*env, []string) error {
		policyPath := fs.String("policy", "", "take the gate from this policy's reputation.trust_gate")
		minRel := fs.String("min-reliability", "", "the lowest decayed reliability allowed, 0.0 to 1.0")
		minConf := fs.String("min-confidence", "0", "the confidence at which --min-reliability starts to apply")
		floor := fs.Bool("starter-floor", false, "apply AVP's starter floor: reliability counts as 0.25 until enough trusted attesters attested the agent")
		trusted := fs.StringArray("trusted-attester", nil, "a trusted attester's principal ID or did:key (repeatable; with --starter-floor)")
		minAtt := fs.Int("min-attesters", reputation.DefaultFloorAttesters, "how many trusted attesters lift the starter floor")
		at := fs.String("at", "", "read the score as of this RFC 3339 time (default: now)")
		dir := workspaceFlag(fs)
		asJSON := fs.Bool("json", false, "print JSON")
		return func(e *env, args []string) error {
			if len(args) != 1 {
				return usagef("give exactly one AGENT: a principal ID, a DID or a profile slug")
			}
			var g *policy.TrustGate
			switch {
			case *policyPath != "" && (*minRel != "" || *floor || len(*trusted) > 0):
				return usagef("give --policy or the gate's flags, not both")
			case *policyPath != "":
				p, err := policy.Load(*policyPath)
				if err != nil {
					return policyLoadError(*policyPath, err)
				}
				if g = p.Reputation.TrustGate; g == nil {
					return inputf("%s has no reputation.trust_gate", *policyPath)
				}
				if p.Workspace != "" && !fs.Changed("workspace") {
					*dir = p.Workspace
				}
			default:
				if *minRel == "" {
					return usagef("give --policy FILE or --min-reliability R")
				}
				g = &policy.TrustGate{}
				for flag, v := range map[string]*float64{"--min-reliability": &g.MinReliability, "--min-confidence": &g.MinConfidence} {
					s := map[string]string{"--min-reliability": *minRel, "--min-confidence": *minConf}[flag]
					f, err := strconv.ParseFloat(s, 64)
					if err != nil || !(f >= 0 && f <= 1) {
						return usagef("%s must be a number from 0.0 to 1.0", flag)
					}
					*v = f
				}
				if len(*trusted) > 0 && !*floor {
					return usagef("--trusted-attester goes with --starter-floor")
				}
				if *floor {
					if *minAtt < 1 {
						return usagef("--min-attesters must be at least 1")
					}
					g.StarterFloor = &policy.StarterFloor{MinAttesters: *minAtt}
					for _, t := range *trusted {
						id, err := identity.NormalizePrincipal(t)
						if err != nil {
							return usagef("--trusted-attester %q is not a principal ID or did:key", t)
						}
						g.StarterFloor.TrustedAttesters = append(g.StarterFloor.TrustedAttesters, id)
					}
				}
			}
			tg, err := gate.TrustGateOf(g)
			if err != nil {
				return inputError{err}
			}
			when, err := atFlag(*at)
			if err != nil {
				return err
			}
			ws, err := openWorkspace(*dir)
			if err != nil {
				return err
			}
			v, err := ws.Trust(args[0], when)
			if err != nil {
				return repError(err)
			}
			r := tg.Report(v)
			if *asJSON {
				return writeJSON(e, r)
			}
			decision := "refused"
			if r.Allowed {
				decision = "allowed"
			}
			agent := r.Agent
			if agent == "" {
				agent = args[0]
			}
			fmt.Fprintf(e.stdout, "%s: %s\n", agent, decision)
			switch {
			case r.FloorApplied:
				fmt.Fprintf(e.stdout, "score judged:  %s (starter floor applied)\n", fmtScore(r.Score))
			case r.Known:
				fmt.Fprintf(e.stdout, "score judged:  %s\n", fmtScore(r.Score))
			default:
				fmt.Fprintln(e.stdout, "score judged:  none (unknown)")
			}
			if r.Known {
				fmt.Fprintf(e.stdout, "reliability:   %s (confidence %.2f, %s)\n", fmtScore(r.Reliability), r.Confidence, countOf(r.SampleSize, "signal"))
			} else {
				fmt.Fprintln(e.stdout, "reliability:   unknown")
			}
			if g.StarterFloor != nil {
				fmt.Fprintf(e.stdout, "floor_applied: %t (%d of %d trusted attesters)\n", r.FloorApplied, len(r.TrustedAttesters), r.MinAttesters)
			}
			fmt.Fprintf(e.stdout, "reason:        %s\n", r.Reason)
			return nil
		}
	},
}
