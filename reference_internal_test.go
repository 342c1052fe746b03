package planexec

import (
	"encoding/json"
	"testing"

	"github.com/planexec/planexec/internal/jsonptr"
)

// Whatever an outcome holds and whatever path a reference names, putting the
// value in place never panics, and gives either a violation or arguments
// that are one JSON document.
func FuzzResolveRefs(f *testing.F) {
	f.Add([]byte(`{"flight":"BA117","fare":"412.50"}`), "/fare", true)
	f.Add([]byte(`[{"a":[1,2,{"b":null}]}]`), "/0/a/2/b", false)
	f.Add([]byte(`"1e400"`), "", true)
	f.Add([]byte(`{"x":"\u0031\u0032"}`), "/x", true)
	f.Fuzz(func(t *testing.T, outcome []byte, path string, unquote bool) {
		if !json.Valid(outcome) {
			return
		}
		tokens, err := jsonptr.Parse(path)
		if err != nil {
			return
		}
		args := []byte(`{"a":1,"v":{"$from":"s1","path":"x"},"z":[true]}`)
		refs := []reference{{at: []string{"v"}, start: 11, end: 36, step: "s1", path: tokens, unquote: unquote}}
		if string(args[refs[0].start:refs[0].end]) != `{"$from":"s1","path":"x"}` {
			t.Fatalf("the fixture's span is off: %s", args[refs[0].start:refs[0].end])
		}
		out, vs := resolveRefs(args, refs, func(int) []byte { return outcome })
		if vs == nil && !json.Valid(out) {
			t.Fatalf("resolved to %s, not JSON", out)
		}
	})
}
