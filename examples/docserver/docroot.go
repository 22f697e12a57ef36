package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"unicode/utf8"
)

// errEscapesRoot is returned for a tool path that climbs above the root.
// Escapes through symbolic links are refused by os.Root with its own error.
var errEscapesRoot = errors.New("path escapes the document root")

// docRoot is the directory the server serves. Every file operation goes
// through an os.Root, so no path and no symbolic link can reach outside it.
type docRoot struct {
	root *os.Root
}

func openDocRoot(dir string) (*docRoot, error) {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	return &docRoot{root: r}, nil
}

func (d *docRoot) Close() error { return d.root.Close() }

// resolve turns a tool path such as "/project/sub/notes.md" into a name
// relative to the root ("project/sub/notes.md", or "." for the root itself).
// It refuses rather than clamps a path like "/../etc": silently serving some
// other file would hide the caller's mistake.
func resolve(p string) (string, error) {
	if strings.IndexByte(p, 0) >= 0 {
		return "", fmt.Errorf("%q: path contains a NUL byte", p)
	}
	var parts []string
	for _, part := range strings.Split(p, "/") {
		switch part {
		case "", ".":
		case "..":
			if len(parts) == 0 {
				return "", fmt.Errorf("%s: %w", p, errEscapesRoot)
			}
			parts = parts[:len(parts)-1]
		default:
			parts = append(parts, part)
		}
	}
	if len(parts) == 0 {
		return ".", nil
	}
	return strings.Join(parts, "/"), nil
}

// pathError restates an os.Root error in terms of the tool path. os.Root's
// error for a symbolic link out of the root is unexported, so it is
// recognised by its text; if that text changes, callers just see os.Root's
// own wording.
func pathError(rel string, err error) error {
	var inner error
	for e := err; e != nil; e = errors.Unwrap(e) {
		if e.Error() == "path escapes from parent" {
			return fmt.Errorf("%s: %w", display(rel), errEscapesRoot)
		}
		if pe, ok := e.(*fs.PathError); ok {
			inner = pe.Err
		}
	}
	if inner == nil {
		return err
	}
	return fmt.Errorf("%s: %w", display(rel), inner)
}

// display renders a root-relative name the way tools show paths.
func display(rel string) string {
	if rel == "." {
		return "/"
	}
	return "/" + rel
}

func (d *docRoot) readFile(p string) (string, error) {
	rel, err := resolve(p)
	if err != nil {
		return "", err
	}
	f, err := d.root.Open(rel)
	if err != nil {
		return "", pathError(rel, err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return "", pathError(rel, err)
	}
	if !info.Mode().IsRegular() {
		return "", fmt.Errorf("%s: not a regular file", display(rel))
	}
	if info.Size() > maxReadBytes {
		return "", fmt.Errorf("%s: %d bytes is over the %d byte limit", display(rel), info.Size(), maxReadBytes)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxReadBytes+1))
	if err != nil {
		return "", err
	}
	if len(data) > maxReadBytes {
		return "", fmt.Errorf("%s: over the %d byte limit", display(rel), maxReadBytes)
	}
	return string(data), nil
}

// listDir returns the sorted names in a directory, directories with a
// trailing "/".
func (d *docRoot) listDir(p string) ([]string, error) {
	rel, err := resolve(p)
	if err != nil {
		return nil, err
	}
	f, err := d.root.Open(rel)
	if err != nil {
		return nil, pathError(rel, err)
	}
	defer f.Close()
	entries, err := f.ReadDir(-1)
	if err != nil {
		return nil, pathError(rel, err)
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() {
			name += "/"
		}
		names = append(names, name)
	}
	slices.Sort(names)
	return names, nil
}

func (d *docRoot) writeFile(p, content string) (string, error) {
	rel, err := resolve(p)
	if err != nil {
		return "", err
	}
	if rel == "." {
		return "", fmt.Errorf("/: is the root directory")
	}
	if dir := path.Dir(rel); dir != "." {
		if err := d.root.MkdirAll(dir, 0o755); err != nil {
			return "", pathError(rel, err)
		}
	}
	if err := d.root.WriteFile(rel, []byte(content), 0o644); err != nil {
		return "", pathError(rel, err)
	}
	return display(rel), nil
}

// match is one line search found.
type match struct {
	Path string `json:"path"`
	Line int    `json:"line"`
	Text string `json:"text"`
}

// search finds lines containing query, ignoring case, in the regular files
// under p. It stops after maxSearchMatches lines and reports whether it did.
// Files it cannot read (a link out of the root, a binary, a huge file) are
// skipped, not reported: a search is a best-effort view.
func (d *docRoot) search(query, p string) (matches []match, truncated bool, err error) {
	if query == "" {
		return nil, false, errors.New("query must not be empty")
	}
	rel, err := resolve(p)
	if err != nil {
		return nil, false, err
	}
	if _, err := d.root.Stat(rel); err != nil {
		return nil, false, pathError(rel, err)
	}
	needle := strings.ToLower(query)
	fsys := d.root.FS()
	walkErr := fs.WalkDir(fsys, rel, func(name string, entry fs.DirEntry, err error) error {
		if err != nil || entry.IsDir() {
			return nil
		}
		data, ok := readSearchable(fsys, name)
		if !ok {
			return nil
		}
		for i, line := range strings.Split(string(data), "\n") {
			if !strings.Contains(strings.ToLower(line), needle) {
				continue
			}
			if len(matches) == maxSearchMatches {
				truncated = true
				return fs.SkipAll
			}
			matches = append(matches, match{Path: display(name), Line: i + 1, Text: clip(strings.TrimRight(line, "\r"))})
		}
		return nil
	})
	return matches, truncated, walkErr
}

// readSearchable returns a file's bytes if it is a small regular text file.
func readSearchable(fsys fs.FS, name string) ([]byte, bool) {
	info, err := fs.Stat(fsys, name)
	if err != nil || !info.Mode().IsRegular() || info.Size() > maxSearchFileBytes {
		return nil, false
	}
	data, err := fs.ReadFile(fsys, name)
	if err != nil || len(data) > maxSearchFileBytes || bytes.IndexByte(data, 0) >= 0 {
		return nil, false
	}
	return data, true
}

func clip(line string) string {
	if utf8.RuneCountInString(line) <= maxSearchLineRunes {
		return line
	}
	return string([]rune(line)[:maxSearchLineRunes]) + "…"
}
