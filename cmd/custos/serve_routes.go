package main

import (
	"context"

	"github.com/custos-runtime/custos/httpapi/openapi"
	"github.com/custos-runtime/custos/internal/routes"
)

// routesKey carries, in a test's context, where serve puts its mux so
// that the OpenAPI test can list the routes it really serves.
type routesKey struct{}

// newServeMux is the mux of custos serve, with the OpenAPI description
// of its endpoints mounted (GET /openapi.json and the schemas it
// references). A test's context with a channel under routesKey receives
// the mux, to list its routes (routes.Mux.Routes) once serve has mounted
// everything.
func newServeMux(ctx context.Context) *routes.Mux {
	m := routes.New()
	doc := openapi.Handler()
	m.Handle("GET /openapi.json", doc)
	m.Handle("GET "+openapi.SchemaPrefix, doc)
	if sink, ok := ctx.Value(routesKey{}).(chan<- *routes.Mux); ok {
		select {
		case sink <- m:
		default:
		}
	}
	return m
}
