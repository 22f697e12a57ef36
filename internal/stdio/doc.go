// Package stdio prepares a process's standard input and output for a
// relay that moves many small messages through them.
package stdio
