package mcptest

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// npmInstalls remembers, per interop directory, the outcome of installing
// it: once per test binary.
var npmInstalls sync.Map // dir → *npmInstall

type npmInstall struct {
	once sync.Once
	err  error
}

// NodePackages installs the pinned npm packages of dir (a directory of the
// module, such as "interop/oauth-js", with its package.json and
// package-lock.json) once per test binary, unless its node_modules already
// holds pkg at version, and returns dir's path. The install keeps the lock
// (npm ci where the registry serves every package it names; npm install,
// which skips an optional package the registry here does not serve, where
// it does not) and must leave pkg at version. A machine without Node.js
// 20+ and npm fails the test, saying so: it never passes silently.
func NodePackages(t testing.TB, dir, pkg, version string) string {
	t.Helper()
	path := filepath.Join(ModuleRoot(t), dir)
	v, _ := npmInstalls.LoadOrStore(path, &npmInstall{})
	in := v.(*npmInstall)
	in.once.Do(func() {
		if installedVersion(path, pkg) == version {
			return
		}
		var out []byte
		for _, verb := range []string{"ci", "install"} {
			cmd := exec.Command("npm", verb, "--no-audit", "--no-fund", "--loglevel=error")
			cmd.Dir = path
			if out, in.err = cmd.CombinedOutput(); in.err == nil {
				break
			}
		}
		switch got := installedVersion(path, pkg); {
		case in.err != nil:
			in.err = fmt.Errorf("npm install in %s: %v: %s", dir, in.err, out)
		case got != version:
			in.err = fmt.Errorf("npm installed %s %q in %s, want the pinned %s", pkg, got, dir, version)
		}
	})
	if in.err != nil {
		t.Fatalf("this test needs Node.js 20+ and npm: %v", in.err)
	}
	return path
}

// installedVersion is the version of pkg in dir's node_modules, "" if none.
func installedVersion(dir, pkg string) string {
	b, err := os.ReadFile(filepath.Join(dir, "node_modules", filepath.FromSlash(pkg), "package.json"))
	var p struct{ Version string }
	if err != nil || json.Unmarshal(b, &p) != nil {
		return ""
	}
	return p.Version
}
