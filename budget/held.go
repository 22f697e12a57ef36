package budget

import (
	"context"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/delegateos/delegateos/internal/redisconn"
)

// heldScript makes the held cost of each spend key of one tree (KEYS[2]
// on) no more than the tree's open reservations (KEYS[1]) hold in all,
// atomically, and returns how many keys it lowered. A key's held cost is
// the sum of its open reservations', all in that hash: when the hash was
// lost (or a reservation in it), what a key holds for the lost ones would
// be held for ever, and the reservation script would refuse the tree (see
// reserveScript). It never lowers a key below what the open reservations
// still in the hash may take back from it.
var heldScript = redis.NewScript(luaDecimal + `
local s = '0'
for _, v in ipairs(redis.call('HVALS', KEYS[1])) do
  valid(KEYS[1], 'of a reservation', v)
  s = sat(add(s, v))
end
local n = 0
for i = 2, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 1 and cmp(get(KEYS[i], 'h'), s) > 0 then
    redis.call('HSET', KEYS[i], 'h', s)
    n = n + 1
  end
end
return n
`)

// heldBatch bounds the keys of one heldScript run.
const heldBatch = 256

// settleHeld lowers the held cost of every spend key of the trees tags
// names (every tree when tags is nil) to what its tree's open
// reservations hold (heldScript), as store recover and store init --reset
// do for the trees whose loss they lift, and returns how many keys it
// lowered.
func settleHeld(ctx context.Context, c redisconn.Client, tags map[string]bool) (int, error) {
	byTag := map[string][]string{}
	collect := func(keys []string) error {
		for _, k := range keys {
			key, ok := budgetKeyOf(k)
			if !ok {
				continue
			}
			if t := redisconn.HashTag(key); tags == nil || tags[t] {
				byTag[t] = append(byTag[t], k)
			}
		}
		return nil
	}
	if tags == nil {
		if err := redisconn.Scan(ctx, c, spendKeyPrefix+"*", collect); err != nil {
			return 0, err
		}
	} else {
		for t := range tags {
			if err := redisconn.Scan(ctx, c, spendKeyPrefix+"{"+globEscape(t)+"}:*", collect); err != nil {
				return 0, err
			}
		}
	}
	n := 0
	for t, keys := range byTag {
		open := openKeyPrefix + "{" + t + "}"
		for len(keys) > 0 {
			batch := keys[:min(len(keys), heldBatch)]
			keys = keys[len(batch):]
			m, err := heldScript.Run(ctx, c, append([]string{open}, batch...)).Int()
			if err != nil {
				return n, err
			}
			n += m
		}
	}
	return n, nil
}

// globEscape quotes the characters SCAN's MATCH reads as a pattern.
func globEscape(s string) string {
	if !strings.ContainsAny(s, `*?[]\`) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
