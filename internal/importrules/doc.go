// Package importrules holds no code: its test checks the layering of the
// module's packages (docs/ARCHITECTURE.md, "What may import what"), so that
// a change that breaks it fails `go test` instead of waiting for a review.
package importrules
