package revdist

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// FuzzServePush checks that no body stores an entry other than one signed
// by the accepted revoker, and that the handler never panics.
func FuzzServePush(f *testing.F) {
	root := testKey(f, 1)
	good := testEntry(f, root, "b1")
	f.Add(pushBody(f, nil, good))
	f.Add(pushBody(f, 1, good))
	f.Add(pushBody(f, nil, testEntry(f, testKey(f, 2), "b1")))
	f.Add(`{"jsonrpc":"2.0","method":"delegateos/revoke","params":{"revocation":{}}}`)
	auth := principals(f, root)
	f.Fuzz(func(t *testing.T, body string) {
		store := NewMemStore()
		d := &Distributor{Store: store, Authority: auth}
		req := httptest.NewRequest(http.MethodPost, Path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		d.ServeHTTP(rec, req)
		for _, e := range store.List.Entries() {
			if e.RevokedBy != root.ID() || e.Verify() != nil {
				t.Fatalf("stored %+v from %q", e, body)
			}
		}
		if store.List.Len() > 0 && rec.Code != http.StatusAccepted && rec.Code != http.StatusOK {
			t.Fatalf("stored an entry but answered %d", rec.Code)
		}
	})
}
