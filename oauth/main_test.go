//go:build unix

package oauth_test

import (
	"os"
	"testing"

	"github.com/delegateos/delegateos/internal/mcptest"
)

func TestMain(m *testing.M) { os.Exit(mcptest.Run(m)) }
