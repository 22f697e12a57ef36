//go:build linux

package proxy_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/gate"
	"github.com/delegateos/delegateos/internal/mcptest"
)

// Two containers on one host started from one image with the state
// directory baked in (red team 7, RT7-5): both see their own copy of the
// directory at the same path (the image's /var/lib/delegateos, say), in
// the same boot of the same kernel (one boot_id). Each copy is its own
// instance of the machine (another device and inode); the image, made
// from a container that had run (docker commit), lists the first
// container's instance. The first container's proxy makes 10 calls; the
// image is taken; the second container's proxy makes 10; Redis goes back
// to before them; the first container's restarted proxy makes 10 more,
// which take the machine's count m:ID back up to what the second saw.
// The second container's restarted proxy must refuse the tree's calls
// store_reset ("used by another host too": the copy's calls hid the
// rollback). It forwarded 10 more: 40 on 30, as long as a boot and a
// path were taken for "the same directory, moved while its proxies ran"
// and the two instances took each other's field over both ways.
//
// Each container here is a mount namespace of its own (unshare -m) in
// which its copy is bind-mounted on the one path, kept by a process
// that lives as long as the container; each proxy is run in it (nsenter),
// so the two proxies see the same path, the same boot_id and different
// directories, as two containers' do. A proxy restarted in the same
// container (same namespace, same directory) is the same instance.
// Needs root for the mounts (CI runs as root) and util-linux's unshare
// and nsenter.
//
// Held: a running proxy takes a field over both ways only from the
// instance of the directory now at its own path (its directory moved or
// remounted: TestE2EFaultRunningProxyGoesOnAfterItsDirMoved); a copy in
// another container is never at its path.
func TestE2EFaultCloneInAnotherContainerAtTheSamePathRefused(t *testing.T) {
	if os.Getuid() != 0 {
		t.Fatal("needs root, to bind-mount each container's copy of the state directory in a mount namespace of its own (CI runs as root)")
	}
	f := newStoreFleet(t)
	base := t.TempDir()
	a, b, path := filepath.Join(base, "a"), filepath.Join(base, "b"), filepath.Join(base, "state")
	for _, d := range []string{a, path} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	ca := newContainer(t, a, path)
	start := func(c *container) (*mcptest.Process, *mcptest.Session) {
		p := f.e.StartProxy(mcptest.ProxyOptions{Policy: f.policy(""), Token: f.a, Bin: c.bin, Env: []string{"DELEGATEOS_STATE_DIR=" + path}})
		return p, p.Connect(mcptest.SessionOptions{})
	}
	p1, s1 := start(ca)
	n, typ, detail := drain(t, s1, 10)
	if n != 10 {
		t.Fatalf("the first container's proxy: %d calls, then %s: %s", n, typ, detail)
	}
	f.settled()
	stopProxy(t, p1)
	// The image, taken from the first container: its state directory.
	copyStateDir(t, a, b)
	cb := newContainer(t, b, path)
	snap := f.snapshot()
	p2, s2 := start(cb)
	k, typ, detail := drain(t, s2, 10)
	if k != 10 {
		t.Fatalf("the second container's proxy: %d calls, then %s: %s", k, typ, detail)
	}
	f.settled()
	stopProxy(t, p2)
	if ia, ib := instances(t, a), instances(t, b); len(ia) != 1 || len(ib) != 2 || ib[0] != ia[0] {
		t.Fatalf("the instances listed: %q in the first container, %q in the second; want one, and the same one then the second's own", ia, ib)
	}
	f.restore(snap)
	// The first container's proxy restarted (the same container: the same
	// instance, nothing refused).
	p3, s3 := start(ca)
	m, typ, detail := drain(t, s3, 10)
	if m != 10 {
		f.sameAsUpstreams([]*mcptest.Process{p1, p2, p3}, n+k+m)
		t.Fatalf("the first container's restarted proxy, Redis back to before the second's calls: %d calls, then %s: %s; want 10", m, typ, detail)
	}
	f.settled()
	stopProxy(t, p3)
	p4, s4 := start(cb)
	more, typ, detail := drain(t, s4, 40)
	total := n + k + m + more
	f.sameAsUpstreams([]*mcptest.Process{p1, p2, p3, p4}, total)
	if more != 0 || typ != string(gate.StoreReset) || !strings.Contains(detail, "used by another host too") {
		t.Errorf("the first container made %d calls, the image was taken, the second container (its copy of the state directory at the same path, same boot) made %d; Redis went back to before them, the first container's restarted proxy made %d: the second's restarted proxy forwarded %d more (%d on 30), then %s: %s; want none, store_reset naming the machine ID shared", n, k, m, more, total, typ, detail)
	}
}

// container is a mount namespace of its own with a directory
// bind-mounted on a path; bin is a delegateos that runs in it.
type container struct {
	bin string
}

// newContainer makes a mount namespace in which dir is mounted on path,
// kept until the test ends.
func newContainer(t *testing.T, dir, path string) *container {
	t.Helper()
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Fatalf("unshare (util-linux) is needed to run a proxy in a mount namespace of its own: %v", err)
	}
	nsenter, err := exec.LookPath("nsenter")
	if err != nil {
		t.Fatalf("nsenter (util-linux) is needed to run a proxy in a mount namespace of its own: %v", err)
	}
	// The namespace's holder: it writes nothing more once ready, and ends
	// when its input closes.
	cmd := exec.Command(unshare, "-m", "--propagation", "private", "/bin/sh", "-c", `mount --bind "$1" "$2" && echo ready && read x`, "sh", dir, path)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if line != "ready\n" {
		stdin.Close()
		cmd.Wait()
		t.Fatalf("a mount namespace with %s on %s: %q %v %s", dir, path, line, err, stderr.String())
	}
	bin := filepath.Join(t.TempDir(), "in-container")
	script := fmt.Sprintf("#!/bin/sh\nexec %s --mount=/proc/%d/ns/mnt -- %s \"$@\"\n", nsenter, cmd.Process.Pid, mcptest.Delegateos(t))
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return &container{bin: bin}
}

// instances is the list of instances the state directory dir ran as.
func instances(t *testing.T, dir string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "machine-instances"))
	if err != nil {
		t.Fatal(err)
	}
	var toks []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		tok, _, _ := strings.Cut(l, " ")
		toks = append(toks, tok)
	}
	return toks
}
