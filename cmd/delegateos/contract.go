package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/delegateos/delegateos/contract"
	"github.com/delegateos/delegateos/internal/fsutil"
	"github.com/delegateos/delegateos/verify"
)

// maxDocument bounds a JSON document read from a flag, a file or stdin.
const maxDocument = 4 << 20

// readDocument reads a JSON value given as a flag: the JSON itself, "-"
// for standard input or "@FILE".
func readDocument(e *env, flag, arg string) ([]byte, error) {
	var r io.Reader
	switch {
	case arg == "":
		return nil, usagef("%s is required", flag)
	case arg == "-":
		r = e.stdin
	case strings.HasPrefix(arg, "@"):
		f, err := os.Open(arg[1:])
		if err != nil {
			return nil, inputf("%s: %v", flag, err)
		}
		defer f.Close()
		r = f
	default:
		return []byte(arg), nil
	}
	b, err := io.ReadAll(io.LimitReader(r, maxDocument+1))
	if err != nil {
		return nil, inputf("%s: %v", flag, err)
	}
	if len(b) > maxDocument {
		return nil, inputf("%s: larger than %d bytes", flag, maxDocument)
	}
	return b, nil
}

// readContract reads and verifies a contract file ("-" is stdin).
func readContract(e *env, arg string) (*contract.TaskContract, error) {
	if arg != "-" && arg != "" && !strings.HasPrefix(arg, "@") {
		arg = "@" + arg
	}
	b, err := readDocument(e, "--contract", arg)
	if err != nil {
		return nil, err
	}
	c, err := contract.Parse(b)
	if err != nil {
		return nil, inputf("the contract cannot be read: %v", err)
	}
	return c, nil
}

// writeOut writes data to path atomically, or to standard output.
func writeOut(e *env, path string, data []byte) error {
	if path == "" || path == "-" {
		_, err := e.stdout.Write(data)
		return err
	}
	if err := fsutil.WriteFileAtomic(path, data, 0o644); err != nil {
		return inputf("write %s: %v", path, err)
	}
	return nil
}

var contractCreateCmd = &command{
	name: "create",
	args: "--key FILE --title T [--description D] [--inputs JSON] --output-schema JSON --verification JSON --budget MICROCENTS " +
		"(--deadline TIME | --ttl DURATION) [--max-depth N] [--require NS:ACTION...] [--id CT] [--out FILE] [--json]",
	summary: "create and sign a task contract (JSON values may be @FILE or - for stdin)",
	flags: func(fs *pflag.FlagSet) func(*env, []string) error {
		key := fs.String("key", "", "the issuer's key file: the delegator, who signs the contract")
		title := fs.String("title", "", "what the task is, in a few words")
		desc := fs.String("description", "", "what the task asks for")
		inputs := fs.String("inputs", "{}", "the task's inputs: a JSON object")
		schema := fs.String("output-schema", "", "a JSON Schema (draft-07) the output must satisfy")
		spec := fs.String("verification", "", "the VerificationSpec, e.g. '{\"method\":\"schema_match\",\"schema\":{...}}'")
		budget := fs.Int64("budget", -1, "the most the work may cost, in microcents")
		deadline := fs.String("deadline", "", "when the work is due, RFC 3339")
		ttl := fs.Duration("ttl", 0, "the deadline as a duration from now, instead of --deadline")
		depth := fs.Int64("max-depth", 0, "how many times the work may be delegated further")
		require := fs.StringArray("require", nil, "a capability the token must grant, NAMESPACE:ACTION (repeatable)")
		id := fs.String("id", "", "the contract ID (default: a new random ct_ ID)")
		out := fs.String("out", "", "write the contract to FILE instead of standard output")
		fs.Bool("json", true, "output is always JSON: the signed contract")
		return func(e *env, args []string) error {
			if len(args) > 0 {
				return usagef("unexpected argument %q", args[0])
			}
			if *title == "" {
				return usagef("--title is required")
			}
			if *budget < 0 {
				return usagef("--budget is required (microcents, 0 or more)")
			}
			now := time.Now()
			var due time.Time
			switch {
			case *deadline != "" && *ttl != 0:
				return usagef("give --deadline or --ttl, not both")
			case *deadline != "":
				t, err := parseTime("--deadline", *deadline)
				if err != nil {
					return err
				}
				due = t
			case *ttl > 0:
				due = now.Add(*ttl)
			default:
				return usagef("--deadline or --ttl is required")
			}
			k, err := loadKey(*key)
			if err != nil {
				return err
			}
			p := contract.CreateParams{ID: *id, Title: *title, Description: *desc,
				MaxBudgetMicrocents: *budget, Deadline: due, MaxChainDepth: *depth, RequiredCapabilities: *require}
			for _, f := range []struct {
				flag, arg string
				dst       *json.RawMessage
			}{{"--inputs", *inputs, &p.Inputs}, {"--output-schema", *schema, &p.OutputSchema}, {"--verification", *spec, &p.Verification}} {
				b, err := readDocument(e, f.flag, f.arg)
				if err != nil {
					return err
				}
				*f.dst = b
			}
			c, err := contract.Create(k, p, now)
			if err != nil {
				return usagef("%v", err)
			}
			if spec, err := c.Spec(); err == nil {
				if err := knownChecks(spec, verify.DefaultRegistry()); err != nil {
					return usagef("--verification: %v", err)
				}
			}
			b, err := json.MarshalIndent(c, "", "  ")
			if err != nil {
				return err
			}
			return writeOut(e, *out, append(b, '\n'))
		}
	},
}

var contractVerifyCmd = &command{
	name:    "verify",
	args:    "FILE [--json]",
	summary: "check a task contract's signature and structure (exit 0 valid, 1 not)",
	flags: func(fs *pflag.FlagSet) func(*env, []string) error {
		asJSON := fs.Bool("json", false, "print the result as JSON")
		return func(e *env, args []string) error {
			if len(args) != 1 {
				return usagef("give one contract FILE (- for standard input)")
			}
			c, err := readContract(e, args[0])
			if err != nil {
				return err
			}
			verr := c.Verify()
			if *asJSON {
				res := struct {
					Valid    bool   `json:"valid"`
					ID       string `json:"id"`
					Issuer   string `json:"issuer"`
					Problem  string `json:"problem,omitempty"`
					Deadline string `json:"deadline"`
				}{verr == nil, c.ID, c.Issuer, errString(verr), c.Constraints.Deadline}
				if err := writeJSON(e, res); err != nil {
					return err
				}
			} else if verr == nil {
				fmt.Fprintf(e.stdout, "valid: contract %s %q signed by %s, due %s\n", c.ID, c.Task.Title, c.Issuer, c.Constraints.Deadline)
			}
			if verr != nil {
				return checkError{fmt.Sprintf("contract %s is not valid: %v", c.ID, verr)}
			}
			return nil
		}
	},
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

var verifyOutputCmd = &command{
	name:    "verify-output",
	args:    "--contract FILE --output FILE [--judge PROGRAM [--judge-arg ARG]...] [--json]",
	summary: "run a contract's verification on an output and print the CheckResult (exit 0 passed, 1 failed)",
	flags: func(fs *pflag.FlagSet) func(*env, []string) error {
		cfile := fs.String("contract", "", "the task contract file")
		ofile := fs.String("output", "", "the output to verify: a JSON file, or - for standard input")
		judge := fs.String("judge", "", "the llm_judge program: reads the prompt on stdin, prints {\"score\": S, \"reasoning\": \"...\"}")
		judgeArgs := fs.StringArray("judge-arg", nil, "an argument for the judge program (repeatable)")
		fs.Bool("json", true, "output is always JSON: the CheckResult")
		return func(e *env, args []string) error {
			if len(args) > 0 {
				return usagef("unexpected argument %q", args[0])
			}
			if *cfile == "" || *ofile == "" {
				return usagef("--contract and --output are required")
			}
			c, err := readContract(e, *cfile)
			if err != nil {
				return err
			}
			if err := c.Verify(); err != nil {
				return checkError{fmt.Sprintf("contract %s is not valid: %v", c.ID, err)}
			}
			arg := *ofile
			if arg != "-" {
				arg = "@" + arg
			}
			output, err := readDocument(e, "--output", arg)
			if err != nil {
				return err
			}
			spec, err := c.Spec()
			if err != nil {
				return checkError{fmt.Sprintf("contract %s: %v", c.ID, err)}
			}
			v := outputVerifier(e, *judge, *judgeArgs, 0)
			res, err := v.Verify(context.Background(), spec, c.VerifyTask(), json.RawMessage(output))
			if err != nil {
				return checkError{fmt.Sprintf("verification could not run: %v", err)}
			}
			if err := writeJSON(e, res); err != nil {
				return err
			}
			if !res.Passed {
				return checkError{"the output fails the contract's verification"}
			}
			return nil
		}
	},
}

// outputVerifier is the verify.Verifier of the CLI: warnings to stderr and,
// when a judge program is given, llm_judge through it.
func outputVerifier(e *env, judge string, judgeArgs []string, timeout time.Duration) *verify.Verifier {
	v := &verify.Verifier{Warn: func(msg string) { fmt.Fprintf(e.stderr, "warning: %s\n", msg) }}
	if judge != "" {
		v.Judge = &verify.CommandJudge{Command: append([]string{judge}, judgeArgs...), Timeout: timeout}
	}
	return v
}

// knownChecks refuses a spec naming a check function the registry does not
// have: such a contract could never be passed.
func knownChecks(s *verify.Spec, r *verify.Registry) error {
	if s.CheckName != "" {
		if _, err := r.Get(s.CheckName); err != nil {
			return fmt.Errorf("%w (known checks: %s)", err, strings.Join(r.List(), ", "))
		}
	}
	for i := range s.Steps {
		if err := knownChecks(&s.Steps[i], r); err != nil {
			return err
		}
	}
	return nil
}
