package reputation

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/delegateos/delegateos/identity"
)

// Report is the result of Validate.
type Report struct {
	// Files lists the workspace files checked, e.g. "reputation/bot.md".
	Files []string `json:"files"`
	// Problems lists every problem, sorted by file and line.
	Problems []Problem `json:"problems"`
}

// Errors counts the error-severity problems: the workspace is valid when
// there are none.
func (r *Report) Errors() int { return len(errorsOnly(r.Problems)) }

// Warnings counts the warnings.
func (r *Report) Warnings() int { return len(r.Problems) - r.Errors() }

// Validate checks every file of reputation/ and contracts/ against the
// schemas and rules of RDP §2, §3, §5 and §6, and the workspace as a
// whole: one profile per agent, contracts whose delegateSlug names their
// delegate's profile, stored sample sizes that match the signals. It
// reports every problem found, errors and warnings; the error is only for
// a workspace that cannot be read at all. Hidden files (such as the lock
// files) and files not ending in .md are not workspace files.
func (w *Workspace) Validate() (*Report, error) {
	r := &Report{Problems: []Problem{}, Files: []string{}}
	var problems []Problem
	profiles := map[string]*Profile{}
	byDID := map[string]string{}
	var contracts []*Contract
	for _, sub := range []string{ProfilesDir, ContractsDir} {
		entries, err := os.ReadDir(filepath.Join(w.dir, sub))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			name := e.Name()
			if slug, ok := strings.CutSuffix(name, signalLogSuffix); ok && sub == ProfilesDir {
				if _, err := os.Lstat(w.path(ProfilesDir, slug)); errors.Is(err, fs.ErrNotExist) {
					problems = append(problems, Problem{File: sub + "/" + name, Severity: SeverityWarning,
						Message: fmt.Sprintf("a signal log without its profile %s: its signals belong to no profile (restore the profile, or remove the log)", rel(ProfilesDir, slug))})
				}
				continue
			}
			if strings.HasPrefix(name, ".") || !strings.HasSuffix(name, ".md") {
				continue
			}
			file := sub + "/" + name
			r.Files = append(r.Files, file)
			slug := strings.TrimSuffix(name, ".md")
			if !ValidSlug(slug) {
				problems = append(problems, Problem{File: file, Message: "the file name is not a slug (lowercase letters, digits and hyphens, then .md), so its id cannot match it", Severity: SeverityError})
				continue
			}
			data, err := readFile(filepath.Join(w.dir, sub, name))
			if err != nil {
				problems = append(problems, Problem{File: file, Message: err.Error(), Severity: SeverityError})
				continue
			}
			if sub == ContractsDir {
				lc, ps, _ := parseContractFile(data, slug)
				problems = append(problems, ps...)
				if lc != nil {
					contracts = append(contracts, lc.c)
				}
				continue
			}
			lp, ps, _ := parseProfileFile(data, slug)
			problems = append(problems, ps...)
			if lp == nil {
				continue
			}
			// The profile's signal log holds signals not yet folded in.
			if log, err := w.readSignalLog(slug); err != nil {
				var ve *ValidationError
				if errors.As(err, &ve) {
					problems = append(problems, ve.Problems...)
				} else {
					problems = append(problems, Problem{File: sub + "/" + slug + signalLogSuffix, Message: err.Error(), Severity: SeverityError})
				}
			} else {
				log.merge(lp.p)
			}
			profiles[slug] = lp.p
			problems = append(problems, profileChecks(file, lp.p)...)
			if other, dup := byDID[lp.p.AgentDID]; dup {
				problems = append(problems, Problem{File: file, Field: "agentDid", Severity: SeverityError,
					Message: fmt.Sprintf("%s also has a profile in %s: one agent, one profile", lp.p.AgentDID, rel(ProfilesDir, other))})
			} else {
				byDID[lp.p.AgentDID] = slug
			}
		}
	}
	for _, c := range contracts {
		problems = append(problems, contractChecks(c, profiles)...)
	}
	sort.SliceStable(problems, func(i, j int) bool {
		if problems[i].File != problems[j].File {
			return problems[i].File < problems[j].File
		}
		return problems[i].Line < problems[j].Line
	})
	r.Problems = append(r.Problems, problems...)
	return r, nil
}

// profileChecks are the checks of a valid profile that look at more than
// one field.
func profileChecks(file string, p *Profile) []Problem {
	var ps []Problem
	if strings.HasPrefix(p.AgentDID, "did:key:") {
		if _, err := identity.PublicKeyFromDID(p.AgentDID); err != nil {
			ps = append(ps, Problem{File: file, Field: "agentDid", Severity: SeverityWarning,
				Message: fmt.Sprintf("%s is not an Ed25519 did:key, so no DelegateOS principal matches it", clip(p.AgentDID))})
		}
	}
	counts := map[scoreKey]int{}
	for _, s := range p.Signals {
		counts[s.key()]++
	}
	check := func(field string, m map[string]Dimension, domain bool) {
		for _, name := range sortedDims(m) {
			if n := counts[scoreKey{domain: domain, name: name}]; n != m[name].SampleSize {
				ps = append(ps, Problem{File: file, Field: field + "." + name + ".sampleSize", Severity: SeverityWarning,
					Message: fmt.Sprintf("is %d, but the profile records %d signals for it", m[name].SampleSize, n)})
			}
		}
	}
	check("dimensions", p.Dimensions, false)
	check("domainCompetence", p.DomainCompetence, true)
	return ps
}

// contractChecks relate a valid contract to the profiles.
func contractChecks(c *Contract, profiles map[string]*Profile) []Problem {
	file := rel(ContractsDir, c.Slug)
	p := profiles[c.DelegateSlug]
	if p == nil {
		return nil
	}
	if p.AgentDID != c.Delegate {
		return []Problem{{File: file, Field: "delegateSlug", Severity: SeverityError,
			Message: fmt.Sprintf("names %s, the profile of %s, but the delegate is %s", rel(ProfilesDir, c.DelegateSlug), p.AgentDID, c.Delegate)}}
	}
	if c.Status == Evaluated {
		for _, s := range p.Signals {
			if s.Evidence == c.ID() {
				return nil
			}
		}
		return []Problem{{File: file, Field: "status", Severity: SeverityWarning,
			Message: fmt.Sprintf("the contract is evaluated, but %s holds no signal with evidence %q", rel(ProfilesDir, c.DelegateSlug), c.ID())}}
	}
	return nil
}

func sortedDims(m map[string]Dimension) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
