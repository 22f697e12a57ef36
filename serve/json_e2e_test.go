package serve_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/delegateos/delegateos/internal/mcptest"
)

// serve --json prints where it listens, once listening, as one JSON value
// on standard output: a script that gave port 0 learns the port.
func TestServeJSONSaysWhere(t *testing.T) {
	t.Parallel()
	e := mcptest.NewEnv(t)
	root := mcptest.NewKey(t, "root")
	cmd := exec.Command(mcptest.Delegateos(t), "serve", "--json", "--listen", "127.0.0.1:0", "--root", root.DID(), "--", "cat")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = &mcptest.Buffer{}
	cmd.Dir = e.Dir
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() }()
	dec := json.NewDecoder(bufio.NewReader(out))
	var where struct{ Address, URL string }
	if err := dec.Decode(&where); err != nil {
		t.Fatalf("reading serve --json: %v", err)
	}
	if !strings.HasPrefix(where.URL, "http://"+where.Address+"/") || strings.HasSuffix(where.Address, ":0") {
		t.Fatalf("serve --json said %+v", where)
	}
	res, err := http.Get("http://" + where.Address + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("/healthz at the address said: %d", res.StatusCode)
	}
}
