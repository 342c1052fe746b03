// Package rawjson puts raw JSON values back, byte for byte, into documents
// that encoding/json wrote.
//
// encoding/json compacts a json.RawMessage as it writes it: the spaces,
// tabs and line breaks a planner put between the tokens of a step's
// arguments are dropped. A store that must give arguments back exactly as
// written encodes its record with encoding/json and then calls Restore.
package rawjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/planexec/planexec/internal/jsonscan"
)

// Each is the path element that steps into every element of an array.
const Each = "*"

// Restore returns doc with the values that path leads to replaced, in
// document order, by raws. doc is what encoding/json, without HTML
// escaping, wrote for a value holding raws as json.RawMessage at those
// places. path names object members from the top of doc; Each steps into
// every element of an array. A null where an object or array is expected
// leads nowhere.
//
// Each value found must be the compacted form of its raw value (an empty
// raw value is written as null and stays so), and there must be one for
// each raw value: otherwise doc and raws do not belong together and Restore
// fails, returning nil.
func Restore(doc []byte, path []string, raws []json.RawMessage) ([]byte, error) {
	r := restorer{doc: doc, raws: raws}
	end := r.walk(jsonscan.SkipSpace(doc, 0), path)
	switch {
	case r.err != nil:
		return nil, r.err
	case end < 0:
		return nil, errors.New("rawjson: the document is not JSON")
	case r.n != len(raws):
		return nil, fmt.Errorf("rawjson: the path leads to %d values, and %d raw values were given", r.n, len(raws))
	}
	if len(r.spans) == 0 {
		return doc, nil
	}
	grow := 0
	for _, s := range r.spans {
		grow += len(raws[s.raw]) - (s.end - s.start)
	}
	out := make([]byte, 0, len(doc)+grow)
	at := 0
	for _, s := range r.spans {
		out = append(out, doc[at:s.start]...)
		out = append(out, raws[s.raw]...)
		at = s.end
	}
	return append(out, doc[at:]...), nil
}

// span is a value of doc to replace by raws[raw].
type span struct{ start, end, raw int }

type restorer struct {
	doc     []byte
	raws    []json.RawMessage
	n       int // raw values met so far
	spans   []span
	err     error
	scratch []bool
	key     []byte
	compact bytes.Buffer
}

// walk follows path from the value at i and returns the offset just past
// that value, or -1 when doc is malformed there.
func (r *restorer) walk(i int, path []string) int {
	if r.err != nil || i >= len(r.doc) {
		return -1
	}
	if len(path) == 0 {
		return r.found(i)
	}
	switch c := r.doc[i]; {
	case c == 'n':
		return jsonscan.ScanLiteral(r.doc, i)
	case path[0] == Each && c == '[':
		return r.elements(i, path[1:])
	case path[0] != Each && c == '{':
		return r.members(i, path)
	}
	want := "an object"
	if path[0] == Each {
		want = "an array"
	}
	r.err = fmt.Errorf("rawjson: at byte %d the document holds neither %s nor null, as the path needs", i, want)
	return -1
}

// found checks the value at i against the next raw value and marks it for
// replacement.
func (r *restorer) found(i int) int {
	end, scratch := jsonscan.SkipValue(r.doc, i, r.scratch)
	r.scratch = scratch
	if end < 0 {
		return -1
	}
	if r.n >= len(r.raws) {
		r.n++ // counted, so the caller reports how many there were
		return end
	}
	raw := r.raws[r.n]
	got := r.doc[i:end]
	if len(raw) == 0 {
		if string(got) != "null" {
			r.err = fmt.Errorf("rawjson: value %d is %.40q, not the null written for an empty raw value", r.n, got)
		}
		r.n++
		return end
	}
	r.compact.Reset()
	if err := json.Compact(&r.compact, raw); err != nil {
		r.err = fmt.Errorf("rawjson: raw value %d is not JSON: %w", r.n, err)
		return -1
	}
	if !bytes.Equal(got, r.compact.Bytes()) {
		r.err = fmt.Errorf("rawjson: value %d of the document is not raw value %d compacted", r.n, r.n)
		return -1
	}
	if !bytes.Equal(got, raw) {
		r.spans = append(r.spans, span{start: i, end: end, raw: r.n})
	}
	r.n++
	return end
}

// elements walks each element of the array at i.
func (r *restorer) elements(i int, rest []string) int {
	i = jsonscan.SkipSpace(r.doc, i+1)
	if i < len(r.doc) && r.doc[i] == ']' {
		return i + 1
	}
	for {
		if i = r.walk(i, rest); i < 0 {
			return -1
		}
		if i = jsonscan.SkipSpace(r.doc, i); i >= len(r.doc) {
			return -1
		}
		switch r.doc[i] {
		case ']':
			return i + 1
		case ',':
			i = jsonscan.SkipSpace(r.doc, i+1)
		default:
			return -1
		}
	}
}

// members walks the member of the object at i that path[0] names, and
// skips the others.
func (r *restorer) members(i int, path []string) int {
	i = jsonscan.SkipSpace(r.doc, i+1)
	if i < len(r.doc) && r.doc[i] == '}' {
		return i + 1
	}
	for {
		kend, _ := jsonscan.ScanString(r.doc, i)
		if kend < 0 {
			return -1
		}
		r.key = jsonscan.AppendUnquoted(r.key[:0], r.doc[i:kend])
		match := string(r.key) == path[0]
		if i = jsonscan.SkipSpace(r.doc, kend); i >= len(r.doc) || r.doc[i] != ':' {
			return -1
		}
		i = jsonscan.SkipSpace(r.doc, i+1)
		if match {
			i = r.walk(i, path[1:])
		} else {
			var scratch []bool
			i, scratch = jsonscan.SkipValue(r.doc, i, r.scratch)
			r.scratch = scratch
		}
		if i < 0 {
			return -1
		}
		if i = jsonscan.SkipSpace(r.doc, i); i >= len(r.doc) {
			return -1
		}
		switch r.doc[i] {
		case '}':
			return i + 1
		case ',':
			i = jsonscan.SkipSpace(r.doc, i+1)
		default:
			return -1
		}
	}
}

// Marshal encodes v as encoding/json does, without HTML escaping and with
// no trailing newline, then restores raws at the places path leads to (see
// Restore): v holds raws there as json.RawMessage. With no path, it only
// encodes.
func Marshal(v any, path []string, raws []json.RawMessage) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	doc := bytes.TrimSuffix(b.Bytes(), []byte("\n"))
	if len(path) == 0 {
		return doc, nil
	}
	return Restore(doc, path, raws)
}
