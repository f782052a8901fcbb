package openapi_test

import (
	"encoding/json"
	"io"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/custos-runtime/custos/httpapi/openapi"
	"github.com/custos-runtime/custos/httpapi/openapi/openapitest"
)

// TestDocumentIsValidOpenAPI31 loads the served JSON into a real OpenAPI
// validator, its references resolved among the served schemas.
func TestDocumentIsValidOpenAPI31(t *testing.T) {
	doc, err := openapi.JSON()
	if err != nil {
		t.Fatal(err)
	}
	var top struct {
		OpenAPI string                    `json:"openapi"`
		Paths   map[string]map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(doc, &top); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(top.OpenAPI, "3.1.") {
		t.Fatalf("openapi: %q, want 3.1.x", top.OpenAPI)
	}
	if _, err := openapitest.Load(t.TempDir(), doc, openapi.Schemas()); err != nil {
		t.Fatal(err)
	}
	// The YAML as written loads the same.
	if _, err := openapitest.Load(t.TempDir(), openapi.YAML(), openapi.Schemas()); err != nil {
		t.Fatal(err)
	}
}

// TestEveryReferenceIsServed: each relative $ref names a schema served
// under /openapi/schemas/ (and a #/$defs/ fragment that exists in it),
// and each local reference a component that exists.
func TestEveryReferenceIsServed(t *testing.T) {
	doc, err := openapi.JSON()
	if err != nil {
		t.Fatal(err)
	}
	var tree map[string]any
	if err := json.Unmarshal(doc, &tree); err != nil {
		t.Fatal(err)
	}
	schemas := openapi.Schemas()
	refs := regexp.MustCompile(`"\$ref":"([^"]*)"`).FindAllSubmatch(doc, -1)
	if len(refs) == 0 {
		t.Fatal("no references found")
	}
	external := 0
	for _, m := range refs {
		ref := string(m[1])
		file, frag, _ := strings.Cut(ref, "#")
		var target map[string]any
		switch {
		case file == "":
			target = tree
		case strings.HasPrefix(file, strings.TrimPrefix(openapi.SchemaPrefix, "/")):
			external++
			b, ok := schemas[strings.TrimPrefix(file, strings.TrimPrefix(openapi.SchemaPrefix, "/"))]
			if !ok {
				t.Errorf("%s: no such served schema", ref)
				continue
			}
			if err := json.Unmarshal(b, &target); err != nil {
				t.Fatal(err)
			}
		default:
			t.Errorf("%s: a reference outside the document and its schemas", ref)
			continue
		}
		var at any = target
		for _, part := range strings.Split(strings.TrimPrefix(frag, "/"), "/") {
			if part == "" {
				continue
			}
			obj, ok := at.(map[string]any)
			if !ok {
				at = nil
				break
			}
			at = obj[strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")]
		}
		if at == nil {
			t.Errorf("%s: the fragment names nothing", ref)
		}
	}
	if external == 0 {
		t.Error("the document references none of the embedded AAIS/ASC schemas")
	}
}

func TestHandler(t *testing.T) {
	h := openapi.Handler()
	for _, c := range []struct {
		path, ct string
		code     int
	}{
		{"/openapi.json", "application/json", 200},
		{"/openapi/schemas/aais-1.0.schema.json", "application/schema+json", 200},
		{"/openapi/schemas/agent-status.schema.json", "application/schema+json", 200},
		{"/openapi/schemas/arsia-message.schema.json", "application/schema+json", 200},
		{"/openapi/schemas/nope.json", "application/problem+json", 404},
		{"/openapi/schemas/..%2fopenapi.yaml", "application/problem+json", 404},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", c.path, nil))
		if rec.Code != c.code || rec.Header().Get("Content-Type") != c.ct {
			t.Errorf("GET %s: %d %s, want %d %s", c.path, rec.Code, rec.Header().Get("Content-Type"), c.code, c.ct)
		}
		body, _ := io.ReadAll(rec.Body)
		if !json.Valid(body) {
			t.Errorf("GET %s: not JSON: %.80s", c.path, body)
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("POST", "/openapi.json", nil))
	if rec.Code != 405 {
		t.Errorf("POST /openapi.json: %d, want 405", rec.Code)
	}
	// What is served is the embedded schema, byte for byte.
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/openapi/schemas/aais-1.0.schema.json", nil))
	if !slices.Equal(rec.Body.Bytes(), openapi.Schemas()["aais-1.0.schema.json"]) {
		t.Error("the served AAIS schema differs from the embedded one")
	}
}
