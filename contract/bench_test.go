package contract

import "testing"

func BenchmarkParseVerify(b *testing.B) {
	data := mustMarshal(b, testContract(b))
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		c, err := Parse(data)
		if err != nil {
			b.Fatal(err)
		}
		if err := c.Verify(); err != nil {
			b.Fatal(err)
		}
	}
}
