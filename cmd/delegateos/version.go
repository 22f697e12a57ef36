package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// buildVersion is the module version the binary was built at ("(devel)"
// for a build from a checkout) and the commit, with "+dirty" when the
// checkout had changes ("" when the build recorded none).
func buildVersion() (version, commit string) {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown)", ""
	}
	version = info.Main.Version
	if version == "" {
		version = "(devel)"
	}
	dirty := false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			commit = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if commit != "" && dirty {
		commit += "+dirty"
	}
	return version, commit
}

// writeVersion answers delegateos --version.
func writeVersion(w io.Writer) {
	version, commit := buildVersion()
	if commit != "" {
		commit = ", commit " + commit
	}
	fmt.Fprintf(w, "delegateos %s (%s%s, %s/%s)\n", version, runtime.Version(), commit, runtime.GOOS, runtime.GOARCH)
}
