package render

import "testing"

// No input can make either function write a character outside its
// alphabet, and MermaidText always decodes back to its input.
func FuzzRender(f *testing.F) {
	f.Add("ct_000000000001")
	f.Add("\"]\n  x --> y\n  click p0 call alert(1)")
	f.Add("#quot;<b>\u202e\xff%%`")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		checkPrintable(t, s, Printable(s))
		checkMermaidText(t, s, MermaidText(s))
	})
}
