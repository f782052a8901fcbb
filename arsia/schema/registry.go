package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/custos-runtime/custos/internal/pyrepr"
	"io"
	"io/fs"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// fallbackBase is the retrieval URL prefix of a schema file whose $id is
// not an absolute URL (arsia-common.schema.json's $id is its bare file
// name). Relative references inside it then resolve to URLs whose last
// segment is the referenced file name, which is all the loader needs.
const fallbackBase = "https://arsia.invalid/schemas/"

// registry is a set of schema files that reference each other, with the
// lazily compiled schemas. The package uses one registry over the embedded
// files; tests build others.
type registry struct {
	files map[string][]byte // by file name
	names []string          // sorted file names
	ids   map[string]string // absolute $id -> file name

	compileMu sync.Mutex // the jsonschema.Compiler is not safe for concurrent use
	compiler  *jsonschema.Compiler

	entriesMu sync.Mutex
	entries   map[string]*entry // by ref

	ordered sync.Map // file name -> *orderedDoc
}

// entry is one compiled ref. A compiled *jsonschema.Schema is read-only and
// safe for concurrent validation.
type entry struct {
	once   sync.Once
	schema *jsonschema.Schema
	err    error
}

// orderedDoc is a schema file decoded with its key order kept, for the
// repr() of schema values in messages.
type orderedDoc struct {
	once sync.Once
	doc  any
	err  error
}

// newRegistry reads every *.json file at the top of fsys.
func newRegistry(fsys fs.FS) (*registry, error) {
	matches, err := fs.Glob(fsys, "*.json")
	if err != nil {
		return nil, err
	}
	r := &registry{
		files:   map[string][]byte{},
		ids:     map[string]string{},
		entries: map[string]*entry{},
	}
	for _, name := range matches {
		data, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		var head struct {
			ID string `json:"$id"`
		}
		if err := json.Unmarshal(data, &head); err != nil {
			return nil, fmt.Errorf("arsia/schema: %s: %w", name, err)
		}
		r.files[name] = data
		r.names = append(r.names, name)
		if u, err := url.Parse(head.ID); err == nil && u.IsAbs() && u.Fragment == "" {
			if _, dup := r.ids[head.ID]; !dup {
				r.ids[head.ID] = name
			}
		}
	}
	slices.Sort(r.names)

	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(loader{r})
	c.RegisterVocabulary(pyVocabulary())
	c.AssertVocabs() // needed for the vocabulary above to be active under 2020-12
	r.compiler = c
	return r, nil
}

// fileFor maps a URL the validator asks for to a file name: an exact $id
// first, then the last path segment, as the reference SDK's retrieve hook
// does.
func (r *registry) fileFor(rawURL string) (string, bool) {
	rawURL, _, _ = strings.Cut(rawURL, "#")
	if name, ok := r.ids[rawURL]; ok {
		return name, true
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", false
	}
	p := u.Path
	if p == "" {
		p = u.Opaque
	}
	name := path.Base(p)
	_, ok := r.files[name]
	return name, ok
}

// entryURL is the URL a file is compiled from: its absolute $id when it has
// one, so that references by $id and by file name reach the same root.
func (r *registry) entryURL(name string) string {
	for id, n := range r.ids {
		if n == name {
			return id
		}
	}
	return fallbackBase + name
}

// schemaFor returns the compiled schema of ref ("file.json" or
// "file.json#/json/pointer"), compiling it on first use.
func (r *registry) schemaFor(ref string) (*jsonschema.Schema, error) {
	name, frag, hasFrag := strings.Cut(ref, "#")
	if _, ok := r.files[name]; !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownSchema, ref)
	}
	r.entriesMu.Lock()
	e, ok := r.entries[ref]
	if !ok {
		e = &entry{}
		r.entries[ref] = e
	}
	r.entriesMu.Unlock()
	e.once.Do(func() {
		loc := r.entryURL(name)
		if hasFrag {
			loc += "#" + frag
		}
		r.compileMu.Lock()
		defer r.compileMu.Unlock()
		e.schema, e.err = r.compiler.Compile(loc)
		if e.err != nil {
			e.err = fmt.Errorf("arsia/schema: compiling %s: %w", ref, e.err)
		}
	})
	return e.schema, e.err
}

// orderedValue returns the value at the JSON pointer ptr of file name,
// decoded with object key order kept.
func (r *registry) orderedValue(name, ptr string) (any, bool) {
	raw, ok := r.files[name]
	if !ok {
		return nil, false
	}
	v, _ := r.ordered.LoadOrStore(name, &orderedDoc{})
	od := v.(*orderedDoc)
	od.once.Do(func() { od.doc, od.err = decodeOrdered(raw) })
	if od.err != nil {
		return nil, false
	}
	return lookupPointer(od.doc, ptr)
}

// schemaValue returns the keyword value at a schema location as reported
// by the validator ("<url>#<escaped pointer>") extended by keyword tokens.
func (r *registry) schemaValue(location string, keyword ...string) (any, bool) {
	base, frag, _ := strings.Cut(location, "#")
	name, ok := r.fileFor(base)
	if !ok {
		return nil, false
	}
	ptr, err := url.PathUnescape(frag)
	if err != nil {
		return nil, false
	}
	for _, k := range keyword {
		ptr += "/" + escapeToken(k)
	}
	return r.orderedValue(name, ptr)
}

// loader serves the validator's URL requests from the registry.
type loader struct{ r *registry }

// Load implements jsonschema.URLLoader.
func (l loader) Load(rawURL string) (any, error) {
	name, ok := l.r.fileFor(rawURL)
	if !ok {
		return nil, fmt.Errorf("%w: no schema file for %s", ErrUnknownSchema, rawURL)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(l.r.files[name]))
	if err != nil {
		return nil, fmt.Errorf("arsia/schema: %s: %w", name, err)
	}
	renameKeywords(doc)
	return doc, nil
}

// decodeOrdered decodes JSON into pyrepr.Object, []any, json.Number,
// string, bool and nil.
func decodeOrdered(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeOrderedValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data after JSON value")
	}
	return v, nil
}

func decodeOrderedValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('{'):
		obj := &pyrepr.Object{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, err
			}
			key, _ := kt.(string)
			val, err := decodeOrderedValue(dec)
			if err != nil {
				return nil, err
			}
			obj.Keys = append(obj.Keys, key)
			obj.Values = append(obj.Values, val)
		}
		_, err := dec.Token() // '}'
		return obj, err
	case json.Delim('['):
		arr := []any{}
		for dec.More() {
			val, err := decodeOrderedValue(dec)
			if err != nil {
				return nil, err
			}
			arr = append(arr, val)
		}
		_, err := dec.Token() // ']'
		return arr, err
	}
	return tok, nil
}

// lookupPointer resolves an RFC 6901 pointer in a value from decodeOrdered.
func lookupPointer(v any, ptr string) (any, bool) {
	if ptr == "" {
		return v, true
	}
	if ptr[0] != '/' {
		return nil, false
	}
	for _, tok := range strings.Split(ptr[1:], "/") {
		tok = unescapeToken(tok)
		switch c := v.(type) {
		case *pyrepr.Object:
			val, ok := c.Get(tok)
			if !ok {
				return nil, false
			}
			v = val
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(c) {
				return nil, false
			}
			v = c[i]
		default:
			return nil, false
		}
	}
	return v, true
}

func escapeToken(tok string) string {
	return strings.ReplaceAll(strings.ReplaceAll(tok, "~", "~0"), "/", "~1")
}

func unescapeToken(tok string) string {
	return strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
}
