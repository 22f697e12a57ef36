package policy

import (
	"crypto/sha256"
	"encoding/hex"

	"gopkg.in/yaml.v3"
)

// ReceiptsConfig is the receipts section: what the proxy's signed receipts
// hold besides hashes.
type ReceiptsConfig struct {
	// IncludeArguments puts a request's params.arguments in clear into its
	// decision receipt; by default only their SHA-256 is.
	IncludeArguments bool
	// IncludeResults puts a response's result in clear into its execution
	// receipt; by default only the response's SHA-256 is.
	IncludeResults bool
}

func (ps *parser) receipts(n *yaml.Node, key string, out *ReceiptsConfig) {
	if n.Kind != yaml.MappingNode {
		ps.errorf(n, key, "must be a mapping with include_arguments and include_results (true or false)")
		return
	}
	ps.mapping(n, key, []string{"include_arguments", "include_results"}, func(k string, v *yaml.Node) {
		switch k {
		case "include_arguments":
			ps.boolean(v, key+"."+k, &out.IncludeArguments)
		case "include_results":
			ps.boolean(v, key+"."+k, &out.IncludeResults)
		}
	})
}

// fileDigest is the hex SHA-256 of a policy file's bytes.
func fileDigest(data []byte) string {
	d := sha256.Sum256(data)
	return hex.EncodeToString(d[:])
}
