package budget

// isNoSpace reports false: Plan 9 errors are strings, not numbers.
func isNoSpace(error) bool { return false }
