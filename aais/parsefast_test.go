package aais

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/custos-runtime/custos/jcs"
)

// sameAsWire fails unless fromDoc, when it answers for data, builds
// exactly the message and issues the wire types give. It reports whether
// fromDoc answered.
func sameAsWire(t *testing.T, data []byte) bool {
	t.Helper()
	doc, err := jcs.Decode(data)
	if err != nil || !fastValid(doc) {
		return false
	}
	var fast issues
	m1, ok := fromDoc(data, doc, &fast)
	if !ok {
		return false
	}
	var w wireMessage
	if err := json.Unmarshal(data, &w); err != nil {
		t.Fatalf("the fast path accepted what the wire types refuse: %v\n%s", err, data)
	}
	var slow issues
	m2 := w.toMessage(&slow)
	if !reflect.DeepEqual(m1, m2) || !reflect.DeepEqual(fast.list, slow.list) {
		t.Fatalf("fromDoc differs from the wire types:\nfast %#v %v\nwire %#v %v\n%s", m1, fast.list, m2, slow.list, data)
	}
	return true
}

// docVariants returns data as given, indented, and with every member name
// and string written with escapes where it has a letter to escape.
func docVariants(data []byte) [][]byte {
	out := [][]byte{data}
	var ind bytes.Buffer
	if json.Indent(&ind, data, "", "  ") == nil {
		out = append(out, ind.Bytes())
	}
	// "\u0061" for every "a" inside strings: names and values alike.
	var esc []byte
	in := false
	for i := 0; i < len(data); i++ {
		c := data[i]
		switch {
		case in && c == '\\':
			esc = append(esc, c, data[i+1])
			i++
			continue
		case c == '"':
			in = !in
		case in && c == 'a':
			esc = append(esc, `\u0061`...)
			continue
		}
		esc = append(esc, c)
	}
	// Lower-case "z": the schema's date-time takes it, ParseTimestamp
	// does not, so every timestamp is an issue.
	return append(out, esc, bytes.ReplaceAll(data, []byte(`Z"`), []byte(`z"`)))
}

func TestFromDocMatchesWire(t *testing.T) {
	names, _ := filepath.Glob("testdata/*.json")
	golden, _ := filepath.Glob("testdata/golden/*.json")
	answered := 0
	for _, name := range append(names, golden...) {
		for _, d := range docVariants(readFile(t, name)) {
			if sameAsWire(t, d) {
				answered++
			}
		}
	}
	for _, m := range copySeeds(t) {
		for op := range copyMutations {
			for _, v := range append(append([]string{}, copyValues...), encodeValues...) {
				c := m.clone()
				mutateCopy(c, op, v)
				w, err := c.toWire()
				if err != nil {
					continue
				}
				b, err := encode(w)
				if err != nil {
					continue
				}
				for _, d := range docVariants(b) {
					if sameAsWire(t, d) {
						answered++
					}
				}
			}
		}
	}
	if answered < 100 {
		t.Fatalf("the fast path answered for only %d documents", answered)
	}
}

// FuzzFromDoc: for any document the schema fast path accepts, fromDoc
// builds what the wire types build.
func FuzzFromDoc(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/*.json")
	golden, _ := filepath.Glob("testdata/golden/*.json")
	for _, name := range append(seeds, golden...) {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		for _, d := range docVariants(b) {
			f.Add(d)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		sameAsWire(t, data)
	})
}
