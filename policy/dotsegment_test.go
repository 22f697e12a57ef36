package policy

import (
	"errors"
	"testing"

	"github.com/delegateos/delegateos/dct"
)

// MapResource refuses a "." or ".." segment because a server may resolve
// it to another path, also with a query or fragment after it. A ".."
// followed by path parameters (";", RFC 3986 §3.3) is the same segment to
// servers that strip parameters before normalizing (servlet containers,
// Spring, many proxies): "/project/..;/secret" reads "/secret". The grant
// file:///project/** matches it, since "..;" is no dot segment to the
// segment matcher either.
// Found by the second red team (was TestRedteam2DotSegmentWithPathParameters).
func TestMapResourceRefusesDotSegmentWithPathParameters(t *testing.T) {
	p := Default()
	grant := dct.Capability{Namespace: ResourceNamespace, Action: ResourceAction, Resource: "file:///project/**"}
	for _, uri := range []string{
		"file:///project/..;/secret.md",
		"file:///project/..;jsessionid=x/secret.md",
		"file:///project/.;/secret.md",
		"file:///project/sub/..%3B/secret.md",
	} {
		c, err := p.MapResource(uri)
		if err == nil && grant.Covers(c.Namespace, c.Action, c.Resource) {
			t.Errorf("%s is mapped to %s:%s:%s, which %s grants; want ErrUnmappable (a dot segment with parameters)", uri, c.Namespace, c.Action, c.Resource, grant.Resource)
		} else if err != nil && !errors.Is(err, ErrUnmappable) {
			t.Errorf("%s: %v", uri, err)
		}
	}
}
