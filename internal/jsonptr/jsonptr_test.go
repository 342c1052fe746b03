package jsonptr

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"testing"
)

func TestParseUnescapesAndRefusesWhatIsNoPointer(t *testing.T) {
	for in, want := range map[string][]string{
		"":          nil,
		"/":         {""},
		"/a/0":      {"a", "0"},
		"/a~1b/c~0": {"a/b", "c~"},
		"/~01":      {"~1"},
	} {
		got, err := Parse(in)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("Parse(%q) = %q, %v; want %q", in, got, err, want)
		}
		if in != "" && Format(got) != in {
			t.Errorf("Format(Parse(%q)) = %q", in, Format(got))
		}
	}
	for _, in := range []string{"a", "0/a", "/a~", "/a~2"} {
		if _, err := Parse(in); !errors.Is(err, ErrSyntax) {
			t.Errorf("Parse(%q): %v, want ErrSyntax", in, err)
		}
	}
}

func TestGetFindsWhatThePointerNames(t *testing.T) {
	doc := []byte(` { "a" : [ {"b": 1}, {"b": [true, null, "x"]} ], "a/b": {"": 2}, "\u0063": "esc", "n": 1.5e3 } `)
	for ptr, want := range map[string]string{
		"":         string(doc[1 : len(doc)-1]),
		"/a/0":     `{"b": 1}`,
		"/a/1/b/2": `"x"`,
		"/a/1/b/1": "null",
		"/a~1b/":   "2",
		"/c":       `"esc"`,
		"/n":       "1.5e3",
	} {
		tokens, err := Parse(ptr)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := Get(doc, tokens)
		if !ok || string(got) != want {
			t.Errorf("Get(%q) = %q, %v; want %q", ptr, got, ok, want)
		}
	}
	for _, ptr := range []string{"/x", "/a/2", "/a/-", "/a/01", "/a/0/b/c", "/n/0", "/a/b"} {
		tokens, _ := Parse(ptr)
		if got, ok := Get(doc, tokens); ok {
			t.Errorf("Get(%q) = %q, want nothing", ptr, got)
		}
	}
	if _, ok := Get([]byte(`{"a": [1, `), []string{"a", "1"}); ok {
		t.Error("a truncated document gave a value")
	}
}

func TestFindListsTheObjectsHoldingTheKeyWithWhereTheyAre(t *testing.T) {
	doc := []byte(`{"x": {"$from": "s1", "path": ""}, "list": [1, {"deep": {"path": "", "\u0024from": "s2"}}], "plain": {"from": 1}}`)
	found, ok := Find(doc, "$from", 32)
	if !ok || len(found) != 2 {
		t.Fatalf("Find: %v, %v", found, ok)
	}
	if !slices.Equal(found[0].At, []string{"x"}) || string(doc[found[0].Start:found[0].End]) != `{"$from": "s1", "path": ""}` {
		t.Errorf("first: %q %q", found[0].At, doc[found[0].Start:found[0].End])
	}
	if !slices.Equal(found[1].At, []string{"list", "1", "deep"}) {
		t.Errorf("second at %q", found[1].At)
	}
	var v any
	if err := json.Unmarshal(doc[found[1].Start:found[1].End], &v); err != nil {
		t.Errorf("the second span is not one value: %v", err)
	}
	if _, ok := Find([]byte(`[[[[1]]]]`), "$from", 3); ok {
		t.Error("nesting past the limit was accepted")
	}
	if _, ok := Find([]byte(`{"a": }`), "$from", 3); ok {
		t.Error("malformed JSON was accepted")
	}
}

func FuzzGetAgreesWithDecoding(f *testing.F) {
	f.Add([]byte(`{"a":[1,{"b":"c"}]}`), "/a/1/b")
	f.Add([]byte(`[0,1,2]`), "/2")
	f.Fuzz(func(t *testing.T, doc []byte, ptr string) {
		tokens, err := Parse(ptr)
		if err != nil || !json.Valid(doc) {
			return
		}
		var tree any
		if json.Unmarshal(doc, &tree) != nil {
			return
		}
		got, ok := Get(doc, tokens)
		want, wantOK := walk(tree, tokens)
		if ok != wantOK {
			// Duplicate keys: encoding/json keeps the last, Get the first.
			return
		}
		if !ok {
			return
		}
		var gotV any
		if err := json.Unmarshal(got, &gotV); err != nil {
			t.Fatalf("Get(%q) = %q, not one JSON value", ptr, got)
		}
		a, _ := json.Marshal(gotV)
		b, _ := json.Marshal(want)
		if string(a) != string(b) && !dupKeys(doc) {
			t.Fatalf("Get(%q) = %s, want %s", ptr, a, b)
		}
	})
}

func walk(v any, tokens []string) (any, bool) {
	for _, tok := range tokens {
		switch n := v.(type) {
		case map[string]any:
			x, ok := n[tok]
			if !ok {
				return nil, false
			}
			v = x
		case []any:
			i, ok := Index(tok)
			if !ok || i >= len(n) {
				return nil, false
			}
			v = n[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// dupKeys reports whether doc may hold an object with a key twice, where
// Get (the first) and encoding/json (the last) rightly differ.
func dupKeys(doc []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(doc))
	type frame struct {
		obj  bool
		keys map[string]bool
		key  bool
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		switch x := tok.(type) {
		case json.Delim:
			switch x {
			case '{', '[':
				if top != nil && top.obj {
					top.key = false
				}
				stack = append(stack, &frame{obj: x == '{', keys: map[string]bool{}, key: x == '{'})
				continue
			default:
				stack = stack[:len(stack)-1]
				if len(stack) > 0 && stack[len(stack)-1].obj {
					stack[len(stack)-1].key = true
				}
				continue
			}
		case string:
			if top != nil && top.obj && top.key {
				if top.keys[x] {
					return true
				}
				top.keys[x] = true
				top.key = false
				continue
			}
		}
		if top != nil && top.obj {
			top.key = true
		}
	}
}
