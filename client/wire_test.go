package client

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/custos-runtime/custos/httpapi"
)

// The client mirrors the server's wire types instead of importing the
// server: the members must stay the same.
func TestHistoryEntryMirrorsTheServer(t *testing.T) {
	members := func(typ reflect.Type) []string {
		var out []string
		for f := range typ.Fields() {
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			out = append(out, name)
		}
		slices.Sort(out)
		return out
	}
	got, want := members(reflect.TypeFor[HistoryEntry]()), members(reflect.TypeFor[httpapi.HistoryEntry]())
	if !slices.Equal(got, want) {
		t.Fatalf("client.HistoryEntry members %v; the server's %v", got, want)
	}
}
