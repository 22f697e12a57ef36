package credential

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func isKind(err, kind error) bool {
	var e *Error
	return errors.As(err, &e) && errors.Is(err, kind)
}

// mutation is a tampered copy of a document and what was done.
type mutation struct {
	what string
	doc  any
}

// deepCopy copies a decoded JSON value.
func deepCopy(v any) any {
	switch x := v.(type) {
	case object:
		c := make(object, len(x))
		for k, e := range x {
			c[k] = deepCopy(e)
		}
		return c
	case []any:
		c := make([]any, len(x))
		for i, e := range x {
			c[i] = deepCopy(e)
		}
		return c
	}
	return v
}

// changed returns a different value of the same kind as v.
func changed(v any) any {
	switch x := v.(type) {
	case string:
		if x == "" {
			return "x"
		}
		// Bump the last digit, so that a date or a key stays well formed;
		// without digits, change the last character.
		for i := len(x) - 1; i >= 0; i-- {
			if c := x[i]; '0' <= c && c <= '9' {
				return x[:i] + string('0'+(c-'0'+1)%10) + x[i+1:]
			}
		}
		last := x[len(x)-1]
		repl := byte('a')
		if last == 'a' {
			repl = 'b'
		}
		return x[:len(x)-1] + string(repl)
	case json.Number:
		return json.Number(string(x) + "1")
	case bool:
		return !x
	case nil:
		return "null"
	}
	return nil
}

// mutations lists every one-field change of doc: each member removed,
// renamed and (for scalars) changed, each array element removed, changed
// and duplicated, and a member added to each object.
func mutations(doc any) []mutation {
	var out []mutation
	var walk func(path string, v any, set func(root any, nv any, del bool) any)
	root := doc
	walk = func(path string, v any, edit func(root any, nv any, del bool) any) {
		switch x := v.(type) {
		case object:
			out = append(out, mutation{path + " +member", editAt(root, path, func(o any) any {
				m := o.(object)
				m["tampered"] = true
				return m
			})})
			for _, k := range sortedKeys(x) {
				p := path + "/" + k
				out = append(out, mutation{p + " removed", editAt(root, path, func(o any) any {
					delete(o.(object), k)
					return o
				})})
				out = append(out, mutation{p + " renamed", editAt(root, path, func(o any) any {
					m := o.(object)
					m[strings.ToUpper(k[:1])+k[1:]+"_"] = m[k]
					delete(m, k)
					return m
				})})
				walk(p, x[k], nil)
			}
		case []any:
			out = append(out, mutation{path + " +element", editAt(root, path, func(o any) any {
				a := o.([]any)
				return append(a, deepCopy(a[len(a)-1]))
			})})
			for i := range x {
				p := fmt.Sprintf("%s/%d", path, i)
				out = append(out, mutation{p + " removed", editAt(root, path, func(o any) any {
					a := o.([]any)
					return append(a[:i:i], a[i+1:]...)
				})})
				walk(p, x[i], nil)
			}
			if len(x) > 1 {
				out = append(out, mutation{path + " reversed", editAt(root, path, func(o any) any {
					a := o.([]any)
					for i, j := 0, len(a)-1; i < j; i, j = i+1, j-1 {
						a[i], a[j] = a[j], a[i]
					}
					return a
				})})
			}
		default:
			out = append(out, mutation{path + " changed", editAt(root, path, changed)})
		}
	}
	walk("", doc, nil)
	return out
}

// editAt returns a copy of root with the value at path (members and
// indexes joined by '/') replaced by f of it.
func editAt(root any, path string, f func(any) any) any {
	c := deepCopy(root)
	if path == "" {
		return f(c)
	}
	parts := strings.Split(path[1:], "/")
	var rec func(v any, parts []string) any
	rec = func(v any, parts []string) any {
		if len(parts) == 0 {
			return f(v)
		}
		switch x := v.(type) {
		case object:
			x[parts[0]] = rec(x[parts[0]], parts[1:])
			return x
		case []any:
			var i int
			fmt.Sscan(parts[0], &i)
			x[i] = rec(x[i], parts[1:])
			return x
		}
		panic("path " + path + " leads through a scalar")
	}
	return rec(c, parts)
}

// tamperEach checks that doc verifies and that each one-field change of it
// does not; it returns how many changes were tried.
func tamperEach(t *testing.T, doc []byte, opts VerifyOptions) int {
	t.Helper()
	if _, err := Verify(doc, opts); err != nil {
		t.Fatalf("the untampered document: %v", err)
	}
	orig := mustParse(t, doc)
	want, _ := canonical(orig)
	ms := mutations(orig)
	for _, m := range ms {
		b, err := canonical(m.doc)
		if err != nil {
			t.Fatalf("%s: %v", m.what, err)
		}
		if string(b) == string(want) {
			t.Fatalf("%s: the mutation changed nothing", m.what)
		}
		r, err := Verify(b, opts)
		if err == nil {
			t.Errorf("%s: verified (%+v)", m.what, r.Checks)
			continue
		}
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("%s: error %v is not an *Error", m.what, err)
		}
	}
	return len(ms)
}

func errorAs(err error, e **Error) bool { return errors.As(err, e) }
