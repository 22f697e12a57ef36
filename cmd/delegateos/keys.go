package main

import (
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/spf13/pflag"

	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/policy"
)

type keyInfo struct {
	Principal string `json:"principal"`
	DID       string `json:"did"`
	Name      string `json:"name,omitempty"`
	File      string `json:"file,omitempty"`
}

func printKey(e *env, asJSON bool, k *identity.Keypair, file string) error {
	info := keyInfo{Principal: k.ID(), DID: k.DID(), Name: k.Name(), File: file}
	if asJSON {
		return writeJSON(e, info)
	}
	fmt.Fprintf(e.stdout, "principal %s\ndid       %s\n", info.Principal, info.DID)
	return nil
}

var keygenCmd = &command{
	name:    "keygen",
	args:    "--out FILE [--seed HEX] [--name NAME] [--json]",
	summary: "create an Ed25519 key file (mode 0600) and print its principal ID and did:key",
	flags: func(fs *pflag.FlagSet) func(*env, []string) error {
		out := fs.String("out", "", "key file to create (refuses to overwrite)")
		seed := fs.String("seed", "", "32-byte seed as 64 hex digits (default: random); for tests and reproducible demos only")
		name := fs.String("name", "", "a human name stored in the key file")
		asJSON := fs.Bool("json", false, "print JSON")
		return func(e *env, args []string) error {
			if len(args) > 0 {
				return usagef("unexpected argument %q", args[0])
			}
			if *out == "" {
				return usagef("--out is required")
			}
			var k *identity.Keypair
			var err error
			if *seed != "" {
				b, herr := hex.DecodeString(*seed)
				if herr != nil || len(b) != 32 {
					return usagef("--seed must be 64 hex digits")
				}
				k, err = identity.FromSeed(b, *name)
			} else {
				k, err = identity.Generate(nil, *name)
			}
			if err != nil {
				return err
			}
			if err := identity.SaveKeyFile(*out, k); err != nil {
				return inputError{err}
			}
			return printKey(e, *asJSON, k, *out)
		}
	},
}

var idCmd = &command{
	name:    "id",
	args:    "--key FILE [--did] [--json] | --policy FILE",
	summary: "print the principal ID (or did:key) of a key file, or the did:key the proxy signs receipts with",
	flags: func(fs *pflag.FlagSet) func(*env, []string) error {
		key := fs.String("key", "", "key file")
		policyPath := fs.String("policy", "", "print the did:key of the policy's proxy_key, which signs the proxy's receipts")
		did := fs.Bool("did", false, "print the did:key instead of the principal ID")
		asJSON := fs.Bool("json", false, "print both as JSON")
		return func(e *env, args []string) error {
			if len(args) > 0 {
				return usagef("unexpected argument %q", args[0])
			}
			if *policyPath != "" {
				if *key != "" {
					return usagef("give --key or --policy, not both")
				}
				p, err := policy.Load(*policyPath)
				if err != nil {
					return policyLoadError(*policyPath, err)
				}
				if p.ProxyKey == "" {
					return fixf("the policy %s sets no proxy_key; create a key with 'delegateos keygen --out proxy.key' and set proxy_key: proxy.key", *policyPath)
				}
				*key, *did = p.ProxyKey, true
			}
			k, err := loadKey(*key)
			if err != nil {
				return err
			}
			switch {
			case *asJSON:
				return printKey(e, true, k, "")
			case *did:
				fmt.Fprintln(e.stdout, k.DID())
			default:
				fmt.Fprintln(e.stdout, k.ID())
			}
			return nil
		}
	},
}

func writeJSON(e *env, v any) error {
	enc := json.NewEncoder(e.stdout)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
