// Package openapi serves the OpenAPI 3.1 description of custos serve's
// HTTP endpoints: GET /openapi.json (the hand-maintained openapi.yaml,
// embedded and served as JSON) and GET /openapi/schemas/{name}, the
// JSON Schemas of ARSIA, AAIS and ASC embedded in Custos, which the
// document references relative to itself.
package openapi

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/custos-runtime/custos/aais"
	arsiaschema "github.com/custos-runtime/custos/arsia/schema"
	"github.com/custos-runtime/custos/asc"
	"github.com/custos-runtime/custos/internal/routes"
)

//go:embed openapi.yaml
var documentYAML []byte

// SchemaPrefix is where the referenced schemas are served.
const SchemaPrefix = "/openapi/schemas/"

// YAML returns the document as written (a copy).
func YAML() []byte { return append([]byte(nil), documentYAML...) }

// JSON returns the document as JSON (a copy).
func JSON() ([]byte, error) {
	b, err := documentJSON()
	if err != nil {
		return nil, err
	}
	return append([]byte(nil), b...), nil
}

var documentJSON = sync.OnceValues(func() ([]byte, error) {
	var doc any
	if err := yaml.Unmarshal(documentYAML, &doc); err != nil {
		return nil, fmt.Errorf("openapi: %w", err)
	}
	return json.Marshal(doc)
})

// Schemas returns the schema files the document may reference, by name.
func Schemas() map[string][]byte {
	out := map[string][]byte{
		"aais-1.0.schema.json":     aais.Schema(),
		"agent-status.schema.json": asc.Schema(),
	}
	for _, n := range arsiaschema.Names() {
		if b, ok := arsiaschema.File(n); ok {
			out[n] = b
		}
	}
	return out
}

// Handler serves GET /openapi.json and GET /openapi/schemas/{name}. Mount
// it at both:
//
//	mux.Handle("GET /openapi.json", h)
//	mux.Handle("GET /openapi/schemas/", h)
func Handler() http.Handler {
	schemas := Schemas()
	mux := routes.New()
	mux.HandleFunc("GET /openapi.json", func(w http.ResponseWriter, _ *http.Request) {
		doc, err := documentJSON()
		if err != nil { // the tests of this package make sure it is not
			problem(w, asc.InternalError, http.StatusInternalServerError, "The OpenAPI document could not be rendered.")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "max-age=300")
		_, _ = w.Write(doc)
	})
	mux.HandleFunc("GET "+SchemaPrefix+"{name}", func(w http.ResponseWriter, r *http.Request) {
		b, ok := schemas[r.PathValue("name")]
		if !ok {
			problem(w, asc.NotFound, http.StatusNotFound, "No such schema.")
			return
		}
		w.Header().Set("Content-Type", "application/schema+json")
		w.Header().Set("Cache-Control", "max-age=300")
		_, _ = w.Write(b)
	})
	return mux
}

// problem writes an error as a problem document with its ASC status.
func problem(w http.ResponseWriter, code asc.Code, status int, detail string) {
	env := asc.New(code, asc.ScopePolicyDecision, true, time.Now())
	env.Message = &asc.Message{User: detail}
	p := asc.ToProblem(env)
	p.Status = status
	b, err := p.MarshalJSON()
	if err != nil {
		http.Error(w, detail, status)
		return
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
