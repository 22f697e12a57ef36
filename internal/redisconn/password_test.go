package redisconn

import (
	"strings"
	"testing"
)

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
