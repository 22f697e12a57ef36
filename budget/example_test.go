package budget_test

import (
	"errors"
	"fmt"
	"log"

	"github.com/delegateos/delegateos/budget"
)

// A proxy reserves a call's cost at every delegation on the token's chain
// before forwarding it, and commits what the call actually cost.
func Example() {
	store := budget.NewMemory() // or budget.OpenFile(path) to survive restarts
	defer store.Close()

	levels := []budget.Level{
		{Key: "ISSUER/del_root", Limit: 1000},
		{Key: "ISSUER/del_root/del_a", Limit: 500},
	}
	for _, cost := range []int64{300, 300} {
		r, err := store.Reserve(levels, cost)
		var exceeded *budget.ExceededError
		if errors.As(err, &exceeded) {
			fmt.Println("denied:", err)
			continue
		}
		if err != nil {
			log.Fatal(err)
		}
		// ... forward the call; the upstream reports what it cost ...
		if err := store.Commit(r, 250); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println("spent:", store.Spent("ISSUER/del_root/del_a"))
	// Output:
	// denied: budget exceeded at ISSUER/del_root/del_a: a call costing 300 microcents does not fit in the 250 left of 500 (spent 250)
	// spent: 250
}
