package config

import (
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// TestEveryKeyDocumented fails when a YAML key of the configuration is
// named in none of custos.example.yaml, docs/configuration.md and
// docs/notifications.md.
func TestEveryKeyDocumented(t *testing.T) {
	var docs strings.Builder
	for _, f := range []string{"../../custos.example.yaml", "../../docs/configuration.md", "../../docs/notifications.md"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		docs.Write(b)
	}
	text := docs.String()
	seen := map[reflect.Type]bool{}
	var walk func(typ reflect.Type, path string)
	walk = func(typ reflect.Type, path string) {
		for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice || typ.Kind() == reflect.Map {
			typ = typ.Elem()
		}
		if typ.Kind() != reflect.Struct || seen[typ] || typ.PkgPath() != reflect.TypeFor[Config]().PkgPath() {
			return
		}
		seen[typ] = true
		for i := 0; i < typ.NumField(); i++ {
			key := yamlKey(typ.Field(i))
			if key == "" {
				continue
			}
			if !regexp.MustCompile(`(^|[\s{,#\x60.])` + regexp.QuoteMeta(key) + `(:|\x60)`).MatchString(text) {
				t.Errorf("%s%s is documented nowhere", path, key)
			}
			walk(typ.Field(i).Type, path+key+".")
		}
	}
	walk(reflect.TypeFor[Config](), "")
}
