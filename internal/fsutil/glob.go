package fsutil

import (
	"errors"
	"os"
	"path/filepath"
)

// GlobIn returns the paths of the entries of the directory dir whose
// names match pattern (filepath.Match syntax, applied to the name only),
// in lexical order; none when dir does not exist. Unlike
// filepath.Glob(filepath.Join(dir, pattern)), the directory is taken as
// written: a path holding '[', '*', '?' or '\' ("/srv/delegateos[prod]")
// is not read as a pattern, which would silently match nothing. A
// malformed pattern, or a directory that cannot be read, is an error.
func GlobIn(dir, pattern string) ([]string, error) {
	if _, err := filepath.Match(pattern, ""); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, e := range entries {
		if ok, _ := filepath.Match(pattern, e.Name()); ok {
			paths = append(paths, filepath.Join(dir, e.Name()))
		}
	}
	return paths, nil
}
