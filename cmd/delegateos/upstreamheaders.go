package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"os"
	"strings"

	"github.com/delegateos/delegateos/internal/fsutil"
)

// maxHeaderFile bounds the --upstream-headers file.
const maxHeaderFile = 64 << 10

// bridgeHeaders are the headers the bridge to an --upstream-url sets
// itself: a configured one would break the protocol or the framing.
var bridgeHeaders = map[string]bool{
	"Host": true, "Content-Length": true, "Content-Type": true, "Accept": true, "Transfer-Encoding": true,
	"Connection": true, "Te": true, "Upgrade": true, "Trailer": true, "Keep-Alive": true,
	"Mcp-Session-Id": true, "Mcp-Protocol-Version": true, "Last-Event-Id": true,
}

// upstreamHeaders reads the headers sent with every request to an
// --upstream-url: the "Name: value" lines of file (blank lines and lines
// starting with # skipped), and for each NAME=VAR of envs, header NAME
// with the value of the environment variable VAR, so that a credential
// need not be on the command line, where every user of the machine can
// read it.
func upstreamHeaders(file string, envs []string, getenv func(string) string) (http.Header, error) {
	h := http.Header{}
	add := func(where, name, value string) error {
		if !validHeaderName(name) {
			return fmt.Errorf("%s: %q is not a header name", where, name)
		}
		key := textproto.CanonicalMIMEHeaderKey(name)
		if bridgeHeaders[key] {
			return fmt.Errorf("%s: %s is set by the bridge to the upstream itself", where, key)
		}
		if value == "" || strings.ContainsAny(value, "\r\n\x00") {
			return fmt.Errorf("%s: the value of %s is empty or holds a line break", where, key)
		}
		h[key] = append(h[key], value)
		return nil
	}
	if file != "" {
		data, err := readHeaderFile(file)
		if err != nil {
			return nil, err
		}
		hs, err := parseHeaderLines(data)
		if err != nil {
			return nil, fmt.Errorf("--upstream-headers %s: %w", file, err)
		}
		for _, kv := range hs {
			if err := add("--upstream-headers "+file, kv[0], kv[1]); err != nil {
				return nil, err
			}
		}
	}
	for _, e := range envs {
		name, v, ok := strings.Cut(e, "=")
		if !ok || v == "" {
			return nil, fmt.Errorf("--upstream-header-env %q: give NAME=VARIABLE, e.g. Authorization=UPSTREAM_AUTH", e)
		}
		value := getenv(v)
		if value == "" {
			return nil, fmt.Errorf("--upstream-header-env %s: the environment variable %s is not set", e, v)
		}
		if err := add("--upstream-header-env "+e, name, value); err != nil {
			return nil, err
		}
	}
	return h, nil
}

// readHeaderFile reads the headers file: a regular file, at most
// maxHeaderFile bytes.
func readHeaderFile(path string) ([]byte, error) {
	f, err := fsutil.OpenRegular(path)
	if err != nil {
		return nil, fmt.Errorf("--upstream-headers: %w", err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("--upstream-headers %s is not a regular file", path)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxHeaderFile+1))
	if err != nil {
		return nil, fmt.Errorf("--upstream-headers %s: %w", path, err)
	}
	if len(data) > maxHeaderFile {
		return nil, fmt.Errorf("--upstream-headers %s is over %d bytes", path, maxHeaderFile)
	}
	return data, nil
}

// parseHeaderLines reads "Name: value" lines; the value is trimmed of
// surrounding spaces. Blank lines and lines starting with # are skipped.
func parseHeaderLines(data []byte) ([][2]string, error) {
	var out [][2]string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), maxHeaderFile+1)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSuffix(sc.Text(), "\r")
		if t := strings.TrimSpace(line); t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		name, value, ok := strings.Cut(line, ":")
		if !ok {
			return nil, fmt.Errorf("line %d is not 'Name: value'", n)
		}
		out = append(out, [2]string{name, strings.TrimSpace(value)})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// headerFileWarning says when the headers file may be read by other users.
func headerFileWarning(path string) string {
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm()&0o077 == 0 {
		return ""
	}
	return fmt.Sprintf("the --upstream-headers file %s may be read by other users (mode %s): it holds the upstream's credentials; chmod 600 it", path, fi.Mode().Perm())
}
