package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/budget"
	"github.com/delegateos/delegateos/internal/redistest"
)

// runCLI runs delegateos with args and returns its exit status and output.
func runCLI(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

// store migrate moves a file store to Redis, spend shows it there, and
// it moves back to a file.
func TestStoreMigrateAndSpendOnRedis(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "spend.log")
	f, err := budget.OpenFile(src)
	if err != nil {
		t.Fatal(err)
	}
	r, err := f.Reserve([]budget.Level{{Key: "ISSUER/16:del_aaaaaaaaaaaa", Limit: 1000}}, 300)
	if err != nil {
		t.Fatal(err)
	}
	f.Commit(r, 250)
	f.Close()
	srv := redistest.Start(t)
	code, out, errs := runCLI("store", "migrate", "--from", src, "--to", srv.URL())
	if code != 0 || !strings.Contains(out, "copied the spend of 1 delegations") {
		t.Fatalf("store migrate to Redis: exit %d, %q %q", code, out, errs)
	}
	code, out, errs = runCLI("spend", "--store", srv.URL(), "--json")
	if code != 0 || !strings.Contains(out, `"committed": 250`) {
		t.Fatalf("spend --store URL: exit %d, %q %q", code, out, errs)
	}
	back := filepath.Join(dir, "back.log")
	code, out, errs = runCLI("store", "migrate", "--from", srv.URL(), "--to", back, "--json")
	if code != 0 || !strings.Contains(out, `"delegations": 1`) {
		t.Fatalf("store migrate back: exit %d, %q %q", code, out, errs)
	}
	code, _, errs = runCLI("store", "migrate", "--from", src, "--to", srv.URL())
	if code == 0 || !strings.Contains(errs, "already holds spend") {
		t.Fatalf("store migrate into a store with spend: exit %d, %q", code, errs)
	}
	srv.Stop()
	code, _, errs = runCLI("spend", "--store", srv.URL())
	if code == 0 || !strings.Contains(errs, "is unavailable") {
		t.Fatalf("spend of a stopped Redis: exit %d, %q", code, errs)
	}
}

// policy check and spend do not show a Redis URL's password.
func TestRedisPasswordNotShown(t *testing.T) {
	dir := t.TempDir()
	pol := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(pol, []byte("allow_unauthenticated: true\nspend_store: redis://:hunter2@127.0.0.1:1/0\nrevocation_list: redis://:hunter2@127.0.0.1:1/0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"policy", "check", pol}, {"policy", "check", pol, "--json"}, {"spend", "--policy", pol}} {
		_, out, errs := runCLI(args...)
		if strings.Contains(out+errs, "hunter2") {
			t.Errorf("%v shows the password: %s%s", args, out, errs)
		}
	}
}
