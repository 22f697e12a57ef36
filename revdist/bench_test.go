package revdist

import (
	"fmt"
	"testing"
)

// BenchmarkEncodeList is what a GET of a list of 10,000 entries costs
// when the cached encoding has expired: the entries copied, encoded and
// hashed.
func BenchmarkEncodeList(b *testing.B) {
	root := testKey(b, 1)
	store := NewMemStore()
	for i := range 10_000 {
		if _, err := store.Add(testEntry(b, root, fmt.Sprint(i))); err != nil {
			b.Fatal(err)
		}
	}
	d := &Distributor{Store: store}
	for b.Loop() {
		if _, _, err := d.encodeList(); err != nil {
			b.Fatal(err)
		}
	}
}
