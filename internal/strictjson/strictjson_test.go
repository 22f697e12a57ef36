package strictjson

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/internal/cputime"
)

type leaf struct {
	Name  string `json:"name"`
	Count int    `json:"count,omitempty"`
}

type doc struct {
	Version int               `json:"version"`
	Leaf    leaf              `json:"leaf"`
	Ptr     *leaf             `json:"ptr,omitempty"`
	List    []leaf            `json:"list,omitempty"`
	Arr     [2]leaf           `json:"arr"`
	Map     map[string]leaf   `json:"map,omitempty"`
	PtrList []*leaf           `json:"ptrList,omitempty"`
	Deep    map[string][]leaf `json:"deep,omitempty"`
	Raw     json.RawMessage   `json:"raw,omitempty"`
	Any     any               `json:"any,omitempty"`
	Untag   string
	Dash    string `json:"-"`
	//lint:ignore SA5008 encoding/json documents `json:"-,"` as naming the member "-"; strictjson must agree
	DashKey string `json:"-,"`
}

// decodeBoth decodes with Unmarshal and with plain encoding/json.
func decodeBoth[T any](t *testing.T, in string) (strict, plain T, err error) {
	t.Helper()
	err = Unmarshal([]byte(in), &strict)
	if jerr := json.Unmarshal([]byte(in), &plain); err == nil && jerr != nil {
		t.Fatalf("Unmarshal accepted what encoding/json refuses (%v): %s", jerr, in)
	}
	return strict, plain, err
}

func TestUnmarshalAccepts(t *testing.T) {
	tests := []string{
		`{}`,
		`{"version":1}`,
		" \t\n{\"version\":1}\r\n ",
		`{"version":1,"leaf":{"name":"a","count":2},"ptr":{"name":"p"},"list":[{"name":"x"},{"name":"y","count":3}]}`,
		`{"arr":[{"name":"0"},{"name":"1"}],"map":{"k":{"name":"v"},"Name":{"count":1}},"ptrList":[null,{"name":"q"}]}`,
		`{"deep":{"a":[{"name":"d"}],"b":[]}}`,
		`{"raw":{"Anything":[1,{"GOES":"here"}],"name":1},"any":{"Name":1,"NAME":[{"x":{}}]}}`,
		`{"Untag":"u","-":"dash key"}`,
		`{"leaf":{"name":"\u0061\ud83d\ude00\n"}}`,
		`{"leaf":{"name":"é€😀"}}`,
		`{"ptr":null,"list":null,"map":null}`,
		`{"version":10}`,
	}
	for _, in := range tests {
		strict, plain, err := decodeBoth[doc](t, in)
		if err != nil {
			t.Errorf("Unmarshal(%s): %v", in, err)
			continue
		}
		if !reflect.DeepEqual(strict, plain) {
			t.Errorf("Unmarshal(%s) = %+v, encoding/json = %+v", in, strict, plain)
		}
	}
	var dk doc
	if err := Unmarshal([]byte(`{"-":"x"}`), &dk); err != nil || dk.DashKey != "x" {
		t.Errorf(`json:"-," field: got %q, %v; want the member named "-"`, dk.DashKey, err)
	}
}

func TestUnmarshalRefuses(t *testing.T) {
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	tests := []struct {
		name, in, want string // want is a fragment of the error
	}{
		// Duplicates, wherever they are and however they are spelled.
		{"duplicate top-level", `{"version":1,"version":2}`, "duplicate"},
		{"duplicate escaped-equal", `{"version":1,"\u0076ersion":2}`, "duplicate"},
		{"duplicate all escaped", `{"\u0061":1,"a":2}`, "duplicate"},
		{"duplicate with surrogate pair", `{"\ud83d\ude00":1,"😀":2}`, "duplicate"},
		{"duplicate in nested struct", `{"leaf":{"name":"a","name":"b"}}`, "duplicate"},
		{"duplicate in escaped nested struct", `{"leaf":{"name":"a","n\u0061me":"b"}}`, "duplicate"},
		{"duplicate in slice element", `{"list":[{"name":"a"},{"name":"a","count":1,"count":2}]}`, "duplicate"},
		{"duplicate map key", `{"map":{"k":{},"k":{}}}`, "duplicate"},
		{"duplicate inside RawMessage", `{"raw":{"x":1,"x":2}}`, "duplicate"},
		{"duplicate inside any", `{"any":[{"x":1,"\u0078":2}]}`, "duplicate"},
		{"duplicate empty name", `{"raw":{"":1,"":2}}`, "duplicate"},
		// Names must match the field exactly (encoding/json folds case).
		{"case top-level", `{"Version":1}`, "unknown member"},
		{"case upper", `{"VERSION":1}`, "unknown member"},
		{"case nested struct", `{"leaf":{"Name":"a"}}`, "unknown member"},
		{"case pointer struct", `{"ptr":{"NAME":"a"}}`, "unknown member"},
		{"case slice element", `{"list":[{"name":"a"},{"naMe":"b"}]}`, "unknown member"},
		{"case array element", `{"arr":[{},{"Count":1}]}`, "unknown member"},
		{"case map value", `{"map":{"k":{"Name":"a"}}}`, "unknown member"},
		{"case slice of pointers", `{"ptrList":[{"Name":"a"}]}`, "unknown member"},
		{"case map of slices", `{"deep":{"a":[{"Count":1}]}}`, "unknown member"},
		{"case untagged field", `{"untag":"u"}`, "unknown member"},
		{"case by Kelvin sign", "{\"lea\u212a\":{}}", "unknown member"}, // encoding/json folds K (U+212A) to k
		// Unknown members.
		{"unknown top-level", `{"version":1,"extra":true}`, "unknown member"},
		{"unknown nested", `{"leaf":{"name":"a","extra":1}}`, "unknown member"},
		{"unknown in slice", `{"list":[{"extra":1}]}`, "unknown member"},
		{"field tagged out", `{"Dash":"x"}`, "unknown member"},
		// Trailing data.
		{"second value", `{} {}`, "trailing"},
		{"trailing garbage", `{}x`, "trailing"},
		{"trailing bracket", `{}]`, ""},
		{"trailing comma", `{},`, ""},
		{"trailing NUL", "{}\x00", ""},
		// Depth.
		{"too deep arrays", `{"any":` + deep(MaxDepth) + `}`, "deeper"},
		{"too deep objects", strings.Repeat(`{"raw":`, MaxDepth+1) + "1" + strings.Repeat("}", MaxDepth+1), "deeper"},
		// Invalid UTF-8, raw or escaped.
		{"invalid UTF-8 in value", "{\"leaf\":{\"name\":\"\xff\"}}", "UTF-8"},
		{"invalid UTF-8 in name", "{\"\xc3\":1}", "UTF-8"},
		{"UTF-8 encoded surrogate", "{\"leaf\":{\"name\":\"\xed\xa0\x80\"}}", "UTF-8"},
		{"overlong UTF-8", "{\"leaf\":{\"name\":\"\xc0\xaf\"}}", "UTF-8"},
		{"escaped lone high surrogate", `{"leaf":{"name":"\ud800"}}`, "surrogate"},
		{"escaped lone low surrogate", `{"leaf":{"name":"\udc00"}}`, "surrogate"},
		{"escaped reversed pair", `{"leaf":{"name":"\ude00\ud83d"}}`, "surrogate"},
		{"escaped high surrogate then letter", `{"leaf":{"name":"\ud83dx"}}`, "surrogate"},
		{"escaped high surrogate at end", `{"leaf":{"name":"a\uD83D"}}`, "surrogate"},
		{"escaped lone surrogate in name", `{"raw":{"\udfff":1}}`, "surrogate"},
		// Not JSON at all, or the wrong JSON.
		{"empty", ``, ""},
		{"whitespace", ` `, ""},
		{"truncated", `{"version":1`, ""},
		{"single quotes", `{'version':1}`, ""},
		{"wrong type", `{"version":"1"}`, ""},
		{"array for struct", `[]`, ""},
		{"NaN", `{"any":NaN}`, ""},
		{"comment", `{"version":1 /* */}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := decodeBoth[doc](t, tt.in)
			if err == nil {
				t.Fatalf("Unmarshal(%q) succeeded", tt.in)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Unmarshal(%q) = %v, want an error mentioning %q", tt.in, err, tt.want)
			}
		})
	}
}

func TestDepthLimit(t *testing.T) {
	nest := func(n int) []byte {
		return []byte(strings.Repeat(`{"a":`, n-1) + "[]" + strings.Repeat("}", n-1))
	}
	var v any
	if err := Unmarshal(nest(MaxDepth), &v); err != nil {
		t.Fatalf("depth %d refused: %v", MaxDepth, err)
	}
	if err := Check(nest(MaxDepth)); err != nil {
		t.Fatalf("Check at depth %d: %v", MaxDepth, err)
	}
	if err := Unmarshal(nest(MaxDepth+1), &v); err == nil {
		t.Fatalf("depth %d accepted", MaxDepth+1)
	}
	if err := Check(nest(MaxDepth + 1)); err == nil {
		t.Fatalf("Check accepted depth %d", MaxDepth+1)
	}
	// A very deep document is refused without exhausting the stack.
	if err := Check([]byte(strings.Repeat("[", 1<<20))); err == nil {
		t.Fatal("Check accepted a million open brackets")
	}
}

func TestUnmarshalIntoMapAndAny(t *testing.T) {
	var m map[string]any
	if err := Unmarshal([]byte(`{"A":1,"a":2}`), &m); err != nil {
		t.Fatalf("names differing in case are distinct map keys: %v", err)
	}
	if err := Unmarshal([]byte(`{"a":1,"\u0061":2}`), &m); err == nil {
		t.Fatal("duplicate map key accepted")
	}
	var a any
	if err := Unmarshal([]byte(`[1,"x",{"k":[true,null]}]`), &a); err != nil {
		t.Fatal(err)
	}
}

func TestCheck(t *testing.T) {
	ok := []string{`{}`, `[]`, `1`, `"s"`, `null`, ` {"a":{"a":1},"b":[{"a":1},{"a":2}]} `, `{"A":1,"a":2}`, `"\ud83d\ude00"`}
	for _, in := range ok {
		if err := Check([]byte(in)); err != nil {
			t.Errorf("Check(%s): %v", in, err)
		}
	}
	bad := []string{``, `{"a":1,"a":2}`, `[{"x":{"b":1,"\u0062":2}}]`, `{} {}`, `{}x`, "\"\xff\"", `"\udc00"`, `{"a":}`, `[1,]`}
	for _, in := range bad {
		if err := Check([]byte(in)); err == nil {
			t.Errorf("Check(%q) succeeded", in)
		}
	}
}

func TestUnexportedFieldIsNotAMember(t *testing.T) {
	var v struct {
		Name   string `json:"name"`
		hidden string
	}
	if err := Unmarshal([]byte(`{"hidden":"x"}`), &v); err == nil || v.hidden != "" {
		t.Fatalf("member named after an unexported field: err = %v, hidden = %q", err, v.hidden)
	}
}

type custom struct{ got string }

func (c *custom) UnmarshalJSON(b []byte) error { c.got = string(b); return nil }

func TestUnmarshalerIsTrusted(t *testing.T) {
	var v struct {
		C custom `json:"c"`
	}
	if err := Unmarshal([]byte(`{"c":{"AnyCase":1}}`), &v); err != nil {
		t.Fatalf("names inside a json.Unmarshaler are its own business: %v", err)
	}
	if err := Unmarshal([]byte(`{"c":{"x":1,"x":2}}`), &v); err == nil {
		t.Fatal("duplicate inside a json.Unmarshaler accepted")
	}
}

// FuzzUnmarshal: Unmarshal never panics, and whatever it accepts decodes to
// the same value with encoding/json (strictness only ever removes inputs).
func FuzzUnmarshal(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"version":1,"leaf":{"name":"a"}}`, `{"version":1,"version":2}`,
		`{"leaf":{"Name":"a"}}`, `{"list":[{"name":"x"}],"map":{"k":{"count":1}}}`,
		`{"raw":{"a":[1,2,{"b":null}]},"any":"\ud83d\ude00"}`, `{"leaf":{"name":"\ud800"}}`,
		"{\"leaf\":{\"name\":\"\xff\"}}", `{} {}`, `[[[[]]]]`, `{"-":"d","Untag":"u"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var strict, plain doc
		if err := Unmarshal(data, &strict); err == nil {
			if jerr := json.Unmarshal(data, &plain); jerr != nil {
				t.Fatalf("accepted %q, which encoding/json refuses: %v", data, jerr)
			}
			if !reflect.DeepEqual(strict, plain) {
				t.Fatalf("%q decodes to %+v, encoding/json %+v", data, strict, plain)
			}
		}
		var strictAny, plainAny any
		if err := Unmarshal(data, &strictAny); err == nil {
			if err := Check(data); err != nil {
				t.Fatalf("Unmarshal accepted %q but Check refuses it: %v", data, err)
			}
			if jerr := json.Unmarshal(data, &plainAny); jerr != nil {
				t.Fatalf("accepted %q, which encoding/json refuses: %v", data, jerr)
			}
			if !reflect.DeepEqual(strictAny, plainAny) {
				t.Fatalf("%q decodes to %#v, encoding/json %#v", data, strictAny, plainAny)
			}
		}
	})
}

// scalarsNil is a parseTreeByTokens tree with its scalars nil, as
// treeParser keeps them.
func scalarsNil(v any) any {
	switch v := v.(type) {
	case object:
		o := object{}
		for k, x := range v {
			o[k] = scalarsNil(x)
		}
		return o
	case array:
		var a array
		for _, x := range v {
			a = append(a, scalarsNil(x))
		}
		return a
	}
	return nil
}

var treeSeeds = []string{
	`{}`, `[]`, `{"a":1,"b":[true,false,null,"x",-1.5e3],"c":{"d":{}}}`, `{"a":1,"a":2}`, `{"a":1,"\u0061":2}`,
	`{"a\"b":1,"a\\\"b":2}`, `[{"x":[{"y":1,"y":2}]}]`, `{"k":"\ud800"}`, `{"\ud83d\ude00":1}`, ` [ 1 , { "a" : [ ] } ] `,
	`"s"`, `1`, `null`, `{"a":{"b":1},"a":{"c":2}}`, `[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]`,
}

// TestParseTree: the byte parser reads what the decoder's tokens read.
func TestParseTree(t *testing.T) {
	for _, s := range treeSeeds {
		compareTrees(t, []byte(s))
	}
}

// FuzzParseTree holds treeParser to json.Decoder's tokens: the same tree
// (scalars aside) and the same refusal, for every input.
func FuzzParseTree(f *testing.F) {
	for _, s := range treeSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(compareTrees)
}

func compareTrees(t *testing.T, data []byte) {
	got, err1 := parseTree(data)
	want, err2 := parseTreeByTokens(data)
	if (err1 == nil) != (err2 == nil) || err1 != nil && err1.Error() != err2.Error() {
		t.Fatalf("%q: %v, tokens %v", data, err1, err2)
	}
	if err1 == nil && !reflect.DeepEqual(got, scalarsNil(want)) {
		t.Fatalf("%q: %#v, tokens %#v", data, got, want)
	}
}

// BenchmarkParseTree reads a 3 KB document of nested objects, arrays,
// strings with escapes and numbers: /bytes is parseTree, /tokens the
// decoder's tokens it reads invalid JSON with.
func BenchmarkParseTree(b *testing.B) {
	item := map[string]any{"id": "ldpatt_4008fdc301d3fa578ee174cd", "text": `{"arguments":{"text":"hi"}}`, "n": 12345, "ok": true,
		"hashes": []string{"sha256:b1311d5a46cad87b748a5aef98e828b2b7901b5823b75508503fd252e044d972"}, "none": nil}
	data, _ := json.Marshal(map[string]any{"a": []any{item, item, item, item, item, item}, "b": map[string]any{"c": item, "d": item}})
	for name, f := range map[string]func([]byte) (any, error){"bytes": parseTree, "tokens": parseTreeByTokens} {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			defer cputime.Report(b)()
			for b.Loop() {
				if _, err := f(data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
