package contract

import (
	"os"
	"path/filepath"
	"testing"
)

// TestPlanDirListsOnlyOnChange (rtdecomp F4): a look at an unchanged plan
// directory does not list it again, however many plan files it holds; a
// file added by another process (which changes the directory), or a Put
// here, is seen at the next look.
func TestPlanDirListsOnlyOnChange(t *testing.T) {
	dir := t.TempDir()
	d, err := OpenPlanDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	p := testDecomposition(t).Plan
	if err := d.Put(p); err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		if err := os.WriteFile(filepath.Join(dir, "plan_"+string(rune('a'+i%26))+"0000000000"+string(rune('a'+i/26))+".json"), []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := d.View(); err != nil {
		t.Fatal(err)
	}
	before := d.lists
	for range 100 {
		v, err := d.View()
		if err != nil || len(v.SubTaskOf(p.SubTasks[0].DelegationKey)) != 1 {
			t.Fatal("the plan is not indexed", err)
		}
	}
	// At most one more listing: maxListAge may pass on a loaded machine.
	if got := d.lists - before; got > 1 {
		t.Errorf("100 looks at an unchanged directory listed it %d times", got)
	}

	// Another process records a plan: the directory changes.
	other, err := OpenPlanDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	q := testDecomposition(t).Plan
	if err := other.Put(q); err != nil {
		t.Fatal(err)
	}
	if v, err := d.View(); err != nil || len(v.SubTaskOf(q.SubTasks[0].DelegationKey)) != 1 {
		t.Fatal("a plan another process recorded is not seen at the next look", err)
	}
}
