package main

import (
	"errors"
	"fmt"
	"github.com/delegateos/delegateos/internal/redisconn"
	iofs "io/fs"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"github.com/delegateos/delegateos/chain"
	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/revocation"
)

// The DelegateOS files of a workspace, next to RDP's reputation/ and
// contracts/ directories, as gate.Open names them.
const (
	wsDelegations   = gate.WorkspaceDelegations
	wsTaskContracts = gate.WorkspaceTaskContracts
	wsAttestations  = gate.WorkspaceAttestations
)

var chainShowCmd = &command{
	name:    "show",
	args:    "[--workspace DIR | --store FILE] [--revocations FILE|URL] [--ended URL] [--format text|mermaid|json] [--name NAME=ID]...",
	summary: "show the delegation chain as a tree with each delegation's status",
	flags: func(fs *pflag.FlagSet) func(*env, []string) error {
		ws := fs.String("workspace", ".", "the workspace directory (its "+wsDelegations+" is read)")
		store := fs.String("store", "", "the delegation log file, instead of --workspace")
		format := fs.String("format", "text", "text (a tree for people), mermaid (a diagram for docs) or json")
		revs := fs.String("revocations", "", "a revocation list (a file, or a redis:// URL): active delegations whose tokens it revokes are shown revoked (a revocation written with 'delegateos revoke' reaches the record only this way)")
		ended := fs.String("ended", "", "the redis:// URL of the ended-delegation set a fleet shares (the policy's ended_delegations): active delegations it records ended are shown with that status")
		names := fs.StringArray("name", nil, "show principal ID (or did:key) ID as NAME (repeatable), e.g. --name alice=did:key:z6Mk...")
		asJSON := fs.Bool("json", false, "the same as --format json")
		return func(e *env, args []string) error {
			if len(args) > 0 {
				return usagef("unexpected argument %q", args[0])
			}
			if *asJSON {
				*format = "json"
			}
			if *format != "text" && *format != "mermaid" && *format != "json" {
				return usagef("--format must be text, mermaid or json")
			}
			label, err := principalNames(*names)
			if err != nil {
				return err
			}
			path := *store
			if path == "" {
				path = filepath.Join(*ws, wsDelegations)
			}
			ds, err := chain.Load(path)
			if errors.Is(err, iofs.ErrNotExist) {
				return inputf("%s does not exist: no delegation has been recorded in this workspace (the proxy records them when its policy sets workspace)", path)
			}
			if err != nil {
				return inputf("%v", err)
			}
			if *ended != "" {
				if !redisconn.IsURL(*ended) {
					return usagef("--ended must be a redis:// or rediss:// URL")
				}
				set, err := chain.LoadEnded(*ended)
				if err != nil {
					return inputf("%v", err)
				}
				for i := range ds {
					// By key; an entry by ID is one an older proxy wrote.
					st, ok := set[ds[i].Key]
					if !ok {
						st, ok = set[ds[i].ID]
					}
					if ok && ds[i].Status == chain.StatusActive {
						ds[i].Status = st
					}
				}
			}
			if *revs != "" {
				list, err := revocation.Load(*revs)
				if err != nil {
					return inputf("%v", err)
				}
				for i := range ds {
					if ds[i].Status != chain.StatusActive {
						continue
					}
					tok, err := dct.Parse(ds[i].DCT.Token)
					if err != nil {
						continue
					}
					if _, revoked, _ := list.Revoked(tok.RevocationIDs(), tok.Signers()); revoked {
						ds[i].Status = chain.StatusRevoked
					}
				}
			}
			switch *format {
			case "json":
				if ds == nil {
					ds = []chain.Delegation{}
				}
				return writeJSON(e, ds)
			case "mermaid":
				fmt.Fprint(e.stdout, chain.Mermaid(chain.Tree(ds), label))
			default:
				if len(ds) == 0 {
					fmt.Fprintln(e.stdout, "no delegations recorded")
					return nil
				}
				for _, l := range chain.Text(chain.Tree(ds), label) {
					fmt.Fprintln(e.stdout, l)
				}
			}
			return nil
		}
	},
}

// principalNames reads --name NAME=ID flags into a label function that
// shows other principals abbreviated.
func principalNames(flags []string) (func(string) string, error) {
	names := map[string]string{}
	for _, f := range flags {
		name, id, ok := strings.Cut(f, "=")
		if !ok || name == "" {
			return nil, usagef("--name %q: write NAME=ID", f)
		}
		pid, err := identity.NormalizePrincipal(id)
		if err != nil {
			return nil, usagef("--name %s: %v", name, err)
		}
		names[pid] = name
	}
	return func(id string) string {
		if n, ok := names[id]; ok {
			return n
		}
		if len(id) > 12 {
			return id[:10] + "…"
		}
		return id
	}, nil
}
