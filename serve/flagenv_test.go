package serve_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/internal/mcptest"
)

// serve takes its configuration from DELEGATEOS_<FLAG> (a container's
// environment), and a flag on the command line wins over it.
func TestServeFlagsFromEnvironment(t *testing.T) {
	e := mcptest.NewEnv(t)
	envCert, envKey := filepath.Join(e.Dir, "env.crt"), filepath.Join(e.Dir, "env.key")
	t.Setenv("DELEGATEOS_TLS_CERT", envCert)
	t.Setenv("DELEGATEOS_TLS_KEY", envKey)
	t.Setenv("DELEGATEOS_LISTEN", "127.0.0.1:0")
	_, stderr, code := mcptest.CLI(t, "serve", "--root", e.Root.ID(), "--", "cat")
	if code != 2 || !strings.Contains(stderr, "--tls-cert "+envCert) {
		t.Fatalf("TLS files from the environment: exit %d, %q", code, stderr)
	}
	flagCert, flagKey := filepath.Join(e.Dir, "flag.crt"), filepath.Join(e.Dir, "flag.key")
	_, stderr, code = mcptest.CLI(t, "serve", "--root", e.Root.ID(), "--tls-cert", flagCert, "--tls-key", flagKey, "--", "cat")
	if code != 2 || !strings.Contains(stderr, "--tls-cert "+flagCert) || strings.Contains(stderr, envCert) {
		t.Fatalf("the command line over the environment: exit %d, %q", code, stderr)
	}
	t.Setenv("DELEGATEOS_IDLE_TIMEOUT", "soon")
	_, stderr, code = mcptest.CLI(t, "serve", "--root", e.Root.ID(), "--", "cat")
	if code != 2 || !strings.Contains(stderr, "DELEGATEOS_IDLE_TIMEOUT") {
		t.Fatalf("a malformed variable: exit %d, %q", code, stderr)
	}
}
