//go:build unix

// Package extrastest drives the real delegateos serve binary through the
// parts beside its MCP transport: holder-of-key signatures, revocation
// distribution between two servers, the agent card and /metrics.
package extrastest

import (
	"os"
	"testing"

	"github.com/delegateos/delegateos/internal/mcptest"
)

func TestMain(m *testing.M) { os.Exit(mcptest.Run(m)) }
