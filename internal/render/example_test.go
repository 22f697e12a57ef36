package render_test

import (
	"fmt"

	"github.com/delegateos/delegateos/internal/render"
)

func ExamplePrintable() {
	fmt.Println(render.Printable("ct_a1b2c3d4e5f6"))
	fmt.Println(render.Printable("ct_1\nforged line"))
	// Output:
	// ct_a1b2c3d4e5f6
	// "ct_1\nforged line"
}

func ExampleMermaidText() {
	fmt.Printf("  n0[\"%s\"]\n", render.MermaidText(`ct_1"] --> x["<b>`))
	// Output:
	//   n0["ct_1#34;#93; --#62; x#91;#34;#60;b#62;"]
}
