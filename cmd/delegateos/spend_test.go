package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/delegateos/delegateos/budget"
	"github.com/delegateos/delegateos/chain"
	"github.com/delegateos/delegateos/dct"
)

// A delegation is named from the chain only when the chain records it on
// the same path: the same parents up to a root issued by the key's issuer.
func TestSpendReportNames(t *testing.T) {
	const root = dct.RootParentDelegationID
	key := "ISS/16:del_a00000000001/16:del_b00000000001/16:del_c00000000001"
	rec := func(id, parent, from string) chain.Delegation {
		return chain.Delegation{ID: id, ParentID: parent, From: from, To: "to-" + id, Status: chain.StatusActive}
	}
	whole := []chain.Delegation{
		rec("del_a00000000001", root, "ISS"),
		rec("del_b00000000001", "del_a00000000001", "to-del_a00000000001"),
		rec("del_c00000000001", "del_b00000000001", "to-del_b00000000001"),
	}
	tests := []struct {
		name  string
		ds    []chain.Delegation
		named bool
	}{
		{"the same path", whole, true},
		{"another parent", []chain.Delegation{whole[0], whole[1], rec("del_c00000000001", "del_a00000000001", "x")}, false},
		{"another issuer", []chain.Delegation{rec("del_a00000000001", root, "OTHER"), whole[1], whole[2]}, false},
		{"an ancestor missing", []chain.Delegation{whole[1], whole[2]}, false},
		{"the top not a root", []chain.Delegation{rec("del_a00000000001", "del_z00000000001", "ISS"), whole[1], whole[2]}, false},
		{"no chain", nil, false},
		// Anyone may reuse an ID: another delegation with it, elsewhere,
		// neither takes the name nor hides it.
		{"the ID reused elsewhere", append(append([]chain.Delegation(nil), whole...), rec("del_c00000000001", "del_z00000000001", "x")), true},
		{"the ID reused elsewhere first", []chain.Delegation{rec("del_c00000000001", "del_z00000000001", "x"), whole[0], whole[1], whole[2]}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep := newSpendReport("spend.log", []budget.Usage{{Key: key, Committed: 1}}, tt.ds)
			n := rep.nodes[0]
			if named := n.record != nil; named != tt.named {
				t.Fatalf("named %v, want %v", named, tt.named)
			}
			if tt.named && n.who(func(s string) string { return s }, func(s string) string { return s }) != "to-del_b00000000001 → to-del_c00000000001" {
				t.Errorf("who = %q", n.who(func(s string) string { return s }, func(s string) string { return s }))
			}
		})
	}
}

// FuzzSpendReport: whatever keys a store holds, the table has one line
// per key under its header, the tree one line per key, every line
// printable; the diagram has one node per key, each label made of letters,
// digits, spaces, entity codes and <br/>, and one edge per nested key.
func FuzzSpendReport(f *testing.F) {
	f.Add("ISS/16:del_a11ce0000001", "ISS/16:del_a11ce0000001/16:del_b0b000000001", "old-key", "from")
	f.Add("I\x1b[2JS/8:evil\"]\nx", "I\x1b[2JS/8:evil\"]\nx/3:a/b", "\u202e/1:\n", "\xff")
	f.Add("a/1:b/1:c", "a/1:b", "a", "a/1:b/1:c/1:d")
	labelRE := regexp.MustCompile(`^  s[0-9]+\["([A-Za-z0-9 _.-]|#[0-9]+;|<br/>)*"\]$`)
	edgeRE := regexp.MustCompile(`^  s[0-9]+ --> s[0-9]+$`)
	f.Fuzz(func(t *testing.T, k1, k2, k3, name string) {
		seen := map[string]bool{}
		var us []budget.Usage
		for i, k := range []string{k1, k2, k3} {
			if k == "" || seen[k] {
				continue
			}
			seen[k] = true
			us = append(us, budget.Usage{Key: k, Committed: int64(i), Recorded: i > 0, Calls: int64(i), Limit: 10, LastCall: time.UnixMilli(1767225600000)})
		}
		// ReadUsage returns keys in order.
		for i := 1; i < len(us); i++ {
			for j := i; j > 0 && us[j].Key < us[j-1].Key; j-- {
				us[j], us[j-1] = us[j-1], us[j]
			}
		}
		label := func(string) string { return name }
		rep := newSpendReport("store\n", us, nil)
		var table, tree bytes.Buffer
		rep.writeTable(&table, label)
		rep.writeTree(&tree, label)
		lines := func(s string, want int) {
			t.Helper()
			ls := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
			if len(ls) != want {
				t.Fatalf("%d lines, want %d:\n%s", len(ls), want, s)
			}
			for _, l := range ls {
				for _, r := range l {
					if !unicode.IsPrint(r) {
						t.Fatalf("line %q holds %U", l, r)
					}
				}
			}
		}
		if len(us) == 0 {
			lines(table.String(), 2)
			lines(tree.String(), 2)
			return
		}
		lines(table.String(), len(us)+2)
		lines(tree.String(), len(us)+1)
		nodes, edges := 0, 0
		for _, l := range strings.Split(strings.TrimSuffix(rep.mermaid(label), "\n"), "\n")[1:] {
			switch {
			case labelRE.MatchString(l):
				nodes++
			case edgeRE.MatchString(l):
				edges++
			default:
				t.Fatalf("diagram line %q", l)
			}
		}
		if nodes != len(us) || edges != len(us)-len(rep.roots) {
			t.Fatalf("%d nodes and %d edges for %d keys, %d roots", nodes, edges, len(us), len(rep.roots))
		}
	})
}

// A delegation receipt is for the delegation the delegator made (and the
// attestation ended), not another that reuses its ID.
func TestReceiptRecordWithSharedID(t *testing.T) {
	mine := chain.Delegation{ID: "del_a00000000001", Key: "k1", From: "ME", AttestationID: "att_000000000001"}
	theirs := chain.Delegation{ID: "del_a00000000001", Key: "k2", From: "SYBIL", AttestationID: "att_000000000002"}
	for _, ds := range [][]chain.Delegation{{mine, theirs}, {theirs, mine}} {
		if d, err := receiptRecord(ds, mine.ID, "", "ME"); err != nil || d == nil || d.Key != "k1" {
			t.Errorf("by delegator: %+v, %v", d, err)
		}
		if d, err := receiptRecord(ds, mine.ID, "att_000000000002", "ME"); err != nil || d == nil || d.Key != "k2" {
			t.Errorf("by attestation: %+v, %v", d, err)
		}
	}
	again := mine
	again.Key = "k3"
	if _, err := receiptRecord([]chain.Delegation{mine, again}, mine.ID, "", "ME"); err == nil {
		t.Error("two delegations of the key with the ID: no error")
	}
	if d, err := receiptRecord(nil, mine.ID, "", "ME"); d != nil || err != nil {
		t.Errorf("none: %+v %v", d, err)
	}
}
