package redisconn

import (
	"strings"
	"testing"
)

// FuzzClusterURL: any store URL parses without a panic; a cluster URL's
// options name as many seeds as its host list, none empty; and no error
// repeats the URL with its password.
func FuzzClusterURL(f *testing.F) {
	for _, s := range []string{
		"redis+cluster://a:7000,b:7001/0", "redis://u:pw@a:1,b:2/0?read_timeout=5s",
		"rediss+cluster://a:7000", "redis+cluster://a:7000,,b:7001/0", "redis+cluster://:pw@a:1/3",
		"redis://a:6379/0", "redis+cluster://@/?#",
	} {
		f.Add(s, "hunter2")
	}
	f.Fuzz(func(t *testing.T, rawURL, password string) {
		if !IsURL(rawURL) {
			return
		}
		if len(password) >= 4 && !strings.ContainsAny(password, ":/@?#%,") {
			scheme, rest, _ := strings.Cut(rawURL, "://")
			rawURL = scheme + "://u:" + password + "@" + rest
		}
		var err error
		if IsCluster(rawURL) {
			co, cerr := ClusterOptions(rawURL)
			err = cerr
			if cerr == nil {
				if len(co.Addrs) != strings.Count(hostPart(rawURL), ",")+1 {
					t.Fatalf("%q: seeds %q", rawURL, co.Addrs)
				}
				for _, a := range co.Addrs {
					if a == "" {
						t.Fatalf("%q: an empty seed", rawURL)
					}
				}
			}
		} else {
			_, err = Options(rawURL)
		}
		if err != nil && len(password) >= 4 && !strings.ContainsAny(password, ":/@?#%,") && strings.Contains(err.Error(), "u:"+password+"@") {
			t.Fatalf("%q: the error shows the password: %v", rawURL, err)
		}
	})
}
