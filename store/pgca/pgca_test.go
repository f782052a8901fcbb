package pgca_test

import (
	"testing"

	"github.com/custos-runtime/custos/gateway/ca"
	"github.com/custos-runtime/custos/gateway/ca/catest"
	"github.com/custos-runtime/custos/internal/pgutil"
	"github.com/custos-runtime/custos/internal/pgutil/pgtest"
	"github.com/custos-runtime/custos/store/pgca"
)

func TestRegistryContract(t *testing.T) {
	catest.Run(t, func(t *testing.T) ca.Registry {
		schema := pgtest.Schema(t)
		pool, _, err := pgutil.OpenPool(t.Context(), pgtest.DSN(t), schema, schema, "custos-pgca-test", 4, 4)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		r, err := pgca.New(t.Context(), pool, schema)
		if err != nil {
			t.Fatal(err)
		}
		return r
	})
}
