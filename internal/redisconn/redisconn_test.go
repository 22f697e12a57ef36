package redisconn

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestOptions(t *testing.T) {
	o, err := Options("redis://:pw@10.0.0.5:6380/3")
	if err != nil {
		t.Fatal(err)
	}
	if o.Addr != "10.0.0.5:6380" || o.DB != 3 || o.Password != "pw" || o.ReadTimeout != Timeout || o.DialTimeout != Timeout || o.MaxRetries != 1 {
		t.Fatalf("options %+v", o)
	}
	o, err = Options("rediss://h:1/0?read_timeout=250ms&max_retries=3")
	if err != nil {
		t.Fatal(err)
	}
	if o.ReadTimeout != 250*time.Millisecond || o.WriteTimeout != Timeout || o.MaxRetries != 3 || o.TLSConfig == nil {
		t.Fatalf("the URL's own settings: %+v", o)
	}
	for _, bad := range []string{"/var/spend.log", "http://h:1/", "redis://h:1/0?bogus=1"} {
		if _, err := Options(bad); err == nil {
			t.Errorf("Options(%q) accepted", bad)
		}
	}
}

func TestRedact(t *testing.T) {
	if got := Redact("redis://user:secret@h:1/0"); strings.Contains(got, "secret") || !strings.Contains(got, "h:1") {
		t.Fatalf("Redact = %q", got)
	}
}

func TestHashTag(t *testing.T) {
	for key, want := range map[string]string{"ISSUER/1:a/1:b": "ISSUER", "ISSUER": "ISSUER", "a{b}c/x": "abc", "": ""} {
		if got := HashTag(key); got != want {
			t.Errorf("HashTag(%q) = %q, want %q", key, got, want)
		}
	}
}

// A reply Redis made is not unavailability, unless it says Redis cannot
// serve now.
func TestUnavailable(t *testing.T) {
	if Unavailable("x", nil) != nil {
		t.Fatal("nil became an error")
	}
	if err := Unavailable("spend store x", errors.New("dial tcp: refused")); !errors.Is(err, ErrUnavailable) || err.Error() != "spend store x is unavailable: dial tcp: refused" {
		t.Fatalf("a network error: %v", err)
	}
	script := replyError("ERR Error running script")
	if err := Unavailable("x", script); errors.Is(err, ErrUnavailable) {
		t.Fatalf("a script error: %v", err)
	}
	if err := Unavailable("x", replyError("LOADING Redis is loading the dataset in memory")); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("LOADING: %v", err)
	}
}

// replyError is an error reply from Redis, as go-redis reports one.
type replyError string

func (e replyError) Error() string { return string(e) }

// RedisError marks it a redis.Error.
func (replyError) RedisError() {}

var _ redis.Error = replyError("")

// OpenOnce's client never retries, whatever the URL says.
func TestOpenOnceNeverRetries(t *testing.T) {
	for _, u := range []string{"redis://127.0.0.1:1/0", "redis://127.0.0.1:1/0?max_retries=3"} {
		c, err := OpenOnce(u)
		if err != nil {
			t.Fatal(err)
		}
		// go-redis reads MaxRetries -1 as none and keeps it as 0.
		if got := c.(*redis.Client).Options().MaxRetries; got != 0 {
			t.Errorf("%s: MaxRetries %d, want none", u, got)
		}
		c.Close()
	}
	c, err := OpenOnce("redis+cluster://127.0.0.1:1,127.0.0.1:2/0?max_retries=3")
	if err != nil {
		t.Fatal(err)
	}
	if o := c.(*redis.ClusterClient).Options(); o.MaxRetries > 0 || o.MaxRedirects > 0 {
		t.Errorf("cluster: MaxRetries %d, MaxRedirects %d, want none", o.MaxRetries, o.MaxRedirects)
	}
	c.Close()
	if _, err := OpenOnce("http://x"); err == nil {
		t.Error("OpenOnce took an http URL")
	}
}

// A cluster URL lists its seeds (with the redis+cluster scheme, or with
// several hosts), takes Options' parameters and refuses a database other
// than 0; a one-host redis:// URL is a single server's.
func TestClusterURL(t *testing.T) {
	for _, tc := range []struct {
		url     string
		cluster bool
		seeds   []string
		err     bool
	}{
		{"redis://127.0.0.1:6379/0", false, nil, false},
		{"redis+cluster://127.0.0.1:7000/0", true, []string{"127.0.0.1:7000"}, false},
		{"redis+cluster://u:p@a:7000,b:7001,c:7002?read_timeout=5s", true, []string{"a:7000", "b:7001", "c:7002"}, false},
		{"redis://a:7000,b:7001/0", true, []string{"a:7000", "b:7001"}, false},
		{"rediss+cluster://a:7000,b:7001/0", true, []string{"a:7000", "b:7001"}, false},
		{"redis+cluster://a:7000,b:7001/3", true, nil, true},
		{"redis+cluster://a:7000,,b:7001/0", true, nil, true},
	} {
		if !IsURL(tc.url) || IsCluster(tc.url) != tc.cluster {
			t.Errorf("%s: IsURL %v, IsCluster %v", tc.url, IsURL(tc.url), IsCluster(tc.url))
		}
		if !tc.cluster {
			continue
		}
		o, err := ClusterOptions(tc.url)
		if (err != nil) != tc.err {
			t.Errorf("%s: %v", tc.url, err)
			continue
		}
		if err == nil && (!slices.Equal(o.Addrs, tc.seeds) || o.ReadTimeout == 0 || !o.DisableIdentity) {
			t.Errorf("%s: %+v", tc.url, o)
		}
		if err != nil && strings.Contains(err.Error(), ":p@") {
			t.Errorf("%s: the error shows the password: %v", tc.url, err)
		}
	}
	o, _ := ClusterOptions("redis+cluster://u:secret@a:7000,b:7001?read_timeout=5s")
	if o.Username != "u" || o.Password != "secret" || o.ReadTimeout != 5*time.Second {
		t.Errorf("options %+v", o)
	}
}

// A MOVED reply to a one-server client is a store that cannot answer, and
// says to name the cluster.
func TestMovedSaysCluster(t *testing.T) {
	err := Unavailable("spend store redis://h:1/0", replyError("MOVED 15118 127.0.0.1:7002"))
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "redis+cluster://") {
		t.Fatalf("%v", err)
	}
}

// A URL that does not parse must not have its password echoed in the
// error, which reaches logs and denial messages.
func TestOptionsErrorHidesPassword(t *testing.T) {
	for _, bad := range []string{
		"redis://:hunter2%zz@h:1/0",
		"redis://user:hunter2@h:1/0?read_timeout=xyz",
		"rediss://:hunter2@h:notaport/0",
		"redis://:hunter2@h:1/notadb",
	} {
		_, err := Options(bad)
		if err == nil {
			t.Errorf("Options(%q) accepted", bad)
			continue
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("Options(%q) error leaks the password: %v", bad, err)
		}
	}
}
