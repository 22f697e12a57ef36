package main

import (
	"encoding/json"
	"time"

	"github.com/delegateos/delegateos/internal/mcplist"
	"github.com/delegateos/delegateos/policy"
)

// initTimeout bounds how long 'policy init' and 'policy check --upstream'
// wait for an upstream.
const initTimeout = mcplist.DefaultTimeout

// listUpstreamTools starts an MCP server over stdio, lists every page of
// its tools and stops it again.
func listUpstreamTools(argv []string, timeout time.Duration) ([]policy.StarterTool, error) {
	l, err := mcplist.List(argv, mcplist.Options{Timeout: timeout, ClientName: "delegateos policy init"})
	if err != nil {
		return nil, err
	}
	tools := make([]policy.StarterTool, 0, len(l.Tools))
	for _, t := range l.Tools {
		schema := t.RawInputSchema
		if len(schema) == 0 {
			if schema, err = json.Marshal(t.InputSchema); err != nil {
				schema = nil
			}
		}
		readOnly := t.Annotations.ReadOnlyHint != nil && *t.Annotations.ReadOnlyHint
		tools = append(tools, policy.StarterTool{Name: t.Name, Description: t.Description, InputSchema: schema, ReadOnly: readOnly})
	}
	return tools, nil
}
