package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/internal/render"
)

// Every string an Inspection holds was written by whoever made the token,
// and anyone can make a token: the text and tree formats show each one
// through render.Printable and the Mermaid format through
// render.MermaidText, so no token can forge a line or a diagram element.

var inspectCmd = &command{
	name:    "inspect",
	args:    "--token TOKEN [--format text|tree|mermaid|json] [--name NAME=ID]... [--json]",
	summary: "show a token's chain of blocks and what it grants (does not verify trust)",
	flags: func(fs *pflag.FlagSet) func(*env, []string) error {
		token := fs.String("token", "", "the token; - reads standard input, @FILE reads a file")
		format := fs.String("format", "text", "text (every block in full), tree (the chain from the root issuer to the holder), mermaid (a graph TD diagram for docs) or json")
		names := fs.StringArray("name", nil, "with tree or mermaid, show principal ID (or did:key) ID as NAME (repeatable), e.g. --name alice=did:key:z6Mk...")
		asJSON := fs.Bool("json", false, "the same as --format json")
		return func(e *env, args []string) error {
			if len(args) > 0 {
				return usagef("unexpected argument %q", args[0])
			}
			if *asJSON {
				if fs.Changed("format") && *format != "json" {
					return usagef("--json is --format json; give one of them")
				}
				*format = "json"
			}
			switch *format {
			case "text", "tree", "mermaid", "json":
			default:
				return usagef("--format must be text, tree, mermaid or json")
			}
			if len(*names) > 0 && *format != "tree" && *format != "mermaid" {
				return usagef("--name applies to --format tree and mermaid")
			}
			name, err := inspectNames(*names)
			if err != nil {
				return err
			}
			tok, err := parseToken(e, *token)
			if err != nil {
				return err
			}
			ins := tok.Inspect()
			switch *format {
			case "json":
				return writeJSON(e, ins)
			case "tree":
				writeInspectionTree(e.stdout, ins, name)
			case "mermaid":
				_, err := io.WriteString(e.stdout, inspectionMermaid(ins, name))
				return err
			default:
				writeInspection(e.stdout, ins)
			}
			return nil
		}
	},
}

// inspectNames reads --name NAME=ID flags into a function that shows a
// principal by its name, or by its whole ID: a token's principals are what
// a person inspects it for, so no ID is abbreviated.
func inspectNames(flags []string) (func(string) string, error) {
	names := map[string]string{}
	for _, f := range flags {
		n, id, ok := strings.Cut(f, "=")
		if !ok || n == "" {
			return nil, usagef("--name %q: write NAME=ID", f)
		}
		pid, err := identity.NormalizePrincipal(id)
		if err != nil {
			return nil, usagef("--name %s: %v", n, err)
		}
		names[pid] = n
	}
	return func(id string) string {
		if n, ok := names[id]; ok {
			return n
		}
		return id
	}, nil
}

// writeInspection is the text format: every field of every block.
func writeInspection(w io.Writer, ins dct.Inspection) {
	p := render.Printable
	fmt.Fprintf(w, "%s token, %d block(s)\n", p(ins.Format), len(ins.Blocks))
	writeSignatures(w, ins)
	for i, b := range ins.Blocks {
		indent := strings.Repeat("   ", i)
		fmt.Fprintf(w, "\n%s[%d] %s\n", indent, b.Index, p(b.Kind))
		in := indent + "    "
		if i > 0 {
			fmt.Fprintf(w, "%s└─ ", strings.Repeat("   ", i-1))
			fmt.Fprintf(w, "delegated by %s\n", p(b.Signer))
		} else {
			fmt.Fprintf(w, "%sissuer        %s\n", in, p(b.Signer))
		}
		fmt.Fprintf(w, "%sdelegatee     %s\n", in, p(b.Delegatee))
		fmt.Fprintf(w, "%sdelegation    %s", in, p(b.DelegationID))
		if b.ParentDelegationID != "" {
			fmt.Fprintf(w, " (parent %s)", p(b.ParentDelegationID))
		}
		fmt.Fprintf(w, "\n%scontract      %s\n", in, p(b.ContractID))
		if b.Capabilities != nil {
			fmt.Fprintf(w, "%scapabilities  %s\n", in, capsText(*b.Capabilities))
		}
		if b.MaxBudgetMicrocents != nil {
			fmt.Fprintf(w, "%sbudget        %d microcents\n", in, *b.MaxBudgetMicrocents)
		}
		if b.ExpiresAt != nil {
			fmt.Fprintf(w, "%sexpires       %s\n", in, p(*b.ExpiresAt))
		}
		if b.IssuedAt != "" {
			fmt.Fprintf(w, "%sissued        %s\n", in, p(b.IssuedAt))
		}
		if b.ChainDepth != nil {
			fmt.Fprintf(w, "%schain depth   %d\n", in, *b.ChainDepth)
		}
		if b.MaxChainDepth != nil {
			if b.Kind == "authority" {
				fmt.Fprintf(w, "%smax depth     %d\n", in, *b.MaxChainDepth)
			} else {
				fmt.Fprintf(w, "%sfurther hops  %d\n", in, *b.MaxChainDepth)
			}
		}
		fmt.Fprintf(w, "%srevocation id %s\n", in, p(b.RevocationID))
	}
	fmt.Fprintln(w)
	writeEffective(w, ins, func(id string) string { return id })
}

func writeSignatures(w io.Writer, ins dct.Inspection) {
	if ins.SignaturesValid {
		fmt.Fprintln(w, "signatures: consistent with the keys named in the token (trust in the issuer is checked by 'dct verify --root')")
	} else {
		fmt.Fprintf(w, "signatures: INVALID: %s\n", render.Printable(ins.SignatureProblem))
	}
}

func writeEffective(w io.Writer, ins dct.Inspection, name func(string) string) {
	if ins.Effective == nil {
		fmt.Fprintf(w, "chain: INVALID: %s\n", render.Printable(ins.ChainProblem))
		return
	}
	ef := ins.Effective
	fmt.Fprintf(w, "effective: %s may use %s\n", render.Printable(name(ef.Holder)), capsText(ef.Capabilities))
	fmt.Fprintf(w, "           budget %d microcents, expires %s, depth %d of at most %d\n",
		ef.MaxBudgetMicrocents, render.Printable(ef.ExpiresAt), ef.ChainDepth, ef.MaxChainDepth)
}

func capsText(caps []dct.Capability) string {
	if len(caps) == 0 {
		return "(none)"
	}
	s := make([]string, len(caps))
	for i, c := range caps {
		s[i] = render.Printable(c.String())
	}
	return strings.Join(s, ", ")
}

// writeInspectionTree is the tree format: the root issuer, then each
// block's delegatee one level deeper, with the block's fields under it.
//
//	root  (root issuer)
//	└─ alice  [0] authority
//	   │  capabilities  docs:read:/project/**
//	   │  ...
//	   └─ bob  [1] attenuation
//	         capabilities  (inherited)
func writeInspectionTree(w io.Writer, ins dct.Inspection, name func(string) string) {
	p := render.Printable
	fmt.Fprintf(w, "%s token, %d block(s)\n", p(ins.Format), len(ins.Blocks))
	writeSignatures(w, ins)
	fmt.Fprintln(w)
	if len(ins.Blocks) == 0 {
		writeEffective(w, ins, name)
		return
	}
	above := ins.Blocks[0].Signer
	fmt.Fprintf(w, "%s  (root issuer)\n", p(name(above)))
	for i, b := range ins.Blocks {
		lead := strings.Repeat("   ", i)
		fmt.Fprintf(w, "%s└─ %s  [%d] %s", lead, p(name(b.Delegatee)), b.Index, p(b.Kind))
		if b.Signer != above {
			// Only a broken chain gets here; the line below it says why.
			fmt.Fprintf(w, ", signed by %s", p(name(b.Signer)))
		}
		fmt.Fprintln(w)
		bar := "│"
		if i == len(ins.Blocks)-1 {
			bar = " "
		}
		for _, f := range blockFields(b, p) {
			fmt.Fprintf(w, "%s   %s  %-13s %s\n", lead, bar, f.key, f.value)
		}
		above = b.Delegatee
	}
	fmt.Fprintln(w)
	writeEffective(w, ins, name)
}

// field is one labelled value of a block, as the tree and the diagram
// show it, already escaped.
type field struct{ key, value string }

// blockFields are the fields of b that say what it grants and how to refer
// to it, "(inherited)" where an attenuation keeps its parent's value. Each
// piece of text is passed through esc on its own, so that one hostile
// capability is shown escaped without hiding its neighbours.
func blockFields(b dct.Block, esc func(string) string) []field {
	inherited := esc("(inherited)")
	delegation := esc(b.DelegationID)
	if b.ParentDelegationID != "" {
		delegation += esc(" (parent ") + esc(b.ParentDelegationID) + esc(")")
	}
	fs := []field{{"delegation", delegation}, {"contract", esc(b.ContractID)}}
	caps := inherited
	if b.Capabilities != nil {
		s := make([]string, len(*b.Capabilities))
		for i, c := range *b.Capabilities {
			s[i] = esc(c.String())
		}
		caps = strings.Join(s, esc(", "))
		if len(s) == 0 {
			caps = esc("(none)")
		}
	}
	fs = append(fs, field{"capabilities", caps})
	budget := inherited
	if b.MaxBudgetMicrocents != nil {
		budget = esc(strconv.FormatInt(*b.MaxBudgetMicrocents, 10) + " microcents")
	}
	fs = append(fs, field{"budget", budget})
	expires := inherited
	if b.ExpiresAt != nil {
		expires = esc(*b.ExpiresAt)
	}
	fs = append(fs, field{"expires", expires})
	if b.MaxChainDepth != nil {
		if b.Kind == "authority" {
			depth := int64(0)
			if b.ChainDepth != nil {
				depth = *b.ChainDepth
			}
			fs = append(fs, field{"depth", esc(fmt.Sprintf("%d of at most %d", depth, *b.MaxChainDepth))})
		} else {
			fs = append(fs, field{"further hops", esc(strconv.FormatInt(*b.MaxChainDepth, 10))})
		}
	}
	return append(fs, field{"revocation id", esc(b.RevocationID)})
}

// inspectionMermaid is the mermaid format: a graph TD with a node for the
// root issuer and one for each block's delegatee, labelled with the
// block's fields, an edge down each delegation, and a red node saying why
// when the signatures or the chain are not valid. Node names are generated
// (p0, p1, ...); every label is written by render.MermaidText.
func inspectionMermaid(ins dct.Inspection, name func(string) string) string {
	m := render.MermaidText
	var b strings.Builder
	b.WriteString("graph TD\n")
	if len(ins.Blocks) > 0 {
		above := ins.Blocks[0].Signer
		b.WriteString(`  p0["` + m(name(above)) + `<br/>root issuer"]` + "\n")
		for i, blk := range ins.Blocks {
			node := "p" + strconv.Itoa(i+1)
			b.WriteString("  " + node + `["` + m(name(blk.Delegatee)))
			b.WriteString("<br/>block " + strconv.Itoa(blk.Index) + " #183; " + m(blk.Kind))
			if blk.Signer != above {
				b.WriteString(" #183; signed by " + m(name(blk.Signer)))
			}
			for _, f := range blockFields(blk, m) {
				b.WriteString("<br/>" + m(f.key) + " " + f.value)
			}
			b.WriteString("\"]\n")
			b.WriteString("  p" + strconv.Itoa(i) + " --> " + node + "\n")
			above = blk.Delegatee
		}
		b.WriteString("  class p" + strconv.Itoa(len(ins.Blocks)) + " holder\n")
	}
	var problems []string
	if !ins.SignaturesValid {
		problems = append(problems, "signatures INVALID: "+ins.SignatureProblem)
	}
	if ins.Effective == nil {
		problems = append(problems, "chain INVALID: "+ins.ChainProblem)
	}
	if len(problems) > 0 {
		b.WriteString(`  invalid["`)
		for i, pr := range problems {
			if i > 0 {
				b.WriteString("<br/>")
			}
			b.WriteString(m(pr))
		}
		b.WriteString("\"]\n  class invalid invalid\n")
	}
	b.WriteString("  classDef holder fill:#e3f2fd,stroke:#1e88e5,color:#0d47a1\n")
	b.WriteString("  classDef invalid fill:#ffebee,stroke:#e53935,color:#b71c1c\n")
	return b.String()
}
