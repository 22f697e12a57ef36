package budget

import (
	"strconv"
	"testing"
)

// FuzzRedisUsage: the fields of a spend hash read from Redis never panic;
// what reads is what the fields say, and no spend is negative or passes
// the largest int64.
func FuzzRedisUsage(f *testing.F) {
	f.Add("delegateos:spend:{ISSUER}:ISSUER/1:a", "10", "5", "3", "1767225600000", "100", uint8(0))
	f.Add("delegateos:spend:{I}:I", "9223372036854775807", "1", "1", "1", "0", uint8(0))
	f.Add("delegateos:spend:{a}:a/x}:y", "0", "", "1", "", "01", uint8(3))
	f.Add("delegateos:spend:{}:", "-1", "+2", " 3", "1e3", "99999999999999999999999", uint8(31))
	f.Fuzz(func(t *testing.T, name, c, h, n, at, l string, missing uint8) {
		key, ok := budgetKeyOf(name)
		if ok {
			if spendKey(key) != name {
				t.Fatalf("budgetKeyOf(%q) = %q, whose spend key is %q", name, key, spendKey(key))
			}
		}
		vals := []any{c, h, n, at, l}
		for i := range vals {
			if missing&(1<<i) != 0 {
				vals[i] = nil
			}
		}
		u, err := parseUsageFields(key, vals)
		if err != nil {
			return
		}
		if u.Committed < 0 || u.Reserved < 0 || u.Calls < 0 || u.Limit < 0 {
			t.Fatalf("negative usage %+v from %q", u, vals)
		}
		if _, ok := addChecked(u.Committed, u.Reserved); !ok {
			t.Fatalf("spend passes int64: %+v", u)
		}
		for i, v := range vals {
			s, _ := v.(string)
			if v == nil || len(s) > 19 {
				continue
			}
			want, _ := strconv.ParseInt(s, 10, 64)
			got := []int64{u.Committed, u.Reserved, u.Calls, u.LastCall.UnixMilli(), u.Limit}[i]
			if i >= 3 && !u.Recorded {
				continue
			}
			if got != want {
				t.Fatalf("field %d %q read as %d", i, s, got)
			}
		}
	})
}

// FuzzReserveReply: a reply the reservation script did not make is an
// error, never a reservation or a level out of range.
func FuzzReserveReply(f *testing.F) {
	f.Add(int64(1), int64(0), "", uint8(1), uint8(2))
	f.Add(int64(0), int64(1), "123", uint8(3), uint8(2))
	f.Add(int64(0), int64(5), "007", uint8(3), uint8(2))
	f.Fuzz(func(t *testing.T, flag, level int64, spent string, n, levels uint8) {
		res := []any{flag, level, spent}[:min(int(n), 3)]
		ok, lv, sp, calls, err := parseReserveReply(res, int(levels))
		switch {
		case err != nil:
			return
		case ok && (flag != 1 || len(res) != 2 || calls < 0):
			t.Fatalf("%v read as a reservation", res)
		case !ok && (lv < 0 || lv >= int(levels) || sp < 0):
			t.Fatalf("%v read as level %d, spent %d", res, lv, sp)
		}
	})
}
