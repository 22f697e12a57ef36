// Package redistest runs real redis-server processes for tests, each on a
// free port in the test's temporary directory, with the append-only file
// on and synced at every write ("nothing acknowledged is lost").
//
// A test that needs Redis fails, naming the Debian package to install,
// when redis-server is not on PATH: it is never skipped.
package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// A Server is one redis-server process, stopped when the test ends.
type Server struct {
	t     testing.TB
	fsync string
	dir   string
	port  int
	cmd   *exec.Cmd
	done  chan struct{}
	// extra are more redis-server arguments (a cluster node's).
	extra []string
}

// Binary returns the path of redis-server, or fails the test.
func Binary(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("this test needs redis-server, which is not on PATH: install it (Debian: apt-get install -y redis-server; `make redis` does it) — %v", err)
	}
	return p
}

// Start starts a redis-server on a free port and waits until it answers.
func Start(t testing.TB) *Server {
	t.Helper()
	return StartFsync(t, "always")
}

// StartFsync is Start with another appendfsync policy: "everysec" (lose
// up to a second of writes to a crash of the machine) or "no".
func StartFsync(t testing.TB, fsync string) *Server {
	t.Helper()
	Binary(t)
	s := &Server{t: t, fsync: fsync, dir: t.TempDir()}
	t.Cleanup(func() { s.kill() })
	// The port was free when freePort closed its listener; another
	// process may take it before the server binds it. Then the server
	// exits, and a new port is tried.
	for try := 1; ; try++ {
		s.port = freePort(t)
		err := s.launch()
		if err == nil {
			return s
		}
		if try == 5 {
			t.Fatal(err)
		}
		t.Logf("%v; trying another port", err)
	}
}

// URL returns the server's redis:// URL.
func (s *Server) URL() string { return fmt.Sprintf("redis://127.0.0.1:%d/0", s.port) }

// Addr returns the server's host:port.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// PID returns the process ID of the running server.
func (s *Server) PID() int { return s.cmd.Process.Pid }

func (s *Server) start() {
	s.t.Helper()
	if err := s.launch(); err != nil {
		s.t.Fatal(err)
	}
}

// launch starts the server and waits until it answers; an error if it
// exits first.
func (s *Server) launch() error {
	s.t.Helper()
	s.cmd = exec.Command(Binary(s.t), append([]string{
		"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1", "--dir", s.dir,
		"--save", "", "--appendonly", "yes", "--appendfsync", s.fsync,
		"--daemonize", "no", "--protected-mode", "yes", "--loglevel", "warning",
		"--logfile", filepath.Join(s.dir, "redis.log")}, s.extra...)...)
	// Its output goes to its log file, and it dies with the test binary,
	// so that a test that crashes leaves no server holding go test's pipes.
	s.cmd.SysProcAttr = procAttr()
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("start redis-server: %v", err)
	}
	s.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { cmd.Wait(); close(done) }(s.cmd, s.done)
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1, DialTimeout: time.Second})
	defer c.Close()
	deadline := time.Now().Add(15 * time.Second)
	for {
		err := c.Ping(context.Background()).Err()
		select {
		case <-s.done:
			// Exited: whatever answered the ping on its port is not it.
			log, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
			return fmt.Errorf("redis-server on port %d exited at start: %s", s.port, log)
		default:
		}
		if err == nil {
			// And it is this server that answers, not another that took
			// the port first.
			info, err := c.Info(context.Background(), "server").Result()
			if err == nil && strings.Contains(info, "process_id:"+strconv.Itoa(s.cmd.Process.Pid)+"\r\n") {
				return nil
			}
			if err == nil {
				s.cmd.Process.Kill()
				<-s.done
				return fmt.Errorf("another server answers on port %d", s.port)
			}
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("redis-server on port %d did not answer: %v", s.port, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Kill kills the server with SIGKILL and waits for it to exit: what it
// acknowledged is in its append-only file, synced.
func (s *Server) kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGCONT)
	s.cmd.Process.Kill()
	<-s.done
}

// Restart kills the server (SIGKILL, no shutdown save) and starts it again
// on the same port and directory, from its append-only file.
func (s *Server) Restart() {
	s.t.Helper()
	s.kill()
	s.start()
}

// RestartEmpty kills the server and starts it again on the same port
// without its data, as a server without persistence restarts.
func (s *Server) RestartEmpty() {
	s.t.Helper()
	s.kill()
	if err := os.RemoveAll(filepath.Join(s.dir, "appendonlydir")); err != nil {
		s.t.Fatal(err)
	}
	os.Remove(filepath.Join(s.dir, "dump.rdb"))
	s.start()
}

// Stop kills the server; Start it again with Restart.
func (s *Server) Stop() { s.kill() }

// Pause stops the server with SIGSTOP: connections stay open and nothing
// answers, as in a network stall.
func (s *Server) Pause() {
	s.t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		s.t.Fatal(err)
	}
}

// Resume continues a paused server.
func (s *Server) Resume() {
	s.t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		s.t.Fatal(err)
	}
}

// Client returns a plain client of the server, closed when the test ends.
func (s *Server) Client() *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.Addr()})
	s.t.Cleanup(func() { c.Close() })
	return c
}

// FlushAll empties the server (FLUSHALL), as an operator's mistake or a
// restart without persistence does.
func (s *Server) FlushAll() {
	s.t.Helper()
	if err := s.Client().FlushAll(context.Background()).Err(); err != nil {
		s.t.Fatal(err)
	}
}

// Config returns a setting of the running server (CONFIG GET).
func (s *Server) Config(name string) string {
	s.t.Helper()
	v, err := s.Client().ConfigGet(context.Background(), name).Result()
	if err != nil {
		s.t.Fatal(err)
	}
	return v[name]
}

// freePort returns a TCP port nothing listens on now.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
