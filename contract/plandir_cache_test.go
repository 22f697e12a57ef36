package contract

import (
	"os"
	"path/filepath"
	"strings"
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

// FuzzPlanBindings: the bindings file (workspace bytes) either reads, each
// key bound to valid plan IDs only, or is refused whole; never a panic.
func FuzzPlanBindings(f *testing.F) {
	f.Add([]byte(`{"plan":"plan_0123456789ab","keys":["k1","k2"]}` + "\n"))
	f.Add([]byte(`{"plan":"plan_0123456789ab","keys":["k1"]}` + "\n" + `{"plan":"plan_0123456789ac","keys":["k1"]}` + "\n"))
	f.Add([]byte(`{"plan":"plan_0123`))
	f.Add([]byte("\n\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, bindingsFile), data, 0o644); err != nil {
			t.Fatal(err)
		}
		d := &PlanDir{dir: dir}
		m, err := d.readBindings()
		if err != nil {
			return
		}
		for k, ids := range m {
			for _, id := range strings.Fields(ids) {
				if !ValidPlanID(id) {
					t.Fatalf("key %q bound to %q, not a plan ID", k, id)
				}
			}
		}
	})
}

// TestPlanDirBindingOutlivesPlanFile (rtdecomp F1): a plan's delegations
// are bound in the bindings file, so once its file is deleted or damaged
// a fresh PlanDir reports them as covered by a missing plan; a plan
// recorded before bindings existed is bound at the first look.
func TestPlanDirBindingOutlivesPlanFile(t *testing.T) {
	dir := t.TempDir()
	d, err := OpenPlanDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	p := testDecomposition(t).Plan
	if err := d.Put(p); err != nil {
		t.Fatal(err)
	}
	sub := p.SubTasks[0].DelegationKey
	if v, err := d.View(); err != nil || v.Missing(sub) != "" {
		t.Fatalf("an intact plan counts as missing: %q %v", v.Missing(sub), err)
	}
	path := filepath.Join(dir, p.ID+".json")
	if err := os.WriteFile(path, []byte(`{"id":`), 0o644); err != nil {
		t.Fatal(err)
	}
	fresh, err := OpenPlanDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	v, err := fresh.View()
	if err != nil || !strings.Contains(v.Missing(sub), p.ID) || !strings.Contains(v.Missing(p.ParentDelegationKey), p.ID) {
		t.Fatalf("a damaged plan file frees what it covered: %q %v", v.Missing(sub), err)
	}

	// A workspace from before bindings: the plan file alone.
	old := t.TempDir()
	b, _ := p.Marshal()
	if err := os.WriteFile(filepath.Join(old, p.ID+".json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	od, err := OpenPlanDir(old)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := od.View(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(old, p.ID+".json")); err != nil {
		t.Fatal(err)
	}
	od2, _ := OpenPlanDir(old)
	if v, err := od2.View(); err != nil || v.Missing(sub) == "" {
		t.Fatalf("a plan recorded before bindings is not bound at the first look: %v", err)
	}
}
